package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/wfc-lang/wfc/ir"
)

// errGraphChanged is a script's refusal of a caller that read the run's
// graph before a patch changed it (lib.lua's header): nothing was written,
// and the caller reads the run again and decides on its current version.
var errGraphChanged = errors.New("the run's workflow was patched meanwhile (graph changed); read the run again")

// maxGraphRetries bounds how often an outside call (Cancel, Decide,
// Signal, Retry) reads the run again after a patch raced it: each retry
// follows a patch that was applied, so a few suffice unless the run is
// patched in a tight loop, and then the caller gets errGraphChanged.
const maxGraphRetries = 5

// retryGraph runs f, again on errGraphChanged (f reads the run afresh
// each time), as workers do after a patch.
func retryGraph[T any](f func() (T, error)) (T, error) {
	for try := 1; ; try++ {
		v, err := f()
		if try < maxGraphRetries && errors.Is(err, errGraphChanged) {
			continue
		}
		return v, err
	}
}

func retryGraph0(f func() error) error {
	_, err := retryGraph(func() (struct{}, error) { return struct{}{}, f() })
	return err
}

// forget drops what the worker keeps of a run (its meta, and that it was
// found running), so that its next token reads the run's meta.
func (f *freshness) forget(run string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.runs, run)
	delete(f.live, run)
}

// reload reads the job's run again after a patch: its meta, plan and node.
func (j *job) reload() error {
	j.w.fresh.forget(j.tok.Run)
	m, err := j.w.st.meta(j.ctx, j.tok.Run)
	if err != nil {
		return err
	}
	p, err := j.w.st.planFor(j.ctx, m.IR)
	if err != nil {
		return err
	}
	if j.tok.Node != "" {
		n := p.nodes[j.tok.Node]
		if n == nil {
			// patch.lua refuses to remove a node that has started.
			return fmt.Errorf("run %s: node %s is not in the run's current workflow", m.ID, j.tok.Node)
		}
		j.n = n
	}
	j.m, j.ref, j.p = m, m.ref(), p
	return nil
}

// A RunWorkflow is the workflow a run currently executes: its IR, the
// IR's content hash and the run's version (1 when it started, one more
// for each patch applied).
type RunWorkflow struct {
	Run      string
	Status   string
	Hash     string
	Version  int
	Workflow *ir.Workflow
}

// RunWorkflow returns the workflow run currently executes. The returned
// workflow is the caller's to modify.
func (e *Engine) RunWorkflow(ctx context.Context, run string) (*RunWorkflow, error) {
	m, err := e.meta(ctx, run)
	if err != nil {
		return nil, err
	}
	ver, err := e.st.rdb.HGet(ctx, e.st.ks.state(run), runField("ver")).Int()
	if err != nil {
		ver = 1
	}
	p, err := e.st.planFor(ctx, m.IR)
	if err != nil {
		return nil, err
	}
	data, err := ir.Marshal(p.w)
	if err != nil {
		return nil, err
	}
	w, err := ir.Decode(data)
	if err != nil {
		return nil, err
	}
	return &RunWorkflow{Run: run, Status: m.Status, Hash: m.IR, Version: ver, Workflow: w}, nil
}

// A PatchRequest asks Patch to move a run from the workflow Base (the IR
// hash the patch was computed against) to New, a workflow the caller
// validated with the same checks as a build (ir.ApplyPatch,
// compiler.CheckIR). Patch is the RFC 6902 document, recorded in the
// run's event; By says who asked (recorded too; at most 200 printable
// characters).
type PatchRequest struct {
	Run    string
	Base   string
	New    *ir.Workflow
	Patch  json.RawMessage
	By     string
	DryRun bool
}

// A PatchResult says what a patch did (or, for a dry run, would do) to a
// run.
type PatchResult struct {
	Run     string `json:"run"`
	OldHash string `json:"old_hash"`
	NewHash string `json:"new_hash"`
	// Version is the run's version after the patch (unchanged by a dry run).
	Version int  `json:"version"`
	DryRun  bool `json:"dry_run,omitempty"`
	// Added, Removed and Changed are node ids.
	Added   []string `json:"added,omitempty"`
	Removed []string `json:"removed,omitempty"`
	Changed []string `json:"changed,omitempty"`
	// Pending: the nodes of the patched workflow that have not finished
	// (not started, queued, running or waiting): those that may still run.
	Pending []string `json:"pending,omitempty"`
	// NewJoins: nodes that are joins in the patched workflow and were not,
	// or join other edges now; NewTerminals: nodes without outgoing edges
	// that had some, or are new.
	NewJoins     []string `json:"new_joins,omitempty"`
	NewTerminals []string `json:"new_terminals,omitempty"`
	// Delivered: nodes that got a token at once, from an edge added behind
	// a node that had finished (or new entry nodes).
	Delivered []string `json:"delivered,omitempty"`
}

// A PatchRefusedError lists every reason the run's live state refuses a
// patch. Nothing was changed.
type PatchRefusedError struct {
	Run     string
	Reasons []string
}

func (e *PatchRefusedError) Error() string {
	return fmt.Sprintf("patch refused for run %s:\n\t%s", e.Run, strings.Join(e.Reasons, "\n\t"))
}

// ErrPatchConflict: the run's workflow is no longer the patch's base (a
// concurrent patch won); read the run again and recompute the patch.
var ErrPatchConflict = errors.New("the run's workflow changed since the patch was computed")

// patchArgs are patch.lua's arguments (see the script).
type patchArgs struct {
	base
	Base      string      `json:"base"`
	IR        string      `json:"ir"`
	Graph     string      `json:"graph"`
	Patch     string      `json:"patch"`
	By        string      `json:"by"`
	Dry       bool        `json:"dry"`
	Unstarted [][2]string `json:"unstarted"` // exec key, why it must not have started
	NoArrival [][2]string `json:"noarrival"` // join arrival field, why it must be absent
	Unsent    [][2]string `json:"unsent"`    // exec key of a source that must not have finished, why
	Added     []addedEdge `json:"added"`     // edges added behind sources that may have finished
	Entries   [][2]string `json:"entries"`   // new entry nodes [id, vec]
	States    []string    `json:"states"`    // exec keys whose state the reply reports
}

type addedEdge struct {
	From string `json:"from"`
	X    string `json:"x"` // the source's exec key
	To   string `json:"to"`
	Vec  string `json:"vec"` // the target's vec
	Kind string `json:"kind"`
	// Real: what a completed source sends on the edge (after edges of
	// plain nodes); Ok: whether a finished source's token is known at
	// all (else a finished source refuses the patch).
	Real bool `json:"real"`
	Ok   bool `json:"ok"`
}

type patchReply struct {
	Status    string            `json:"status"`
	Version   int               `json:"version"`
	Reasons   []string          `json:"reasons"`
	States    map[string]string `json:"states"`
	Delivered []string          `json:"delivered"`
}

// Patch moves a running run to a new workflow, checking the patch against
// the run's live state and writing in one script (patch.lua): the new IR
// and graph, the run's version, a patch.applied event, and the tokens of
// edges added behind nodes that had finished. Nothing changes when the run
// refuses the patch (*PatchRefusedError, every reason), when Base is no
// longer the run's workflow (ErrPatchConflict), or for a dry run.
func (e *Engine) Patch(ctx context.Context, req PatchRequest) (*PatchResult, error) {
	if !validRunID(req.Run) {
		return nil, fmt.Errorf("%w %q", ErrUnknownRun, req.Run)
	}
	if len(req.By) > 200 || strings.IndexFunc(req.By, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return nil, fmt.Errorf("runtime: patch author %q: at most 200 printable characters", req.By)
	}
	if len(req.Patch) > ir.MaxPatchBytes {
		return nil, fmt.Errorf("runtime: the patch is %d bytes, over the limit of %d", len(req.Patch), ir.MaxPatchBytes)
	}
	m, err := e.meta(ctx, req.Run)
	if err != nil {
		return nil, err
	}
	if m.Status != RunRunning {
		return nil, &PatchRefusedError{Run: req.Run, Reasons: []string{fmt.Sprintf("the run is %s: only a running run can be patched", m.Status)}}
	}
	if req.Base != "" && m.IR != req.Base {
		return nil, fmt.Errorf("%w: run %s runs %s, the patch was made against %s", ErrPatchConflict, req.Run, m.IR, req.Base)
	}
	old, err := e.st.planFor(ctx, m.IR)
	if err != nil {
		return nil, err
	}
	nw, err := e.plan(req.New)
	if err != nil {
		return nil, err
	}
	// The queues the run's nodes were assigned when it started are in its
	// stored graph (a plan read back from its IR has none).
	shard := e.st.ks.shard(req.Run)
	stored, err := e.st.rdb.HGetAll(ctx, e.st.ks.graph(shard, m.Graph)).Result()
	if err != nil {
		return nil, err
	}
	oq := map[string][2]string{}
	for id, raw := range stored {
		var g gnode
		if id != "_" && json.Unmarshal([]byte(raw), &g) == nil {
			oq[id] = [2]string{g.Q, g.CQ}
		}
	}
	res := &PatchResult{Run: req.Run, OldHash: m.IR, NewHash: nw.hash, DryRun: req.DryRun}
	a, reasons := patchChecks(old, nw, oq, res)
	if len(reasons) > 0 {
		return nil, &PatchRefusedError{Run: req.Run, Reasons: reasons}
	}
	if !req.DryRun {
		if err := e.storePlan(ctx, nw, shard); err != nil {
			return nil, err
		}
	}
	ref := runRef{id: req.Run, graph: nw.suffix, queues: nw.queues}
	a.base = e.st.base(ref, nil)
	a.Base, a.IR, a.Graph, a.Patch, a.By, a.Dry = m.IR, nw.hash, nw.suffix, string(compactJSON(req.Patch)), req.By, req.DryRun
	raw, err := e.st.call(ctx, "patch", ref, a)
	if err != nil {
		return nil, fmt.Errorf("runtime: patching run %s: %w", req.Run, err)
	}
	var rep patchReply
	if err := json.Unmarshal([]byte(raw), &rep); err != nil {
		return nil, fmt.Errorf("runtime: patch script reply %q: %w", raw, err)
	}
	switch rep.Status {
	case "conflict":
		return nil, fmt.Errorf("%w: run %s", ErrPatchConflict, req.Run)
	case "refused":
		return nil, &PatchRefusedError{Run: req.Run, Reasons: rep.Reasons}
	case "ok", "dry":
	default:
		return nil, fmt.Errorf("runtime: patch script replied %q", raw)
	}
	res.Version, res.Delivered = rep.Version, rep.Delivered
	for _, id := range nw.w.Order {
		switch rep.States[xkey(nw, id)] {
		case NodeCompleted, NodeSkipped, NodeFailed:
		default:
			res.Pending = append(res.Pending, id)
		}
	}
	return res, nil
}

func compactJSON(raw json.RawMessage) []byte {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return raw
	}
	return b.Bytes()
}

// xkey is a node's first exec key in a plan: loops start at iteration 1,
// and an execution of a later iteration implies one of the first.
func xkey(p *plan, id string) string { return execKey(id, firstVec(p.graph[id])) }

// patchChecks compares the run's plan (oq: its nodes' queue and
// compensation queue, as stored) with the patched one: what the
// script must check against the live state (a), what cannot be patched on
// a running run at all (reasons), and the what-if facts of res.
func patchChecks(old, nw *plan, oq map[string][2]string, res *PatchResult) (a patchArgs, reasons []string) {
	same := func(x, y any) bool {
		bx, _ := json.Marshal(x)
		by, _ := json.Marshal(y)
		return bytes.Equal(bx, by)
	}
	if !same(old.w.Inputs, nw.w.Inputs) {
		reasons = append(reasons, "/inputs: a patch cannot change a running run's inputs (they were checked against the declarations it started with)")
	}
	if !same(old.w.Settings, nw.w.Settings) {
		reasons = append(reasons, "/settings: a patch cannot change a running run's settings (its deadline and limits were set when it started)")
	}
	if old.w.Name != nw.w.Name {
		reasons = append(reasons, fmt.Sprintf("/name: a patch cannot rename the workflow (%q to %q)", old.w.Name, nw.w.Name))
	}
	unstarted := func(p *plan, id, why string) {
		a.Unstarted = append(a.Unstarted, [2]string{xkey(p, id), why})
	}
	for _, id := range old.w.Order {
		og := old.graph[id]
		ng := nw.graph[id]
		if ng == nil {
			res.Removed = append(res.Removed, id)
			unstarted(old, id, fmt.Sprintf("node %s cannot be removed: it has started", id))
			for _, in := range og.In {
				a.NoArrival = append(a.NoArrival, [2]string{xkey(old, id) + "|" + in[0] + "|" + in[1],
					fmt.Sprintf("node %s cannot be removed: it holds a token from %s", id, in[0])})
			}
			continue
		}
		if !same(nodeDef(old.nodes[id]), nodeDef(nw.nodes[id])) {
			res.Changed = append(res.Changed, id)
			unstarted(nw, id, fmt.Sprintf("node %s cannot be changed: it has started", id))
		}
		if q := oq[id]; q[0] != ng.Q || q[1] != ng.CQ || og.Back != ng.Back || !slices.Equal(og.Loops, ng.Loops) {
			unstarted(nw, id, fmt.Sprintf("node %s cannot be moved to another queue or loop: it has started", id))
		}
		if og.Join != ng.Join || og.NS != ng.NS || !slices.Equal(og.In, ng.In) {
			if ng.Join != "" && (og.Join == "" || !slices.Equal(og.In, ng.In)) {
				res.NewJoins = append(res.NewJoins, id)
			}
			unstarted(nw, id, fmt.Sprintf("node %s cannot be re-wired in front: it has started (a join that fired, or a node that ran, takes no new edges)", id))
			for _, in := range og.In {
				if !slices.Contains(ng.In, in) {
					a.NoArrival = append(a.NoArrival, [2]string{xkey(old, id) + "|" + in[0] + "|" + in[1],
						fmt.Sprintf("edge %s -> %s (%s) cannot be removed: it delivered its token", in[0], id, in[1])})
				}
			}
		}
		for _, e := range og.Out {
			if !slices.Contains(ng.Out, e) {
				a.Unsent = append(a.Unsent, [2]string{xkey(old, id), fmt.Sprintf("edge %s -> %s (%s) cannot be removed: %s has finished and sent its token", id, e[0], e[1], id)})
			}
		}
		if len(og.Out) > 0 && len(ng.Out) == 0 {
			res.NewTerminals = append(res.NewTerminals, id)
		}
	}
	for _, id := range nw.w.Order {
		ng := nw.graph[id]
		og := old.graph[id]
		if og == nil {
			res.Added = append(res.Added, id)
			if ng.Join != "" {
				res.NewJoins = append(res.NewJoins, id)
			}
			if len(ng.Out) == 0 {
				res.NewTerminals = append(res.NewTerminals, id)
			}
			if slices.Contains(nw.w.Entries, id) {
				a.Entries = append(a.Entries, [2]string{id, firstVec(ng)})
			}
		}
		for _, e := range ng.Out {
			if og != nil && slices.Contains(og.Out, e) {
				continue
			}
			n := nw.nodes[id]
			plain := n.Branch == nil && n.Loop == nil && n.Agent == nil && n.ForEach == nil
			ok := len(ng.Loops) == 0 && len(nw.graph[e[0]].Loops) == 0 && og != nil
			a.Added = append(a.Added, addedEdge{From: id, X: xkey(nw, id), To: e[0], Vec: firstVec(nw.graph[e[0]]), Kind: e[1],
				Real: plain && e[1] == ir.EdgeAfter, Ok: ok && (e[1] == ir.EdgeAfter || e[1] == ir.EdgeError)})
		}
		a.States = append(a.States, xkey(nw, id))
	}
	for _, id := range old.w.Order {
		if nw.graph[id] == nil {
			a.States = append(a.States, xkey(old, id))
		}
	}
	return a, reasons
}

// nodeDef is what a node does, without the derived fields and location.
func nodeDef(n *ir.Node) ir.Node {
	c := *n
	c.Dependencies, c.Dependents, c.JoinInfo, c.MaySkip, c.Entry, c.Terminal, c.LoopBody, c.Loc = nil, nil, nil, false, false, false, nil, nil
	return c
}

package runtime

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/runtime/handlers"
)

// A gnode is one node of the routing graph the scripts read (docs/runtime.md,
// "Graph"). It is stored as JSON in the field named by the node id of the
// graph hash; field "_" holds a graphInfo.
type gnode struct {
	Q    string      `json:"q"`              // queue of the node's tokens
	Out  [][2]string `json:"out,omitempty"`  // outgoing forward edges [to, kind]
	In   [][2]string `json:"in,omitempty"`   // incoming forward edges [from, kind], joins only
	Join string      `json:"join,omitempty"` // "all", "any", "settled" or "first", joins only
	// Cancel: a join first's JoinInfo.Cancels, the nodes whose pending
	// work its firing cancels (lib.lua's cancellosers).
	Cancel []string `json:"cancel,omitempty"`
	// NS: the number of distinct sources of In, when fewer than len(In)
	// (a routing node with several edges to the node: at most one of them
	// is real). A join all runs when every source sent a real token.
	NS    int      `json:"ns,omitempty"`
	Loops []string `json:"loops,omitempty"` // loop nodes whose body holds the node, outer first
	Back  string   `json:"back,omitempty"`  // back_to of a loop node
	CQ    string   `json:"cq,omitempty"`    // queue of the compensate handler, if any
	// Rd: the state fields the node's activation reads (outputs of the
	// nodes its expressions name, ...: plan.carryFields), which the
	// scripts copy into its exec tokens (lib.lua's dispatch).
	Rd []string `json:"rd,omitempty"`
}

type graphInfo struct {
	Ctl     string `json:"ctl"`           // control queue
	Outputs bool   `json:"outputs"`       // the run ends through a finish token: it has outputs to evaluate, or goals to check, or a finally
	Finally bool   `json:"fin,omitempty"` // the workflow has a finally block: endrun queues it (lib.lua)
	FQ      string `json:"fq,omitempty"`  // the finally handler's queue, when not the control queue
}

// A plan is a workflow prepared for execution: its IR, content hash,
// routing graph and queue assignment. Plans are immutable and cached by
// IR hash and queue assignment.
type plan struct {
	w       *ir.Workflow
	hash    string // ir.Hash
	suffix  string // graph key suffix: hash + "." + queue-assignment hash
	nodes   map[string]*ir.Node
	graph   map[string]*gnode
	info    graphInfo
	queues  []string // the run's queues, control queue first
	entries [][2]string
	order   map[string]int  // position in w.Order
	exprs   map[string]bool // the nodes with expressions (hasExprs)
	cel     *celCache

	ancMu sync.Mutex
	anc   map[string][]string
	// inputReads caches readsInput (under ancMu); inputsDecoded counts
	// the decodings of a run's inputs (a test reads it).
	inputReads    map[string]bool
	ahead         map[string]bool // aheadNode, under ancMu
	inputsDecoded atomic.Int64

	simpleOnce sync.Once
	simple     map[string][]simpleSucc // see simpleSuccessors

	kids sync.Map // child workflow hash -> *ir.Workflow (plan.child)
}

// A simpleSucc is a successor on complete's fast path: its id and, for a
// join, its number of incoming edges and its mode.
type simpleSucc struct {
	id   string
	nin  int
	mode string
	rd   string // its gnode's rd, comma-separated (advance.lua)
}

// simpleSuccessors returns the successors of node id, in edge order, when
// its completion can take the fast path (scripts/advance.lua): the node is
// outside every loop, is no loop itself and has no compensate; every
// outgoing edge (there may be none) is a plain after edge to a node outside
// every loop. Else ok is false. (Queues come from the stored graph: the submitting process assigned
// them.)
func (p *plan) simpleSuccessors(id string) ([]simpleSucc, bool) {
	p.simpleOnce.Do(func() {
		p.simple = map[string][]simpleSucc{}
		for nid, g := range p.graph {
			if len(g.Loops) > 0 || g.Back != "" || g.CQ != "" {
				continue
			}
			list := []simpleSucc{}
			seen := map[string]bool{}
			for _, e := range g.Out {
				t := p.graph[e[0]]
				// A successor named twice (duplicate edges) takes the
				// general path, whose dispatch sees the first arrival.
				// So does a join all with a source of several edges (its
				// fast-path count is of edges, its rule of sources).
				// So does a join first: its firing cancels (lib.lua).
				if e[1] != ir.EdgeAfter || t == nil || len(t.Loops) > 0 || seen[e[0]] || t.NS != 0 || t.Join == ir.JoinFirst {
					list = nil
					break
				}
				seen[e[0]] = true
				list = append(list, simpleSucc{e[0], len(t.In), t.Join, joinFields(t.Rd)})
			}
			if list != nil {
				p.simple[nid] = list
			}
		}
	})
	list, ok := p.simple[id]
	return list, ok
}

// queueOf maps a handler name to the queue its tokens go to.
type queueOf func(handler string) string

// newPlan prepares w, which it does not modify: it works on a decoded copy,
// analyzed and validated. ctl is the control queue ("" for ControlQueue).
func newPlan(w *ir.Workflow, qf queueOf, ctl string) (*plan, error) {
	if err := CheckSupported(w); err != nil {
		return nil, err
	}
	data, err := ir.Marshal(w)
	if err != nil {
		return nil, fmt.Errorf("runtime: encoding IR: %w", err)
	}
	return planFromJSON(data, qf, ctl)
}

// planFromJSON prepares an IR document.
func planFromJSON(data []byte, qf queueOf, ctl string) (*plan, error) {
	ctl = cmp.Or(ctl, ControlQueue)
	w, err := ir.Decode(data)
	if err != nil {
		return nil, fmt.Errorf("runtime: invalid IR: %w", err)
	}
	if ps := ir.Validate(w); len(ps) > 0 {
		return nil, fmt.Errorf("runtime: invalid IR: %w", ir.Problems(ps))
	}
	if err := CheckSupported(w); err != nil {
		return nil, err
	}
	hash, err := ir.Hash(w)
	if err != nil {
		return nil, fmt.Errorf("runtime: hashing IR: %w", err)
	}
	p := &plan{
		w:     w,
		hash:  hash,
		nodes: make(map[string]*ir.Node, len(w.Nodes)),
		graph: make(map[string]*gnode, len(w.Nodes)),
		info:  graphInfo{Ctl: ctl, Outputs: len(w.Outputs) > 0 || len(w.Goals) > 0 || w.Finally != nil, Finally: w.Finally != nil},
		order: make(map[string]int, len(w.Order)),
		exprs: map[string]bool{},
	}
	for i, id := range w.Order {
		p.order[id] = i
	}
	if qf == nil {
		qf = func(string) string { return ctl }
	}
	queues := map[string]bool{ctl: true}
	var assign []string
	if ctl != ControlQueue {
		// Another control queue is another stored graph.
		assign = append(assign, "_ctl="+ctl)
	}
	for i := range w.Nodes {
		n := &w.Nodes[i]
		p.nodes[n.ID] = n
		if len(nodeExprs(n)) > 0 {
			p.exprs[n.ID] = true
		}
		g := &gnode{Q: cmp.Or(qf(n.Handler), ctl)}
		if n.Human != nil || n.Flow != nil || n.Agent != nil {
			// A human, flow or agent node runs no handler: its token is
			// the runtime's own (an agent's worker needs a model server:
			// docs/agents.md).
			g.Q = ctl
		}
		if d := n.Dispatch; d != nil && len(d.Handlers) > 0 {
			q, err := dispatchQueue(n.ID, d.Handlers, qf, ctl)
			if err != nil {
				return nil, err
			}
			g.Q = q
		}
		queues[g.Q] = true
		assign = append(assign, n.ID+"="+g.Q)
		if n.Compensate != nil {
			g.CQ = cmp.Or(qf(n.Compensate.Handler), ctl)
			queues[g.CQ] = true
			assign = append(assign, n.ID+"~"+g.CQ)
		}
		if n.Loop != nil {
			g.Back = n.Loop.BackTo
		}
		if n.JoinInfo != nil {
			g.Join = cmp.Or(n.JoinInfo.Mode, ir.JoinAll)
			srcs := map[string]bool{}
			for _, e := range n.JoinInfo.Incoming {
				g.In = append(g.In, [2]string{e.From, e.Kind})
				srcs[e.From] = true
			}
			if len(srcs) < len(g.In) {
				g.NS = len(srcs)
			}
			if g.Join == ir.JoinFirst {
				g.Cancel = n.JoinInfo.Cancels
			}
		}
		p.graph[n.ID] = g
	}
	seen := map[[3]string]bool{}
	for _, e := range w.Edges {
		if !ir.Forward(e.Kind) || seen[[3]string{e.From, e.To, e.Kind}] {
			continue
		}
		seen[[3]string{e.From, e.To, e.Kind}] = true
		g := p.graph[e.From]
		if g == nil || p.graph[e.To] == nil {
			return nil, fmt.Errorf("runtime: edge %s -> %s names an unknown node", e.From, e.To)
		}
		g.Out = append(g.Out, [2]string{e.To, e.Kind})
	}
	// Loops: every node lists the loops whose body holds it, outer first.
	// Nested bodies are strictly smaller, so sorting by size orders them.
	bodySize := map[string]int{}
	for i := range w.Nodes {
		n := &w.Nodes[i]
		if n.Loop == nil {
			continue
		}
		if len(n.LoopBody) == 0 {
			return nil, fmt.Errorf("runtime: loop node %q has no loop body (back_to %q)", n.ID, n.Loop.BackTo)
		}
		bodySize[n.ID] = len(n.LoopBody)
		for _, b := range n.LoopBody {
			if g := p.graph[b]; g != nil {
				g.Loops = append(g.Loops, n.ID)
			}
		}
	}
	for _, g := range p.graph {
		sort.SliceStable(g.Loops, func(i, j int) bool { return bodySize[g.Loops[i]] > bodySize[g.Loops[j]] })
	}
	for _, id := range w.Entries {
		p.entries = append(p.entries, [2]string{id, firstVec(p.graph[id])})
	}
	if len(p.entries) == 0 {
		return nil, fmt.Errorf("runtime: workflow %q has no entry node", w.Name)
	}
	if f := w.Finally; f != nil {
		if q := cmp.Or(qf(f.Handler), ctl); q != ctl {
			p.info.FQ = q
			queues[q] = true
			assign = append(assign, "_fin="+q)
		}
	}
	delete(queues, ctl)
	p.queues = []string{ctl}
	for q := range queues {
		p.queues = append(p.queues, q)
	}
	slices.Sort(p.queues[1:])
	sort.Strings(assign)
	qh := "d"
	if slices.ContainsFunc(assign, func(s string) bool {
		_, q, _ := strings.Cut(strings.Replace(s, "~", "=", 1), "=")
		return q != ControlQueue
	}) {
		sum := sha256.Sum256([]byte(strings.Join(assign, "\n")))
		qh = hex.EncodeToString(sum[:6])
	}
	// The suffix is longer than 64 characters, and must stay so: a run's
	// state hash holds it (run|graph) to be a hashtable from the start
	// (step.lua).
	p.suffix = hash + "." + qh
	p.cel = newCELCache(p)
	for id, g := range p.graph {
		g.Rd = p.carryFields(id)
	}
	return p, nil
}

// dispatchQueue is the queue of a node that dispatches to one of a set of
// handlers: the token goes to one queue before the handler is chosen. The
// set's handlers on the control queue (core handlers: every worker runs
// them) go along with any queue; the others must share one, except that
// handlers on their default queues (HandlerQueue) take the first one's: a
// worker serving it must run them all.
func dispatchQueue(id string, hs []string, qf queueOf, ctl string) (string, error) {
	q, first := ctl, ""
	defaults := true
	for _, h := range hs {
		hq := cmp.Or(qf(h), ctl)
		if hq == ctl {
			continue
		}
		defaults = defaults && hq == HandlerQueue(h)
		if q == ctl {
			q, first = hq, h
		} else if hq != q && !defaults {
			return "", fmt.Errorf("runtime: node %s dispatches to handlers on different queues (%s on %q, %s on %q): a dispatch set must share a queue", id, first, q, h, hq)
		}
	}
	return q, nil
}

// graphFields returns the graph hash to store for the plan.
func (p *plan) graphFields() (map[string]any, error) {
	f := make(map[string]any, len(p.graph)+1)
	info, err := json.Marshal(p.info)
	if err != nil {
		return nil, err
	}
	f["_"] = string(info)
	for id, g := range p.graph {
		b, err := json.Marshal(g)
		if err != nil {
			return nil, err
		}
		f[id] = string(b)
	}
	return f, nil
}

// firstVec is the iteration vector of a node's first execution: 1 for every
// loop around it ("" outside loops).
func firstVec(g *gnode) string {
	if g == nil || len(g.Loops) == 0 {
		return ""
	}
	return strings.TrimSuffix(strings.Repeat("1.", len(g.Loops)), ".")
}

// execKey names one execution of a node: the node id, then "@" and the
// iteration vector inside loops (e.g. "check@3" or "inner@2.1").
func execKey(node, vec string) string {
	if vec == "" {
		return node
	}
	return node + "@" + vec
}

// splitExecKey is the inverse of execKey.
func splitExecKey(x string) (node, vec string) {
	node, vec, _ = strings.Cut(x, "@")
	return node, vec
}

// loopIteration returns the iteration of a loop node's own loop: the last
// component of its iteration vector.
func loopIteration(vec string) int {
	if i := strings.LastIndexByte(vec, '.'); i >= 0 {
		vec = vec[i+1:]
	}
	n, err := strconv.Atoi(vec)
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// CheckSupported reports whether this runtime can execute w: the IR must
// analyze cleanly, and a human or agent node must not have for_each,
// loop, branch, dispatch or compensate.
// The CLI should call it before submitting a run.
func CheckSupported(w *ir.Workflow) error {
	if w == nil {
		return fmt.Errorf("runtime: nil workflow")
	}
	if w.IRVersion != "" && w.IRVersion != ir.Version {
		return fmt.Errorf("runtime: unsupported ir_version %q (this runtime executes %q)", w.IRVersion, ir.Version)
	}
	for i := range w.Nodes {
		n := &w.Nodes[i]
		switch n.Type {
		case ir.NodeTask:
			if n.Handler == "" && n.Dispatch == nil {
				return fmt.Errorf("runtime: task node %q has no handler", n.ID)
			}
		case ir.NodeHuman:
			if n.Human == nil {
				return fmt.Errorf("runtime: human node %q has no human block", n.ID)
			}
			for _, c := range []struct {
				what string
				set  bool
			}{{"for_each", n.ForEach != nil}, {"loop", n.Loop != nil}, {"branch", n.Branch != nil},
				{"dispatch", n.Dispatch != nil}, {"compensate", n.Compensate != nil}} {
				if c.set {
					return fmt.Errorf("runtime: human node %q has %s, which this runtime does not support on a human node", n.ID, c.what)
				}
			}
		case ir.NodeFlow:
			if n.Flow == nil {
				return fmt.Errorf("runtime: flow node %q has no flow block", n.ID)
			}
		case ir.NodeAgent:
			if n.Agent == nil {
				return fmt.Errorf("runtime: agent node %q has no agent block", n.ID)
			}
			if n.ForEach != nil || n.Loop != nil || n.Branch != nil || n.Dispatch != nil || n.Compensate != nil || n.Handler != "" {
				return fmt.Errorf("runtime: agent node %q has a handler, for_each, loop, branch, dispatch or compensate, which an agent node does not support", n.ID)
			}
		default:
			return fmt.Errorf("runtime: node %q has unknown type %q", n.ID, n.Type)
		}
	}
	// The children its flow nodes run (at any depth: the list is flat).
	for i := range w.Children {
		if err := CheckSupported(&w.Children[i].Workflow); err != nil {
			return err
		}
	}
	return nil
}

// MissingHandlers returns the handlers w runs (tasks and compensations,
// its children's too)
// that reg cannot run (Registry.Can: exec counts only when allowed), sorted. `wfc run` should refuse to start a run
// whose handlers no local worker can execute.
func MissingHandlers(w *ir.Workflow, reg *handlers.Registry) []string {
	seen := map[string]bool{}
	var missing []string
	check := func(h string) {
		if h == "" || seen[h] {
			return
		}
		seen[h] = true
		if !reg.Can(h) {
			missing = append(missing, h)
		}
	}
	for i := range w.Nodes {
		check(w.Nodes[i].Handler)
		if d := w.Nodes[i].Dispatch; d != nil {
			for _, h := range d.Handlers {
				check(h)
			}
		}
		if c := w.Nodes[i].Compensate; c != nil {
			check(c.Handler)
		}
	}
	if f := w.Finally; f != nil {
		check(f.Handler)
	}
	// The children its flow nodes run: their handlers run on the same
	// workers.
	for i := range w.Children {
		for _, h := range MissingHandlers(&w.Children[i].Workflow, reg) {
			check(h)
		}
	}
	sort.Strings(missing)
	return missing
}

package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/runtime/handlers"
)

// Human nodes (docs/waiting.md): a worker that reaches one records an
// approval and lets go of it (scripts/await.lua); the run waits, holding
// the execution's counter unit but no worker. A decision (Engine.Decide) or
// the approval's timeout (a timer token of kind timeout) completes the
// execution through complete's transition (scripts/decide.lua); exactly
// one of them finds the approval open. A node with escalate_to also gets
// a timer token of kind escalate: when it fires on an open approval the
// approval escalates (field ae|x), and from then on the escalation
// approvers may decide too (scripts/decide.lua, kind escalate).

// Approval states (Approval.State).
const (
	ApprovalOpen     = "open"      // waiting for a decision
	ApprovalApproved = "approved"  // approved by Approval.By (or by its timeout: on_timeout approve)
	ApprovalRejected = "rejected"  // rejected by Approval.By (or by its timeout: on_timeout reject)
	ApprovalTimedOut = "timed_out" // its timeout fired: on_timeout fail
	// ApprovalClosed: the run ended (cancelled, failed, deadline) or was
	// retried before a decision; nobody can decide it any more.
	ApprovalClosed = "closed"
	// ApprovalCancelled: a join first that it fed ran first (docs/waiting.md,
	// "Races"); a later decision is refused.
	ApprovalCancelled = "cancelled"
)

// CodeRejected is the error code of a human node whose approval was
// rejected while it has no on_reject targets.
const CodeRejected = "rejected"

// maxDecisionText bounds a decision's By and Comment.
const (
	maxApproverBytes = 256
	maxCommentBytes  = 16 << 10
)

// An Approval is the approval of one execution of a human node.
type Approval struct {
	// ID is "<run>/<exec key>": the exec key is the node id, plus "@" and
	// the iteration vector inside loops.
	ID        string    `json:"id"`
	Run       string    `json:"run"`
	Node      string    `json:"node"`
	Iter      string    `json:"iter,omitempty"`
	Exec      string    `json:"x"`
	Gen       int       `json:"gen"`
	Approvers []string  `json:"approvers"`
	Prompt    string    `json:"prompt,omitempty"`
	Created   time.Time `json:"created"`
	Due       time.Time `json:"due,omitzero"` // when it times out; zero: no timeout
	// EscalateTo may decide too from EscalateAt on (when it escalates;
	// zero: no escalation); Escalated is when it did (zero: not yet).
	EscalateTo []string  `json:"escalate_to,omitempty"`
	EscalateAt time.Time `json:"escalate_at,omitzero"`
	Escalated  time.Time `json:"escalated,omitzero"`
	State      string    `json:"state"`
	// By, Comment and Decided: the decision, once there is one ("" By: its
	// timeout).
	By      string    `json:"by,omitempty"`
	Comment string    `json:"comment,omitempty"`
	Decided time.Time `json:"decided,omitzero"`
}

// apRecord is an approval as the run's state hash holds it (field ap|x);
// apDecision its decision (field ad|x).
type apRecord struct {
	ID        string   `json:"id"`
	Node      string   `json:"node"`
	Iter      string   `json:"iter"`
	Gen       int      `json:"gen"`
	Hop       int      `json:"hop"`
	Approvers []string `json:"approvers"`
	Prompt    string   `json:"prompt,omitempty"`
	Created   int64    `json:"created"`
	Due       int64    `json:"due,omitempty"`
	// EscalateTo may decide once the approval escalated, at EscalateAt
	// (ms; the escalate token's time).
	EscalateTo []string `json:"escalate_to,omitempty"`
	EscalateAt int64    `json:"escalate_at,omitempty"`
}

type apDecision struct {
	Outcome string `json:"outcome"`
	By      string `json:"by"`
	Comment string `json:"comment"`
	At      int64  `json:"at"`
}

// A Decision decides an approval.
type Decision struct {
	Approve bool
	// By is who decides. It must be one of the approval's approvers, or,
	// once it escalated, of its escalation approvers. The runtime trusts
	// it: the caller asserts the identity (docs/waiting.md).
	By      string
	Comment string
	// Fields are the values of the other fields the node's declared output
	// type has (beyond approved, approver and comment), checked against
	// their types. A string given for a field whose type is not string
	// (nor any, duration) is read as JSON: "3" for an int.
	Fields map[string]any
}

// approvalIndex is the shard's sorted set of open approvals ("run x" by
// creation time), for listing them without a run (Engine.OpenApprovals).
// The scripts that write it get it after the queues' keys.
func (k keyspace) approvalIndex(shard int) string { return k.tag(shard) + ":approvals" }

// callIndexed runs an approval script: the run KEYS, then the shard's
// approval index.
func (s *store) callIndexed(ctx context.Context, name string, r runRef, args any, run func(sc *redis.Script, keys []string, arg string) (any, error)) (string, error) {
	idx := s.ks.approvalIndex(s.ks.shard(r.id))
	return s.callWith(ctx, name, r, args, func(sc *redis.Script, keys []string, arg string) (any, error) {
		return run(sc, append(keys, idx), arg)
	})
}

type awaitArgs struct {
	base
	Node      string `json:"node"`
	Iter      string `json:"iter"`
	Hop       int    `json:"hop"`
	Gen       int    `json:"gen"`
	Record    string `json:"record"`
	ID        string `json:"id"`
	Approvers string `json:"approvers"`
	Prompt    string `json:"prompt"`
	Due       int64  `json:"due"`
	// EscalateTo (comma separated, for the event) and Escalate (ms; 0: no
	// escalation): the escalate token's time.
	EscalateTo string `json:"escalate_to"`
	Escalate   int64  `json:"escalate"`
	MaxState   int    `json:"maxstate"`
}

// await handles the exec token of a human node: it evaluates the
// approvers and renders the prompt, then records the approval.
func (j *job) await(act vars) error {
	h, n := j.n.Human, j.n
	approvers, err := j.approverList(h.Approvers, h.ApproversExpr, "approvers", act)
	if err != nil {
		return err
	}
	if approvers == nil {
		return nil // the node failed
	}
	var escalateTo []string
	if h.EscalateAfterMS > 0 {
		if escalateTo, err = j.approverList(h.EscalateTo, h.EscalateToExpr, "escalate_to", act); escalateTo == nil {
			return err
		}
	}
	prompt := ""
	if h.Prompt != nil {
		raw, err := j.p.value(j.ctx, h.Prompt, n.ID+".prompt", act, j.maxOutput())
		if err != nil {
			return j.evalFailed(err, -1)
		}
		if json.Unmarshal(raw, &prompt) != nil {
			prompt = string(raw)
		}
		prompt = j.w.opts.Secrets.Text(prompt)
	}
	now := nowMS()
	rec := apRecord{ID: j.tok.Run + "/" + j.x, Node: n.ID, Iter: j.tok.Iter, Gen: j.tok.Gen, Hop: j.tok.Hop,
		Approvers: approvers, Prompt: prompt, Created: now}
	if h.TimeoutMS > 0 {
		rec.Due = now + h.TimeoutMS
	}
	if len(escalateTo) > 0 {
		rec.EscalateTo, rec.EscalateAt = escalateTo, now+h.EscalateAfterMS
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	a := awaitArgs{base: j.base(), Node: n.ID, Iter: j.tok.Iter, Hop: j.tok.Hop, Gen: j.tok.Gen, Record: string(data),
		ID: rec.ID, Approvers: strings.Join(approvers, ","), Prompt: prompt, Due: rec.Due,
		EscalateTo: strings.Join(escalateTo, ","), Escalate: rec.EscalateAt, MaxState: j.maxState()}
	a.Now = strconv.FormatInt(now, 10)
	res, err := j.w.st.callIndexed(j.ctx, "await", j.ref, a, func(sc *redis.Script, keys []string, arg string) (any, error) {
		return j.batched(sc, keys, arg)
	})
	if err != nil {
		return fmt.Errorf("await %s: %w", j.x, err)
	}
	j.counted("await", res)
	if res == "state" {
		return j.failNode(j.stateErr("the approval", len(data)), -1)
	}
	return nil
}

// approverList returns a human node's approvers (or escalation
// approvers: item names which): the literal list, or expr's value. When
// they are not a non-empty list of approvers it fails the node and
// returns nil (with the error of failing it, if any).
func (j *job) approverList(lits []string, expr *ir.Expr, item string, act vars) ([]string, error) {
	list := lits
	if expr != nil {
		raw, err := j.p.evalJSON(j.ctx, expr, j.n.ID+"."+item, act, j.maxOutput())
		if err != nil {
			return nil, j.evalFailed(err, -1)
		}
		list = nil
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, j.failNode(handlers.Errorf(CodeExpr, false, "%s: %s is not a list of strings", item, expr.CEL), -1)
		}
	}
	for _, a := range list {
		if a == "" || len(a) > maxApproverBytes {
			return nil, j.failNode(handlers.Errorf(CodeExpr, false, "%s: %q is not an approver (1 to %d bytes)", item, a, maxApproverBytes), -1)
		}
	}
	if len(list) == 0 {
		return nil, j.failNode(handlers.Errorf(CodeExpr, false, "%s: the list is empty, so nobody could decide", item), -1)
	}
	return list, nil
}

type decideArgs struct {
	base
	Node     string      `json:"node"`
	Iter     string      `json:"iter"`
	Gen      int         `json:"gen"`
	Kind     string      `json:"kind"` // decision, timeout, escalate
	By       string      `json:"by"`
	Comment  string      `json:"comment"`
	Outcome  string      `json:"outcome"`
	Mode     string      `json:"mode"`
	Output   string      `json:"output,omitempty"`
	Error    string      `json:"error,omitempty"`
	Code     string      `json:"code,omitempty"`
	Real     [][2]string `json:"real,omitempty"`
	FailRun  bool        `json:"failrun"`
	MaxState int         `json:"maxstate"`
}

// outcome fills in complete's part of a decision: approval sends real
// tokens to the after-dependents; rejection to the on_reject targets, or,
// without them, fails the node with code rejected; a timeout with
// on_timeout fail (the default) fails it with code timeout. A failure takes
// the node's on_error route, else fails the run.
func (a *decideArgs) outcome(p *plan, n *ir.Node, approved bool, failCode, failMsg string) {
	switch {
	case failCode == "" && approved:
		a.Mode, a.Real = "ok", p.edges(n.ID, ir.EdgeAfter, nil)
		return
	case failCode == "" && len(n.Human.OnReject) > 0:
		a.Mode, a.Real = "ok", p.edges(n.ID, ir.EdgeReject, nil)
		return
	case failCode == "":
		failCode = CodeRejected
	}
	a.Mode, a.Code, a.Error, a.Output = "fail", failCode, failMsg, ""
	if targets, ok := n.Route(failCode); ok {
		if targets == nil {
			targets = []string{}
		}
		a.Real = p.edges(n.ID, ir.EdgeError, targets)
		return
	}
	a.FailRun = true
}

// decisionOutput is the human node's output for a decision: approved,
// approver, comment (when not empty) and fields, checked against the node's
// output type.
func decisionOutput(n *ir.Node, approved bool, by, comment string, fields map[string]any) (string, error) {
	out := map[string]any{"approved": approved, "approver": by}
	if comment != "" {
		out["comment"] = comment
	}
	t := n.OutputType
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range fields {
			if !yield(k) {
				return
			}
		}
	})
	for _, k := range names {
		v := fields[k]
		if k == "approved" || k == "approver" || k == "comment" {
			return "", fmt.Errorf("field %s is set by the decision itself, not as a field", k)
		}
		var ft *ir.Type
		if t != nil && t.Kind == ir.KindObject {
			for i := range t.Fields {
				if t.Fields[i].Name == k {
					ft = &t.Fields[i].Type
				}
			}
			if ft == nil {
				var have []string
				for _, f := range t.Fields {
					if f.Name != "approved" && f.Name != "approver" && f.Name != "comment" {
						have = append(have, f.Name)
					}
				}
				if len(have) == 0 {
					return "", fmt.Errorf("node %s declares no field %s (its output has no fields beyond approved, approver and comment)", n.ID, k)
				}
				return "", fmt.Errorf("node %s declares no field %s (its fields: %s)", n.ID, k, strings.Join(have, ", "))
			}
		}
		if s, ok := v.(string); ok && ft != nil {
			switch ft.Kind {
			case ir.KindString, ir.KindAny, ir.KindDuration, ir.KindSecret, "":
			default:
				parsed, err := decodeJSON([]byte(s))
				if err != nil {
					return "", fmt.Errorf("field %s: %q is not a %s", k, s, typeName(ft))
				}
				v = parsed
			}
		}
		out[k] = v
	}
	data, err := json.Marshal(out)
	if err != nil {
		return "", fmt.Errorf("fields: %w", err)
	}
	v, err := decodeJSON(data)
	if err != nil {
		return "", err
	}
	if err := checkType(v, outputType(n), "output"); err != nil {
		return "", err
	}
	return string(data), nil
}

// typeName is a type in words, for errors.
func typeName(t *ir.Type) string {
	switch t.Kind {
	case ir.KindList:
		return "list"
	case ir.KindObject:
		return "object"
	}
	return t.Kind
}

// Decide decides the approval of run's execution x of a human node — a
// node id, with "@" and the iteration inside loops (a node id alone names
// the node's one open approval). It completes the execution: approval sends
// real tokens to the node's dependents; rejection to its on_reject targets
// (without them the node fails with code rejected). It is refused, nothing
// changed, when the run is unknown or not running, the approval unknown or
// closed (decided already, timed out, its run cancelled), By is not one of
// its approvers (nor, once it escalated, of its escalation approvers), or a
// field does not fit the node's output type; exactly one of concurrent
// decisions (and the timeout) applies, and the escalation is ordered with
// them.
func (e *Engine) Decide(ctx context.Context, run, x string, d Decision) error {
	return retryGraph0(func() error { return e.decideOnce(ctx, run, x, d) })
}

func (e *Engine) decideOnce(ctx context.Context, run, x string, d Decision) error {
	if !validRunID(run) {
		return fmt.Errorf("runtime: decide: invalid run id %q", run)
	}
	if d.By == "" {
		return fmt.Errorf("runtime: decide: who decides is required (the decider)")
	}
	if len(d.By) > maxApproverBytes || len(d.Comment) > maxCommentBytes {
		return fmt.Errorf("runtime: decide: the decider is at most %d bytes and the comment at most %d", maxApproverBytes, maxCommentBytes)
	}
	m, err := e.meta(ctx, run)
	if err != nil {
		return fmt.Errorf("runtime: decide: %w", err)
	}
	if m.Status != RunRunning {
		return fmt.Errorf("runtime: decide: run %s is %s: its approvals are closed", run, m.Status)
	}
	p, err := e.st.planFor(ctx, m.IR)
	if err != nil {
		return fmt.Errorf("runtime: decide: run %s: %w", run, err)
	}
	node, iter := splitExecKey(x)
	n := p.nodes[node]
	if n == nil {
		return fmt.Errorf("runtime: decide: run %s has no node %q", run, node)
	}
	if n.Human == nil {
		return fmt.Errorf("runtime: decide: node %s of run %s is a %s node, not a human node", node, run, n.Type)
	}
	if iter == "" && len(p.graph[node].Loops) > 0 {
		if x, err = e.openExec(ctx, run, node); err != nil {
			return fmt.Errorf("runtime: decide: %w", err)
		}
		_, iter = splitExecKey(x)
	}
	out, err := decisionOutput(n, d.Approve, d.By, d.Comment, d.Fields)
	if err != nil {
		return fmt.Errorf("runtime: decide %s/%s: %w", run, x, err)
	}
	a := decideArgs{base: e.st.base(m.ref(), nil), Node: node, Iter: iter, Gen: m.Gen, Kind: "decision", By: d.By, Comment: d.Comment,
		Output: out, MaxState: effectiveLimit(p.w.Settings.MaxStateBytes, DefaultMaxStateBytes)}
	a.Outcome = ApprovalRejected
	msg := "rejected by " + d.By
	if d.Comment != "" {
		msg += ": " + d.Comment
	}
	if d.Approve {
		a.Outcome = ApprovalApproved
	}
	a.outcome(p, n, d.Approve, "", msg)
	_, err = e.st.callIndexed(ctx, "decide", m.ref(), a, func(sc *redis.Script, keys []string, arg string) (any, error) {
		return sc.Run(ctx, e.st.rdb, keys, arg).Result()
	})
	if err != nil {
		return fmt.Errorf("runtime: decide: %w", err)
	}
	return nil
}

// openExec returns the exec key of node's one open approval in run.
func (e *Engine) openExec(ctx context.Context, run, node string) (string, error) {
	aps, err := e.Approvals(ctx, run)
	if err != nil {
		return "", err
	}
	var open []string
	for _, a := range aps {
		if a.Node == node && a.State == ApprovalOpen {
			open = append(open, a.Exec)
		}
	}
	switch len(open) {
	case 0:
		return "", fmt.Errorf("node %s of run %s has no open approval", node, run)
	case 1:
		return open[0], nil
	}
	return "", fmt.Errorf("node %s of run %s has %d open approvals (%s): name one", node, run, len(open), strings.Join(open, ", "))
}

// timeout handles the timer token of an approval's timeout: on_timeout
// decides it, if it is still open.
func (j *job) timeout() error {
	n := j.n
	if n.Human == nil {
		return j.ack()
	}
	h := n.Human
	a := decideArgs{base: j.base(), Node: n.ID, Iter: j.tok.Iter, Gen: j.tok.Gen, Kind: "timeout", MaxState: j.maxState()}
	d := time.Duration(h.TimeoutMS) * time.Millisecond
	msg := fmt.Sprintf("the approval timed out after %s", d)
	switch h.OnTimeout {
	case ir.TimeoutApprove, ir.TimeoutReject:
		approved := h.OnTimeout == ir.TimeoutApprove
		a.Outcome = ApprovalRejected
		if approved {
			a.Outcome = ApprovalApproved
		}
		out, err := decisionOutput(n, approved, "", msg, nil)
		if err != nil {
			a.Outcome = ApprovalTimedOut
			a.outcome(j.p, n, false, CodeOutput, fmt.Sprintf("%s, and on_timeout %s gives an output that does not fit: %v", msg, h.OnTimeout, err))
			break
		}
		a.Output = out
		a.outcome(j.p, n, approved, "", msg)
	default:
		a.Outcome = ApprovalTimedOut
		a.outcome(j.p, n, false, handlers.CodeTimeout, msg)
	}
	a.Comment = msg
	res, err := j.w.st.callIndexed(j.ctx, "decide", j.ref, a, func(sc *redis.Script, keys []string, arg string) (any, error) {
		return j.batched(sc, keys, arg)
	})
	if err != nil {
		return fmt.Errorf("timeout %s: %w", j.x, err)
	}
	j.counted("decide", res)
	return nil
}

// escalate handles the timer token of an approval's escalation: the
// approval escalates, if it is still open and did not already.
func (j *job) escalate() error {
	if j.n.Human == nil {
		return j.ack()
	}
	a := decideArgs{base: j.base(), Node: j.n.ID, Iter: j.tok.Iter, Gen: j.tok.Gen, Kind: "escalate", MaxState: j.maxState()}
	res, err := j.w.st.callIndexed(j.ctx, "decide", j.ref, a, func(sc *redis.Script, keys []string, arg string) (any, error) {
		return j.batched(sc, keys, arg)
	})
	if err != nil {
		return fmt.Errorf("escalate %s: %w", j.x, err)
	}
	j.counted("decide", res)
	return nil
}

// Approvals returns every approval of a run, open or decided, oldest first.
func (e *Engine) Approvals(ctx context.Context, run string) ([]Approval, error) {
	if !validRunID(run) {
		return nil, fmt.Errorf("runtime: invalid run id %q", run)
	}
	states, err := e.st.rdb.HGetAll(ctx, e.st.ks.state(run)).Result()
	if err != nil {
		return nil, err
	}
	m, err := parseMeta(run, metaFromHash(states))
	if err != nil {
		return nil, e.st.explainUnknown(ctx, run, err)
	}
	return approvalsOf(run, m, states), nil
}

// approvalsOf reads a run's approvals from its state hash.
func approvalsOf(run string, m *runMeta, states map[string]string) []Approval {
	var out []Approval
	for f, v := range states {
		x, ok := strings.CutPrefix(f, "ap|")
		if !ok {
			continue
		}
		out = append(out, approvalOf(run, m.Status, m.Gen, x, v, states[x], states["ad|"+x], states["ae|"+x]))
	}
	sortApprovals(out)
	return out
}

func sortApprovals(out []Approval) {
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Created.Equal(out[j].Created) {
			return out[i].Created.Before(out[j].Created)
		}
		return out[i].ID < out[j].ID
	})
}

// approvalOf decodes an approval from its record, its execution's state,
// its decision and its escalation time.
func approvalOf(run, status string, gen int, x, rec, xstate, dec, esc string) Approval {
	var r apRecord
	json.Unmarshal([]byte(rec), &r)
	a := Approval{ID: run + "/" + x, Run: run, Node: r.Node, Iter: r.Iter, Exec: x, Gen: r.Gen, Approvers: r.Approvers,
		Prompt: r.Prompt, Created: msTime(r.Created), Due: msTime(r.Due), State: ApprovalClosed,
		EscalateTo: r.EscalateTo, EscalateAt: msTime(r.EscalateAt)}
	if ms, err := strconv.ParseInt(esc, 10, 64); err == nil {
		a.Escalated = msTime(ms)
	}
	if a.Node == "" {
		a.Node, a.Iter = splitExecKey(x)
	}
	if dec != "" {
		var d apDecision
		if json.Unmarshal([]byte(dec), &d) == nil {
			a.State, a.By, a.Comment, a.Decided = d.Outcome, d.By, d.Comment, msTime(d.At)
		}
	} else if status == RunRunning && xstate == NodeWaiting && r.Gen == gen {
		a.State = ApprovalOpen
	}
	return a
}

// OpenApprovals returns the open approvals of every run, oldest first. It
// reads each shard's index of open approvals and drops the entries of
// approvals that closed without a decision (their run ended or was
// retried) as it goes.
func (e *Engine) OpenApprovals(ctx context.Context) ([]Approval, error) {
	var out []Approval
	for s := 0; s < max(e.st.ks.shards, 1); s++ {
		idx := e.st.ks.approvalIndex(s)
		members, err := e.st.rdb.ZRange(ctx, idx, 0, -1).Result()
		if err != nil {
			return nil, err
		}
		for len(members) > 0 {
			chunk := members[:min(len(members), 500)]
			members = members[len(chunk):]
			pipe := e.st.rdb.Pipeline()
			cmds := make([]*redis.SliceCmd, len(chunk))
			for i, mem := range chunk {
				run, x, _ := strings.Cut(mem, " ")
				cmds[i] = pipe.HMGet(ctx, e.st.ks.state(run), runField("status"), runField("gen"), x, "ap|"+x, "ad|"+x, "ae|"+x)
			}
			if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
				return nil, err
			}
			var stale []any
			for i, mem := range chunk {
				run, x, _ := strings.Cut(mem, " ")
				vals := cmds[i].Val()
				str := func(k int) string {
					if k < len(vals) {
						s, _ := vals[k].(string)
						return s
					}
					return ""
				}
				gen, _ := strconv.Atoi(str(1))
				if str(3) == "" {
					stale = append(stale, mem)
					continue
				}
				a := approvalOf(run, str(0), gen, x, str(3), str(2), str(4), str(5))
				if a.State != ApprovalOpen {
					stale = append(stale, mem)
					continue
				}
				out = append(out, a)
			}
			if len(stale) > 0 {
				if err := e.st.rdb.ZRem(ctx, idx, stale...).Err(); err != nil {
					return nil, err
				}
			}
		}
	}
	sortApprovals(out)
	return out, nil
}

// HumanNodes returns the ids of w's human nodes, in order: a run of w waits
// for decisions from outside (wfc run refuses them on an embedded Redis,
// which no other process reaches).
func HumanNodes(w *ir.Workflow) []string {
	var ids []string
	for i := range w.Nodes {
		if w.Nodes[i].Type == ir.NodeHuman {
			ids = append(ids, w.Nodes[i].ID)
		}
	}
	return ids
}

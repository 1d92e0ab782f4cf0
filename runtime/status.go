package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Run states.
const (
	RunRunning   = "running"
	RunCompleted = "completed"
	RunFailed    = "failed"
	RunCancelled = "cancelled"
)

// Node execution states.
const (
	NodeQueued    = "queued"    // a token is queued or a worker runs it
	NodeRunning   = "running"   // its handler runs (for a while: WorkerOptions.RunningAfter), or a for_each node's items run
	NodeRetrying  = "retrying"  // waiting for its next attempt
	NodeCompleted = "completed" // ran; has an output
	NodeSkipped   = "skipped"   // did not run (false when, or only skips arrived)
	NodeFailed    = "failed"    // failed after its attempts
	NodeCancelled = "cancelled" // a join first ran first: its pending work was cancelled, or it will never run (docs/waiting.md, "Races")
	NodeWaiting   = "waiting"   // a human node's approval waits for a decision, or a wait task for its time (docs/waiting.md)
)

// A Status is the state of a run.
type Status struct {
	RunID    string `json:"run_id"`
	Workflow string `json:"workflow"`
	IR       string `json:"ir"` // IR content hash
	State    string `json:"state"`
	// Gen counts partial retries (Retry); tokens of older generations are stale.
	Gen int `json:"gen"`
	// Counter is the number of outstanding work units: queued or running
	// executions, items and collect steps, retries waiting on a timer.
	Counter int64 `json:"counter"`
	// Nodes holds every execution that was queued, ran or was skipped, by
	// exec key: the node id, plus "@" and the iteration vector inside loops.
	Nodes  map[string]*NodeStatus `json:"nodes"`
	Inputs json.RawMessage        `json:"inputs,omitempty"`
	Result json.RawMessage        `json:"result,omitempty"`
	Error  string                 `json:"error,omitempty"`
	// FailedNode is the execution whose failure failed the run, if any.
	FailedNode string `json:"failed_node,omitempty"`
	// Waiting says why the run's control tokens (deadline, outputs,
	// finally) would wait: "no live worker serves queue Q" when no worker
	// in the registry serves its control queue (docs/runtime.md,
	// "Workers"); "" otherwise and once the run ended.
	Waiting string `json:"waiting,omitempty"`
	// Compensation is "" (none), "running" or "done".
	Compensation string `json:"compensation,omitempty"`
	// Finally is the workflow's finally step: "" (none, or not yet),
	// "running", "done" or "failed" (FinallyError says why).
	Finally      string    `json:"finally,omitempty"`
	FinallyError string    `json:"finally_error,omitempty"`
	Created      time.Time `json:"created"`
	Ended        time.Time `json:"ended,omitzero"`
	// Expires is when the run's keys expire (its retention period after it
	// ended); zero while it runs or when they are kept forever. After that
	// the run is unknown.
	Expires time.Time `json:"expires,omitzero"`
	// Approvals are the run's approvals (human nodes), open or decided,
	// oldest first.
	Approvals []Approval `json:"approvals,omitempty"`
	// Children are the child runs its flow nodes started (every attempt
	// and for_each item; not one recorded that has not started yet) and
	// the runs its agents delegated: child run id
	// -> the execution that started it, with "#" and the item index for
	// an item's.
	Children map[string]string `json:"children,omitempty"`
}

// Done reports whether the run is terminal and no compensation is running.
func (s *Status) Done() bool {
	return s.State != RunRunning && s.Compensation != "running" && s.Finally != "running"
}

// A NodeStatus is the state of one node execution.
type NodeStatus struct {
	Node    string          `json:"node"`
	Iter    string          `json:"iter,omitempty"`
	State   string          `json:"state"`
	Output  json.RawMessage `json:"output,omitempty"`
	Error   string          `json:"error,omitempty"`
	Code    string          `json:"code,omitempty"`    // the error code of a failed execution
	Attempt int             `json:"attempt,omitempty"` // the attempt queued next, after retries
	// Waiting, for a queued or retrying execution of a running run: "no
	// live worker serves queue Q" when no worker in the registry serves
	// the queue of its node (it waits until one starts); else "".
	Waiting string `json:"waiting,omitempty"`
	// Due, for a waiting wait task (the built-in durable timer), is the
	// time it waits until; for a signal task with a timeout, when it
	// times out.
	Due time.Time `json:"due,omitzero"`
	// Child, for a flow node, is the child run of its latest attempt
	// (docs/waiting.md, "Child flows"), once it started.
	Child string `json:"child,omitempty"`
	// Signal and Correlation, for a signal task waiting for its signal,
	// are the signal's name and correlation (docs/waiting.md, "Signals").
	Signal      string `json:"signal,omitempty"`
	Correlation string `json:"correlation,omitempty"`
}

// Output returns the output of node id's latest execution (its last
// iteration inside a loop), or nil: nil too when that execution was skipped
// or failed, as for x.output in the workflow (docs/language.md §7.6).
func (s *Status) Output(id string) json.RawMessage {
	var best *NodeStatus
	for _, ns := range s.Nodes {
		if ns.Node == id && (best == nil || vecLess(best.Iter, ns.Iter)) {
			best = ns
		}
	}
	if best == nil {
		return nil
	}
	return best.Output
}

// vecLess orders iteration vectors numerically.
func vecLess(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(as) && i < len(bs); i++ {
		x, _ := strconv.Atoi(as[i])
		y, _ := strconv.Atoi(bs[i])
		if x != y {
			return x < y
		}
	}
	return len(as) < len(bs)
}

func msTime(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

func (s *store) status(ctx context.Context, run string) (*Status, error) {
	// The whole run is its state hash: its own fields and its executions'.
	pipe := s.rdb.Pipeline()
	stc := pipe.HGetAll(ctx, s.ks.state(run))
	ttl := pipe.PTTL(ctx, s.ks.state(run))
	reg := pipe.HGetAll(ctx, s.ks.workers(s.ks.shard(run)))
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	states := stc.Val()
	m, err := parseMeta(run, metaFromHash(states))
	if err != nil {
		return nil, s.explainUnknown(ctx, run, err)
	}
	st := &Status{
		RunID: run, Workflow: m.Workflow, IR: m.IR, State: m.Status, Gen: m.Gen,
		Nodes: map[string]*NodeStatus{}, Error: m.Error, FailedNode: m.FailedNode, Compensation: m.Comp, Finally: m.Finally,
		FinallyError: states["run|finally_error"],
		Created:      msTime(m.Created), Ended: msTime(m.Ended),
	}
	if d := ttl.Val(); d > 0 {
		st.Expires = time.Now().Add(d).UTC().Truncate(time.Millisecond)
	}
	if m.Inputs != "" {
		st.Inputs = json.RawMessage(m.Inputs)
	}
	if m.Result != "" {
		st.Result = json.RawMessage(m.Result)
	}
	st.Counter, _ = strconv.ParseInt(states[runField("counter")], 10, 64)
	for x, v := range states {
		if strings.Contains(x, "|") { // hop|x, out|x, joins, run|counter: not an execution
			continue
		}
		node, vec := splitExecKey(x)
		ns := &NodeStatus{Node: node, Iter: vec, State: v}
		if ns.State == NodeCompleted {
			if o, ok := states[outField(x)]; ok {
				ns.Output = json.RawMessage(o)
			}
		}
		if ns.State == NodeFailed {
			ns.Error, ns.Code = states["err|"+x], states["ec|"+x]
		}
		if ns.State == NodeWaiting {
			ns.Due = waitDueOf(states, x)
			signalOf(ns, states, x)
		}
		if a := states["att|"+x]; a != "" {
			ns.Attempt, _ = strconv.Atoi(a)
		}
		if c := states["fl|"+x]; states["cp|"+c] == "" { // a pending child may never start (flow.go)
			ns.Child = c
		}
		st.Nodes[x] = ns
	}
	for k, v := range states {
		if c, ok := strings.CutPrefix(k, "ch|"); ok && states["cp|"+c] == "" {
			if st.Children == nil {
				st.Children = map[string]string{}
			}
			st.Children[c] = v
		}
	}
	st.Approvals = approvalsOf(run, m, states)
	s.waiting(ctx, st, m.Graph, reg.Val())
	return st, nil
}

// An Event is one entry of a run's event log.
type Event struct {
	ID     string            `json:"id"`
	Type   string            `json:"type"`
	Time   time.Time         `json:"time"`
	Fields map[string]string `json:"fields,omitempty"`
}

func (s *store) events(ctx context.Context, run, after string, count int64) ([]Event, error) {
	start := "-"
	if after != "" {
		start = "(" + after
	}
	var msgs []redis.XMessage
	var err error
	if count > 0 {
		msgs, err = s.rdb.XRangeN(ctx, s.ks.events(run), start, "+", count).Result()
	} else {
		msgs, err = s.rdb.XRange(ctx, s.ks.events(run), start, "+").Result()
	}
	if err != nil {
		return nil, err
	}
	return parseEvents(msgs), nil
}

func parseEvents(msgs []redis.XMessage) []Event {
	evs := make([]Event, 0, len(msgs))
	for _, m := range msgs {
		ev := Event{ID: m.ID, Fields: map[string]string{}}
		for k, v := range m.Values {
			sv := fmt.Sprint(v)
			switch k {
			case "type":
				ev.Type = sv
			case "ts":
				ms, _ := strconv.ParseInt(sv, 10, 64)
				ev.Time = msTime(ms)
			default:
				ev.Fields[k] = sv
			}
		}
		evs = append(evs, ev)
	}
	return evs
}

// Queued returns the executions an event queued: the x of a node.queued
// event, or those listed in the field next ("x:hop,...") of a step that
// folds the executions it queues into its own event (run.started,
// node.completed).
func (ev Event) Queued() []string {
	if ev.Type == "node.queued" {
		return []string{ev.Fields["x"]}
	}
	next := ev.Fields["next"]
	if next == "" {
		return nil
	}
	out := strings.Split(next, ",")
	for i, q := range out {
		out[i], _, _ = strings.Cut(q, ":")
	}
	return out
}

// A Transition is the change of one execution's state that an event
// records.
type Transition struct {
	Exec    string          // exec key: node id, plus "@" and the iteration vector inside loops
	State   string          // the new state: NodeQueued, NodeRunning, ...
	Output  json.RawMessage // with NodeCompleted
	Error   string          // with NodeFailed
	Code    string          // with NodeFailed: the error code
	Attempt int             // with NodeRetrying: the attempt queued next
}

// Transitions returns the execution state changes ev records, in the
// order they happened: the event's own execution's first, then the
// executions it queued (see Queued). Folding the transitions of a run's
// events in log order gives its node states (Replay does).
func (ev Event) Transitions() []Transition {
	f := ev.Fields
	var ts []Transition
	switch ev.Type {
	case "node.expanded":
		ts = append(ts, Transition{Exec: f["x"], State: NodeRunning})
	case "node.completed":
		ts = append(ts, Transition{Exec: f["x"], State: NodeCompleted, Output: json.RawMessage(f["output"])})
	case "node.skipped":
		ts = append(ts, Transition{Exec: f["x"], State: NodeSkipped})
	case "node.started":
		ts = append(ts, Transition{Exec: f["x"], State: NodeRunning})
	case "approval.created", "node.waiting":
		ts = append(ts, Transition{Exec: f["x"], State: NodeWaiting})
	case "node.failed":
		ts = append(ts, Transition{Exec: f["x"], State: NodeFailed, Error: f["error"], Code: f["code"]})
	case "join.cancelled":
		for _, x := range strings.Split(f["cancelled"], ",") {
			if x != "" {
				ts = append(ts, Transition{Exec: x, State: NodeCancelled})
			}
		}
	case "node.retry":
		if f["item"] == "-1" { // a for_each item's retry leaves its node running
			a, _ := strconv.Atoi(f["attempt"])
			ts = append(ts, Transition{Exec: f["x"], State: NodeRetrying, Attempt: a})
		}
	}
	for _, q := range ev.Queued() {
		ts = append(ts, Transition{Exec: q, State: NodeQueued})
	}
	return ts
}

// Replay rebuilds a run's status from its event log alone. For every run,
// Replay(Events(run)) equals Status(run) in State, Gen, Counter, Nodes,
// Result, Error, FailedNode and Compensation; Compare checks that.
func Replay(run string, events []Event) (*Status, error) {
	st := &Status{RunID: run, Nodes: map[string]*NodeStatus{}}
	node := func(x string) *NodeStatus {
		ns := st.Nodes[x]
		if ns == nil {
			n, vec := splitExecKey(x)
			ns = &NodeStatus{Node: n, Iter: vec}
			st.Nodes[x] = ns
		}
		return ns
	}
	for _, ev := range events {
		f := ev.Fields
		if dc := f["dc"]; dc != "" {
			d, err := strconv.ParseInt(dc, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("event %s: bad dc %q", ev.ID, dc)
			}
			st.Counter += d
		}
		x := f["x"]
		switch ev.Type {
		case "run.started":
			st.State, st.IR, st.Workflow, st.Created = RunRunning, f["ir"], f["workflow"], ev.Time
			st.Inputs = json.RawMessage(f["inputs"])
		case "run.completed":
			st.State, st.Ended = RunCompleted, ev.Time
			if r, ok := f["result"]; ok {
				st.Result = json.RawMessage(r)
			}
		case "run.failed":
			st.State, st.Error, st.FailedNode, st.Ended = RunFailed, f["error"], x, ev.Time
		case "run.cancelled":
			st.State, st.Error, st.Ended = RunCancelled, f["reason"], ev.Time
		case "run.retried":
			st.State, st.Error, st.FailedNode, st.Result, st.Compensation, st.Ended = RunRunning, "", "", nil, "", time.Time{}
			st.Finally, st.FinallyError = "", ""
			st.Gen, _ = strconv.Atoi(f["gen"])
			st.Counter, _ = strconv.ParseInt(f["counter"], 10, 64)
		case "patch.applied":
			st.IR = f["new"]
		case "comp.queued":
			st.Compensation = "running"
		case "comp.done":
			st.Compensation = "done"
		case "finally.queued":
			st.Finally = "running"
		case "finally.done":
			st.Finally = "done"
		case "finally.failed":
			st.Finally, st.FinallyError = "failed", f["error"]
		}
		for _, t := range ev.Transitions() {
			if t.State == NodeQueued { // queued anew: nothing of an earlier execution is kept
				n, vec := splitExecKey(t.Exec)
				st.Nodes[t.Exec] = &NodeStatus{Node: n, Iter: vec, State: NodeQueued}
				continue
			}
			ns := node(t.Exec)
			ns.State = t.State
			switch t.State {
			case NodeCompleted:
				ns.Output = t.Output
			case NodeFailed:
				ns.Error, ns.Code = t.Error, t.Code
			case NodeRetrying:
				ns.Attempt = t.Attempt
			}
		}
	}
	return st, nil
}

// Compare returns the differences between two statuses in the fields that
// Replay rebuilds, one line each; none means equal.
func Compare(a, b *Status) []string {
	var d []string
	diff := func(what string, x, y any) {
		if fmt.Sprint(x) != fmt.Sprint(y) {
			d = append(d, fmt.Sprintf("%s: %v != %v", what, x, y))
		}
	}
	diff("state", a.State, b.State)
	diff("gen", a.Gen, b.Gen)
	diff("counter", a.Counter, b.Counter)
	diff("result", string(a.Result), string(b.Result))
	diff("error", a.Error, b.Error)
	diff("failed_node", a.FailedNode, b.FailedNode)
	diff("compensation", a.Compensation, b.Compensation)
	diff("finally", a.Finally, b.Finally)
	diff("finally error", a.FinallyError, b.FinallyError)
	keys := map[string]bool{}
	for k := range a.Nodes {
		keys[k] = true
	}
	for k := range b.Nodes {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	for _, k := range sorted {
		x, y := a.Nodes[k], b.Nodes[k]
		if x == nil || y == nil {
			d = append(d, fmt.Sprintf("node %s: present in one status only", k))
			continue
		}
		diff("node "+k+" state", x.State, y.State)
		diff("node "+k+" output", string(x.Output), string(y.Output))
		diff("node "+k+" error", x.Error, y.Error)
		diff("node "+k+" code", x.Code, y.Code)
		diff("node "+k+" attempt", x.Attempt, y.Attempt)
	}
	return d
}

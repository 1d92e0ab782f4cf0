package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/runtime/handlers"
)

// noDanglingChild checks that every child run a status names (Children,
// a node's Child) exists: a child recorded but never started is not one.
func noDanglingChild(t *testing.T, e *Engine, st *Status) {
	t.Helper()
	named := map[string]string{}
	for c, x := range st.Children {
		named[c] = "children (" + x + ")"
	}
	for x, ns := range st.Nodes {
		if ns.Child != "" {
			named[ns.Child] = "node " + x
		}
	}
	for c, where := range named {
		if _, err := e.Status(context.Background(), c); errors.Is(err, ErrUnknownRun) {
			t.Errorf("run %s names child %s in its %s: no such run", st.RunID, c, where)
		} else if err != nil {
			t.Fatal(err)
		}
	}
}

// A child the runtime refuses to start (its inputs do not fit its input
// block or its max_input_bytes) fails the flow node with code flow, and
// the parent names no child run: nothing was started.
func TestFlowChildRefused(t *testing.T) {
	intKid := childWF(t, "kid", "count")
	small := build(t, wfSpec{name: "small", inputs: []ir.Input{input("s", "string")}, set: ir.Settings{MaxInputBytes: 16},
		nodes: []*nodeSpec{task("work", "count", with("s", cexpr("input.s")))}})
	cases := []struct {
		name  string
		child *ir.Workflow
		opts  []nodeOpt
		want  string // in the node's error
	}{
		{"wrong type", intKid, []nodeOpt{fwith("n", konst(`"seven"`))}, "input n"},
		{"missing input", intKid, nil, `input "n"`},
		{"over max_input_bytes", small, []nodeOpt{fwith("s", konst(`"far too long for sixteen bytes"`))}, "max_input_bytes"},
		{"for_each item", intKid, []nodeOpt{forEach("x", "[1, 2]", 0), fwith("n", konst(`"seven"`))}, "input n"},
		{"with retry", intKid, []nodeOpt{fwith("n", konst(`"seven"`)), retry(3, "fixed", 1)}, "input n"},
	}
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				w := build(t, wfSpec{name: "parent", children: []*ir.Workflow{c.child},
					nodes: []*nodeSpec{flowNode(t, "c", c.child, c.opts...)}})
				st := v.run(w, nil)
				ns := st.Nodes["c"]
				if st.State != RunFailed || ns == nil || ns.State != NodeFailed || ns.Code != CodeFlow || !strings.Contains(ns.Error, c.want) {
					t.Fatalf("parent: %s", dump(st))
				}
				if len(st.Children) != 0 || ns.Child != "" {
					t.Errorf("a refused child is named: children %v, c.child %q", st.Children, ns.Child)
				}
				noDanglingChild(t, v.e, st)
				if n := eventCount(v, st.RunID, "node.waiting", "c"); n != 0 {
					t.Errorf("c parked %d times on a child that could not start", n)
				}
			})
		}
	})
}

// A worker that dies, or a parent that gives its child up, between the
// record of a child run (the flow script) and its submit leaves no child
// the parent names but that does not exist, and no child that runs on
// without its parent: the record comes true (the worker that takes the
// message again submits the same child) or goes (the parent ended, a join
// first cancelled the execution or its timeout passed first: the child
// never starts), also when the worker that recorded it submits it late.
// The doomed worker serves the control queue only: the child's task (and
// the parent's, a) run on the rescuer (from the start when none dies).
func TestFlowChildRecordedNotSubmitted(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		for _, c := range childRecordedCases {
			t.Run(c.name, func(t *testing.T) { testChildRecorded(t, b, Options{}, c) })
		}
	})
}

// On a Redis Cluster (6 shards over 3 masters): the scripts that record,
// start and close a child touch the parent's and the child's keys in one
// slot.
func TestFlowChildRecordedCluster(t *testing.T) {
	t.Parallel()
	for _, c := range childRecordedCases {
		if c.shape == "one" && c.phase == "recorded" {
			t.Run(c.name, func(t *testing.T) { testChildRecorded(t, clusterBackend, Options{Shards: 6}, c) })
		}
	}
}

type childRecordedCase struct {
	name    string
	shape   string // "one" flow node c, "each" (c's item 0), "first" (a join first j of a and c), "timeout" (c's, 300 ms), "retry" (and 2 attempts)
	phase   string // where the hook acts: "recorded" or "submitted"
	cancel  bool   // the hook cancels the parent
	until   string // then the hook waits for c's state (with code when failed)
	kill    bool   // then the worker dies
	want    string // the parent's end
	node    string // c's end, with code when failed
	started bool   // the hook's child exists in the end
}

const timedOut = NodeFailed + " " + handlers.CodeTimeout

var childRecordedCases = []childRecordedCase{
	{"worker dies, parent goes on", "one", "recorded", false, "", true, RunCompleted, NodeCompleted, true},
	{"parent cancelled, worker dies", "one", "recorded", true, "", true, RunCancelled, NodeWaiting, false},
	{"parent cancelled, worker goes on", "one", "recorded", true, "", false, RunCancelled, NodeWaiting, false},
	{"item: worker dies, parent goes on", "each", "recorded", false, "", true, RunCompleted, NodeCompleted, true},
	{"item: parent cancelled, worker dies", "each", "recorded", true, "", true, RunCancelled, NodeRunning, false},
	{"parent cancelled after the submit, worker dies", "one", "submitted", true, "", true, RunCancelled, NodeWaiting, true},
	{"join first cancels, worker dies", "first", "recorded", false, "", true, RunCompleted, NodeCancelled, false},
	{"join first cancels, worker goes on late", "first", "recorded", false, NodeCancelled, false, RunCompleted, NodeCancelled, false},
	{"timeout passes, worker dies", "timeout", "recorded", false, "", true, RunFailed, timedOut, false},
	{"timeout passes, worker goes on late", "retry", "recorded", false, NodeRetrying, false, RunCompleted, NodeCompleted, false},
}

func testChildRecorded(t *testing.T, b backend, o Options, c childRecordedCase) {
	var h func(ctx context.Context, phase, child string)
	o.flowHook = func(ctx context.Context, phase, child string) { h(ctx, phase, child) }
	v := newEnv(t, b, o)
	wo := fastWorker(v.reg)
	wo.crash, wo.Consumer, wo.Queues = true, "doomed", []string{ControlQueue}
	ctx1, kill := context.WithCancel(v.ctx)
	defer kill()
	run := "parent-" + strings.NewReplacer(" ", "-", ",", "", ":", "").Replace(c.name)
	var acted atomic.Int32
	var kid atomic.Value
	// a (of the join first) runs once c's child is recorded.
	v.reg.RegisterFunc("gate", func(ctx context.Context, req handlers.Request) (json.RawMessage, error) {
		for acted.Load() == 0 {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(10 * time.Millisecond):
			}
		}
		return json.RawMessage(`{}`), nil
	})
	h = func(ctx context.Context, phase, child string) {
		if phase != c.phase || !acted.CompareAndSwap(0, 1) {
			return
		}
		kid.Store(child)
		if c.cancel {
			if err := v.e.Cancel(v.ctx, run); err != nil {
				t.Errorf("cancel: %v", err)
			}
		}
		for deadline := time.Now().Add(20 * time.Second); c.until != ""; time.Sleep(10 * time.Millisecond) {
			st, err := v.e.Status(v.ctx, run)
			if err != nil {
				t.Error(err)
				return
			}
			if ns := st.Nodes["c"]; ns != nil && strings.TrimSpace(ns.State+" "+ns.Code) == c.until {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("c never became %s: %s", c.until, dump(st))
				return
			}
		}
		// Then the parent gives the child up (the unchild or
		// flowtimeout token's handling), before this submit.
		for deadline := time.Now().Add(20 * time.Second); c.until != ""; time.Sleep(10 * time.Millisecond) {
			if ok, err := v.e.st.rdb.HExists(v.ctx, v.e.st.ks.state(run), "ch|"+child).Result(); err != nil || !ok {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("the record of child %s was never closed", child)
				return
			}
		}
		if c.kill {
			kill()
			waitDone(t, ctx) // the handling sees the stop: it goes no further
		}
	}
	w1 := v.e.NewWorker(wo)
	done1 := make(chan struct{})
	go func() { defer close(done1); w1.Run(ctx1) }()
	if !c.kill {
		v.worker(func(o *WorkerOptions) { o.Consumer = "rescuer" })
	}

	child := childWF(t, "child", "count")
	nodes := []*nodeSpec{flowNode(t, "c", child, fwith("n", konst("2")))}
	switch c.shape {
	case "each":
		nodes = []*nodeSpec{flowNode(t, "c", child, forEach("x", "[2]", 0), fwith("n", cexpr("x")))}
	case "first":
		nodes = append(nodes, task("a", "gate"), task("j", "noop", after("a", "c"), joinMode(ir.JoinFirst)))
	case "timeout":
		nodes = []*nodeSpec{flowNode(t, "c", child, fwith("n", konst("2")), timeout(300))}
	case "retry":
		nodes = []*nodeSpec{flowNode(t, "c", child, fwith("n", konst("2")), timeout(300), retry(2, "fixed", 1000))}
	}
	w := build(t, wfSpec{name: "parent", children: []*ir.Workflow{child}, nodes: nodes})
	if _, err := v.e.Submit(v.ctx, w, nil, WithRunID(run)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for acted.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if acted.Load() == 0 {
		t.Fatal("the hook never acted")
	}
	if c.kill {
		select {
		case <-done1:
		case <-time.After(20 * time.Second):
			t.Fatal("the doomed worker did not stop")
		}
		// Before anyone takes the message again: the parent
		// names no child that does not exist.
		st, err := v.e.Status(v.ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		noDanglingChild(t, v.e, st)
		v.worker(func(o *WorkerOptions) { o.Consumer = "rescuer" })
	}
	st := v.wait(run)
	ns := st.Nodes["c"]
	if st.State != c.want || ns == nil || strings.TrimSpace(ns.State+" "+ns.Code) != c.node {
		t.Fatalf("parent: %s", dump(st))
	}
	if c.shape == "timeout" && !strings.Contains(ns.Error, "timed out after 300ms: its child run had not started") {
		t.Errorf("c's error: %s", ns.Error)
	}
	if c.want == RunCompleted && ns.State == NodeCompleted {
		want := `{"doubled":4}`
		if c.shape == "each" {
			want = `[` + want + `]`
		}
		if got := string(ns.Output); got != want {
			t.Errorf("c.output = %s, want %s", got, want)
		}
	}
	waitNoPending(t, v.e)
	st, err := v.e.Status(v.ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	noDanglingChild(t, v.e, st)
	id := kid.Load().(string)
	cst, err := v.e.Status(v.ctx, id)
	switch {
	case !c.started && !errors.Is(err, ErrUnknownRun):
		t.Errorf("child %s started though its parent gave it up first: %v %s", id, err, dump(cst))
	case c.started && err != nil:
		t.Errorf("child %s: %v", id, err)
	case c.started:
		if _, ok := st.Children[id]; !ok {
			t.Errorf("child %s is not among the parent's children %v", id, st.Children)
		}
		cst = v.wait(id)
		if want := map[string]string{RunCompleted: RunCompleted, RunCancelled: RunCancelled}[c.want]; cst.State != want {
			t.Errorf("child %s is %s, want %s", id, cst.State, want)
		}
	}
	if _, listed := st.Children[id]; listed != c.started {
		t.Errorf("children %v", st.Children)
	}
}

// A worker that dies after submitting an attempt's child, before
// acknowledging, while that child fails and the node's retry is
// scheduled: the message taken again is of an attempt that is over, and
// must not park the execution on that attempt's (failed) child again, or
// the next attempt would find it parked and the run would never end.
func TestFlowChildStaleAttempt(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		var h func(ctx context.Context, phase, child string)
		v := newEnv(t, b, Options{flowHook: func(ctx context.Context, phase, child string) { h(ctx, phase, child) }})
		var calls atomic.Int64
		v.reg.RegisterFunc("once", func(_ context.Context, req handlers.Request) (json.RawMessage, error) {
			if calls.Add(1) == 1 {
				return nil, fmt.Errorf("once: first call fails")
			}
			return req.Config, nil
		})
		// The doomed worker does not serve the child's queue (h:once):
		// the child fails on the rescuer at once, and its failure is
		// handled before the doomed worker's message is claimed again.
		o := fastWorker(v.reg)
		o.crash, o.Consumer, o.Queues = true, "doomed", []string{ControlQueue}
		ctx1, kill := context.WithCancel(v.ctx)
		defer kill()
		var acted atomic.Int32
		h = func(ctx context.Context, phase, child string) {
			if phase == "submitted" && acted.CompareAndSwap(0, 1) {
				kill()
				waitDone(t, ctx)
			}
		}
		w1 := v.e.NewWorker(o)
		done1 := make(chan struct{})
		go func() { defer close(done1); w1.Run(ctx1) }()
		child := childWF(t, "child", "once")
		// The retry waits longer than the message takes to be claimed
		// again (VisibilityTimeout): that message comes while the node
		// is retrying.
		w := build(t, wfSpec{name: "parent", outputs: []ir.Output{output("got", "c.output.doubled")}, children: []*ir.Workflow{child},
			nodes: []*nodeSpec{flowNode(t, "c", child, fwith("n", konst("5")), retry(2, "fixed", 4000))}})
		run := v.submit(w, nil)
		select {
		case <-done1:
		case <-time.After(20 * time.Second):
			t.Fatal("the doomed worker did not stop")
		}
		v.worker(func(o *WorkerOptions) { o.Consumer = "rescuer" })
		st := v.wait(run)
		if st.State != RunCompleted || string(st.Result) != `{"got":10}` {
			t.Fatalf("parent: %s", dump(st))
		}
		if n := checkChildren(v, run); n != 2 {
			t.Errorf("%d children, want 2 (one per attempt)", n)
		}
		if n := eventCount(v, run, "node.waiting", "c"); n != 2 {
			t.Errorf("c parked %d times, want 2 (one per attempt)", n)
		}
		waitNoPending(t, v.e)
	})
}

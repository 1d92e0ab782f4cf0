package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/runtime/handlers"
)

// embedChildren returns the root's flat, hash-sorted children list for the
// given built children (and theirs).
func embedChildren(t testing.TB, kids []*ir.Workflow) []ir.Child {
	t.Helper()
	byHash := map[string]ir.Workflow{}
	var add func(w *ir.Workflow)
	add = func(w *ir.Workflow) {
		c := *w
		for i := range c.Children {
			add(&c.Children[i].Workflow)
		}
		c.Children = nil
		h, err := ir.Hash(&c)
		if err != nil {
			t.Fatal(err)
		}
		byHash[h] = c
	}
	for _, k := range kids {
		add(k)
	}
	var out []ir.Child
	for h, w := range byHash {
		out = append(out, ir.Child{Hash: h, Workflow: w})
	}
	slices.SortFunc(out, func(a, b ir.Child) int { return strings.Compare(a.Hash, b.Hash) })
	return out
}

// flowNode is a flow node running child (built), with options such as
// fwith (its inputs).
func flowNode(t testing.TB, id string, child *ir.Workflow, opts ...nodeOpt) *nodeSpec {
	t.Helper()
	c := *child
	c.Children = nil
	h, err := ir.Hash(&c)
	if err != nil {
		t.Fatal(err)
	}
	s := &nodeSpec{n: ir.Node{ID: id, Type: ir.NodeFlow, Join: ir.JoinAll, Flow: &ir.Flow{Uses: child.Name + ".wf", Hash: h}}}
	for _, o := range opts {
		o(s)
	}
	return s
}

func fwith(name string, v ir.Value) nodeOpt {
	return func(s *nodeSpec) { s.n.Flow.With = append(s.n.Flow.With, ir.Param{Name: name, Value: v}) }
}

// childWF: input n (int); a task echoing it, with the given handler and
// options; output doubled = n * 2.
func childWF(t testing.TB, name, handler string, opts ...nodeOpt) *ir.Workflow {
	return build(t, wfSpec{name: name, inputs: []ir.Input{input("n", "int")},
		outputs: []ir.Output{output("doubled", "input.n * 2")},
		nodes:   []*nodeSpec{task("work", handler, append([]nodeOpt{with("n", cexpr("input.n"))}, opts...)...)}})
}

// checkChildren checks replay == live state for every child run of run,
// at any depth, once the child is at rest, and returns how many there are.
// A parent can end before its children do: a failure of another branch
// ends it while a flow node's child runs, and its end's orphans token
// cancels that child later, on a worker. Reading such a child's status,
// then its event log, while it is being cancelled compares a live state
// from before the cancel with a log from after it (a "replay mismatch"
// seen under load): each child is waited for first. Every child a status
// names exists: one recorded and not started yet is not named, and one
// that never starts (its parent ended first) never is.
func checkChildren(v *env, run string) int {
	v.t.Helper()
	st, err := v.e.Status(v.ctx, run)
	if err != nil {
		v.t.Fatal(err)
	}
	n := 0
	for c := range st.Children {
		if _, err := v.e.Status(v.ctx, c); errors.Is(err, ErrUnknownRun) {
			v.t.Errorf("run %s names child %s, which does not exist", run, c)
			continue
		}
		v.wait(c) // waits for the child to be done, then checks it
		n += 1 + checkChildren(v, c)
	}
	return n
}

func TestLimitFlowChild(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		child := childWF(t, "child", "count")
		w := build(t, wfSpec{name: "parent", outputs: []ir.Output{output("got", "c.output.doubled")},
			children: []*ir.Workflow{child},
			nodes: []*nodeSpec{
				task("a", "count", with("v", konst("3"))),
				flowNode(t, "c", child, after("a"), fwith("n", cexpr("a.output.v + 1"))),
			}})
		st := v.run(w, nil)
		if st.State != RunCompleted || string(st.Result) != `{"got":8}` {
			t.Fatalf("parent: %s", dump(st))
		}
		if got := string(st.Nodes["c"].Output); got != `{"doubled":8}` {
			t.Errorf("c.output = %s", got)
		}
		kid := st.Nodes["c"].Child
		if kid == "" || st.Children[kid] != "c" {
			t.Fatalf("child not recorded: %s", dump(st))
		}
		cst, err := v.e.Status(v.ctx, kid)
		if err != nil || cst.State != RunCompleted {
			t.Fatalf("child %s: %v %s", kid, err, dump(cst))
		}
		evs, _ := v.e.Events(v.ctx, kid)
		if len(evs) == 0 || evs[0].Type != "run.started" || evs[0].Fields["parent"] != st.RunID || evs[0].Fields["parent_x"] != "c" {
			t.Errorf("the child's run.started does not name its parent: %+v", evs[:1])
		}
		if n := checkChildren(v, st.RunID); n != 1 {
			t.Errorf("%d children, want 1", n)
		}
	})
}

// A failed child is a failed attempt: retry starts a new child, which
// succeeds; without retry the parent fails with code flow.
func TestLimitFlowChildFails(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		// once fails its first call only: attempt 1's child fails, attempt
		// 2's (a new run) completes.
		var calls atomic.Int64
		v.reg.RegisterFunc("once", func(_ context.Context, req handlers.Request) (json.RawMessage, error) {
			if calls.Add(1) == 1 {
				return nil, fmt.Errorf("once: first call fails")
			}
			return req.Config, nil
		})
		v.worker()
		child := build(t, wfSpec{name: "child", inputs: []ir.Input{input("fails", "int")},
			outputs: []ir.Output{output("ok", "true")},
			nodes:   []*nodeSpec{task("work", "perm", when("input.fails > 0")), task("fine", "count")}})
		w := build(t, wfSpec{name: "parent", children: []*ir.Workflow{child},
			nodes: []*nodeSpec{flowNode(t, "c", child, fwith("fails", konst("1")))}})
		st := v.run(w, nil)
		if st.State != RunFailed || st.Nodes["c"].Code != CodeFlow || !strings.Contains(st.Nodes["c"].Error, "perm: permanent failure") {
			t.Fatalf("parent: %s", dump(st))
		}
		if n := checkChildren(v, st.RunID); n != 1 {
			t.Errorf("%d children, want 1", n)
		}

		child2 := childWF(t, "child2", "once")
		w2 := build(t, wfSpec{name: "parent2", outputs: []ir.Output{output("got", "c.output.doubled")}, children: []*ir.Workflow{child2},
			nodes: []*nodeSpec{flowNode(t, "c", child2, fwith("n", konst("5")), retry(2, "fixed", 1))}})
		st = v.run(w2, nil)
		if st.State != RunCompleted || string(st.Result) != `{"got":10}` {
			t.Fatalf("parent2: %s", dump(st))
		}
		if n := checkChildren(v, st.RunID); n != 2 {
			t.Errorf("%d children, want 2 (one per attempt)", n)
		}
	})
}

// Cancelling the parent cancels its running child (and the child's).
func TestLimitFlowCancel(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		inner := childWF(t, "inner", "block")
		mid := build(t, wfSpec{name: "mid", inputs: []ir.Input{input("n", "int")}, children: []*ir.Workflow{inner},
			nodes: []*nodeSpec{flowNode(t, "in", inner, fwith("n", cexpr("input.n")))}})
		w := build(t, wfSpec{name: "parent", children: []*ir.Workflow{mid},
			nodes: []*nodeSpec{flowNode(t, "m", mid, fwith("n", konst("1")))}})
		run := v.submit(w, nil)
		v.waitStarted()
		if err := v.e.Cancel(v.ctx, run); err != nil {
			t.Fatal(err)
		}
		st := v.wait(run)
		if st.State != RunCancelled {
			t.Fatalf("parent: %s", dump(st))
		}
		midRun := st.Nodes["m"].Child
		mst := v.wait(midRun)
		innerRun := mst.Nodes["in"].Child
		ist := v.wait(innerRun)
		if mst.State != RunCancelled || ist.State != RunCancelled {
			t.Fatalf("children not cancelled: mid %s, inner %s", mst.State, ist.State)
		}
		close(v.unblock)
	})
}

// Three levels: parent -> mid -> leaf, the result passed up; on 1 shard
// and on 8 (a child run's id puts it in its parent's shard).
func TestLimitFlowNested(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		t.Run("shards=1", func(t *testing.T) { testFlowNested(t, newEnv(t, b)) })
		t.Run("shards=8", func(t *testing.T) { testFlowNested(t, newEnv(t, b, Options{Shards: 8})) })
	})
}

func testFlowNested(t *testing.T, v *env) {
	{
		v.worker()
		leaf := childWF(t, "leaf", "count")
		mid := build(t, wfSpec{name: "mid", inputs: []ir.Input{input("n", "int")}, children: []*ir.Workflow{leaf},
			outputs: []ir.Output{output("doubled", "l.output.doubled")},
			nodes:   []*nodeSpec{flowNode(t, "l", leaf, fwith("n", cexpr("input.n + 1")))}})
		top := build(t, wfSpec{name: "top", inputs: []ir.Input{input("n", "int")}, children: []*ir.Workflow{mid},
			outputs: []ir.Output{output("doubled", "m.output.doubled")},
			nodes:   []*nodeSpec{flowNode(t, "m", mid, fwith("n", cexpr("input.n + 1")))}})
		w := build(t, wfSpec{name: "root", children: []*ir.Workflow{top},
			outputs: []ir.Output{output("got", "t.output.doubled")},
			nodes:   []*nodeSpec{flowNode(t, "t", top, fwith("n", konst("1")))}})
		if len(w.Children) != 3 {
			t.Fatalf("%d children embedded, want 3", len(w.Children))
		}
		st := v.run(w, nil)
		if st.State != RunCompleted || string(st.Result) != `{"got":6}` {
			t.Fatalf("root: %s", dump(st))
		}
		if n := checkChildren(v, st.RunID); n != 3 {
			t.Errorf("%d runs below the root, want 3", n)
		}
	}
}

// for_each over a flow node: one child per item, parallel 10, 100 items.
func TestLimitFlowForEach(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker(func(o *WorkerOptions) { o.Concurrency = 16 })
		child := childWF(t, "child", "count")
		w := build(t, wfSpec{name: "parent", children: []*ir.Workflow{child}, inputs: []ir.Input{{Name: "items", Type: ir.Type{Kind: ir.KindList, Elem: &ir.Type{Kind: ir.KindInt}}, Required: true}},
			nodes: []*nodeSpec{flowNode(t, "c", child, forEach("x", "input.items", 10), fwith("n", cexpr("x")))}})
		items := make([]any, 100)
		for i := range items {
			items[i] = i
		}
		st := v.run(w, map[string]any{"items": items})
		if st.State != RunCompleted {
			t.Fatalf("parent: %s", dump(st))
		}
		var out []map[string]int
		if err := json.Unmarshal(st.Nodes["c"].Output, &out); err != nil || len(out) != 100 {
			t.Fatalf("c.output: %v %s", err, st.Nodes["c"].Output)
		}
		for i, o := range out {
			if o["doubled"] != 2*i {
				t.Fatalf("item %d: %v", i, o)
			}
		}
		if n := checkChildren(v, st.RunID); n != 100 {
			t.Errorf("%d children, want 100", n)
		}
	})
}

// Every message delivered three times and each delivery handled twice at
// once: the flow node starts one child and completes once; the duplicate
// child tokens change nothing.
func TestLimitFlowDuplicate(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker(func(o *WorkerOptions) { o.redeliver, o.dup = 3, 2 })
		child := childWF(t, "child", "count")
		w := build(t, wfSpec{name: "parent", outputs: []ir.Output{output("got", "c.output.doubled")},
			children: []*ir.Workflow{child},
			nodes:    []*nodeSpec{flowNode(t, "c", child, fwith("n", konst("2"))), task("d", "count", after("c"))}})
		st := v.run(w, nil)
		if st.State != RunCompleted || string(st.Result) != `{"got":4}` {
			t.Fatalf("parent: %s", dump(st))
		}
		if n := checkChildren(v, st.RunID); n != 1 {
			t.Errorf("%d children, want 1", n)
		}
		if n := eventCount(v, st.RunID, "node.completed", "c"); n != 1 {
			t.Errorf("c completed %d times", n)
		}
		if n := eventCount(v, st.RunID, "node.waiting", "c"); n != 1 {
			t.Errorf("c parked %d times", n)
		}
		waitNoPending(t, v.e)
	})
}

// MissingHandlers counts the children's handlers: wfc run refuses a run
// whose child no local worker could run, instead of waiting for ever.
func TestLimitFlowMissingHandlers(t *testing.T) {
	child := childWF(t, "child", "nosuch.handler")
	w := build(t, wfSpec{name: "parent", children: []*ir.Workflow{child},
		nodes: []*nodeSpec{flowNode(t, "c", child, fwith("n", konst("1")))}})
	if got := MissingHandlers(w, handlers.NewRegistry(handlers.Options{})); !slices.Equal(got, []string{"nosuch.handler"}) {
		t.Fatalf("MissingHandlers = %v", got)
	}
}

// A parent that fails (here: its deadline) cancels its running children.
func TestLimitFlowParentFails(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		child := childWF(t, "child", "block")
		w := build(t, wfSpec{name: "parent", set: ir.Settings{DeadlineMS: 300}, children: []*ir.Workflow{child},
			nodes: []*nodeSpec{flowNode(t, "c", child, fwith("n", konst("1")))}})
		run := v.submit(w, nil)
		v.waitStarted()
		st := v.wait(run)
		if st.State != RunFailed || !strings.Contains(st.Error, "deadline") {
			t.Fatalf("parent: %s", dump(st))
		}
		cst := v.wait(st.Nodes["c"].Child)
		if cst.State != RunCancelled || cst.Error != "parent run "+run+" failed" {
			t.Fatalf("child: %s", dump(cst))
		}
		close(v.unblock)
		waitNoPending(t, v.e)
	})
}

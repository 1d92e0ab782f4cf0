package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/runtime/handlers"
)

// poll outputs {n: k} for the k-th execution of a node in a run. It is
// idempotent: a redelivered execution (same idempotency key) gets the same
// answer.
func registerPoll(v *env) {
	var mu sync.Mutex
	counts := map[string]int{}
	answers := map[string]int{}
	v.reg.RegisterFunc("poll", func(ctx context.Context, req handlers.Request) (json.RawMessage, error) {
		v.note(req)
		mu.Lock()
		n, ok := answers[req.IdempotencyKey]
		if !ok {
			counts[req.RunID+"/"+req.Node]++
			n = counts[req.RunID+"/"+req.Node]
			answers[req.IdempotencyKey] = n
		}
		mu.Unlock()
		return json.RawMessage(fmt.Sprintf(`{"n":%d}`, n)), nil
	})
}

func TestLoopEndsNormally(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		registerPoll(v)
		v.worker()
		// prepare -> check (loop back_to check while n < 3, max 5) -> done
		w := build(t, wfSpec{
			outputs: []ir.Output{output("n", "check.output.n"), output("done", "has(done.output)"), output("dlq", "has(dlq.output)")},
			nodes: []*nodeSpec{
				task("prepare", "noop"),
				task("check", "poll", after("prepare"), loop("output.n < 3", 5, "", "dlq")),
				task("done", "noop", after("check")),
				task("dlq", "noop"),
			},
		})
		st := v.run(w, nil)
		if string(st.Result) != `{"n":3,"done":true,"dlq":false}` {
			t.Fatalf("result %s (%s)", st.Result, dump(st))
		}
		for _, x := range []string{"check@1", "check@2", "check@3"} {
			if nodeState(st, x) != NodeCompleted {
				t.Errorf("%s is %s", x, nodeState(st, x))
			}
		}
		if nodeState(st, "dlq") != NodeSkipped {
			t.Errorf("dlq is %s", nodeState(st, "dlq"))
		}
	})
}

func TestLoopExhausted(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		registerPoll(v)
		v.worker()
		w := build(t, wfSpec{
			outputs: []ir.Output{output("n", "check.output.n"), output("done", "has(done.output)"), output("dlq", "has(dlq.output)")},
			nodes: []*nodeSpec{
				task("check", "poll", loop("output.n < 100", 4, "", "dlq")),
				task("done", "noop", after("check")),
				task("dlq", "noop"),
			},
		})
		st := v.run(w, nil)
		if st.State != RunCompleted || string(st.Result) != `{"n":4,"done":false,"dlq":true}` {
			t.Fatalf("%s result %s", st.State, st.Result)
		}
		// Without an exhausted path the loop node fails, and so does the run.
		w2 := build(t, wfSpec{nodes: []*nodeSpec{
			task("check", "poll", loop("true", 2, "")),
			task("done", "noop", after("check")),
		}})
		st = v.run(w2, nil)
		if st.State != RunFailed || st.FailedNode != "check@2" {
			t.Fatalf("without exhausted: %s failed at %q: %s", st.State, st.FailedNode, st.Error)
		}
	})
}

// A loop body with a fan-out and a join inside: the join must start fresh
// in every iteration (iteration-aware keys), and an edge entering the body
// from outside counts in every iteration.
func TestLoopBodyWithJoin(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		registerPoll(v)
		v.worker()
		w := build(t, wfSpec{
			outputs: []ir.Output{output("n", "tail.output.n"), output("sum", "merge.output.sum")},
			nodes: []*nodeSpec{
				task("seed", "cel", with("base", cexpr("10"))),
				task("head", "poll", after("seed")),
				task("left", "cel", after("head"), with("v", cexpr("head.output.n"))),
				task("right", "cel", after("head"), with("v", cexpr("head.output.n * 100"))),
				// merge also waits for seed, which is outside the body
				task("merge", "count", after("left", "right", "seed"), with("sum", cexpr("left.output.v + right.output.v + seed.output.base"))),
				task("tail", "poll", after("merge"), loop("output.n < 3", 10, "head")),
				task("end", "noop", after("tail")),
			},
		})
		st := v.run(w, nil)
		if string(st.Result) != `{"n":3,"sum":313}` {
			t.Fatalf("result %s; %s", st.Result, dump(st))
		}
		for i := 1; i <= 3; i++ {
			x := fmt.Sprintf("merge@%d", i)
			if nodeState(st, x) != NodeCompleted {
				t.Errorf("%s is %s", x, nodeState(st, x))
			}
			if n := v.callCount(st.RunID + "/" + x); n != 1 {
				t.Errorf("%s ran %d times", x, n)
			}
		}
	})
}

func TestNestedLoops(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		var calls atomic.Int64
		v.reg.RegisterFunc("tick", func(ctx context.Context, req handlers.Request) (json.RawMessage, error) {
			calls.Add(1)
			return json.RawMessage(`{"iter":"` + req.Iteration + `"}`), nil
		})
		v.worker()
		// outer: o1 -> inner -> o2 (loop back_to o1, 3 times); inner loops on
		// itself twice per outer iteration.
		w := build(t, wfSpec{
			outputs: []ir.Output{output("last", "o2.output.iter")},
			nodes: []*nodeSpec{
				task("o1", "tick"),
				task("inner", "tick", after("o1"), loop("!output.iter.endsWith('.2')", 5, "")),
				task("o2", "tick", after("inner"), loop("!output.iter.startsWith('3')", 5, "o1")),
			},
		})
		st := v.run(w, nil)
		if string(st.Result) != `{"last":"3"}` {
			t.Fatalf("result %s; %s", st.Result, dump(st))
		}
		if calls.Load() != 3*(1+2+1) {
			t.Errorf("%d handler calls, want 12", calls.Load())
		}
		for _, x := range []string{"inner@1.1", "inner@1.2", "inner@3.2", "o1@3", "o2@3"} {
			if nodeState(st, x) != NodeCompleted {
				t.Errorf("%s is %s", x, nodeState(st, x))
			}
		}
	})
}

func TestMaxHops(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		w := build(t, wfSpec{
			set: ir.Settings{MaxHops: 4},
			nodes: []*nodeSpec{
				task("a", "noop"),
				task("b", "noop", after("a"), loop("true", 100, "")),
			},
		})
		st := v.run(w, nil)
		if st.State != RunFailed || st.FailedNode != "b@4" {
			t.Fatalf("%s at %q: %s", st.State, st.FailedNode, st.Error)
		}
	})
}

// TestLoopOutputsArePerIteration: in iteration i, a body node that was
// skipped or failed into on_error in iteration i has no output for the
// readers after it, although it had one in an earlier iteration; after the
// loop, x.output is that of the last iteration (issue #13, item 1).
func TestLoopOutputsArePerIteration(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		registerPoll(v)
		v.worker()
		// start (poll: n = the iteration) -> opt (only in iteration 1),
		// flaky (fails in iteration 2, on_error => rescue) -> check, which
		// loops back to start while n < 3.
		w := build(t, wfSpec{
			outputs: []ir.Output{
				output("opt", "has(opt.output)"), output("flaky", "has(flaky.output)"),
				output("rescue", "has(rescue.output)"), output("last", "check.output"),
			},
			nodes: []*nodeSpec{
				task("start", "poll"),
				task("opt", "cel", after("start"), when("start.output.n == 1"), with("v", cexpr("start.output.n"))),
				task("flaky", "perm", after("start"), when("start.output.n <= 2"), onError("rescue")),
				task("rescue", "noop"),
				task("check", "cel", after("start", "opt", "flaky", "rescue"), joinMode(ir.JoinSettled),
					with("opt", cexpr("has(opt.output) ? opt.output.v : 0")),
					with("flaky", cexpr("has(flaky.output)")),
					with("rescue", cexpr("has(rescue.output)")),
					loop("start.output.n < 3", 5, "start")),
				task("done", "noop", after("check")),
			},
		})
		st := v.run(w, nil)
		if st.State != RunCompleted {
			t.Fatalf("run %s: %s (%s)", st.State, st.Error, dump(st))
		}
		want := map[string]string{
			"check@1": `{"opt":1,"flaky":false,"rescue":true}`,
			"check@2": `{"opt":0,"flaky":false,"rescue":true}`,
			"check@3": `{"opt":0,"flaky":false,"rescue":false}`,
		}
		for x, out := range want {
			if got := st.Nodes[x]; got == nil || string(got.Output) != out {
				t.Errorf("%s: output %s, want %s (%s)", x, outputOf(got), out, dump(st))
			}
		}
		if res := `{"opt":false,"flaky":false,"rescue":false,"last":{"flaky":false,"opt":0,"rescue":false}}`; string(st.Result) != res {
			t.Errorf("result %s, want %s", st.Result, res)
		}
		if st.Output("opt") != nil || st.Output("rescue") != nil {
			t.Errorf("Status.Output: opt %s, rescue %s; want none (not run in the last iteration)", st.Output("opt"), st.Output("rescue"))
		}
	})
}

func outputOf(n *NodeStatus) string {
	if n == nil {
		return "(no execution)"
	}
	return string(n.Output)
}

// TestLoopCountsAndAccumulates: L.iteration in the body, in L's while and
// after the loop; a body node reads its own output of the previous
// iteration (absent in iteration 1) to accumulate (issue #13, item 8).
func TestLoopCountsAndAccumulates(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		w := build(t, wfSpec{
			inputs:  []ir.Input{input("target", ir.KindInt)},
			outputs: []ir.Output{output("attempts", "check.iteration"), output("total", "add.output.total"), output("after", "done.output.n")},
			nodes: []*nodeSpec{
				task("add", "cel", with("total", cexpr("(has(add.output) ? add.output.total : 0) + check.iteration")),
					with("seen", cexpr("has(check.output) ? check.output.at : 0"))),
				task("check", "cel", after("add"), with("at", cexpr("check.iteration")),
					loop("add.output.total < input.target && check.iteration < 10", 20, "add")),
				task("done", "cel", after("check"), with("n", cexpr("check.iteration"))),
			},
		})
		st := v.run(w, map[string]any{"target": 10})
		if st.State != RunCompleted || string(st.Result) != `{"attempts":4,"total":10,"after":4}` {
			t.Fatalf("%s %s %s", st.State, st.Result, st.Error)
		}
		// add reads check's output of the previous iteration.
		for x, want := range map[string]string{"add@1": `{"total":1,"seen":0}`, "add@3": `{"total":6,"seen":2}`} {
			if got := st.Nodes[x]; got == nil || string(got.Output) != want {
				t.Errorf("%s: %s, want %s", x, outputOf(got), want)
			}
		}
		// The while's own bound: at most 10 iterations.
		st = v.run(w, map[string]any{"target": 1000})
		if string(st.Result) != `{"attempts":10,"total":55,"after":10}` {
			t.Errorf("bounded: %s %s %s", st.State, st.Result, st.Error)
		}
	})
}

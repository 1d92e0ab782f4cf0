package runtime

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/runtime/handlers"
)

// A set of representative runs shared by the Redis Cluster and the
// retention tests: every way a run can end, and the main semantics (seed
// fan-out and join, branch, loop, retry, for_each, compensation, cancel,
// deadline, outputs that fail).

// mixedRuns submits the runs (copies runs of the fan-out flow, so that
// several shards get some), waits for every one, checks its result and
// the harness invariants, and returns the final statuses by scenario name
// ("fanout.0", "fanout.1", ...). v needs a worker; mixedRuns registers the
// handlers it uses before the caller starts it.
type mixedRuns struct {
	v      *env
	fanout *ir.Workflow
	flows  map[string]*ir.Workflow
	inputs map[string]map[string]any
	want   map[string]string // scenario -> expected state
	result map[string]string // scenario -> expected result (if any)
}

func newMixedRuns(t *testing.T, v *env) *mixedRuns {
	registerPoll(v)
	m := &mixedRuns{v: v, flows: map[string]*ir.Workflow{}, inputs: map[string]map[string]any{},
		want: map[string]string{}, result: map[string]string{}}
	m.fanout = build(t, wfSpec{
		outputs: []ir.Output{output("sum", "e.output.sum")},
		nodes: []*nodeSpec{
			task("a", "cel", with("x", cexpr("1"))),
			task("b", "cel", after("a"), with("x", cexpr("a.output.x + 1"))),
			task("c", "cel", after("a"), with("x", cexpr("a.output.x + 2"))),
			task("d", "cel", after("a"), with("x", cexpr("a.output.x + 3"))),
			task("e", "count", after("b", "c", "d"), with("sum", cexpr("b.output.x + c.output.x + d.output.x"))),
			task("f", "noop", after("e")),
		},
	})
	branchFlow := build(t, wfSpec{
		inputs:  []ir.Input{input("score", ir.KindInt)},
		outputs: []ir.Output{output("route", "has(high.output) ? 'high' : has(mid.output) ? 'mid' : has(low.output) ? 'low' : 'none'")},
		nodes: []*nodeSpec{
			task("score", "cel", with("s", cexpr("input.score")),
				branch([]string{"low"}, rule("output.s >= 80", "high"), rule("output.s >= 50", "mid"))),
			task("high", "noop"), task("mid", "noop"), task("low", "noop"),
			task("done", "noop", after("high", "mid", "low")),
		},
	})
	for name, c := range map[string]struct {
		score int
		route string
	}{"branch.high": {90, "high"}, "branch.mid": {60, "mid"}, "branch.low": {10, "low"}} {
		m.add(name, branchFlow, map[string]any{"score": c.score}, RunCompleted, `{"route":"`+c.route+`"}`)
	}
	m.add("loop", build(t, wfSpec{
		outputs: []ir.Output{output("n", "check.output.n")},
		nodes: []*nodeSpec{
			task("check", "poll", loop("output.n < 3", 5, "", "dlq")),
			task("done", "noop", after("check")),
			task("dlq", "noop"),
		},
	}), nil, RunCompleted, `{"n":3}`)
	m.add("retry", build(t, wfSpec{
		outputs: []ir.Output{output("attempt", "f.output.attempt")},
		nodes:   []*nodeSpec{task("f", "flaky", with("fails", konst("2")), retry(3, ir.BackoffFixed, 20))},
	}), nil, RunCompleted, `{"attempt":3}`)
	m.add("foreach", build(t, wfSpec{
		outputs: []ir.Output{output("ids", "each.output.map(o, o.id)")},
		nodes: []*nodeSpec{
			task("each", "count", forEach("u", "['a', 'b', 'c', 'd']", 2), with("id", tmpl("id-", &ir.Expr{CEL: "u"}))),
		},
	}), nil, RunCompleted, `{"ids":["id-a","id-b","id-c","id-d"]}`)
	// Completed by the script that settles the counter (no outputs, so no
	// finish step).
	m.add("nooutputs", build(t, wfSpec{nodes: []*nodeSpec{task("a", "noop"), task("b", "noop", after("a"))}}),
		nil, RunCompleted, "")
	// Failed with no compensation to run.
	m.add("failed", build(t, wfSpec{nodes: []*nodeSpec{task("a", "noop"), task("b", "perm", after("a"))}}),
		nil, RunFailed, "")
	// Failed, then compensated.
	m.add("compensated", build(t, wfSpec{nodes: []*nodeSpec{
		task("reserve", "record", with("step", konst(`"reserve"`)), compensate("record", ir.Param{Name: "undo", Value: cexpr("output.step")})),
		task("charge", "perm", after("reserve")),
	}}), nil, RunFailed, "")
	// Failed because the workflow outputs cannot be evaluated.
	m.add("badoutputs", build(t, wfSpec{
		outputs: []ir.Output{output("bad", "int('x')")},
		nodes:   []*nodeSpec{task("a", "noop")},
	}), nil, RunFailed, "")
	// Failed by its deadline (abort).
	m.add("deadline", build(t, wfSpec{
		set:   ir.Settings{DeadlineMS: 200},
		nodes: []*nodeSpec{task("a", "sleep", with("duration", konst(`"2s"`)))},
	}), nil, RunFailed, "")
	return m
}

func (m *mixedRuns) add(name string, w *ir.Workflow, in map[string]any, state, result string) {
	m.flows[name], m.inputs[name], m.want[name], m.result[name] = w, in, state, result
}

// run submits copies fan-out runs and every scenario, waits for them, checks
// them, and returns the statuses by name.
func (m *mixedRuns) run(t *testing.T, copies int) map[string]*Status {
	v := m.v
	ids := map[string]string{}
	for i := 0; i < copies; i++ {
		name := "fanout." + string(rune('a'+i))
		ids[name] = v.submit(m.fanout, nil)
		m.want[name], m.result[name] = RunCompleted, `{"sum":9}`
	}
	for name, w := range m.flows {
		ids[name] = v.submit(w, m.inputs[name])
	}
	out := map[string]*Status{}
	for name, id := range ids {
		st := v.wait(id)
		if st.State != m.want[name] {
			t.Errorf("%s: state %s, want %s (%s)", name, st.State, m.want[name], st.Error)
		}
		if m.result[name] != "" && string(st.Result) != m.result[name] {
			t.Errorf("%s: result %s, want %s", name, st.Result, m.result[name])
		}
		out[name] = st
	}
	if st := out["compensated"]; st != nil && st.Compensation != "done" {
		t.Errorf("compensated: compensation %q", st.Compensation)
	}
	return out
}

// cancelRun runs a workflow whose first node blocks, cancels it while the
// handler runs, and returns its final status.
func cancelRun(t *testing.T, v *env) *Status {
	w := build(t, wfSpec{nodes: []*nodeSpec{task("a", "block"), task("b", "noop", after("a"))}})
	run := v.submit(w, nil)
	v.waitStarted()
	if err := v.e.Cancel(v.ctx, run); err != nil {
		t.Fatal(err)
	}
	close(v.unblock)
	st := v.wait(run)
	if st.State != RunCancelled {
		t.Fatalf("cancel: state %s", st.State)
	}
	return st
}

// partialRetryFlow fails at node c until *broken is false; Retry then
// re-runs only c and d.
func partialRetryFlow(t *testing.T, v *env, broken *bool, mu *sync.Mutex) *ir.Workflow {
	v.reg.RegisterFunc("fragile", func(ctx context.Context, req handlers.Request) (json.RawMessage, error) {
		v.note(req)
		mu.Lock()
		defer mu.Unlock()
		if *broken {
			return nil, handlers.Permanentf("downstream is down")
		}
		return json.RawMessage(`{"ok":true}`), nil
	})
	return build(t, wfSpec{
		outputs: []ir.Output{output("a", "a.output.x"), output("c", "c.output.ok")},
		nodes: []*nodeSpec{
			task("a", "count", with("x", konst("1"))),
			task("b", "count", with("x", konst("2"))),
			task("c", "fragile", after("a", "b")),
			task("d", "count", after("c")),
		},
	})
}

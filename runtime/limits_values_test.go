package runtime

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/wfc-lang/wfc/ir"
)

// The value bounds of issue #14 item 5: a run's inputs, a node's output and
// the values a run stores, set per process and per workflow (the smaller
// applies), each checked before anything is written.

// echo is a workflow whose node a outputs {"s": input.s}: len(s)+8 bytes.
func echo(t *testing.T, set ir.Settings, more ...*nodeSpec) *ir.Workflow {
	return build(t, wfSpec{set: set, inputs: []ir.Input{input("s", ir.KindString)},
		nodes: append([]*nodeSpec{task("a", "cel", with("s", cexpr("input.s")))}, more...)})
}

func xs(n int) map[string]any { return map[string]any{"s": strings.Repeat("x", n)} }

// TestLimitInputBound: the inputs' bound is the submitter's, or the
// workflow's max_input_bytes when lower; a workflow cannot raise it.
func TestLimitInputBound(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b, Options{MaxInputBytes: 100})
		for _, c := range []struct {
			set   int // the workflow's max_input_bytes
			limit int // the bound that applies
		}{{50, 50}, {1000, 100}, {0, 100}} {
			w := echo(t, ir.Settings{MaxInputBytes: c.set})
			// {"s":"..."}: len(s)+8 bytes.
			if _, err := v.e.Submit(v.ctx, w, xs(c.limit-8)); err != nil {
				t.Errorf("max_input_bytes %d: inputs of %d bytes: %v", c.set, c.limit, err)
			}
			_, err := v.e.Submit(v.ctx, w, xs(c.limit-7))
			want := fmt.Sprintf("the inputs are %d bytes, over the limit of %d (max_input_bytes)", c.limit+1, c.limit)
			var ie *InputError
			if !errors.As(err, &ie) || !strings.Contains(err.Error(), want) {
				t.Errorf("max_input_bytes %d: inputs of %d bytes: %v, want %q", c.set, c.limit+1, err, want)
			}
		}
	})
}

// TestLimitOutputBound: a node's output is bounded by the worker's
// max output, or the workflow's max_output_bytes when lower; over it the
// node fails with code output and no output is stored.
func TestLimitOutputBound(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker(func(o *WorkerOptions) { o.MaxOutputBytes = 100 })
		for _, c := range []struct{ set, limit int }{{60, 60}, {1000, 100}, {0, 100}} {
			w := echo(t, ir.Settings{MaxOutputBytes: c.set})
			if st := v.run(w, xs(c.limit-8)); st.State != RunCompleted {
				t.Errorf("max_output_bytes %d: output of %d bytes: %s %s", c.set, c.limit, st.State, st.Error)
			}
			st := v.run(w, xs(c.limit-7))
			n := st.Nodes["a"]
			want := fmt.Sprintf("output of %d bytes, over the limit of %d (max_output_bytes)", c.limit+1, c.limit)
			if st.State != RunFailed || n == nil || n.Code != CodeOutput || !strings.Contains(n.Error, want) || len(n.Output) != 0 {
				t.Errorf("max_output_bytes %d: output of %d bytes: %s %+v, want code output and %q", c.set, c.limit+1, st.State, n, want)
			}
		}
	})
}

// runBytes returns the state fields of a run: its run|bytes, and whether
// any out|... field is stored for the executions xs.
func runBytes(t *testing.T, v *env, run string, xs ...string) (int64, []string) {
	t.Helper()
	h, err := v.e.st.rdb.HGetAll(v.ctx, v.e.st.ks.state(run)).Result()
	if err != nil && err != redis.Nil {
		t.Fatal(err)
	}
	var n int64
	fmt.Sscan(h["run|bytes"], &n)
	var outs []string
	for _, x := range xs {
		if _, ok := h["out|"+x]; ok {
			outs = append(outs, x)
		}
	}
	return n, outs
}

// TestLimitStateBound: the values a run stores are counted as they are
// written (run|bytes) and bounded by the worker's max state, or the
// workflow's max_state_bytes when lower; the write that would pass it is
// refused and the node fails with code state.
func TestLimitStateBound(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker(func(o *WorkerOptions) { o.MaxStateBytes = 1000 })
		for _, c := range []struct{ set, limit int }{{500, 500}, {5000, 1000}, {0, 1000}} {
			w := echo(t, ir.Settings{MaxStateBytes: c.set})
			st := v.run(w, xs(c.limit-8))
			if st.State != RunCompleted {
				t.Errorf("max_state_bytes %d: a value of %d bytes: %s %s", c.set, c.limit, st.State, st.Error)
			}
			if n, _ := runBytes(t, v, st.RunID); n != int64(c.limit) {
				t.Errorf("max_state_bytes %d: run|bytes %d, want %d", c.set, n, c.limit)
			}
			st = v.run(w, xs(c.limit-7))
			n := st.Nodes["a"]
			want := fmt.Sprintf("output of %d bytes would take the run's stored values over the limit of %d (max_state_bytes)", c.limit+1, c.limit)
			if st.State != RunFailed || n == nil || n.Code != CodeState || !strings.Contains(n.Error, want) || len(n.Output) != 0 {
				t.Errorf("max_state_bytes %d: a value of %d bytes: %s %+v, want code state and %q", c.set, c.limit+1, st.State, n, want)
			}
			// Nothing but the failure (its error, counted) was written.
			if used, outs := runBytes(t, v, st.RunID, "a"); len(outs) > 0 || used != int64(len(n.Error)) {
				t.Errorf("max_state_bytes %d: after the refusal run|bytes %d (error of %d bytes), outputs %v", c.set, used, len(n.Error), outs)
			}
		}
	})
}

// TestLimitStateBoundLoop: a loop whose iterations each store an output
// runs until the next output would pass max_state_bytes: that iteration
// fails with code state, its output is not stored, and run|bytes stays
// at the bound (the failure's own error does not fit either: the run
// fails with the state error, not counted).
func TestLimitStateBoundLoop(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		// Each iteration outputs {"s":"x…"} of 100 bytes: 10 fit in 1000.
		w := build(t, wfSpec{set: ir.Settings{MaxStateBytes: 1000}, inputs: []ir.Input{input("s", ir.KindString)},
			nodes: []*nodeSpec{task("a", "cel", with("s", cexpr("input.s")), loop("true", 100, ""))}})
		st := v.run(w, xs(92))
		n := st.Nodes["a@11"]
		if st.State != RunFailed || n == nil || n.Code != CodeState || !strings.Contains(st.Error, "over the limit of 1000 bytes (max_state_bytes)") {
			t.Fatalf("%s %q %+v", st.State, st.Error, n)
		}
		if s := nodeState(st, "a@10"); s != NodeCompleted {
			t.Errorf("a@10 is %s", s)
		}
		used, outs := runBytes(t, v, st.RunID, "a@10", "a@11")
		if used != 1000 || len(outs) != 1 || outs[0] != "a@10" {
			t.Errorf("run|bytes %d, outputs stored %v; want 1000 and a@10 only", used, outs)
		}
	})
}

// TestLimitStateBoundForEach: a for_each's items and item results are
// values of the run too.
func TestLimitStateBoundForEach(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		for _, c := range []struct {
			n     int
			limit int
			what  string
		}{
			// Ten items "xxxxxxxxxx" (12 bytes each as JSON): 120 bytes.
			{10, 119, "the for_each items of 120 bytes"},
			// Then ten results {"v":"xxxxxxxxxx"} of 18 bytes: the fifth
			// is over 120 + 4×18 + 17.
			{10, 120 + 4*18 + 17, "output of 18 bytes"},
		} {
			items := make([]any, c.n)
			for i := range items {
				items[i] = strings.Repeat("x", 10)
			}
			w := build(t, wfSpec{set: ir.Settings{MaxStateBytes: c.limit}, inputs: []ir.Input{input("xs", ir.KindAny)},
				nodes: []*nodeSpec{task("each", "count", forEach("x", "input.xs", 1), with("v", cexpr("x")))}})
			st := v.run(w, map[string]any{"xs": items})
			n := st.Nodes["each"]
			if st.State != RunFailed || n == nil || n.Code != CodeState || !strings.Contains(n.Error, c.what) || len(n.Output) != 0 {
				t.Errorf("max_state_bytes %d: %s %+v, want code state and %q", c.limit, st.State, n, c.what)
			}
			if used, _ := runBytes(t, v, st.RunID); used > int64(c.limit)+int64(len(n.Error)) {
				t.Errorf("max_state_bytes %d: run|bytes %d", c.limit, used)
			}
		}
	})
}

// TestLimitExpressionValues: an expression cannot make a value the worker
// cannot hold — a replace, join or format of more than 10 MB, strings
// made over and over in a comprehension, a list of one long string
// many times as JSON — and ten cel tasks doubling a 1 MB input stop at
// the first output over the bound (issue #14 item 5: they killed the
// worker).
func TestLimitExpressionValues(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		ins := []ir.Input{input("s", ir.KindString), {Name: "xs", Type: ir.Type{Kind: ir.KindAny}}}
		list := make([]any, 200)
		for i := range list {
			list[i] = i
		}
		in := map[string]any{"s": strings.Repeat("x", 100_000), "xs": list}
		for _, c := range []struct{ expr, code, want string }{
			{"input.s.substring(0, 1000).replace('', input.s)", CodeExpr, "replace would make a string of more than 100101000 bytes, over the limit of 10000000"},
			{"input.xs.map(x, input.s).join('')", CodeExpr, "join would make a string of more than"},
			{"'%s'.format([input.xs.map(x, input.s)])", CodeExpr, "format would make a string of more than"},
			{"input.xs.map(x, input.s + input.s)", CodeExpr, "cost limit exceeded"},
			{"input.xs.map(x, input.s)", CodeOutput, "over the limit of 1048576 bytes as JSON (max_output_bytes)"},
		} {
			w := build(t, wfSpec{inputs: ins, nodes: []*nodeSpec{task("a", "cel", with("v", cexpr(c.expr)))}})
			st := v.run(w, in)
			n := st.Nodes["a"]
			if st.State != RunFailed || n == nil || n.Code != c.code || !strings.Contains(n.Error, c.want) {
				t.Errorf("%s: %s %+v, want code %s and %q", c.expr, st.State, n, c.code, c.want)
			}
		}
		// Ten cel tasks, each doubling the previous output.
		nodes := []*nodeSpec{task("d0", "cel", with("s", cexpr("input.s + input.s")))}
		for i := 1; i < 10; i++ {
			p := fmt.Sprintf("d%d", i-1)
			nodes = append(nodes, task(fmt.Sprintf("d%d", i), "cel", after(p), with("s", cexpr(p+".output.s + "+p+".output.s"))))
		}
		w := build(t, wfSpec{inputs: ins[:1], nodes: nodes})
		st := v.run(w, xs(1_000_000))
		if n := st.Nodes["d0"]; st.State != RunFailed || n == nil || n.Code != CodeOutput || st.Nodes["d1"] != nil {
			t.Errorf("doubling: %s %q %+v", st.State, st.Error, n)
		}
	})
}

// TestLimitExpressionMemory: what an evaluation allocates is bounded:
// without the checks each of these allocated 200 MB or more before the
// cost limit stopped it (or was never stopped: cel-go charged `+` of dyn
// strings 1).
func TestLimitExpressionMemory(t *testing.T) {
	c := newCELCache(&plan{w: &ir.Workflow{}})
	list := make([]any, 1000)
	for i := range list {
		list[i] = int64(i)
	}
	act := map[string]any{"input": map[string]any{"s": strings.Repeat("x", 200_000), "xs": list}}
	for _, src := range []string{
		"input.s.substring(0, 1000).replace('', input.s)",
		"input.xs.map(x, input.s).join('')",
		"'%s'.format([input.xs.map(x, input.s)])",
		"input.xs.map(x, input.s + input.s)",
		"input.xs.map(x, input.s + 'y').size()",
	} {
		prg, err := c.program(src)
		if err != nil {
			t.Fatal(err)
		}
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		ctx, cancel := context.WithTimeout(context.Background(), celEvalTimeout)
		_, _, err = prg.ContextEval(ctx, act)
		cancel()
		runtime.ReadMemStats(&m1)
		if err == nil {
			t.Errorf("%s: no error", src)
		}
		if a := m1.TotalAlloc - m0.TotalAlloc; a > 40<<20 {
			t.Errorf("%s: allocated %d MB (%v)", src, a>>20, err)
		}
	}
	// What stays within the bounds still works.
	for src, want := range map[string]string{
		"'ab'.replace('', 'x')":               "xaxbx",
		"'abab'.replace('a', 'xy', 1)":        "xybab",
		"['a', 'b'].join('-') + ['c'].join()": "a-bc",
		"'%d-%s'.format([3, 'x'])":            "3-x",
		"size(input.s + input.s)":             "400000",
	} {
		prg, err := c.program(src)
		if err != nil {
			t.Fatal(err)
		}
		out, _, err := prg.ContextEval(context.Background(), act)
		if err != nil || fmt.Sprint(out.Value()) != want {
			t.Errorf("%s = %v (%v), want %s", src, out, err, want)
		}
	}
}

// TestLimitStateBoundRetries: a retried attempt's error is a value of the
// run too (its node.retry event keeps it): the retry that would pass
// max_state_bytes is refused and the node fails with code state, without
// more attempts.
func TestLimitStateBoundRetries(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		// "flaky: attempt N fails" is 22 bytes: two fit in 50, not three.
		w := build(t, wfSpec{set: ir.Settings{MaxStateBytes: 50},
			nodes: []*nodeSpec{task("a", "flaky", with("fails", konst("9")), retry(10, ir.BackoffFixed, 1))}})
		st := v.run(w, nil)
		n := st.Nodes["a"]
		if st.State != RunFailed || n == nil || n.Code != CodeState || !strings.Contains(st.Error, "over the limit of 50 bytes (max_state_bytes)") {
			t.Fatalf("%s %q %+v", st.State, st.Error, n)
		}
		if c := v.callCount(st.RunID + "/a"); c != 3 {
			t.Errorf("%d attempts, want 3", c)
		}
		if used, _ := runBytes(t, v, st.RunID); used != 44 {
			t.Errorf("run|bytes %d, want 44", used)
		}
	})
}

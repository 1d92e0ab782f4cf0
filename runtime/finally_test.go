package runtime

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/runtime/handlers"
)

// TestFinally: a workflow's finally runs once after the run ends —
// completed, failed after its compensations, cancelled — with `run`
// bound to the ended run's metadata; a failing finally is recorded and
// retried under its policy (issue #13, item 5).
func TestFinally(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		var mu sync.Mutex
		seen := map[string][]map[string]any{} // run id -> finally configs
		v.reg.RegisterFunc("exit", func(ctx context.Context, req handlers.Request) (json.RawMessage, error) {
			v.note(req)
			var c map[string]any
			json.Unmarshal(req.Config, &c)
			mu.Lock()
			seen[req.RunID] = append(seen[req.RunID], c)
			v.order = append(v.order, "finally")
			mu.Unlock()
			if c["fail"] == true && req.Attempt < 3 {
				return nil, handlers.Errorf("Exit.Busy", true, "exit: busy")
			}
			return req.Config, nil
		})
		v.worker()
		fin := func(fail bool) *ir.Finally {
			f := &ir.Finally{Handler: "exit", With: []ir.Param{
				{Name: "id", Value: cexpr("run.id")}, {Name: "status", Value: cexpr("run.status")},
				{Name: "failed", Value: cexpr("run.failed_nodes")}, {Name: "error", Value: cexpr("run.error")},
				{Name: "long", Value: cexpr("run.duration >= duration('0s')")},
				{Name: "b", Value: cexpr("has(b.output) ? b.output.v : 0")},
				{Name: "fail", Value: konst(map[bool]string{true: "true", false: "false"}[fail])},
			}}
			if fail {
				f.Retry = &ir.Retry{Attempts: 3, Backoff: ir.BackoffFixed, DelayMS: 5}
			}
			return f
		}
		build2 := func(h string, f *ir.Finally) *ir.Workflow {
			return build(t, wfSpec{finally: f, nodes: []*nodeSpec{
				task("a", "record", with("id", cexpr("run.id")), compensate("record")),
				task("b", h, after("a"), with("v", konst("7"))),
			}})
		}

		// Completed.
		st := v.run(build2("echo", fin(false)), nil)
		got := seen[st.RunID]
		if st.State != RunCompleted || st.Finally != "done" || len(got) != 1 ||
			got[0]["id"] != st.RunID || got[0]["status"] != "completed" || got[0]["b"] != 7.0 || got[0]["long"] != true || len(got[0]["failed"].([]any)) != 0 {
			t.Errorf("completed: %s finally %q, saw %v", st.State, st.Finally, got)
		}
		if a := st.Nodes["a"]; a == nil || string(a.Output) != `{"id":"`+st.RunID+`"}` {
			t.Errorf("run.id in a node: %s", outputOf(a))
		}

		// Failed: the compensation runs first, then finally, once.
		v.order = nil
		st = v.run(build2("perm", fin(false)), nil)
		got = seen[st.RunID]
		if st.State != RunFailed || st.Compensation != "done" || st.Finally != "done" || len(got) != 1 ||
			got[0]["status"] != "failed" || got[0]["error"] != "perm: permanent failure" || got[0]["b"] != 0.0 {
			t.Errorf("failed: %s comp %q finally %q, saw %v", st.State, st.Compensation, st.Finally, got)
		}
		if f, _ := got[0]["failed"].([]any); len(f) != 1 || f[0] != "b" {
			t.Errorf("failed_nodes %v", got[0]["failed"])
		}
		if len(v.order) < 2 || v.order[len(v.order)-1] != "finally" || v.order[len(v.order)-2] != "compensate:a" {
			t.Errorf("order %v: want the compensation, then finally", v.order)
		}

		// A finally that fails twice is retried; one that fails for good is
		// recorded without changing the run's outcome.
		st = v.run(build2("echo", fin(true)), nil)
		if st.State != RunCompleted || st.Finally != "done" || len(seen[st.RunID]) != 3 {
			t.Errorf("retried finally: %s %q after %d calls", st.State, st.Finally, len(seen[st.RunID]))
		}
		f := fin(true)
		f.Retry.Attempts = 2
		st = v.run(build2("echo", f), nil)
		if st.State != RunCompleted || st.Finally != "failed" || st.FinallyError != "attempt 2 of 2: exit: busy" {
			t.Errorf("failing finally: %s %q %q", st.State, st.Finally, st.FinallyError)
		}

		// Cancelled.
		w := build(t, wfSpec{finally: fin(false), nodes: []*nodeSpec{task("a", "block"), task("b", "echo", after("a"))}})
		id := v.submit(w, nil)
		v.waitStarted()
		if err := v.e.Cancel(v.ctx, id); err != nil {
			t.Fatal(err)
		}
		st = v.wait(id)
		if got := seen[id]; st.State != RunCancelled || st.Finally != "done" || len(got) != 1 || got[0]["status"] != "cancelled" || got[0]["error"] != "cancelled" {
			t.Errorf("cancelled: %s %q (%s), saw %v", st.State, st.Finally, st.FinallyError, got)
		}
	})
}

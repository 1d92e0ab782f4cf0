package runtime

import (
	"strings"
	"testing"
	"time"

	"github.com/wfc-lang/wfc/ir"
)

// The result ahead (ahead.go): a run whose outputs read only the node
// that ends it gets its result from that completion, without a finish
// token, and ends exactly as it would through one: the same status,
// result, node states and stored bytes; every case it does not apply to,
// or that fails, still ends through the finish token, with the same
// outcome as before.
func TestResultAhead(t *testing.T) {
	chain := func(outs ...ir.Output) *ir.Workflow {
		return build(t, wfSpec{
			outputs: outs,
			nodes: []*nodeSpec{
				task("a", "cel", with("v", cexpr("1"))),
				task("b", "cel", after("a"), with("v", cexpr("a.output.v + 1"))),
				task("c", "cel", after("b"), with("v", cexpr("b.output.v * 10")), with("s", konst(`"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"`))),
			},
		})
	}
	small := chain(output("v", "c.output.v"), output("s", "c.output.s"))
	small.Settings.MaxStateBytes = 100 // the outputs fit (68 bytes), the result (54) does not
	cases := []struct {
		name   string
		w      *ir.Workflow
		ahead  bool   // ends without a finish token
		result string // of a completed run
		err    string // else, in the failed run's error
	}{
		{"the last node's output", chain(output("v", "c.output.v"), output("w", "c.output.v * 2 + 1")), true, `{"v":20,"w":41}`, ""},
		{"a constant output", chain(output("k", `"done"`)), true, `{"k":"done"}`, ""},
		{"two nodes' outputs", chain(output("v", "c.output.v"), output("a", "a.output.v")), false, `{"v":20,"a":1}`, ""},
		// b evaluates it ahead, but its completion does not end the run.
		{"a node before the last", chain(output("v", "b.output.v")), false, `{"v":2}`, ""},
		{"the run's inputs", chain(output("v", "c.output.v"), output("r", `run.id != ""`)), false, `{"v":20,"r":true}`, ""},
		{"an output that fails", chain(output("v", "c.output.missing")), false, "", "workflow outputs:"},
		{"a result over max_state_bytes", small, false, "", "max_state_bytes"},
	}
	forBackends(t, func(t *testing.T, b backend) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				var got [2]*Status
				for i, general := range []bool{false, true} {
					v := newEnv(t, b, Options{generalOnly: general})
					v.worker(func(o *WorkerOptions) { o.generalOnly = general })
					st := v.run(c.w, nil)
					v.check(st.RunID)
					evs, err := v.e.Events(v.ctx, st.RunID)
					if err != nil {
						t.Fatal(err)
					}
					finishing := false
					for _, ev := range evs {
						finishing = finishing || ev.Type == "run.finishing"
					}
					if wantFinish := general || !c.ahead; finishing != wantFinish {
						t.Errorf("general=%v: finish token %v, want %v", general, finishing, wantFinish)
					}
					if last := evs[len(evs)-1]; c.ahead && !general && (last.Type != "run.completed" || last.Fields["result"] != c.result) {
						t.Errorf("last event %s %v", last.Type, last.Fields)
					}
					switch {
					case c.err == "" && (st.State != RunCompleted || string(st.Result) != c.result):
						t.Errorf("general=%v: %s %s %q, want %s", general, st.State, st.Result, st.Error, c.result)
					case c.err != "" && (st.State != RunFailed || !strings.Contains(st.Error, c.err)):
						t.Errorf("general=%v: %s %q, want failed with %q: %s", general, st.State, st.Error, c.err, dump(st))
					}
					got[i] = st
				}
				// The same end either way: status, result, error, nodes
				// and their outputs.
				for _, st := range got {
					st.RunID, st.Created, st.Ended, st.Expires = "", time.Time{}, time.Time{}, time.Time{}
				}
				if a, g := dump(got[0]), dump(got[1]); a != g {
					t.Errorf("ahead and general runs end differently:\n%s\n%s", a, g)
				}
			})
		}
	})
}

package runtime

import (
	"strings"
	"testing"

	"github.com/wfc-lang/wfc/ir"
)

// TestGoalsMustRun: a run of a goal build succeeds only if every goal
// node completed; otherwise it fails naming the goal and why it did not
// run (issue #13, item 3).
func TestGoalsMustRun(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		w := build(t, wfSpec{
			inputs:  []ir.Input{input("amount", ir.KindInt), input("fast", ir.KindBool)},
			outputs: []ir.Output{output("shipped", "has(ship.output)")},
			goals:   []string{"ship"},
			nodes: []*nodeSpec{
				task("check", "cel", with("ok", cexpr("input.amount > 0"))),
				task("route", "cel", after("check"), branch([]string{"slow"}, rule("input.fast", "express"))),
				task("express", "noop"),
				task("slow", "noop"),
				task("ship", "noop", after("express"), when("check.output.ok")),
			},
		})
		cases := []struct {
			in   map[string]any
			want string // "" for success
		}{
			{map[string]any{"amount": 10, "fast": true}, ""},
			{map[string]any{"amount": 0, "fast": true}, "goal ship did not run: its `when` (check.output.ok) was false"},
			{map[string]any{"amount": 10, "fast": false}, "goal ship did not run: express was skipped: route took another branch"},
		}
		for _, c := range cases {
			st := v.run(w, c.in)
			if c.want == "" {
				if st.State != RunCompleted || string(st.Result) != `{"shipped":true}` {
					t.Errorf("%v: %s %s %s", c.in, st.State, st.Result, st.Error)
				}
				continue
			}
			if st.State != RunFailed || st.Error != c.want {
				t.Errorf("%v: %s %q, want failed %q", c.in, st.State, st.Error, c.want)
			}
		}

		// A failure into on_error skips the goal; a goal build without
		// outputs ends through the finish step too.
		w = build(t, wfSpec{
			goals: []string{"ship"},
			nodes: []*nodeSpec{
				task("pay", "perm", onError("refund")),
				task("refund", "noop"),
				task("ship", "noop", after("pay")),
			},
		})
		st := v.run(w, nil)
		if st.State != RunFailed || !strings.HasPrefix(st.Error, "goal ship did not run: pay failed: perm") {
			t.Errorf("on_error: %s %q", st.State, st.Error)
		}
		w = build(t, wfSpec{goals: []string{"b"}, nodes: []*nodeSpec{task("a", "noop"), task("b", "noop", after("a"))}})
		if st := v.run(w, nil); st.State != RunCompleted {
			t.Errorf("plain goal: %s %q", st.State, st.Error)
		}
	})
}

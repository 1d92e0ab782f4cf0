package runtime

import (
	"fmt"
	"math/rand/v2"
	"slices"
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

// Random DAGs (model_test.go's: joins, predicates, branches, on_error,
// failing nodes) whose output reads one random node's output, or nothing
// but constants: each runs with the fast paths (the result ahead where it
// applies) and without, on the same inputs, and both runs must end the
// same: status, result, error and every node's state and output.
func TestRandomDAGsResultAhead(t *testing.T) {
	seed := seedFromEnv(t)
	forBackends(t, func(t *testing.T, b backend) {
		var envs [2]*env
		for i, general := range []bool{false, true} {
			envs[i] = newEnv(t, b, Options{generalOnly: general})
			envs[i].worker(func(o *WorkerOptions) { o.Concurrency, o.generalOnly = 16, general })
		}
		r := rand.New(rand.NewPCG(seed, 11))
		var inputs []ir.Input
		for f := 0; f < mflags; f++ {
			inputs = append(inputs, input(fmt.Sprintf("f%d", f), ir.KindBool))
		}
		type pair struct {
			runs [2]string
			desc string
		}
		var pairs []pair
		for k := 0; k < 16; k++ {
			ns := genModel(r)
			if k%2 == 0 {
				// Half are plain DAGs (no predicate, branch, failure or
				// settled join): their runs end in a completion, where
				// the result may come ahead.
				for _, m := range ns {
					m.when, m.fails, m.onError, m.branches, m.rules, m.def = -1, false, nil, false, nil, nil
					if m.join == ir.JoinSettled {
						m.join = ir.JoinAll
					}
				}
			}
			var specs []*nodeSpec
			for _, m := range ns {
				specs = append(specs, m.spec(ns))
			}
			out := output("k", `"done"`)
			if k%3 != 0 {
				// Most often the last node (a sink, most likely to end
				// the run), else any.
				id := ns[len(ns)-1].id
				if k%3 == 2 {
					id = ns[r.IntN(len(ns))].id
				}
				out = output("r", fmt.Sprintf("has(%s.output) ? %s.output : null", id, id))
			}
			w := build(t, wfSpec{name: fmt.Sprintf("ahead%d", k), inputs: inputs, nodes: specs, outputs: []ir.Output{out}})
			for c := 0; c < 2; c++ {
				in := map[string]any{}
				for f := 0; f < mflags; f++ {
					in[fmt.Sprintf("f%d", f)] = r.IntN(2) == 0
				}
				p := pair{desc: fmt.Sprintf("workflow %d (%s) inputs %v", k, out.Expr.CEL, in)}
				for i, v := range envs {
					p.runs[i] = v.submit(w, in)
				}
				pairs = append(pairs, p)
			}
		}
		ahead := 0
		for _, p := range pairs {
			var dumps [2]string
			for i, v := range envs {
				st := v.wait(p.runs[i])
				v.check(p.runs[i])
				if st.State == RunFailed {
					// A failing node ends the run while others run: which
					// of those ran first is a race either way.
					st = &Status{State: st.State}
				}
				st.RunID, st.Created, st.Ended, st.Expires = "", time.Time{}, time.Time{}, time.Time{}
				dumps[i] = dump(st)
			}
			if dumps[0] != dumps[1] {
				t.Errorf("%s: the fast and general runs end differently:\n%s\n%s", p.desc, dumps[0], dumps[1])
			}
			evs, err := envs[0].e.Events(envs[0].ctx, p.runs[0])
			if err != nil {
				t.Fatal(err)
			}
			if n := len(evs); n > 0 && evs[n-1].Type == "run.completed" && !slices.ContainsFunc(evs, func(ev Event) bool { return ev.Type == "run.finishing" }) {
				ahead++
			}
		}
		// The seed's workflows gave some runs their result ahead.
		if ahead == 0 {
			t.Errorf("no run of %d ended with its result ahead", len(pairs))
		}
		t.Logf("%d of %d runs ended with their result ahead", ahead, len(pairs))
	})
}

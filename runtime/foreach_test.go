package runtime

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/runtime/handlers"
)

// TestForEachToleranceAndIndex: `for_each i, x in ...` binds the index; a
// for_each with a tolerance lets that many items (or per cent) fail, its
// output carrying each item's output or error, and fails past it (issue
// #13, item 6).
func TestForEachToleranceAndIndex(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.reg.RegisterFunc("evenfails", func(ctx context.Context, req handlers.Request) (json.RawMessage, error) {
			var c struct{ V, At int }
			json.Unmarshal(req.Config, &c)
			if c.V%2 == 0 {
				return nil, handlers.Errorf("Even", false, "%d is even", c.V)
			}
			return req.Config, nil
		})
		v.worker()
		wf := func(tol *ir.Tolerance) *ir.Workflow {
			return build(t, wfSpec{
				inputs:  []ir.Input{{Name: "xs", Type: ir.Type{Kind: ir.KindList, Elem: &ir.Type{Kind: ir.KindInt}}, Required: true}},
				outputs: []ir.Output{output("res", "each.output")},
				nodes: []*nodeSpec{task("each", "evenfails", forEach("x", "input.xs", 2),
					with("v", cexpr("x")), with("at", cexpr("i")),
					func(s *nodeSpec) { s.n.ForEach.Index = "i"; s.n.ForEach.Tolerate = tol })},
			})
		}
		in := map[string]any{"xs": []int{1, 2, 3, 4, 5}}
		want := `{"res":[{"index":0,"output":{"at":0,"v":1}},{"error":{"code":"Even","message":"item 1: 2 is even"},"index":1},` +
			`{"index":2,"output":{"at":2,"v":3}},{"error":{"code":"Even","message":"item 3: 4 is even"},"index":3},{"index":4,"output":{"at":4,"v":5}}]}`
		for _, tol := range []*ir.Tolerance{{Count: 2}, {Percent: 40}} {
			st := v.run(wf(tol), in)
			if st.State != RunCompleted || string(st.Result) != want {
				t.Errorf("tolerate %+v: %s %s %s", *tol, st.State, st.Result, st.Error)
			}
		}
		for _, tol := range []*ir.Tolerance{{Count: 1}, {Percent: 20}, {}} {
			st := v.run(wf(tol), in)
			if st.State != RunFailed || !strings.HasPrefix(st.Error, "for_each: more items failed than the") || !strings.Contains(st.Error, "is even") {
				t.Errorf("tolerate %+v: %s %q", *tol, st.State, st.Error)
			}
			if n := st.Nodes["each"]; n == nil || n.Code != "Even" {
				t.Errorf("tolerate %+v: the node failed with %+v", *tol, n)
			}
		}
	})
}

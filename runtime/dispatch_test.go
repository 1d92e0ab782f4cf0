package runtime

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/runtime/handlers"
)

// TestDispatch: a task whose handler is chosen at run time from a closed
// set (issue #13, item 7); a name outside the set fails the node with
// error code dispatch.
func TestDispatch(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		for _, name := range []string{"to.upper", "to.lower"} {
			v.reg.RegisterFunc(name, func(ctx context.Context, req handlers.Request) (json.RawMessage, error) {
				var c struct{ S string }
				json.Unmarshal(req.Config, &c)
				f := strings.ToUpper
				if req.Handler == "to.lower" {
					f = strings.ToLower
				}
				return json.Marshal(map[string]string{"s": f(c.S), "by": req.Handler})
			})
		}
		v.worker()
		w := build(t, wfSpec{
			inputs:  []ir.Input{input("mode", ir.KindString)},
			outputs: []ir.Output{output("s", "conv.output.s"), output("by", "conv.output.by")},
			nodes: []*nodeSpec{task("conv", "", with("s", konst(`"MiXeD"`)), func(s *nodeSpec) {
				s.n.Dispatch = &ir.Dispatch{Expr: ir.Expr{CEL: `"to." + input.mode`}, Handlers: []string{"to.upper", "to.lower"}}
			})},
		})
		for mode, want := range map[string]string{"upper": `{"s":"MIXED","by":"to.upper"}`, "lower": `{"s":"mixed","by":"to.lower"}`} {
			if st := v.run(w, map[string]any{"mode": mode}); st.State != RunCompleted || string(st.Result) != want {
				t.Errorf("%s: %s %s %s", mode, st.State, st.Result, st.Error)
			}
		}
		st := v.run(w, map[string]any{"mode": "title"})
		if n := st.Nodes["conv"]; st.State != RunFailed || n == nil || n.Code != "dispatch" || !strings.Contains(st.Error, `"to.title" is not one of the node's handlers`) {
			t.Errorf("outside the set: %s %q %+v", st.State, st.Error, n)
		}
	})
}

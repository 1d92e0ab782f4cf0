package runtime

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/runtime/handlers"
)

// synth returns a value of type t.
func synth(t *ir.Type) any {
	if t == nil {
		return map[string]any{}
	}
	switch t.Kind {
	case ir.KindString:
		return "x"
	case ir.KindInt:
		return 1
	case ir.KindNumber:
		return 1.5
	case ir.KindBool:
		return true
	case ir.KindDuration:
		return "1ms"
	case ir.KindNull:
		return nil
	case ir.KindList:
		return []any{synth(t.Elem)}
	case ir.KindMap:
		return map[string]any{"k": synth(t.Elem)}
	case ir.KindObject:
		m := map[string]any{}
		for i := range t.Fields {
			m[t.Fields[i].Name] = synth(&t.Fields[i].Type)
		}
		return m
	}
	return map[string]any{}
}

// Every workflow the compiler's golden tests produce either runs to an end
// on the runtime, with fake handlers whose outputs fit the declared types,
// or is refused by CheckSupported for its agent nodes: flow nodes run their
// embedded children. Approvals are approved as they open, by their first
// approver.
func TestCompilerGoldens(t *testing.T) {
	files, _ := filepath.Glob("../testdata/golden/compiler/*.ir.json")
	if len(files) == 0 {
		t.Skip("no compiler goldens")
	}
	type wf struct {
		name string
		w    *ir.Workflow
	}
	var runnable []wf
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		w, err := ir.Decode(data)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if err := CheckSupported(w); err != nil {
			if !strings.Contains(err.Error(), "not supported") {
				t.Errorf("%s: %v", f, err)
			}
			continue
		}
		runnable = append(runnable, wf{filepath.Base(f), w})
	}
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		nodes := map[string]*ir.Node{}
		fake := func(ctx context.Context, req handlers.Request) (json.RawMessage, error) {
			n := nodes[req.Workflow+"/"+req.Node]
			if req.Compensation || n == nil {
				return json.RawMessage(`{}`), nil
			}
			return json.Marshal(synth(itemType(n)))
		}
		register := func(w *ir.Workflow) {
			for i := range w.Nodes {
				nodes[w.Name+"/"+w.Nodes[i].ID] = &w.Nodes[i]
			}
			for _, h := range w.Handlers {
				switch h.Name {
				case "noop", "echo", "cel", "fail":
				default: // declared handlers, and http, exec, sleep: no outside world in tests
					v.reg.RegisterFunc(h.Name, fake)
				}
			}
		}
		for _, r := range runnable {
			register(r.w)
			for i := range r.w.Children {
				register(&r.w.Children[i].Workflow)
			}
		}
		v.worker(func(o *WorkerOptions) { o.Concurrency = 16 })
		go func() {
			for v.ctx.Err() == nil {
				open, _ := v.e.OpenApprovals(v.ctx)
				for _, a := range open {
					v.e.Decide(v.ctx, a.Run, a.Exec, Decision{Approve: true, By: a.Approvers[0]}) // (a failure shows as a run that does not end)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
		for _, r := range runnable {
			in := map[string]any{}
			for _, i := range r.w.Inputs {
				if i.Required {
					in[i.Name] = synth(&i.Type)
				}
			}
			run, err := v.e.Submit(v.ctx, r.w, in)
			if err != nil {
				t.Errorf("%s: submit: %v", r.name, err)
				continue
			}
			ctx, cancel := context.WithTimeout(v.ctx, 20*time.Second)
			st, err := v.e.Wait(ctx, run)
			cancel()
			if err != nil {
				t.Errorf("%s: %v", r.name, err)
				continue
			}
			v.check(run)
			checkChildren(v, run)
			t.Logf("%s: %s %s %s", r.name, st.State, st.Result, st.Error)
		}
	})
}

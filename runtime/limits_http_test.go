package runtime

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/runtime/handlers"
)

// TestLimitTemplateURLEscape: a template splices raw text; url.pathEscape
// and url.queryEscape (issue #14 item 8) make a value safe in a URL, at
// run time as the compiler types them.
func TestLimitTemplateURLEscape(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		w := build(t, wfSpec{
			inputs:  []ir.Input{input("name", ir.KindString)},
			outputs: []ir.Output{output("u", "a.output.u"), output("raw", "a.output.raw")},
			nodes: []*nodeSpec{
				task("a", "cel",
					with("u", tmpl("https://x/", &ir.Expr{CEL: "url.pathEscape(input.name)"}, "?q=", &ir.Expr{CEL: "url.queryEscape(input.name)"})),
					with("raw", tmpl("https://x/", &ir.Expr{CEL: "input.name"}))),
			},
		})
		st := v.run(w, map[string]any{"name": "a/b c&d=é"})
		if st.State != RunCompleted {
			t.Fatalf("state %s: %s", st.State, dump(st))
		}
		var got map[string]string
		json.Unmarshal(st.Result, &got)
		if got["u"] != "https://x/a%2Fb%20c&d=%C3%A9?q=a%2Fb+c%26d%3D%C3%A9" || got["raw"] != "https://x/a/b c&d=é" {
			t.Errorf("result %s", st.Result)
		}
	})
}

// TestLimitHTTPNodeDenied: a workflow's http node that targets a loopback
// address fails at once with code http.denied on a worker with the
// default policy, whatever its retry policy; one allowed by the worker's
// options completes.
func TestLimitHTTPNodeDenied(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		var calls atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			w.Write([]byte(`{"ok":true}`))
		}))
		t.Cleanup(srv.Close)
		w := build(t, wfSpec{
			outputs: []ir.Output{output("s", "a.output.status")},
			nodes:   []*nodeSpec{task("a", "http", with("url", konst(`"`+srv.URL+`/x"`)), retry(5, "fixed", 10))},
		})
		v := newEnv(t, b)
		v.worker()
		st := v.run(w, nil)
		a := st.Nodes["a"]
		if st.State != RunFailed || a == nil || a.Code != handlers.CodeHTTPDenied || a.Attempt > 1 || !strings.Contains(a.Error, "--http-allow 127.0.0.1") {
			t.Fatalf("default policy: %s", dump(st))
		}
		if calls.Load() != 0 {
			t.Errorf("the server got %d requests", calls.Load())
		}
		v = newEnv(t, b)
		v.reg = handlers.NewRegistry(handlers.Options{HTTPAllow: []string{"127.0.0.1"}})
		v.worker()
		if st := v.run(w, nil); st.State != RunCompleted || string(st.Result) != `{"s":200}` {
			t.Fatalf("allowed: %s", dump(st))
		}
	})
}

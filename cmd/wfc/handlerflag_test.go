package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestWorkerHTTPHandler: `wfc worker --handler NAME=URL` runs a declared
// handler as an HTTP service: the task is POSTed with its Idempotency-Key,
// the JSON response is the output; a problem+json error's code is the
// node's error code, which on_error routes.
func TestWorkerHTTPHandler(t *testing.T) {
	url := fleetRedis(t)
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Node           string         `json:"node"`
			Config         map[string]any `json:"config"`
			IdempotencyKey string         `json:"idempotency_key"`
		}
		b, _ := io.ReadAll(r.Body)
		json.Unmarshal(b, &req)
		if r.Header.Get("Idempotency-Key") != req.IdempotencyKey || req.IdempotencyKey == "" {
			w.WriteHeader(400)
			return
		}
		if req.Node == "deny" {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(403)
			io.WriteString(w, `{"title":"Forbidden","detail":"not this one","code":"svc.denied"}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"greeting": "hello " + req.Config["name"].(string)})
	}))
	defer svc.Close()
	src := filepath.Join(t.TempDir(), "svc.wf")
	os.WriteFile(src, []byte(`workflow svc {
  handler "svc.greet" { config { name: string }  output { greeting: string } }
  task hello { run "svc.greet"  with { name = "Ada" } }
  task deny after hello {
    run "svc.greet"
    with { name = "Bob" }
    on_error "svc.denied" => denied
  }
  task denied { run "cel"  with { code = deny.error.code } }
  output { greeting = hello.output.greeting  code = denied.output.code }
}
`), 0o644)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a hang guard
	defer cancel()
	wctx, stop := context.WithCancel(ctx)
	done := make(chan int, 1)
	go func() {
		env, _, _ := bufEnv()
		done <- Run(wctx, env, []string{"worker", "--redis", url, "--handler", "svc.greet=" + svc.URL + "/greet"})
	}()
	defer func() { stop(); <-done }()
	env, stdout, stderr := bufEnv()
	if code := Run(ctx, env, []string{"submit", "--redis", url, "--wait", src}); code != exitOK {
		t.Fatalf("submit: exit %d: %s", code, stderr)
	}
	// The run id, then the result.
	_, out, _ := strings.Cut(stdout.String(), "\n")
	var res map[string]any
	if err := json.Unmarshal([]byte(out), &res); err != nil || res["greeting"] != "hello Ada" || res["code"] != "svc.denied" {
		t.Fatalf("result %s (%v)", stdout, err)
	}
}

func TestWorkerHandlerFlagErrors(t *testing.T) {
	for _, c := range []struct{ arg, want string }{
		{"svc", "want NAME=URL"},
		{"=http://x", "want NAME=URL"},
		{"noop=http://x", "noop is a built-in handler"},
		{"svc=ftp://x", "not an http or https URL"},
	} {
		env, _, stderr := bufEnv()
		if code := Run(context.Background(), env, []string{"worker", "--redis", "redis://127.0.0.1:1", "--handler", c.arg}); code != exitUsage || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("--handler %s: exit %d: %s", c.arg, code, stderr)
		}
	}
}

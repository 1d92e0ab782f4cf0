package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func req(handler, config string) Request {
	return Request{RunID: "r1", Node: "n", Item: -1, Attempt: 1, Handler: handler, Config: json.RawMessage(config), IdempotencyKey: "r1/n"}
}

func run(t *testing.T, r *Registry, handler, config string) (json.RawMessage, error) {
	t.Helper()
	h, ok := r.Lookup(handler)
	if !ok {
		t.Fatalf("no handler %s", handler)
	}
	return Call(context.Background(), h, req(handler, config))
}

func TestSimpleBuiltins(t *testing.T) {
	r := NewRegistry(Options{})
	for _, c := range []struct{ h, cfg, want string }{
		{"noop", `{}`, `{}`},
		{"echo", `{"a":1,"b":[true]}`, `{"a":1,"b":[true]}`},
		{"cel", `{"x":"y"}`, `{"x":"y"}`},
		{"sleep", `{"duration":"10ms"}`, `{}`},
	} {
		out, err := run(t, r, c.h, c.cfg)
		if err != nil || string(out) != c.want {
			t.Errorf("%s: %s %v", c.h, out, err)
		}
	}
	_, err := run(t, r, "fail", `{"message":"nope"}`)
	if err == nil || err.Error() != "nope" || !IsPermanent(err) || CodeOf(err) != "fail" {
		t.Errorf("fail: %v (permanent %v, code %q)", err, IsPermanent(err), CodeOf(err))
	}
	_, err = run(t, r, "fail", `{"message":"busy","code":"Busy.Later","retryable":true}`)
	if err == nil || err.Error() != "busy" || IsPermanent(err) || CodeOf(err) != "Busy.Later" {
		t.Errorf("fail with code: %v (permanent %v, code %q)", err, IsPermanent(err), CodeOf(err))
	}
	_, err = run(t, r, "sleep", `{"duration":"soon"}`)
	if !IsPermanent(err) {
		t.Errorf("sleep with a bad duration: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	h, _ := r.Lookup("sleep")
	if _, err := Call(ctx, h, req("sleep", `{"duration":"10s"}`)); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("sleep ignores its context: %v", err)
	}
}

func TestCallGuards(t *testing.T) {
	_, err := Call(context.Background(), Func(func(context.Context, Request) (json.RawMessage, error) { panic("oops") }), req("p", "{}"))
	if !IsPermanent(err) || !strings.Contains(err.Error(), "panicked: oops") {
		t.Errorf("panic: %v", err)
	}
	_, err = Call(context.Background(), Func(func(context.Context, Request) (json.RawMessage, error) { return json.RawMessage("{"), nil }), req("j", "{}"))
	if !IsPermanent(err) || !strings.Contains(err.Error(), "invalid JSON") {
		t.Errorf("invalid JSON: %v", err)
	}
	out, err := Call(context.Background(), Func(func(context.Context, Request) (json.RawMessage, error) { return nil, nil }), req("e", "{}"))
	if err != nil || string(out) != "{}" {
		t.Errorf("empty output: %s %v", out, err)
	}
}

func TestHTTP(t *testing.T) {
	var calls atomic.Int32
	var gotKey, gotBody, gotMethod atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		gotKey.Store(r.Header.Get("Idempotency-Key"))
		gotMethod.Store(r.Method)
		var b strings.Builder
		buf := make([]byte, 1024)
		k, _ := r.Body.Read(buf)
		b.Write(buf[:k])
		gotBody.Store(b.String())
		switch r.URL.Path {
		case "/flaky":
			if n < 3 {
				w.Header().Set("Retry-After", "0")
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"ok":true,"n":3}`))
		case "/down":
			w.WriteHeader(http.StatusBadGateway)
		case "/missing":
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte("not here"))
		case "/slow":
			time.Sleep(300 * time.Millisecond)
		}
	}))
	defer srv.Close()
	r := NewRegistry(Options{HTTPAllow: []string{"127.0.0.1"}})

	out, err := run(t, r, "http", `{"url":"`+srv.URL+`/flaky","body":{"amount":5}}`)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) == "" || !strings.Contains(string(out), `"status":200`) || !strings.Contains(string(out), `"body":{"ok":true,"n":3}`) {
		t.Errorf("output %s", out)
	}
	if calls.Load() != 3 || gotKey.Load() != "r1/n" || gotMethod.Load() != "POST" || gotBody.Load() != `{"amount":5}` {
		t.Errorf("calls %d key %v method %v body %v", calls.Load(), gotKey.Load(), gotMethod.Load(), gotBody.Load())
	}

	calls.Store(0)
	_, err = run(t, r, "http", `{"url":"`+srv.URL+`/down"}`)
	if err == nil || IsPermanent(err) || !strings.Contains(err.Error(), "502") || calls.Load() != 3 || CodeOf(err) != "http.502" {
		t.Errorf("5xx: %v (code %q) after %d calls", err, CodeOf(err), calls.Load())
	}

	// A 4xx fails at once with its code and the body's start; accepted,
	// it is the output.
	calls.Store(0)
	_, err = run(t, r, "http", `{"url":"`+srv.URL+`/missing","method":"get"}`)
	if err == nil || !IsPermanent(err) || CodeOf(err) != "http.404" || !strings.HasSuffix(err.Error(), "404 Not Found: not here") {
		t.Errorf("404: %v (code %q, permanent %v)", err, CodeOf(err), IsPermanent(err))
	}
	out, err = run(t, r, "http", `{"url":"`+srv.URL+`/missing","method":"get","accept":[404]}`)
	if err != nil || !strings.Contains(string(out), `"status":404`) || !strings.Contains(string(out), `"body":"not here"`) {
		t.Errorf("404 accepted: %s %v", out, err)
	}
	// No response at all.
	_, err = run(t, r, "http", `{"url":"http://127.0.0.1:1/refused"}`)
	if CodeOf(err) != "http.network" || IsPermanent(err) {
		t.Errorf("refused: %v (code %q)", err, CodeOf(err))
	}

	calls.Store(0)
	start := time.Now()
	_, err = run(t, r, "http", `{"url":"`+srv.URL+`/slow","timeout":"50ms"}`)
	if err == nil || time.Since(start) > 2*time.Second || CodeOf(err) != "timeout" {
		t.Errorf("timeout: %v (code %q) after %s", err, CodeOf(err), time.Since(start))
	}

	if _, err := run(t, r, "http", `{"method":"GET"}`); !IsPermanent(err) {
		t.Errorf("no url: %v", err)
	}
	if d := retryAfter("7"); d != 7*time.Second {
		t.Errorf("Retry-After 7: %s", d)
	}
	if d := retryAfter(time.Now().Add(time.Minute).UTC().Format(http.TimeFormat)); d < 50*time.Second || d > time.Minute {
		t.Errorf("Retry-After date: %s", d)
	}
}

func TestExec(t *testing.T) {
	off := NewRegistry(Options{})
	if _, err := run(t, off, "exec", `{"argv":["echo","hi"]}`); !IsPermanent(err) || !strings.Contains(err.Error(), "--allow-exec") {
		t.Fatalf("exec without AllowExec: %v", err)
	}
	r := NewRegistry(Options{AllowExec: true})
	// No shell: metacharacters reach the program as plain arguments.
	out, err := run(t, r, "exec", `{"argv":["echo","; rm -rf ./x","$(id)","`+"`id`"+`"]}`)
	if err != nil {
		t.Fatal(err)
	}
	var o struct {
		ExitCode int    `json:"exit_code"`
		Stdout   string `json:"stdout"`
	}
	json.Unmarshal(out, &o)
	if o.ExitCode != 0 || o.Stdout != "; rm -rf ./x $(id) `id`\n" {
		t.Errorf("echo: %s", out)
	}
	out, err = run(t, r, "exec", `{"argv":["sh","-c","echo $SECRET-$MINE; exit 3"],"env":{"MINE":"m"},"stdin":"","ok_exit_codes":[3]}`)
	if err != nil {
		t.Fatal(err)
	}
	json.Unmarshal(out, &o)
	if o.ExitCode != 3 || o.Stdout != "-m\n" {
		t.Errorf("exit code and env: %s", out)
	}
	// A status not listed fails with exec.N and the end of stderr.
	_, err = run(t, r, "exec", `{"argv":["sh","-c","echo boom >&2; exit 3"]}`)
	if CodeOf(err) != "exec.3" || IsPermanent(err) || err.Error() != "exec: sh exited with status 3: boom" {
		t.Errorf("exit 3: %v (code %q)", err, CodeOf(err))
	}
	if _, err := run(t, r, "exec", `{"argv":["/nonexistent/program"]}`); !IsPermanent(err) {
		t.Errorf("missing program: %v", err)
	}
	if _, err := run(t, r, "exec", `{"argv":[]}`); !IsPermanent(err) {
		t.Errorf("empty argv: %v", err)
	}
}

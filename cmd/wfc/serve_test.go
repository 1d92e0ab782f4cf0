package main

import (
	"bytes"
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/wfc-lang/wfc/runtime"
	"github.com/wfc-lang/wfc/server"
)

func TestServeRefusesOpenListenerWithoutTokens(t *testing.T) {
	var out, errb bytes.Buffer
	env := &Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
	if code := dispatch(context.Background(), env, []string{"serve", "--listen", "0.0.0.0:0"}); code != exitUsage {
		t.Fatalf("exit %d, want %d: %s", code, exitUsage, errb.String())
	}
	if !strings.Contains(errb.String(), "refusing to listen on 0.0.0.0:0 without tokens") {
		t.Fatalf("stderr: %s", errb.String())
	}
}

// TestClientCommands runs submit, status, events, cancel, approve and
// signal with --server against a server in this process.
func TestClientCommands(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	eng, err := runtime.Open(ctx, runtime.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	eng.StartWorkers(ctx, 2)
	defer eng.StopWorkers()
	tok, err := server.LoadTokens("", "cli-token-0123456789abc sales-manager@example.com admin", nil)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Engine: eng, Tokens: tok})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	wfc := func(token string, args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		env := &Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: func(k string) string {
			if k == "WFC_TOKEN" {
				return token
			}
			return ""
		}}
		code := dispatch(ctx, env, args)
		return code, out.String(), errb.String()
	}
	const token = "cli-token-0123456789abc"
	code, out, errs := wfc(token, "submit", "--server", hs.URL, "../../examples/greet.wf", "--input", "name=Ada", "--wait")
	if code != 0 || !strings.Contains(out, "run.completed") {
		t.Fatalf("submit --wait: %d\n%s\n%s", code, out, errs)
	}
	run := strings.SplitN(out, "\n", 2)[0]
	if code, out, errs = wfc(token, "status", "--server="+hs.URL, run); code != 0 || !strings.Contains(out, `"state": "completed"`) {
		t.Fatalf("status: %d %s %s", code, out, errs)
	}
	if code, out, _ = wfc(token, "events", "--server", hs.URL, run); code != 0 || !strings.Contains(out, "run.started") {
		t.Fatalf("events: %d %s", code, out)
	}
	if code, _, errs = wfc(token, "cancel", "--server", hs.URL, run); code != exitFailed || !strings.Contains(errs, "HTTP 409") {
		t.Fatalf("cancel of an ended run: %d %s", code, errs)
	}
	if code, _, errs = wfc("wrong-token-0123456789", "status", "--server", hs.URL, run); code != exitFailed || !strings.Contains(errs, "HTTP 401") {
		t.Fatalf("wrong token: %d %s", code, errs)
	}

	// approve decides as the token's subject.
	code, out, errs = wfc(token, "submit", "--server", hs.URL, "../../examples/approval.wf", "--input", "customer=acme", "--input", "percent=15", "--idempotency-key", "k1")
	if code != 0 {
		t.Fatalf("submit: %d %s", code, errs)
	}
	run = strings.TrimSpace(out)
	waitNode(t, eng, run, "approve")
	if code, _, errs = wfc(token, "approve", "--server", hs.URL, "--input", "final=12", run, "approve"); code != 0 || !strings.Contains(errs, "approved by sales-manager@example.com") {
		t.Fatalf("approve: %d %s", code, errs)
	}
	st, err := eng.Wait(ctx, run)
	if err != nil || string(st.Result) != `{"approved":true,"discount":12}` {
		t.Fatalf("run: %v %+v", err, st)
	}

	// signal.
	code, out, errs = wfc(token, "submit", "--server", hs.URL, "../../examples/signal.wf", "--input", "order_id=o-1", "--input", "customer=acme")
	if code != 0 {
		t.Fatalf("submit signal.wf: %d %s", code, errs)
	}
	run = strings.TrimSpace(out)
	waitNode(t, eng, run, "reply")
	if code, _, errs = wfc(token, "signal", "--server", hs.URL, "--correlation", "o-1", "--data", `{"text":"yes"}`, run, "customer_reply"); code != 0 || !strings.Contains(errs, "taken by reply") {
		t.Fatalf("signal: %d %s", code, errs)
	}
	if st, err := eng.Wait(ctx, run); err != nil || st.State != "completed" {
		t.Fatalf("run: %v %+v", err, st)
	}
}

func waitNode(t *testing.T, eng *runtime.Engine, run, node string) {
	t.Helper()
	for i := 0; i < 500; i++ {
		st, err := eng.Status(context.Background(), run)
		if err == nil && st.Nodes[node] != nil && st.Nodes[node].State == runtime.NodeWaiting {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("node %s of run %s does not wait", node, run)
}

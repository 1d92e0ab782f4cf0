package tasksapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wfc-lang/wfc/compiler"
	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/runtime"
	"github.com/wfc-lang/wfc/server"
)

// testToken has scope work (the pollers'), submitToken submit and read.
const (
	testToken   = "test-token-0123456789"
	submitToken = "submit-token-0123456789"
)

// A backend is a Redis to run on: "" the embedded server, else a
// redis-server started for the test.
type backend struct {
	name string
	url  func(t *testing.T) string
}

var backends = []backend{
	{"embedded", func(*testing.T) string { return "" }},
	{"redis", startRedis},
}

func forBackends(t *testing.T, f func(t *testing.T, b backend)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { f(t, b) })
	}
}

// startRedis starts a redis-server on a free loopback port, or skips the
// test when there is none (fails under CI=true).
func startRedis(t *testing.T) string {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("redis-server is not on PATH")
		}
		t.Skip("redis-server is not on PATH")
	}
	dir := t.TempDir()
	for range 10 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
			"--save", "", "--appendonly", "no", "--logfile", filepath.Join(dir, "redis.log"))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if c, err := net.Dial("tcp", addr); err == nil {
				c.Close()
				t.Cleanup(func() { cmd.Process.Kill(); <-done })
				return "redis://" + addr
			}
			select {
			case <-done:
				deadline = time.Time{}
			default:
			}
		}
		cmd.Process.Kill()
		<-done
	}
	t.Fatal("could not start redis-server")
	return ""
}

// stack is an engine with wfc workers for the control queue and the
// tasks API on an httptest server.
type stack struct {
	e   *runtime.Engine
	srv *httptest.Server
	ctx context.Context
}

func newStack(t *testing.T, b backend, lease time.Duration) *stack {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	e, err := runtime.Open(context.Background(), runtime.Options{RedisURL: b.url(t), Logger: log, Prefix: "tasksapi"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	e.StartWorkers(ctx, 4, runtime.WorkerOptions{Block: 200 * time.Millisecond, TimerInterval: 20 * time.Millisecond, Logger: log})
	r, err := e.NewRemote(runtime.RemoteOptions{Lease: lease, MaxWait: 3 * time.Second, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	// The handler is mounted in wfc serve's (server.New) as cmd/wfc/serve.go
	// does: the server checks the bearer token and its scope "work".
	tokens, err := server.LoadTokens("", testToken+" py-worker work;"+submitToken+" ci submit,read", log)
	if err != nil {
		t.Fatal(err)
	}
	tasks := New(Config{Remote: r, Logger: log, MaxBodyBytes: 64 << 10, Authorize: server.Authorized})
	h, err := server.New(server.Config{Engine: e, Tokens: tokens, TasksHandler: tasks, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &stack{e: e, srv: srv, ctx: ctx}
}

func compile(t *testing.T, src string) *ir.Workflow {
	t.Helper()
	res := compiler.Compile("test.wf", []byte(src), compiler.Config{})
	if res.Diags.HasErrors() || res.IR == nil {
		t.Fatalf("compile: %v", res.Diags)
	}
	return res.IR
}

// call posts body (a value, or raw bytes) to path and returns the status
// and the decoded JSON answer.
func (s *stack) call(t *testing.T, path string, body any, hdr ...string) (int, map[string]any, http.Header) {
	t.Helper()
	var raw []byte
	switch b := body.(type) {
	case []byte:
		raw = b
	default:
		raw, _ = json.Marshal(b)
	}
	req, _ := http.NewRequest("POST", s.srv.URL+path, bytes.NewReader(raw))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+testToken)
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if len(data) > 0 {
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatalf("%s: %d, not JSON: %s", path, resp.StatusCode, data)
		}
	}
	if resp.StatusCode >= 400 {
		if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" || m["status"] != float64(resp.StatusCode) || m["code"] == "" {
			t.Errorf("%s: %d is not a problem: %s %s", path, resp.StatusCode, ct, data)
		}
	}
	return resp.StatusCode, m, resp.Header
}

const oneTask = `workflow one {
  input { who: string }
  handler "crm.lookup" { config { who: string }  output { name: string } }
  task a { run "crm.lookup"  with { who = input.who } }
  output { name = a.output.name }
}`

func (s *stack) wait(t *testing.T, run string) *runtime.Status {
	t.Helper()
	ctx, cancel := context.WithTimeout(s.ctx, 60*time.Second)
	defer cancel()
	st, err := s.e.Wait(ctx, run)
	if err != nil {
		t.Fatalf("wait: %v", err)
	}
	return st
}

// The endpoints over real HTTP: a task polled, beaten, completed; the
// duplicate refused; bad requests answered with problems and nothing
// changed.
func TestEndpoints(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		s := newStack(t, b, 2*time.Second)
		poll := map[string]any{"worker": "t1", "handlers": []string{"crm.lookup"}, "wait_ms": 100}
		if code, _, _ := s.call(t, "/v1/tasks/poll", poll); code != http.StatusNoContent {
			t.Fatalf("empty poll: %d", code)
		}
		run, err := s.e.Submit(s.ctx, compile(t, oneTask), map[string]any{"who": "ada"})
		if err != nil {
			t.Fatal(err)
		}
		poll["wait_ms"] = 3000
		code, task, _ := s.call(t, "/v1/tasks/poll", poll)
		if code != http.StatusOK || task["handler"] != "crm.lookup" || task["run_id"] != run || task["node"] != "a" ||
			task["idempotency_key"] != run+"/a" || task["lease_ms"] != float64(2000) || task["attempt"] != float64(1) {
			t.Fatalf("poll: %d %v", code, task)
		}
		if c, ok := task["config"].(map[string]any); !ok || c["who"] != "ada" {
			t.Fatalf("config %v", task["config"])
		}
		id, lease := task["id"].(string), task["lease"].(string)
		base := "/v1/tasks/" + id
		if code, m, _ := s.call(t, base+"/heartbeat", map[string]any{"lease": lease}); code != 200 || m["lease_ms"] != float64(2000) {
			t.Fatalf("heartbeat: %d %v", code, m)
		}
		// Bad requests: a problem each, nothing changed.
		bad := []struct {
			path string
			body any
			hdr  []string
			code int
		}{
			{"/v1/tasks/poll", poll, []string{"Authorization", ""}, 401},
			{"/v1/tasks/poll", poll, []string{"Authorization", "Bearer wrong"}, 401},
			{"/v1/tasks/poll", poll, []string{"Authorization", "Bearer " + submitToken}, 403},
			{"/v1/tasks/poll", []byte(`{"worker":`), nil, 400},
			{"/v1/tasks/poll", []byte(`{"worker":"w","handlers":["crm.lookup"],"bogus":1}`), nil, 400},
			{"/v1/tasks/poll", []byte(`{"worker":"w","handlers":["crm.lookup"]} {}`), nil, 400},
			{"/v1/tasks/poll", map[string]any{"worker": "w", "handlers": []string{"noop"}}, nil, 400},
			{"/v1/tasks/poll", map[string]any{"worker": "w w", "handlers": []string{"crm.lookup"}}, nil, 400},
			{"/v1/tasks/poll", map[string]any{"worker": "w", "handlers": []string{"crm.lookup"}, "wait_ms": -1}, nil, 400},
			{"/v1/tasks/poll", poll, []string{"Content-Type", "text/plain"}, 415},
			{"/v1/tasks/poll", []byte(`{"worker":"` + strings.Repeat("x", 70<<10) + `"}`), nil, 413},
			{base + "/complete", map[string]any{"lease": "wrong", "output": map[string]any{"name": "x"}}, nil, 409},
			{base + "/complete", map[string]any{"lease": lease}, nil, 400},
			{base + "/complete", map[string]any{"output": 1}, nil, 400},
			{base + "/fail", map[string]any{"lease": lease}, nil, 400},
			{base + "/fail", map[string]any{"lease": lease, "error": map[string]any{"code": "no spaces"}}, nil, 400},
			{"/v1/tasks/bm9wZQ/complete", map[string]any{"lease": lease, "output": 1}, nil, 404},
			{base + "/heartbeat", map[string]any{"lease": "wrong"}, nil, 409},
			{"/v1/tasks/" + id, map[string]any{}, nil, 404},
		}
		for _, c := range bad {
			if code, m, hdr := s.call(t, c.path, c.body, c.hdr...); code != c.code {
				t.Errorf("%s %v: %d %v, want %d", c.path, c.hdr, code, m, c.code)
			} else if slug, _ := m["code"].(string); m["status"] != float64(code) || m["type"] != ProblemBase+slug || m["title"] == "" || m["instance"] != c.path {
				// The server's problems and the handler's read alike.
				t.Errorf("%s %v: not a wfc problem: %v", c.path, c.hdr, m)
			} else if code == 401 && hdr.Get("WWW-Authenticate") == "" {
				t.Errorf("401 without WWW-Authenticate")
			}
		}
		if st, _ := s.e.Status(s.ctx, run); st.State != runtime.RunRunning {
			t.Fatalf("a bad request changed the run: %s", st.State)
		}
		if code, m, _ := s.call(t, base+"/complete", map[string]any{"lease": lease, "output": map[string]any{"name": "Ada"}}); code != 204 {
			t.Fatalf("complete: %d %v", code, m)
		}
		st := s.wait(t, run)
		if string(st.Result) != `{"name":"Ada"}` {
			t.Fatalf("%s %s %s", st.State, st.Result, st.Error)
		}
		if code, _, _ := s.call(t, base+"/complete", map[string]any{"lease": lease, "output": map[string]any{"name": "late"}}); code != 409 {
			t.Fatalf("duplicate completion: %d", code)
		}
		if st2, _ := s.e.Status(s.ctx, run); string(st2.Result) != string(st.Result) {
			t.Fatal("a duplicate changed the result")
		}
	})
}

// A poll ends when its client goes away; the task it would have got goes
// to the next poller at once.
func TestPollClientGone(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		s := newStack(t, b, 30*time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		body, _ := json.Marshal(map[string]any{"worker": "gone", "handlers": []string{"crm.lookup"}, "wait_ms": 3000})
		req, _ := http.NewRequestWithContext(ctx, "POST", s.srv.URL+"/v1/tasks/poll", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+testToken)
		start := time.Now()
		if _, err := http.DefaultClient.Do(req); err == nil {
			t.Fatal("the poll answered before its wait")
		}
		if time.Since(start) > 2*time.Second {
			t.Fatal("slow")
		}
		run, err := s.e.Submit(s.ctx, compile(t, oneTask), map[string]any{"who": "ada"})
		if err != nil {
			t.Fatal(err)
		}
		code, task, _ := s.call(t, "/v1/tasks/poll", map[string]any{"worker": "next", "handlers": []string{"crm.lookup"}, "wait_ms": 3000})
		if code != 200 {
			t.Fatalf("poll after a gone poller: %d (lease 30 s: the task must not wait for one)", code)
		}
		s.call(t, "/v1/tasks/"+task["id"].(string)+"/complete", map[string]any{"lease": task["lease"], "output": map[string]any{"name": "x"}})
		s.wait(t, run)
	})
}

// The client libraries: a workflow whose handlers live in Python (or
// TypeScript) runs to the end against a real server.
func TestPythonClient(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		needClient(t, "python3 is not on PATH (Debian package python3)")
	}
	dir, _ := filepath.Abs("clients/python")
	testClient(t, "py", func(url string, n int) *exec.Cmd {
		return exec.Command(py, filepath.Join(dir, "client_test.py"), url, testToken, strconv.Itoa(n))
	})
}

func TestTypeScriptClient(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		needClient(t, "node is not on PATH")
	}
	dir, _ := filepath.Abs("clients/typescript")
	tsc := filepath.Join(dir, "node_modules", ".bin", "tsc")
	if _, err := os.Stat(tsc); err != nil {
		needClient(t, "the TypeScript client's packages are not installed: (cd server/tasksapi/clients/typescript && npm ci)")
	}
	out := t.TempDir()
	if b, err := exec.Command(tsc, "-p", dir, "--outDir", out).CombinedOutput(); err != nil {
		t.Fatalf("tsc: %v\n%s", err, b)
	}
	testClient(t, "ts", func(url string, n int) *exec.Cmd {
		return exec.Command(node, filepath.Join(out, "client_test.js"), url, testToken, strconv.Itoa(n))
	})
}

// needClient skips a client test whose tools are missing, or fails it
// when WFC_CLIENT_TESTS=1 (.ci/run installs them).
func needClient(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("WFC_CLIENT_TESTS") == "1" {
		t.Fatal(why)
	}
	t.Skip(why)
}

func testClient(t *testing.T, lang string, cmd func(url string, n int) *exec.Cmd) {
	src, err := os.ReadFile("testdata/polyglot.wf")
	if err != nil {
		t.Fatal(err)
	}
	source := strings.ReplaceAll(string(src), "LANG", lang)
	compile(t, source)
	forBackends(t, func(t *testing.T, b backend) {
		s := newStack(t, b, time.Second)
		// Submitted over the API, as a client would.
		code, sub, _ := s.call(t, "/v1/runs", map[string]any{"source": source, "inputs": map[string]any{"name": "Ada"}}, "Authorization", "Bearer "+submitToken)
		run, _ := sub["run_id"].(string)
		if code != http.StatusCreated || run == "" {
			t.Fatalf("submit: %d %v", code, sub)
		}
		// greet, slow, flaky twice, deny: five tasks.
		c := cmd(s.srv.URL, 5)
		var out bytes.Buffer
		c.Stdout, c.Stderr = &out, &out
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		var exited atomic.Bool
		done := make(chan error, 1)
		go func() { done <- c.Wait(); exited.Store(true) }()
		t.Cleanup(func() {
			if !exited.Load() {
				c.Process.Kill()
				<-done
			}
		})
		st := s.wait(t, run)
		want := map[string]any{"attempt": float64(2), "code": lang + ".denied", "greeting": "hello Ada", "key": run + "/greet", "slept": true}
		var got map[string]any
		json.Unmarshal(st.Result, &got)
		if st.State != runtime.RunCompleted || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s %s %s\nclient output:\n%s", st.State, st.Result, st.Error, out.String())
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("client: %v\n%s", err, out.String())
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("the client did not stop after its tasks\n%s", out.String())
		}
	})
}

package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"

	"github.com/wfc-lang/wfc/runtime"
)

// The real redis-server of the tests (started once, on a free loopback
// port, killed by TestMain); every test uses its own key prefix on it.
var realRedis struct {
	once sync.Once
	url  string
	cmd  *exec.Cmd
	dir  string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if realRedis.cmd != nil {
		realRedis.cmd.Process.Kill()
		realRedis.cmd.Wait()
		os.RemoveAll(realRedis.dir)
	}
	os.Exit(code)
}

func redisURL(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("redis-server is not on PATH")
		}
		t.Skip("redis-server is not on PATH")
	}
	realRedis.once.Do(func() {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			realRedis.err = err
			return
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		realRedis.dir, _ = os.MkdirTemp("", "wfc-serve-redis-")
		realRedis.cmd = exec.Command(bin, "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", realRedis.dir)
		if realRedis.err = realRedis.cmd.Start(); realRedis.err != nil {
			return
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		for i := 0; i < 100; i++ {
			if c, err := net.Dial("tcp", addr); err == nil {
				c.Close()
				realRedis.url = "redis://" + addr + "/0"
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		realRedis.err = fmt.Errorf("redis-server did not listen on %s", addr)
	})
	if realRedis.err != nil {
		t.Fatal(realRedis.err)
	}
	return realRedis.url
}

// A backend is the Redis a test runs on.
type backend struct {
	name string
	real bool
}

var backends = []backend{{"miniredis", false}, {"redis", true}}

func forBackends(t *testing.T, f func(t *testing.T, b backend)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			f(t, b)
		})
	}
}

var prefixSeq struct {
	sync.Mutex
	n int
}

// openEngine opens an engine on b with a key prefix of its own: a second
// engine of the same test shares it when given url and prefix.
func openEngine(t testing.TB, b backend, url, prefix string) (*runtime.Engine, string, string) {
	t.Helper()
	if prefix == "" {
		prefixSeq.Lock()
		prefixSeq.n++
		prefix = fmt.Sprintf("srvt%d", prefixSeq.n)
		prefixSeq.Unlock()
	}
	if url == "" && b.real {
		url = redisURL(t)
	}
	e, err := runtime.Open(context.Background(), runtime.Options{RedisURL: url, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if url == "" {
		url = e.EmbeddedURL()
	}
	return e, url, prefix
}

// A testServer is a Server over real HTTP, with workers.
type testServer struct {
	*Server
	eng    *runtime.Engine
	url    string // the Redis URL
	prefix string
	http   *httptest.Server
}

type serverOpt func(*Config)

func startServer(t testing.TB, b backend, opts ...serverOpt) *testServer {
	t.Helper()
	e, url, prefix := openEngine(t, b, "", "")
	return startServerOn(t, e, url, prefix, opts...)
}

func startServerOn(t testing.TB, e *runtime.Engine, url, prefix string, opts ...serverOpt) *testServer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	e.StartWorkers(ctx, 2)
	cfg := Config{Engine: e, Poll: 20 * time.Millisecond, Heartbeat: 100 * time.Millisecond, CompletionKey: bytes.Repeat([]byte("k"), 32)}
	for _, o := range opts {
		o(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(func() {
		s.Shutdown(context.Background())
		hs.Close()
		cancel()
		e.StopWorkers()
	})
	return &testServer{Server: s, eng: e, url: url, prefix: prefix, http: hs}
}

// The OpenAPI validator, built once from the embedded document.
var apiValidator = sync.OnceValues(func() (validator.Validator, error) {
	doc, err := libopenapi.NewDocument(openAPIDoc)
	if err != nil {
		return nil, err
	}
	// Auth is TestAuth's: most tests run a server without tokens.
	v, errs := validator.NewValidator(doc, config.WithoutSecurityValidation())
	if len(errs) > 0 {
		return nil, fmt.Errorf("%v", errs)
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		return nil, fmt.Errorf("openapi.json is not a valid OpenAPI document: %v", verrs)
	}
	return v, nil
})

// A client calls a test server and checks every request (unless it is
// deliberately malformed) and every response against openapi.json.
type client struct {
	t     testing.TB
	base  string
	token string
}

func (ts *testServer) client(t testing.TB, token string) *client {
	return &client{t: t, base: ts.http.URL, token: token}
}

type resp struct {
	status int
	header http.Header
	body   []byte
}

func (r *resp) decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decoding %s: %v", r.body, err)
	}
}

// problem decodes a problem+json response and checks its status.
func (r *resp) problem(t testing.TB, status int) Problem {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("content type %q, want application/problem+json: %s", ct, r.body)
	}
	var p Problem
	r.decode(t, &p)
	if p.Status != status || !strings.HasPrefix(p.Type, problemBase) || p.Title == "" {
		t.Fatalf("bad problem document: %s", r.body)
	}
	return p
}

func (c *client) do(method, path string, body any, hdr map[string]string) *resp {
	c.t.Helper()
	return c.doRaw(method, path, body, hdr, true)
}

// doRaw sends a request; body is a string sent as is, or a value encoded
// as JSON. validReq says the request must fit the document (false for
// the deliberately bad requests of the bad-input tests).
func (c *client) doRaw(method, path string, body any, hdr map[string]string, validReq bool) *resp {
	return c.doMode(method, path, body, hdr, map[bool]checkMode{true: checkAll, false: checkResponse}[validReq])
}

// checkMode says what doMode checks against the document.
type checkMode int

const (
	checkAll      checkMode = iota
	checkResponse           // a deliberately bad request
	checkNothing            // an endpoint the document does not have
)

func (c *client) doMode(method, path string, body any, hdr map[string]string, mode checkMode) *resp {
	c.t.Helper()
	var data []byte
	switch b := body.(type) {
	case nil:
	case string:
		data = []byte(b)
	case []byte:
		data = b
	default:
		var err error
		if data, err = json.Marshal(b); err != nil {
			c.t.Fatal(err)
		}
	}
	req, err := http.NewRequest(method, c.base+path, bytes.NewReader(data))
	if err != nil {
		c.t.Fatal(err)
	}
	if data != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	v, err := apiValidator()
	if err != nil {
		c.t.Fatal(err)
	}
	if mode == checkAll {
		check := req.Clone(context.Background())
		check.Body = io.NopCloser(bytes.NewReader(data))
		if ok, errs := v.ValidateHttpRequest(check); !ok {
			c.t.Fatalf("%s %s: the request does not fit openapi.json: %s", method, path, verrs(errs))
		}
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	check := req.Clone(context.Background())
	check.Body = io.NopCloser(bytes.NewReader(data))
	res.Body = io.NopCloser(bytes.NewReader(out))
	if mode != checkNothing && !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		if ok, errs := v.ValidateHttpResponse(check, res); !ok {
			c.t.Fatalf("%s %s: the response (%d %s) does not fit openapi.json: %s", method, path, res.StatusCode, out, verrs(errs))
		}
	}
	return &resp{status: res.StatusCode, header: res.Header, body: out}
}

func verrs(errs any) string {
	b, _ := json.MarshalIndent(errs, "", " ")
	return string(b)
}

// waitRun polls a run until it is done.
func (c *client) waitRun(run string) *runtime.Status {
	c.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		r := c.do("GET", "/v1/runs/"+run, nil, nil)
		if r.status != 200 {
			c.t.Fatalf("status of %s: %d %s", run, r.status, r.body)
		}
		var st runtime.Status
		r.decode(c.t, &st)
		if st.Done() {
			return &st
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.t.Fatalf("run %s did not end", run)
	return nil
}

// waitNode polls a run until execution x is in state.
func (c *client) waitNode(run, x, state string) *runtime.Status {
	c.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		r := c.do("GET", "/v1/runs/"+run, nil, nil)
		var st runtime.Status
		r.decode(c.t, &st)
		if ns := st.Nodes[x]; ns != nil && ns.State == state {
			return &st
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.t.Fatalf("execution %s of run %s did not reach %s", x, run, state)
	return nil
}

// writeTokens writes a token file and returns its path.
func writeTokens(t testing.TB, dir, text string) string {
	t.Helper()
	p := filepath.Join(dir, "tokens")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

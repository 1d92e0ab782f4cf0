package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/runtime/handlers"
	"github.com/wfc-lang/wfc/runtime/internal/redistest"
)

// The real redis-server shared by the tests of this package; every test
// uses its own key prefix on it.
var shared struct {
	once sync.Once
	srv  *redistest.Server
	dir  string
	err  error
}

var prefixSeq atomic.Int64

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.srv != nil {
		shared.srv.Kill()
		os.RemoveAll(shared.dir)
	}
	stopSharedCluster()
	if testworkerOnce.path != "" {
		os.RemoveAll(filepath.Dir(testworkerOnce.path))
	}
	os.Exit(code)
}

func sharedRedis(t testing.TB) string {
	t.Helper()
	redistest.Require(t)
	shared.once.Do(func() {
		shared.dir, shared.err = os.MkdirTemp("", "wfc-redis-")
		if shared.err == nil {
			shared.srv, shared.err = redistest.New(shared.dir, redistest.Options{})
		}
	})
	if shared.err != nil {
		t.Fatalf("starting redis-server: %v", shared.err)
	}
	return shared.srv.URL()
}

// A backend is a Redis the scenarios run on: the embedded server
// (miniredis, exactly what `wfc run` uses) or a real redis-server.
type backend struct {
	name string
	url  func(t testing.TB) string // "" means embedded
}

var backends = []backend{
	{"miniredis", func(testing.TB) string { return "" }},
	{"redis", sharedRedis},
}

// forBackends runs f once per backend, as parallel subtests.
func forBackends(t *testing.T, f func(t *testing.T, b backend)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			f(t, b)
		})
	}
}

// serverAddr returns the host:port of b's server: the shared redis-server,
// or for the embedded backend a miniredis of the test's own (an engine
// would start its own otherwise).
func serverAddr(t testing.TB, b backend) string {
	t.Helper()
	u := b.url(t)
	if u == "" {
		return miniredis.RunT(t).Addr()
	}
	o, err := redis.ParseURL(u)
	if err != nil {
		t.Fatal(err)
	}
	return o.Addr
}

// behindProxy starts a proxy to the Redis at addr, closed when the test
// ends, and returns it with a backend (named name) that goes through it.
// addr is host:port or a redis:// URL (whose password the backend keeps).
func behindProxy(t testing.TB, name, addr string) (*redistest.Proxy, backend) {
	t.Helper()
	pw := ""
	if strings.HasPrefix(addr, "redis://") {
		o, err := redis.ParseURL(addr)
		if err != nil {
			t.Fatal(err)
		}
		addr, pw = o.Addr, o.Password
	}
	p, err := redistest.NewProxy(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p, backend{name, func(testing.TB) string { return "redis://:" + pw + "@" + p.Addr() }}
}

// engineURL is a URL other clients of the test reach e's server with: the
// embedded one's carries its password.
func engineURL(e *Engine) string {
	if u := e.EmbeddedURL(); u != "" {
		return u
	}
	return "redis://" + e.RedisAddr()
}

func testLogger(t testing.TB) *slog.Logger {
	if testing.Verbose() && os.Getenv("WFC_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// openEngine opens an engine on the backend with a key prefix of its own.
func openEngine(t testing.TB, b backend, opts Options) *Engine {
	t.Helper()
	opts.RedisURL = b.url(t)
	if opts.Prefix == "" {
		opts.Prefix = fmt.Sprintf("t%d", prefixSeq.Add(1))
	}
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	e, err := Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// fastWorker are worker options that make the tests quick.
func fastWorker(reg *handlers.Registry) WorkerOptions {
	return WorkerOptions{
		Handlers: reg, Concurrency: 8, Block: 200 * time.Millisecond, TimerInterval: 20 * time.Millisecond,
		VisibilityTimeout: 1500 * time.Millisecond, ClaimInterval: 200 * time.Millisecond,
		HeartbeatInterval: 300 * time.Millisecond, ShutdownGrace: 2 * time.Second,
	}
}

// env is one test's engine, handlers and bookkeeping of handler calls.
type env struct {
	t   *testing.T
	e   *Engine
	reg *handlers.Registry
	ctx context.Context

	mu      sync.Mutex
	calls   map[string]int         // handler calls by idempotency key
	times   map[string][]time.Time // call times by idempotency key
	order   []string               // "handler:node" in call order (record handler)
	started chan string            // idempotency keys of block calls that started
	unblock chan struct{}
	barrier *barrier
}

type barrier struct {
	n    int
	mu   sync.Mutex
	seen int
	open chan struct{}
}

func (b *barrier) wait(ctx context.Context) error {
	b.mu.Lock()
	b.seen++
	if b.seen == b.n {
		close(b.open)
	}
	b.mu.Unlock()
	select {
	case <-b.open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func newEnv(t *testing.T, b backend, opts ...Options) *env {
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	v := &env{
		t: t, e: openEngine(t, b, o), ctx: ctx,
		calls: map[string]int{}, times: map[string][]time.Time{},
		started: make(chan string, 1000), unblock: make(chan struct{}),
	}
	v.reg = handlers.NewRegistry(handlers.Options{})
	v.reg.RegisterFunc("count", func(ctx context.Context, req handlers.Request) (json.RawMessage, error) {
		v.note(req)
		return req.Config, nil
	})
	v.reg.RegisterFunc("record", func(ctx context.Context, req handlers.Request) (json.RawMessage, error) {
		v.note(req)
		v.mu.Lock()
		kind := "run"
		if req.Compensation {
			kind = "compensate"
		}
		v.order = append(v.order, kind+":"+req.Node)
		v.mu.Unlock()
		return req.Config, nil
	})
	// flaky fails until the attempt number exceeds config.fails.
	v.reg.RegisterFunc("flaky", func(ctx context.Context, req handlers.Request) (json.RawMessage, error) {
		v.note(req)
		var c struct {
			Fails int `json:"fails"`
		}
		json.Unmarshal(req.Config, &c)
		if req.Attempt <= c.Fails {
			return nil, fmt.Errorf("flaky: attempt %d fails", req.Attempt)
		}
		return json.RawMessage(fmt.Sprintf(`{"attempt":%d}`, req.Attempt)), nil
	})
	v.reg.RegisterFunc("block", func(ctx context.Context, req handlers.Request) (json.RawMessage, error) {
		v.note(req)
		v.started <- req.IdempotencyKey
		select {
		case <-v.unblock:
			return req.Config, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	v.reg.RegisterFunc("barrier", func(ctx context.Context, req handlers.Request) (json.RawMessage, error) {
		v.note(req)
		if err := v.barrier.wait(ctx); err != nil {
			return nil, err
		}
		return req.Config, nil
	})
	v.reg.RegisterFunc("perm", func(ctx context.Context, req handlers.Request) (json.RawMessage, error) {
		v.note(req)
		return nil, handlers.Permanentf("perm: permanent failure")
	})
	v.reg.RegisterFunc("boom", func(ctx context.Context, req handlers.Request) (json.RawMessage, error) {
		v.note(req)
		panic("boom")
	})
	v.reg.RegisterFunc("badjson", func(ctx context.Context, req handlers.Request) (json.RawMessage, error) {
		v.note(req)
		return json.RawMessage(`{"a":`), nil
	})
	return v
}

func (v *env) note(req handlers.Request) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.calls[req.IdempotencyKey]++
	v.times[req.IdempotencyKey] = append(v.times[req.IdempotencyKey], time.Now())
}

// waitStarted waits for a block handler to start and returns its
// idempotency key.
func (v *env) waitStarted() string {
	v.t.Helper()
	select {
	case k := <-v.started:
		return k
	case <-time.After(20 * time.Second):
		v.t.Fatal("no block handler started")
		return ""
	}
}

func (v *env) callCount(key string) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.calls[key]
}

func (v *env) worker(mod ...func(*WorkerOptions)) *Worker {
	o := fastWorker(v.reg)
	for _, m := range mod {
		m(&o)
	}
	return v.e.StartWorkers(v.ctx, o.Concurrency, o)
}

// crashingWorker starts a worker that dies as a crashed process would
// (crash: it acknowledges and releases nothing when stopped), under
// consumer name consumer if given; kill stops it and returns once it has.
func (v *env) crashingWorker(consumer string) (kill func()) {
	o := fastWorker(v.reg)
	o.crash = true
	if consumer != "" {
		o.Consumer = consumer
	}
	w := v.e.NewWorker(o)
	ctx, cancel := context.WithCancel(v.ctx)
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	return func() { cancel(); <-done }
}

func (v *env) submit(w *ir.Workflow, inputs map[string]any) string {
	v.t.Helper()
	id, err := v.e.Submit(v.ctx, w, inputs)
	if err != nil {
		v.t.Fatalf("submit: %v", err)
	}
	return id
}

// wait waits for the run to be done and checks the invariants.
func (v *env) wait(run string) *Status {
	v.t.Helper()
	ctx, cancel := context.WithTimeout(v.ctx, 30*time.Second)
	defer cancel()
	st, err := v.e.Wait(ctx, run)
	if err != nil {
		cur, _ := v.e.Status(context.Background(), run)
		v.t.Fatalf("wait %s: %v\nstatus: %s", run, err, dump(cur))
	}
	v.check(run)
	return st
}

// run submits, waits and checks.
func (v *env) run(w *ir.Workflow, inputs map[string]any) *Status {
	v.t.Helper()
	return v.wait(v.submit(w, inputs))
}

func dump(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}

// check verifies the invariants of a run at rest (I1, I3, I7): replaying
// the event log rebuilds the live status; each execution was queued at
// most once and reached at most one terminal state per generation; a
// completed run has no outstanding work.
func (v *env) check(run string) {
	v.t.Helper()
	ctx := context.Background()
	st, err := v.e.Status(ctx, run)
	if err != nil {
		v.t.Fatal(err)
	}
	evs, err := v.e.Events(ctx, run)
	if err != nil {
		v.t.Fatal(err)
	}
	rep, err := Replay(run, evs)
	if err != nil {
		v.t.Fatal(err)
	}
	if d := Compare(st, rep); len(d) > 0 {
		v.t.Errorf("replayed status differs from the live one:\n\t%s", strings.Join(d, "\n\t"))
	}
	gen := 0
	queued, terminal := map[string]int{}, map[string]int{}
	for _, ev := range evs {
		key := ev.Fields["x"] + "#" + strconv.Itoa(gen)
		for _, x := range ev.Queued() {
			k := x + "#" + strconv.Itoa(gen)
			if queued[k]++; queued[k] > 1 {
				v.t.Errorf("%s queued %d times in generation %d", x, queued[k], gen)
			}
		}
		switch ev.Type {
		case "run.retried":
			gen++
		case "node.completed", "node.skipped", "node.failed":
			terminal[key]++
			if terminal[key] > 1 {
				v.t.Errorf("%s reached a terminal state %d times in generation %d", ev.Fields["x"], terminal[key], gen)
			}
		}
	}
	if st.State == RunCompleted {
		if st.Counter != 0 {
			v.t.Errorf("completed run has counter %d", st.Counter)
		}
		for x, ns := range st.Nodes {
			switch ns.State {
			case NodeCompleted, NodeSkipped, NodeFailed, NodeCancelled:
			default:
				v.t.Errorf("completed run has node %s in state %s", x, ns.State)
			}
		}
	}
}

// pending returns the number of unacknowledged messages on the engine's
// queues (all shards, the given queues; by default every queue stream).
func pending(t testing.TB, e *Engine, queues ...string) int64 {
	t.Helper()
	if len(queues) == 0 {
		for s := 0; s < e.st.ks.shards; s++ {
			keys, err := e.st.rdb.Keys(context.Background(), e.st.ks.stream(s, "*")).Result()
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range keys {
				if q := (&Worker{}).queueOf(k); !slices.Contains(queues, q) {
					queues = append(queues, q)
				}
			}
		}
	}
	var n int64
	for s := 0; s < e.st.ks.shards; s++ {
		for _, q := range queues {
			p, err := e.st.rdb.XPending(context.Background(), e.st.ks.stream(s, q), Group).Result()
			if err != nil {
				if strings.Contains(err.Error(), "NOGROUP") || errors.Is(err, redis.Nil) {
					continue
				}
				t.Fatal(err)
			}
			n += p.Count
		}
	}
	return n
}

// waitNoPending waits until no message is pending (I6).
func waitNoPending(t testing.TB, e *Engine, queues ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := pending(t, e, queues...)
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d messages still pending", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func nodeState(st *Status, x string) string {
	if ns := st.Nodes[x]; ns != nil {
		return ns.State
	}
	return "absent"
}

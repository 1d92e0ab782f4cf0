package runtime

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wfc-lang/wfc/runtime/internal/redistest"
)

func TestParseClusterURL(t *testing.T) {
	for _, c := range []struct {
		url, addrs, user, pass string
		tls                    bool
		dial                   time.Duration
	}{
		{url: "redis+cluster://10.0.0.1:7000", addrs: "10.0.0.1:7000"},
		{url: "redis+cluster://a:7000,b:7001,c:7002/", addrs: "a:7000 b:7001 c:7002"},
		{url: "redis+cluster://u:p@a:7000,b:7001/0?dial_timeout=3s", addrs: "a:7000 b:7001", user: "u", pass: "p", dial: 3 * time.Second},
		{url: "rediss+cluster://a:7000", addrs: "a:7000", tls: true},
	} {
		o, err := parseClusterURL(c.url)
		if err != nil {
			t.Errorf("%s: %v", c.url, err)
			continue
		}
		if got := strings.Join(o.Addrs, " "); got != c.addrs {
			t.Errorf("%s: addrs %q, want %q", c.url, got, c.addrs)
		}
		if o.Username != c.user || o.Password != c.pass || (o.TLSConfig != nil) != c.tls || o.DialTimeout != c.dial {
			t.Errorf("%s: user %q pass %q tls %v dial %v", c.url, o.Username, o.Password, o.TLSConfig != nil, o.DialTimeout)
		}
	}
	for _, bad := range []string{"redis+cluster://", "redis+cluster://a:1/3", "redis+cluster://a:1?nosuch=1"} {
		if _, err := parseClusterURL(bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
	if !IsClusterURL("redis+cluster://a:1") || IsClusterURL("redis://a:1") {
		t.Error("IsClusterURL")
	}
	_, err := Open(context.Background(), Options{RedisURL: "redis+cluster://a:1/2"})
	if err == nil || !strings.Contains(err.Error(), "only database 0") {
		t.Errorf("Open with a database on a cluster: %v", err)
	}
}

// With several shards, each shard's reader holds only its share of the
// worker's slots while it blocks, so an idle shard does not delay the
// others by a blocking read (default Block, 1 s) per hop.
func TestShardReadersShareSlots(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b, Options{Shards: 4})
		w := v.e.StartWorkers(v.ctx, 4, WorkerOptions{Handlers: v.reg})
		if w.opts.Batch != 1 {
			t.Errorf("batch %d, want 1", w.opts.Batch)
		}
		flow := build(t, wfSpec{nodes: []*nodeSpec{
			task("a", "noop"), task("b", "noop", after("a")), task("c", "noop", after("b")),
			task("d", "noop", after("c")), task("e", "noop", after("d")),
		}})
		start := time.Now()
		for i := 0; i < 4; i++ {
			if st := v.run(flow, nil); st.State != RunCompleted {
				t.Fatalf("state %s", st.State)
			}
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("4 runs of a 5-node chain took %v", d)
		}
	})
}

// go-redis's own log lines (here: its failed dials) go to the engine's
// logger at debug level, not to standard error in go-redis's format.
func TestRedisLogsGoToTheEngineLogger(t *testing.T) {
	// A port nothing listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	var buf syncBuffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	_, err = Open(context.Background(), Options{RedisURL: "redis://" + addr, ConnectTimeout: 1500 * time.Millisecond, Logger: log})
	if err == nil || !strings.Contains(err.Error(), "cannot reach Redis at "+addr) {
		t.Fatalf("open: %v", err)
	}
	if out := buf.String(); !strings.Contains(out, "level=DEBUG") || !strings.Contains(out, "go-redis: ") || !strings.Contains(out, addr) {
		t.Errorf("engine log:\n%s", out)
	}
}

// syncBuffer is a bytes.Buffer safe for go-redis's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A pooled connection the server closed while it lay idle (CLIENT KILL,
// a timeout, a restart) is found closed before a command is written to it
// (lazyCheckDialer): the command goes on a new connection and does not
// fail. And the check is made only after an idle spell: a connection in
// constant use is never checked.
func TestIdleConnectionKilled(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ctx := context.Background()
	var conns []*lazyCheckConn
	var mu sync.Mutex
	dial := lazyCheckDialer(redis.NewDialer(&redis.Options{DialTimeout: 5 * time.Second}))
	rdb := redis.NewClient(&redis.Options{
		Addr: srv.Addr(), PoolSize: 1,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dial(ctx, network, addr)
			if err == nil {
				mu.Lock()
				conns = append(conns, c.(*lazyCheckConn))
				mu.Unlock()
			}
			return c, err
		},
	})
	defer rdb.Close()
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer admin.Close()
	for range 100 {
		if err := rdb.Incr(ctx, "n").Err(); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	if len(conns) != 1 || conns[0].checks.Load() != 0 {
		t.Fatalf("%d connections, %d checks: want 1 connection, never checked while in use", len(conns), conns[0].checks.Load())
	}
	// go-redis checks through SyscallConn on every use: in use, that
	// check makes no syscall and does not call go-redis's peek.
	raw, err := net.Conn(conns[0]).(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.Read(func(uintptr) bool { t.Error("the check peeked at a connection in use"); return true }); err != nil || conns[0].checks.Load() != 0 {
		t.Fatalf("check of a connection in use: %v, %d checks", err, conns[0].checks.Load())
	}
	mu.Unlock()
	for round := range 3 {
		id, err := rdb.ClientID(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		if err := admin.ClientKillByFilter(ctx, "ID", strconv.FormatInt(id, 10)).Err(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(idleCheckAfter + 50*time.Millisecond)
		// INCR is not idempotent: it must be applied once, on a new
		// connection (go-redis retries the Write that failed before it
		// sent anything).
		if err := rdb.Incr(ctx, "n").Err(); err != nil {
			t.Fatalf("round %d: a command after CLIENT KILL: %v", round, err)
		}
	}
	if n, _ := admin.Get(ctx, "n").Int(); n != 103 {
		t.Errorf("n = %d, want 103 (each INCR applied once)", n)
	}
	mu.Lock()
	if len(conns) != 4 {
		t.Errorf("%d connections dialled, want 4 (one per kill)", len(conns))
	}
	for i, c := range conns[:min(3, len(conns))] {
		// Found closed by the check, before INCR was written to it.
		if c.closed.Load() != 1 {
			t.Errorf("connection %d: found closed by %d of its %d checks, want 1", i, c.closed.Load(), c.checks.Load())
		}
	}
	mu.Unlock()
	// Killed while in use (no idle spell, so not checked): the next
	// command may fail, once (go-redis retries an EOF, not a reset); the
	// one after goes on a new connection.
	want := 103
	for round := range 3 {
		id, err := rdb.ClientID(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		if err := admin.ClientKillByFilter(ctx, "ID", strconv.FormatInt(id, 10)).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.Incr(ctx, "n").Err(); err == nil {
			want++
		} else {
			t.Logf("round %d: the command right after CLIENT KILL failed: %v", round, err)
		}
		if err := rdb.Incr(ctx, "n").Err(); err != nil {
			t.Fatalf("round %d: the second command after CLIENT KILL: %v", round, err)
		}
		want++
	}
	if n, _ := admin.Get(ctx, "n").Int(); n != want {
		t.Errorf("n = %d, want %d", n, want)
	}
}

// After a restart (every connection killed), a pool holding many idle
// connections hands out a live one: its check drops each dead one without
// spending a retry of the command (MaxRetries 0 here), where a check in
// Write alone failed the command at the first dead one.
func TestIdlePoolAllKilled(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ctx := context.Background()
	dial := lazyCheckDialer(redis.NewDialer(&redis.Options{DialTimeout: 5 * time.Second}))
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 8, MaxRetries: -1, Dialer: dial})
	defer rdb.Close()
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer admin.Close()
	for round := range 3 {
		// Eight connections in the pool: eight blocking calls at once.
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := rdb.BLPop(ctx, 50*time.Millisecond, "nothing-"+strconv.Itoa(i)).Err(); err != nil && err != redis.Nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if n := rdb.PoolStats().IdleConns; n < 4 {
			t.Fatalf("round %d: %d idle connections, want at least 4", round, n)
		}
		if err := admin.ClientKillByFilter(ctx, "TYPE", "normal", "SKIPME", "yes").Err(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(idleCheckAfter + 50*time.Millisecond)
		t0 := time.Now()
		if err := rdb.Incr(ctx, "n").Err(); err != nil {
			t.Fatalf("round %d: the first command after every connection was killed: %v", round, err)
		}
		t.Logf("round %d: %v", round, time.Since(t0))
	}
	if n, _ := admin.Get(ctx, "n").Int(); n != 3 {
		t.Errorf("n = %d, want 3", n)
	}
}

// A worker whose connections the server closes, again and again, while
// runs go (CLIENT KILL of every client but the killer's, idle or not, and
// a restart of the server), loses no work: every run completes, each task
// handled, whatever failed once being retried (go-redis on a new
// connection, or the worker: a message left pending is claimed again).
func TestWorkerSurvivesKilledConnections(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{AOF: true})
	b := backend{"redis", func(testing.TB) string { return srv.URL() }}
	v := newEnv(t, b)
	v.worker()
	flow := build(t, wfSpec{nodes: []*nodeSpec{
		task("a", "count"), task("b", "count", after("a")), task("c", "count", after("a")), task("d", "count", after("b", "c")),
	}})
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer admin.Close()
	stop := make(chan struct{})
	killed := make(chan int)
	go func() {
		n := 0
		defer func() { killed <- n }()
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(20+n%5*40) * time.Millisecond):
			}
			// Idle spells both shorter and longer than idleCheckAfter.
			if k, err := admin.ClientKillByFilter(v.ctx, "TYPE", "normal", "SKIPME", "yes").Result(); err == nil {
				n += int(k)
			}
		}
	}()
	var runs []string
	for i := range 60 {
		// Submit is idempotent under a run id: retried until it goes.
		id := fmt.Sprintf("killed-%d", i)
		for try := 0; ; try++ {
			_, err := v.e.Submit(v.ctx, flow, nil, WithRunID(id))
			if err == nil {
				break
			}
			if try == 50 {
				t.Fatalf("submit %s: %v", id, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		runs = append(runs, id)
		if i == 30 {
			if err := srv.Restart(); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, run := range runs {
		if st := v.wait(run); st.State != RunCompleted {
			t.Fatalf("run %s: %s %s", run, st.State, st.Error)
		}
		v.check(run)
	}
	close(stop)
	if n := <-killed; n == 0 {
		t.Error("no connection was killed")
	}
}

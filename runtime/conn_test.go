package runtime

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
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

package runtime

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wfc-lang/wfc/ir"
)

// TestLimitEmbeddedRedisRequiresAuth: the embedded server of wfc run
// listens on a loopback port; another process of the machine that
// connects without its random password gets nothing (issue #14, item 7:
// it could submit exec runs to this process's workers).
func TestLimitEmbeddedRedisRequiresAuth(t *testing.T) {
	ctx := context.Background()
	e, err := Open(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	addr := e.mini.Addr()
	if strings.Contains(e.RedisAddr(), "@") || strings.Contains(e.RedisAddr(), e.mini.Addr()+":") {
		t.Errorf("RedisAddr %q shows the password", e.RedisAddr())
	}
	for _, pw := range []string{"", "guess"} {
		c := redis.NewClient(&redis.Options{Addr: addr, Password: pw, MaxRetries: -1})
		err := c.Ping(ctx).Err()
		c.Close()
		if err == nil {
			t.Errorf("PING with password %q was answered", pw)
		}
		// Nor can a client read or write anything.
		c = redis.NewClient(&redis.Options{Addr: addr, Password: pw, MaxRetries: -1})
		if err := c.Set(ctx, "x", "1", 0).Err(); err == nil {
			t.Errorf("SET with password %q worked", pw)
		}
		c.Close()
	}
	// The engine itself works.
	if _, err := e.Status(ctx, "nope"); err == nil || !strings.Contains(err.Error(), "unknown") && !strings.Contains(err.Error(), "not") {
		t.Errorf("status of an unknown run: %v", err)
	}
}

// TestLimitWideFanOutAndEntries: a node with 3,000 successors and a run
// with 3,000 entry nodes run (issue #14 item 1: the scripts unpacked
// every write into one call, over Lua's limit of about 8,000 values, and
// the run then hung until its messages were declared poison).
func TestLimitWideFanOutAndEntries(t *testing.T) {
	if testing.Short() {
		t.Skip("3,000-node runs")
	}
	const n = 3000
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker(func(o *WorkerOptions) { o.Concurrency = 32 })
		fan := []*nodeSpec{task("root", "noop")}
		entries := []*nodeSpec{}
		for i := range n {
			fan = append(fan, task(fmt.Sprintf("leaf%d", i), "noop", after("root")))
			entries = append(entries, task(fmt.Sprintf("entry%d", i), "noop"))
		}
		for name, nodes := range map[string][]*nodeSpec{"fan-out": fan, "entries": entries} {
			w := build(t, wfSpec{name: "wide", set: ir.Settings{MaxFanout: 5000}, nodes: nodes})
			st := v.run(w, nil)
			done := 0
			for _, ns := range st.Nodes {
				if ns.State == NodeCompleted {
					done++
				}
			}
			if st.State != RunCompleted || done != len(nodes) {
				t.Errorf("%s: %s with %d of %d nodes completed (%s)", name, st.State, done, len(nodes), st.Error)
			}
		}
	})
}

// TestLimitBadQueueAndShards: a queue name with a comma (a run keeps its
// queues comma-separated: such a run hung) and a negative shard count are
// refused when the engine opens (issue #14 item 15).
func TestLimitBadQueueAndShards(t *testing.T) {
	ctx := context.Background()
	for _, o := range []Options{
		{Queues: map[string]string{"http": "a,b"}},
		{Queues: map[string]string{"http": "has space"}},
		{Queues: map[string]string{"http": strings.Repeat("q", 65)}},
		{Shards: -1},
	} {
		if e, err := Open(ctx, o); err == nil {
			e.Close()
			t.Errorf("Open(%+v) accepted it", o)
		}
	}
	e, err := Open(ctx, Options{Queues: map[string]string{"http": "io.http-1:eu"}})
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
}

// TestLimitValueSizes: a run's inputs and a node's output are bounded
// (1 MiB by default) and inputs nest at most 64 deep, checked before
// anything is written (issue #14 items 5 and 6: cel tasks doubling a 1 MB
// string killed the worker; inputs nested 9,999 deep were accepted).
func TestLimitValueSizes(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		w := build(t, wfSpec{
			inputs:  []ir.Input{input("s", ir.KindString), {Name: "deep", Type: ir.Type{Kind: ir.KindAny}}},
			outputs: []ir.Output{output("n", "size(b.output.s)")},
			nodes: []*nodeSpec{
				task("a", "cel", with("s", cexpr("input.s + input.s"))),
				task("b", "cel", after("a"), with("s", cexpr("a.output.s + a.output.s"))),
			},
		})
		if _, err := v.e.Submit(v.ctx, w, map[string]any{"s": strings.Repeat("x", 2<<20)}); err == nil || !strings.Contains(err.Error(), "over the limit of 1048576") {
			t.Errorf("a 2 MiB input: %v", err)
		}
		var deep any = 1
		for range 100 {
			deep = []any{deep}
		}
		if _, err := v.e.Submit(v.ctx, w, map[string]any{"s": "x", "deep": deep}); err == nil || !strings.Contains(err.Error(), "nested 100 deep") {
			t.Errorf("an input nested 100 deep: %v", err)
		}
		// 300 KB doubled fits; doubled again it does not: b fails, before
		// its output is stored.
		st := v.run(w, map[string]any{"s": strings.Repeat("x", 300_000)})
		if n := st.Nodes["b"]; st.State != RunFailed || n == nil || n.Code != "output" || !strings.Contains(n.Error, "over the limit of 1048576") || len(n.Output) != 0 {
			t.Errorf("doubling: %s %q %+v", st.State, st.Error, n)
		}
		if st := v.run(w, map[string]any{"s": strings.Repeat("x", 100_000)}); st.State != RunCompleted || string(st.Result) != `{"n":400000}` {
			t.Errorf("small: %s %s %s", st.State, st.Result, st.Error)
		}
	})
}

// TestLimitSubmitAfterDataLoss: after Redis lost its data (a restart
// without persistence), a long-running process submits again what it had
// stored before, and the run completes (issue #14 item 11: every later
// submit failed with "graph ... is not stored" until a restart).
func TestLimitSubmitAfterDataLoss(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		w := build(t, wfSpec{nodes: []*nodeSpec{task("a", "noop"), task("b", "noop", after("a"))}})
		if st := v.run(w, nil); st.State != RunCompleted {
			t.Fatalf("first run: %s", st.State)
		}
		// This engine's keys go (the shared server holds other tests').
		iter := v.e.st.rdb.Scan(v.ctx, 0, v.e.opts.Prefix+":*", 1000).Iterator()
		n := 0
		for iter.Next(v.ctx) {
			if err := v.e.st.rdb.Del(v.ctx, iter.Val()).Err(); err != nil {
				t.Fatal(err)
			}
			n++
		}
		if err := iter.Err(); err != nil || n == 0 {
			t.Fatalf("deleting the keys: %v (%d deleted)", err, n)
		}
		if st := v.run(w, nil); st.State != RunCompleted {
			t.Fatalf("after the data loss: %s %s", st.State, st.Error)
		}
	})
}

// TestLimitConnectErrorNamesTheCause: with Redis down, Open reports why
// ("connection refused"), not only that its time ran out (issue #14 item
// 15).
func TestLimitConnectErrorNamesTheCause(t *testing.T) {
	_, err := Open(context.Background(), Options{RedisURL: "redis://127.0.0.1:1", ConnectTimeout: 300 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("Open: %v, want connection refused", err)
	}
}

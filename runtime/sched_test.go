package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/runtime/handlers"
)

// Scheduling (docs/runtime.md, "Scheduling"): a worker takes the work of
// runs in flight before it admits new runs.

// forSchedBackends runs f on both backends and on the Redis Cluster.
func forSchedBackends(t *testing.T, f func(t *testing.T, b backend, o Options)) {
	forBackends(t, func(t *testing.T, b backend) { f(t, b, Options{Queues: sameQueue}) })
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		f(t, clusterBackend, Options{Queues: sameQueue, Shards: 6})
	})
}

// registerOrder registers handler "ord", which records "run:node" in call
// order.
func registerOrder(v *env) func() []string {
	var mu sync.Mutex
	var order []string
	v.reg.RegisterFunc("ord", func(ctx context.Context, req handlers.Request) (json.RawMessage, error) {
		v.note(req)
		mu.Lock()
		order = append(order, req.RunID+":"+req.Node)
		mu.Unlock()
		return json.RawMessage(`{}`), nil
	})
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), order...)
	}
}

// sameQueue routes the tests' handlers to one queue, so that the order
// of their tokens is one stream's.
var sameQueue = map[string]string{"block": "work", "ord": "work", "mark": "work", "spin": "work", "count": "work"}

// waitingEntries returns how many entry tokens wait in the entry streams
// of the control queue and queue work (every shard).
func waitingEntries(t testing.TB, e *Engine) int64 {
	t.Helper()
	var n int64
	for s := range max(e.st.ks.shards, 1) {
		for _, q := range []string{ControlQueue, "work"} {
			c, err := e.st.rdb.XLen(context.Background(), e.st.ks.entries(s, q)).Result()
			if err != nil {
				t.Fatal(err)
			}
			n += c
		}
	}
	return n
}

// admitEntries moves the entry tokens waiting in queue q's entry stream
// into its stream, as a worker's take does, and returns them as read
// (pending for consumer "test").
func admitEntries(t testing.TB, e *Engine, shard int, q string) []redis.XMessage {
	t.Helper()
	if err := e.st.ensureGroup(context.Background(), e.st.ks.stream(shard, q)); err != nil {
		t.Fatal(err)
	}
	w := &Worker{st: e.st, ks: e.st.ks, opts: WorkerOptions{AdmitAge: time.Second}}
	res, _, err := w.take(context.Background(), e.st.rdb, shard, e.st.ks.takeKeys(shard, []string{q}), []string{q}, "test", 1000, 1000, false)
	if err != nil {
		t.Fatal(err)
	}
	var out []redis.XMessage
	for _, s := range res {
		out = append(out, s.Messages...)
	}
	return out
}

// TestInFlightBeforeNew: with a backlog of new runs waiting and one run in
// flight, the run in flight's next nodes are taken before any new run
// starts. With one slot, the order of handler calls shows it; a FIFO
// queue would run every new run's first node before the run's second.
func TestInFlightBeforeNew(t *testing.T) {
	forSchedBackends(t, func(t *testing.T, b backend, o Options) {
		v := newEnv(t, b, o)
		order := registerOrder(v)
		v.worker(func(o *WorkerOptions) { o.Concurrency = 1 })
		first := build(t, wfSpec{nodes: []*nodeSpec{
			task("a", "block"), task("b", "ord", after("a")), task("c", "ord", after("b")),
		}})
		r0 := v.submit(first, nil)
		v.waitStarted()
		next := build(t, wfSpec{nodes: []*nodeSpec{task("x", "ord"), task("y", "ord", after("x"))}})
		const n = 20
		var news []string
		for range n {
			news = append(news, v.submit(next, nil))
		}
		// With shards, each shard's reader granted credits when it found
		// nothing, which new runs of those shards spend: fewer wait.
		if w := waitingEntries(t, v.e); w != n && v.e.st.ks.shards <= 1 || w == 0 {
			t.Errorf("%d entry tokens wait for admission, want %d", w, n)
		}
		close(v.unblock)
		if st := v.wait(r0); st.State != RunCompleted {
			t.Fatalf("run %s", st.State)
		}
		for _, r := range news {
			if st := v.wait(r); st.State != RunCompleted {
				t.Fatalf("new run %s", st.State)
			}
		}
		got := order()
		if len(got) != 2+2*n {
			t.Fatalf("%d calls: %v", len(got), got)
		}
		if got[0] != r0+":b" || got[1] != r0+":c" {
			t.Errorf("the run in flight did not go first: %v", got[:4])
		}
		waitNoPending(t, v.e)
		if w := waitingEntries(t, v.e); w != 0 {
			t.Errorf("%d entry tokens left", w)
		}
	})
}

// TestNewRunsNotStarved: while a run's continuations keep the only slot
// busy (a loop that goes on until a new run has started), a new run is
// admitted once its entry token waited AdmitAge; without that it would
// wait for the loop's last iteration.
func TestNewRunsNotStarved(t *testing.T) {
	forSchedBackends(t, func(t *testing.T, b backend, o Options) {
		// One shard: with one slot, a busy shard's completions keep it,
		// and another shard's reader never gets it (Concurrency should be
		// at least Shards), admission or not.
		o.Shards = 1
		v := newEnv(t, b, o)
		order := registerOrder(v)
		started := make(chan struct{})
		var once sync.Once
		v.reg.RegisterFunc("mark", func(ctx context.Context, req handlers.Request) (json.RawMessage, error) {
			once.Do(func() { close(started) })
			return json.RawMessage(`{}`), nil
		})
		spins := 0
		v.reg.RegisterFunc("spin", func(ctx context.Context, req handlers.Request) (json.RawMessage, error) {
			spins++ // one slot: calls do not overlap
			select {
			case <-started:
				return json.RawMessage(`{"go":false}`), nil
			default:
				return json.RawMessage(`{"go":true}`), nil
			}
		})
		v.worker(func(o *WorkerOptions) { o.Concurrency = 1; o.AdmitAge = time.Millisecond })
		const most = 3000
		loopw := build(t, wfSpec{
			outputs: []ir.Output{output("exhausted", "has(dlq.output)")},
			set:     ir.Settings{MaxHops: 10 * most},
			nodes: []*nodeSpec{
				task("first", "block"),
				task("spin", "spin", after("first"), loop("output.go", most, "", "dlq")),
				task("dlq", "noop"),
			},
		})
		lr := v.submit(loopw, nil)
		v.waitStarted()
		nr := v.submit(build(t, wfSpec{nodes: []*nodeSpec{task("m", "mark"), task("n", "ord", after("m"))}}), nil)
		if w := waitingEntries(t, v.e); w != 1 {
			t.Errorf("%d entry tokens wait, want 1", w)
		}
		close(v.unblock)
		st := v.wait(lr)
		if st.State != RunCompleted || string(st.Result) != `{"exhausted":false}` {
			t.Fatalf("the loop ran %d iterations and ended %s %s: the new run was not admitted while it ran", spins, st.State, st.Result)
		}
		if st := v.wait(nr); st.State != RunCompleted {
			t.Fatalf("new run %s", st.State)
		}
		if got := order(); len(got) != 1 || got[0] != nr+":n" {
			t.Errorf("calls %v", got)
		}
		t.Logf("the new run started after %d iterations", spins)
	})
}

// TestIdleWorkerWakes: a worker blocked on an empty queue grants credits,
// so that a new run's entry token goes straight to the queue's stream,
// which wakes it, rather than waiting in the entry stream until the
// blocking read times out.
func TestIdleWorkerWakes(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b, Options{Queues: sameQueue})
		v.worker()
		w := build(t, wfSpec{nodes: []*nodeSpec{task("a", "count"), task("b", "count", after("a"))}})
		for i := range 5 {
			// Wait for the worker to block, having granted its credits.
			deadline := time.Now().Add(10 * time.Second)
			for {
				c, _ := v.e.st.rdb.HGet(v.ctx, v.e.st.ks.admit(0), "work").Int()
				if c > 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("run %d: the idle worker granted no credits", i)
				}
				time.Sleep(5 * time.Millisecond)
			}
			id := v.submit(w, nil)
			if n := waitingEntries(t, v.e); n != 0 {
				t.Fatalf("run %d: its entry token waits in the entry stream", i)
			}
			if st := v.wait(id); st.State != RunCompleted {
				t.Fatalf("run %d: %s", i, st.State)
			}
		}
	})
}

// TestAdmittedEntryClaimed: a new run's entry token admitted by a worker
// that then dies is claimed, like any message, by another worker after the
// visibility timeout. The run was submitted before any worker ran, so its
// token waited in the entry stream.
func TestAdmittedEntryClaimed(t *testing.T) {
	forSchedBackends(t, func(t *testing.T, b backend, eo Options) {
		v := newEnv(t, b, eo)
		w := build(t, wfSpec{nodes: []*nodeSpec{task("a", "block"), task("b", "count", after("a"))}})
		id := v.submit(w, nil)
		if n := waitingEntries(t, v.e); n != 1 {
			t.Fatalf("%d entry tokens wait, want 1", n)
		}
		stop := v.crashingWorker("")
		v.waitStarted()
		if n := waitingEntries(t, v.e); n != 0 {
			t.Fatalf("%d entry tokens still wait", n)
		}
		// The admitted token carries its entry id (fresh.go).
		shard := v.e.st.ks.shard(id)
		ms, err := v.e.st.rdb.XRange(v.ctx, v.e.st.ks.stream(shard, "work"), "-", "+").Result()
		if err != nil || len(ms) != 1 || ms[0].Values["e"] == nil {
			t.Fatalf("the queue holds %v (%v)", ms, err)
		}
		stop()
		close(v.unblock)
		live := v.worker()
		if st := v.wait(id); st.State != RunCompleted {
			t.Fatalf("run %s", st.State)
		}
		if live.Stats().Claimed == 0 {
			t.Errorf("the admitted token was not claimed")
		}
		if c := v.callCount(id + "/a"); c != 2 {
			t.Errorf("a ran %d times, want 2 (the dead worker's and the claim's)", c)
		}
		waitNoPending(t, v.e)
	})
}

// TestSchedManyWorkers: several workers serve a burst of new runs: every run completes,
// nothing stays pending or waiting, and each node ran once.
func TestSchedManyWorkers(t *testing.T) {
	forSchedBackends(t, func(t *testing.T, b backend, o Options) {
		v := newEnv(t, b, o)
		for range 3 {
			v.worker(func(o *WorkerOptions) { o.Concurrency = 3 })
		}
		chain := build(t, wfSpec{nodes: []*nodeSpec{
			task("a", "count"), task("b", "count", after("a")), task("c", "count", after("b")), task("d", "count", after("a")),
		}})
		var ids []string
		for range 60 {
			ids = append(ids, v.submit(chain, nil))
		}
		for _, id := range ids {
			if st := v.wait(id); st.State != RunCompleted {
				t.Fatalf("run %s: %s", id, st.State)
			}
			for _, n := range []string{"a", "b", "c", "d"} {
				if c := v.callCount(id + "/" + n); c != 1 {
					t.Errorf("%s/%s ran %d times", id, n, c)
				}
			}
		}
		waitNoPending(t, v.e)
		if n := waitingEntries(t, v.e); n != 0 {
			t.Errorf("%d entry tokens left", n)
		}
	})
}

// TestTakeReply: take.lua's reply converts to XREADGROUP's result, and a
// reply of another shape is an error, not a panic.
func TestTakeReply(t *testing.T) {
	res, held, err := takeReply([]any{[]any{[]any{"s", []any{[]any{"1-0", []any{"t", "x", "e", "0-1"}}}}}, int64(1)})
	if err != nil || !held || len(res) != 1 || res[0].Stream != "s" || len(res[0].Messages) != 1 ||
		res[0].Messages[0].ID != "1-0" || res[0].Messages[0].Values["t"] != "x" || res[0].Messages[0].Values["e"] != "0-1" {
		t.Fatalf("%v %v", res, err)
	}
	for _, bad := range []any{"x", []any{"s"}, []any{[]any{"s"}, int64(0)}, []any{[]any{[]any{"s", "m"}}, int64(0)},
		[]any{[]any{[]any{"s", []any{"m"}}}, int64(0)}, []any{[]any{}, "1"}, []any{[]any{}}} {
		if _, _, err := takeReply(bad); err == nil || !strings.Contains(err.Error(), "take replied") {
			t.Errorf("%v: %v", bad, err)
		}
	}
	if res, held, err := takeReply([]any{[]any{}, int64(0)}); err != nil || held || len(res) != 0 {
		t.Errorf("empty: %v %v", res, err)
	}
}

// TestCancelledWhileWaiting: a run cancelled while its entry token waits
// for admission is not run: the token, once admitted, is acknowledged as
// a token of a run that no longer runs.
func TestCancelledWhileWaiting(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b, Options{Queues: sameQueue})
		w := build(t, wfSpec{nodes: []*nodeSpec{task("a", "count"), task("b", "count", after("a"))}})
		id := v.submit(w, nil)
		if n := waitingEntries(t, v.e); n != 1 {
			t.Fatalf("%d entry tokens wait, want 1", n)
		}
		if err := v.e.Cancel(v.ctx, id); err != nil {
			t.Fatal(err)
		}
		wk := v.worker()
		other := v.submit(w, nil) // behind it
		if st := v.wait(other); st.State != RunCompleted {
			t.Fatalf("the other run %s", st.State)
		}
		waitNoPending(t, v.e)
		if n := waitingEntries(t, v.e); n != 0 {
			t.Errorf("%d entry tokens wait", n)
		}
		if c := v.callCount(id + "/a"); c != 0 {
			t.Errorf("the cancelled run's a ran %d times", c)
		}
		if st, _ := v.e.Status(v.ctx, id); st.State != RunCancelled {
			t.Errorf("run %s", st.State)
		}
		for deadline := time.Now().Add(10 * time.Second); wk.Stats().Inactive == 0; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no token of an ended run was dropped: %+v", wk.Stats())
			}
		}
	})
}

// TestChildRunIsInFlight: a flow node's child run is the work of a run in
// flight (its parent waits on it): its entry token goes to the stream, not
// behind the new runs waiting for admission.
func TestChildRunIsInFlight(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b, Options{Queues: sameQueue})
		order := registerOrder(v)
		v.worker(func(o *WorkerOptions) { o.Concurrency = 1 })
		kid := childWF(t, "kid", "ord")
		parent := build(t, wfSpec{children: []*ir.Workflow{kid}, nodes: []*nodeSpec{
			task("a", "block"), flowNode(t, "f", kid, after("a"), fwith("n", konst("1"))), task("z", "ord", after("f")),
		}})
		p := v.submit(parent, nil)
		v.waitStarted()
		next := build(t, wfSpec{nodes: []*nodeSpec{task("x", "ord")}})
		var news []string
		for range 10 {
			news = append(news, v.submit(next, nil))
		}
		close(v.unblock)
		if st := v.wait(p); st.State != RunCompleted {
			t.Fatalf("parent %s: %s", st.State, st.Error)
		}
		for _, r := range news {
			v.wait(r)
		}
		got := order()
		if len(got) != 12 || !strings.HasSuffix(got[0], ":work") || got[1] != p+":z" {
			t.Errorf("the child run and its parent did not go first: %v", got)
		}
	})
}

// TestTakeGrantsCredits: a take for a worker that would block if it read
// nothing grants n credits (maxCredits at most) when it reads fewer than n (its streams are
// drained): also when it read some, so that a lone run's worker need not
// read nothing to top them up; not after a full read, nor for a worker
// that would not block.
func TestTakeGrantsCredits(t *testing.T) {
	cases := []struct {
		name    string
		queued  int
		n       int
		idle    bool
		credits int
	}{
		{"idle, nothing read", 0, 4, true, 4},
		{"idle, a short read", 1, 4, true, 4},
		{"idle, a full read", 4, 4, true, 0},
		{"idle, many slots", 0, 256, true, maxCredits},
		{"not idle, a short read", 1, 4, false, 0},
	}
	forBackends(t, func(t *testing.T, b backend) {
		e := openEngine(t, b, Options{})
		ctx := context.Background()
		for i, c := range cases {
			q := fmt.Sprintf("grant%d", i)
			stream := e.st.ks.stream(0, q)
			if err := e.st.ensureGroup(ctx, stream); err != nil {
				t.Fatal(err)
			}
			for range c.queued {
				if err := e.st.rdb.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: []any{"t", "x"}}).Err(); err != nil {
					t.Fatal(err)
				}
			}
			w := &Worker{st: e.st, ks: e.st.ks, opts: WorkerOptions{AdmitAge: time.Second}}
			res, _, err := w.take(ctx, e.st.rdb, 0, e.st.ks.takeKeys(0, []string{q}), []string{q}, "test", c.n, c.n, c.idle)
			if err != nil {
				t.Fatal(err)
			}
			got := 0
			for _, s := range res {
				got += len(s.Messages)
			}
			credits, err := e.st.rdb.HGet(ctx, e.st.ks.admit(0), q).Int()
			if err != nil && err != redis.Nil {
				t.Fatal(err)
			}
			if got != c.queued || credits != c.credits {
				t.Errorf("%s: read %d, credits %d; want %d, %d", c.name, got, credits, c.queued, c.credits)
			}
		}
	})
}

// TestTakeRefusesBadGrant: a grant that is not a whole number of credits
// (0 or more) is a bad call, refused before any write: a fraction would
// be left in the admission hash, where a start's HINCRBY fails on it. So
// is such an admit, or an n that is no whole number of messages (a
// fraction failed the script at its first XRANGE), in take.lua and in
// admit.lua alike.
func TestTakeRefusesBadGrant(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		e := openEngine(t, b, Options{})
		ctx := context.Background()
		q := "bad"
		if err := e.st.ensureGroup(ctx, e.st.ks.stream(0, q)); err != nil {
			t.Fatal(err)
		}
		for _, bad := range []any{"x", -1, "1.5", ""} {
			for i, args := range [][]any{{Group, "test", 4, 4, bad, 1000, q}, {Group, "test", 4, bad, 4, 1000, q}, {Group, "test", bad, 4, 4, 1000, q}} {
				err := e.st.scripts["take"].Run(ctx, e.st.rdb, e.st.ks.takeKeys(0, []string{q}), args...).Err()
				if err == nil || !strings.Contains(err.Error(), "bad take call") {
					t.Errorf("%s %q: %v, want a bad take call", []string{"grant", "admit", "n"}[i], bad, err)
				}
			}
			// admit.lua checks the same numbers (admission.lua's params).
			for i, args := range [][]any{{Group, 4, 4, bad, 1000, q}, {Group, 4, bad, 4, 1000, q}, {Group, bad, 4, 4, 1000, q}} {
				err := e.st.scripts["admit"].Run(ctx, e.st.rdb, e.st.ks.takeKeys(0, []string{q}), args...).Err()
				if err == nil || !strings.Contains(err.Error(), "bad admit call") {
					t.Errorf("admit, %s %q: %v, want a bad admit call", []string{"grant", "admit", "n"}[i], bad, err)
				}
			}
		}
		if n, err := e.st.rdb.Exists(ctx, e.st.ks.admit(0)).Result(); err != nil || n != 0 {
			t.Errorf("a refused take or admit wrote the admission hash (%d, %v)", n, err)
		}
	})
}

// TestTakeAdmitsUpToAdmit: a take admits at most admit new runs' entry
// tokens however many slots it reads for, says when it held some back,
// and then grants no credits (a start that spent one would go ahead of
// the runs waiting); with fewer waiting than admit it admits them all.
func TestTakeAdmitsUpToAdmit(t *testing.T) {
	cases := []struct {
		name            string
		waiting, n      int
		admit           int
		read            int
		held            bool
		credits, remain int
	}{
		{"held back", 10, 8, 3, 3, true, 0, 7},
		{"none admitted", 10, 8, 0, 0, true, 0, 10},
		{"the slots bound", 10, 8, 8, 8, false, 0, 2},
		{"fewer wait", 2, 8, 3, 2, false, 3, 0},
		{"none wait", 0, 8, 0, 0, false, 0, 0},
	}
	forBackends(t, func(t *testing.T, b backend) {
		e := openEngine(t, b, Options{Queues: sameQueue})
		ctx := context.Background()
		wf := build(t, wfSpec{nodes: []*nodeSpec{task("x", "ord")}})
		keys := e.st.ks.takeKeys(0, []string{"work"})
		if err := e.st.ensureGroup(ctx, keys[1]); err != nil {
			t.Fatal(err)
		}
		w := &Worker{st: e.st, ks: e.st.ks, opts: WorkerOptions{AdmitAge: time.Hour}}
		for _, c := range cases {
			for _, k := range keys {
				if err := e.st.rdb.Del(ctx, k).Err(); err != nil {
					t.Fatal(err)
				}
			}
			if err := e.st.ensureGroup(ctx, keys[1]); err != nil {
				t.Fatal(err)
			}
			for range c.waiting {
				if _, err := e.Submit(ctx, wf, nil); err != nil {
					t.Fatal(err)
				}
			}
			res, held, err := w.take(ctx, e.st.rdb, 0, keys, []string{"work"}, "test", c.n, c.admit, true)
			if err != nil {
				t.Fatal(err)
			}
			read := 0
			for _, s := range res {
				read += len(s.Messages)
			}
			credits, _ := e.st.rdb.HGet(ctx, keys[0], "work").Int()
			remain := waitingEntries(t, e)
			if read != c.read || held != c.held || credits != c.credits || remain != int64(c.remain) {
				t.Errorf("%s: read %d, held %v, credits %d, %d wait; want %d, %v, %d, %d",
					c.name, read, held, credits, remain, c.read, c.held, c.credits, c.remain)
			}
		}
	})
}

// TestEntryLook: a completion's piggyback looks at the credits (and the
// entry streams, unless the last look found credits for every queue) at
// most every entryLookEvery; the read loop blocks without a take only on
// a fresh look that found no new run waiting and credits for half what
// its take would grant, and each look serves one such read.
func TestEntryLook(t *testing.T) {
	var l entryLook
	if !l.due() {
		t.Fatal("the first look is not due")
	}
	if l.due() {
		t.Error("a look is due again at once")
	}
	l.last.Add(-int64(entryLookEvery))
	if !l.due() {
		t.Errorf("no look is due after %s", entryLookEvery)
	}

	cases := []struct {
		name    string
		empty   bool
		credits int64
		age     time.Duration
		n       int
		want    bool
	}{
		{"fresh, empty, credits for half", true, 8, 0, 16, true},
		{"credits for fewer than half", true, 7, 0, 16, false},
		// A take grants at most maxCredits: half of those will do.
		{"many slots, half the most credits", true, maxCredits / 2, 0, 256, true},
		{"many slots, fewer", true, maxCredits/2 - 1, 0, 256, false},
		{"one slot, one credit", true, 1, 0, 1, true},
		{"no credits", true, 0, 0, 1, false},
		{"new runs wait", false, 32, 0, 32, false},
		{"stale", true, 32, lookFresh + time.Millisecond, 32, false},
	}
	for _, c := range cases {
		var l entryLook
		if l.creditsLeft() {
			t.Errorf("%s: credits left before a look", c.name)
		}
		if l.blockAtOnce(c.n) {
			t.Errorf("%s: blocks at once without a look", c.name)
		}
		l.saw(c.empty, c.credits)
		if got := l.creditsLeft(); got != (c.credits > 0) {
			t.Errorf("%s: creditsLeft %v after a look at %d credits", c.name, got, c.credits)
		}
		l.seen -= int64(c.age)
		if got := l.blockAtOnce(c.n); got != c.want {
			t.Errorf("%s: blockAtOnce %v, want %v", c.name, got, c.want)
		}
		if l.blockAtOnce(c.n) {
			t.Errorf("%s: a look served two reads", c.name)
		}
	}
}

// TestLoneRunBlocksAtOnce: a worker running one run after another (each
// submitted when the last ended) blocks at the end of a run without a take
// first (blockAtOnce: its completions' looks found credits), and each new
// run still starts, its entry token in the queue's stream: the read wakes.
// It must happen within a few hundred runs, whatever the machine's speed
// (a look is fresh for lookFresh, and a two-node run ends a hop after it).
func TestLoneRunBlocksAtOnce(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b, Options{Queues: sameQueue})
		wk := v.worker()
		w := build(t, wfSpec{nodes: []*nodeSpec{task("a", "count"), task("b", "count", after("a"))}})
		runs := 0
		for ; runs < 300 && wk.blockedAtOnce.Load() < 3; runs++ {
			if st := v.wait(v.submit(w, nil)); st.State != RunCompleted {
				t.Fatalf("run %d: %s", runs, st.State)
			}
		}
		if n := wk.blockedAtOnce.Load(); n < 3 {
			t.Errorf("the read loop blocked at once %d times in %d runs, want 3", n, runs)
		}
		if n := waitingEntries(t, v.e); n != 0 {
			t.Errorf("%d entry tokens wait", n)
		}
		t.Logf("%d runs", runs)
	})
}

// TestBurstBypassBounded: an idle worker's credits let new runs' entry
// tokens go straight to the queue's stream, ahead of the continuations of
// runs in flight; a burst of submissions to a worker that was idle with
// many free slots (an adaptive worker climbs to 256) must not start all of
// them at once. At most maxCredits of them skip the entry stream; the rest
// wait for a drained read, so the runs the burst started first still end
// first.
func TestBurstBypassBounded(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		e := openEngine(t, b, Options{Queues: sameQueue})
		ctx := context.Background()
		stream := e.st.ks.stream(0, "work")
		if err := e.st.ensureGroup(ctx, stream); err != nil {
			t.Fatal(err)
		}
		// The grant of an idle worker with 256 free slots that read nothing.
		w := &Worker{st: e.st, ks: e.st.ks, opts: WorkerOptions{AdmitAge: time.Second}}
		if _, _, err := w.take(ctx, e.st.rdb, 0, e.st.ks.takeKeys(0, []string{"work"}), []string{"work"}, "test", 256, 256, true); err != nil {
			t.Fatal(err)
		}
		if c, _ := e.st.rdb.HGet(ctx, e.st.ks.admit(0), "work").Int(); c != maxCredits {
			t.Errorf("an idle worker with 256 free slots granted %d credits, want %d", c, maxCredits)
		}
		wf := build(t, wfSpec{nodes: []*nodeSpec{task("x", "ord"), task("y", "ord", after("x"))}})
		const burst = 100
		for range burst {
			if _, err := e.Submit(ctx, wf, nil); err != nil {
				t.Fatal(err)
			}
		}
		straight, err := e.st.rdb.XLen(ctx, stream).Result()
		if err != nil {
			t.Fatal(err)
		}
		if straight != maxCredits || waitingEntries(t, e) != burst-maxCredits {
			t.Errorf("%d of %d new runs went straight to the stream, %d wait; want %d and %d",
				straight, burst, waitingEntries(t, e), maxCredits, burst-maxCredits)
		}
	})
}

// TestAdmissionTarget: a worker with many slots serving a backlog admits
// new runs only while its executions running are fewer than its admission
// target (admissionFloor of its slots, where it stays when admitting more
// buys no throughput), not as many as it has free slots (then 200 runs
// were in progress at once here); the work of runs in progress may use
// the other slots (each run here fans out to four tasks at once); every
// run completes.
func TestAdmissionTarget(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b, Options{Queues: sameQueue})
		var mu, cpu sync.Mutex
		running, most := map[string]bool{}, 0 // runs started and not ended
		execs, mostExecs := 0, 0
		v.reg.RegisterFunc("ord", func(ctx context.Context, req handlers.Request) (json.RawMessage, error) {
			mu.Lock()
			execs++
			mostExecs = max(mostExecs, execs)
			running[req.RunID] = true
			most = max(most, len(running))
			mu.Unlock()
			// One at a time, as on a saturated CPU: more executions at
			// once buy no throughput.
			cpu.Lock()
			time.Sleep(100 * time.Microsecond)
			cpu.Unlock()
			mu.Lock()
			execs--
			if req.Node == "z" {
				delete(running, req.RunID)
			}
			mu.Unlock()
			return json.RawMessage(`{}`), nil
		})
		const slots, backlog = 200, 300
		target := admissionFloor(slots)
		wf := build(t, wfSpec{nodes: []*nodeSpec{
			task("a", "ord"), task("b1", "ord", after("a")), task("b2", "ord", after("a")),
			task("b3", "ord", after("a")), task("b4", "ord", after("a")),
			task("z", "ord", after("b1", "b2", "b3", "b4")),
		}})
		var ids []string
		for range backlog {
			ids = append(ids, v.submit(wf, nil))
		}
		o := fastWorker(v.reg)
		o.Concurrency = slots
		w := v.e.NewWorker(o)
		// The target held at its floor: here the gate is tested, not
		// how the limiter moves it (adapt_test.go).
		w.admission = newLimiter(target, target, target)
		ctx, stop := context.WithCancel(v.ctx)
		done := make(chan struct{})
		go func() { defer close(done); w.Run(ctx) }()
		defer func() { stop(); <-done }()
		for _, id := range ids {
			if st := v.wait(id); st.State != RunCompleted {
				t.Fatalf("run %s: %s %s", id, st.State, st.Error)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		t.Logf("runs in progress at most %d, executions %d (target %d, slots %d)", most, mostExecs, target, slots)
		if a := w.Stats().Admission; a != int64(target) {
			t.Errorf("Stats().Admission = %d, want %d", a, target)
		}
		// A run between two executions (its token on the way to the next)
		// is not running: a few more may be in progress than the target.
		if most > target+target/4 {
			t.Errorf("%d runs were in progress at once, want about the admission target %d (slots %d)", most, target, slots)
		}
		if mostExecs <= target/2 {
			t.Errorf("at most %d executions ran at once: the admission target %d was not used", mostExecs, target)
		}
	})
}

// TestIdleReadReservesNoAdmission: a read loop blocked on empty queues
// holds none of the admission target (admit reserves a take's admissions
// until what it read is dispatched: a take that read nothing is done).
func TestIdleReadReservesNoAdmission(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b, Options{Queues: sameQueue})
		w := v.worker(func(o *WorkerOptions) { o.Concurrency = 64; o.Block = 2 * time.Second })
		time.Sleep(300 * time.Millisecond) // the read loop took, then blocked
		if a := w.admitting.Load(); a != 0 {
			t.Errorf("an idle worker reserves %d admissions", a)
		}
	})
}

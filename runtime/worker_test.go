package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/runtime/handlers"
)

// A handler that runs longer than the visibility timeout keeps its message
// with heartbeats: the other worker does not claim it.
func TestHeartbeatKeepsLongHandlers(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		var deliveries int64
		v.reg.RegisterFunc("long", func(ctx context.Context, req handlers.Request) (json.RawMessage, error) {
			v.note(req)
			select {
			case <-time.After(1500 * time.Millisecond):
				// Heartbeats are not deliveries (the embedded server
				// counted them as such): the count is still 1.
				p, err := v.e.st.rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: v.e.st.ks.stream(0, HandlerQueue("long")), Group: Group, Start: "-", End: "+", Count: 10}).Result()
				if err == nil && len(p) == 1 {
					atomic.StoreInt64(&deliveries, p[0].RetryCount)
				}
				return json.RawMessage(`{}`), nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		})
		fast := func(o *WorkerOptions) {
			o.VisibilityTimeout = 500 * time.Millisecond
			o.HeartbeatInterval = 100 * time.Millisecond
			o.ClaimInterval = 100 * time.Millisecond
		}
		v.worker(fast)
		v.worker(fast)
		st := v.run(build(t, wfSpec{nodes: []*nodeSpec{task("a", "long")}}), nil)
		if st.State != RunCompleted {
			t.Fatal(st.State)
		}
		if c := v.callCount(st.RunID + "/a"); c != 1 {
			t.Errorf("long handler ran %d times", c)
		}
		if d := atomic.LoadInt64(&deliveries); d != 1 {
			t.Errorf("the long handler's message has %d deliveries after its heartbeats, want 1", d)
		}
	})
}

// A worker that stops gracefully gives back the messages whose handlers
// did not finish within the grace period; another worker takes them at
// once, long before the visibility timeout.
func TestGracefulStopReleases(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		o := fastWorker(v.reg)
		o.ShutdownGrace = 100 * time.Millisecond
		o.VisibilityTimeout = time.Minute
		w1 := v.e.NewWorker(o)
		ctx1, stop := context.WithCancel(v.ctx)
		done := make(chan struct{})
		go func() { defer close(done); w1.Run(ctx1) }()
		run := v.submit(mixedBlock(t), nil)
		v.waitStarted()
		stop()
		<-done
		close(v.unblock)
		start := time.Now()
		v.worker(func(o *WorkerOptions) { o.VisibilityTimeout = time.Minute })
		st := v.wait(run)
		if st.State != RunCompleted {
			t.Fatal(st.State)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("the released message took %s", d)
		}
		waitNoPending(t, v.e)
	})
}

func TestShards(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b, Options{Shards: 3})
		v.worker()
		w := build(t, wfSpec{
			outputs: []ir.Output{output("v", "b.output.v")},
			nodes: []*nodeSpec{
				task("a", "cel", with("v", konst("1"))),
				task("b", "cel", after("a"), with("v", cexpr("a.output.v + 1"))),
			},
		})
		shards := map[int]bool{}
		var runs []string
		for range 9 {
			r := v.submit(w, nil)
			runs = append(runs, r)
			shards[v.e.st.ks.shard(r)] = true
		}
		for _, r := range runs {
			if st := v.wait(r); string(st.Result) != `{"v":2}` {
				t.Errorf("%s: %s %s %s", r, st.State, st.Result, st.Error)
			}
		}
		if len(shards) < 2 {
			t.Errorf("9 runs all landed in shards %v", shards)
		}
		// Every key of a run carries its shard's hash tag.
		keys, _ := v.e.st.rdb.Keys(v.ctx, v.e.opts.Prefix+":*").Result()
		for _, k := range keys {
			if !strings.HasPrefix(k, v.e.opts.Prefix+":{") && !strings.HasPrefix(k, v.e.opts.Prefix+":ir:") {
				t.Errorf("key %s has no hash tag", k)
			}
		}
	})
}

func TestQueueRouting(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b, Options{Queues: map[string]string{"special": "gpu"}})
		v.reg.RegisterFunc("special", func(ctx context.Context, req handlers.Request) (json.RawMessage, error) {
			return json.RawMessage(`{"where":"gpu"}`), nil
		})
		plain := handlers.NewRegistry(handlers.Options{}) // has no "special"
		v.e.StartWorkers(v.ctx, 2, WorkerOptions{Handlers: plain, Block: 200 * time.Millisecond, TimerInterval: 20 * time.Millisecond})
		w := build(t, wfSpec{
			outputs: []ir.Output{output("where", "b.output.where")},
			nodes:   []*nodeSpec{task("a", "noop"), task("b", "special", after("a"))},
		})
		run := v.submit(w, nil)
		time.Sleep(300 * time.Millisecond)
		st, _ := v.e.Status(v.ctx, run)
		if nodeState(st, "b") != NodeQueued {
			t.Fatalf("b is %s before a gpu worker exists", nodeState(st, "b"))
		}
		v.worker(func(o *WorkerOptions) { o.Queues = []string{"gpu"} })
		st = v.wait(run)
		if string(st.Result) != `{"where":"gpu"}` {
			t.Fatalf("%s %s %s", st.State, st.Result, st.Error)
		}
		waitNoPending(t, v.e, "default", "gpu")
	})
}

// The queue streams are trimmed below the oldest pending entry only.
func TestTrim(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker(func(o *WorkerOptions) { o.TrimInterval = 100 * time.Millisecond })
		w := build(t, wfSpec{nodes: []*nodeSpec{task("a", "noop"), task("b", "noop", after("a")), task("c", "noop", after("b"))}})
		for range 5 {
			v.run(w, nil)
		}
		blocked := v.submit(mixedBlock(t), nil)
		v.waitStarted()
		stream := v.e.st.ks.stream(0, ControlQueue)
		deadline := time.Now().Add(5 * time.Second)
		for {
			n, _ := v.e.st.rdb.XLen(v.ctx, stream).Result()
			if n <= 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("stream still has %d entries", n)
			}
			time.Sleep(50 * time.Millisecond)
		}
		close(v.unblock)
		if st := v.wait(blocked); st.State != RunCompleted {
			t.Fatal(st.State)
		}
	})
}

// Cancelling a run cancels the handlers still running for it.
func TestCancelStopsHandlers(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker(func(o *WorkerOptions) { o.HeartbeatInterval = 50 * time.Millisecond })
		run := v.submit(mixedBlock(t), nil)
		v.waitStarted()
		start := time.Now()
		if err := v.e.Cancel(v.ctx, run); err != nil {
			t.Fatal(err)
		}
		waitNoPending(t, v.e)
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("the handler kept its message %s after the cancel", d)
		}
		v.wait(run)
	})
}

func TestFollow(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		w := build(t, wfSpec{
			outputs: []ir.Output{output("v", "b.output.v")},
			nodes: []*nodeSpec{
				task("a", "cel", with("v", konst("1"))),
				task("b", "cel", after("a"), with("v", cexpr("a.output.v + 1"))),
			},
		})
		run := v.submit(w, nil)
		var types, trans []string
		st, err := v.e.Follow(v.ctx, run, func(ev Event) error {
			types = append(types, ev.Type+":"+ev.Fields["x"]+fmt.Sprint(ev.Queued()))
			for _, tr := range ev.Transitions() {
				trans = append(trans, tr.Exec+":"+tr.State)
			}
			return nil
		})
		if err != nil || st.State != RunCompleted {
			t.Fatalf("%v %v", st, err)
		}
		// b's completion ends the run with the result ahead (ahead.go).
		want := "run.started:[a] node.completed:a[b] node.completed:b[] run.completed:[]"
		if got := strings.Join(types, " "); got != want {
			t.Errorf("events\n got %s\nwant %s", got, want)
		}
		// An event's own execution changes first, then those it queued.
		want = "a:queued a:completed b:queued b:completed"
		if got := strings.Join(trans, " "); got != want {
			t.Errorf("transitions\n got %s\nwant %s", got, want)
		}
		if _, err := v.e.Follow(v.ctx, "nope", func(Event) error { return nil }); err == nil {
			t.Error("Follow of an unknown run")
		}
	})
}

// A worker serving several queues with one slot: XREADGROUP's COUNT bounds
// each stream, so one read can bring a message of every queue. The worker
// must handle them all (it used to give back more slots than it held and
// hang).
func TestSeveralQueuesOneSlot(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b, Options{Queues: map[string]string{"special": "gpu"}})
		v.reg.RegisterFunc("special", func(ctx context.Context, req handlers.Request) (json.RawMessage, error) {
			return json.RawMessage(`{}`), nil
		})
		// Two entries, one per queue: every run puts a token in both at once.
		w := build(t, wfSpec{nodes: []*nodeSpec{task("a", "noop"), task("b", "special"), task("c", "noop", after("a", "b"))}})
		var runs []string
		for range 10 {
			runs = append(runs, v.submit(w, nil))
		}
		v.worker(func(o *WorkerOptions) { o.Queues = []string{ControlQueue, "gpu"}; o.Concurrency = 1 })
		for _, run := range runs {
			if st := v.wait(run); st.State != RunCompleted {
				t.Fatalf("run %s: %s %s", run, st.State, st.Error)
			}
		}
	})
}

// Completions read the next messages (the piggyback) and hand them their
// slots: the worker still never runs more handlers than its concurrency,
// and every run completes, on several queues too.
func TestPiggybackKeepsConcurrency(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b, Options{Queues: map[string]string{"special": "gpu"}})
		var mu sync.Mutex
		running, most := 0, 0
		slow := func(ctx context.Context, req handlers.Request) (json.RawMessage, error) {
			mu.Lock()
			running++
			most = max(most, running)
			mu.Unlock()
			time.Sleep(time.Millisecond)
			mu.Lock()
			running--
			mu.Unlock()
			return json.RawMessage(`{}`), nil
		}
		v.reg.RegisterFunc("slow", slow)
		v.reg.RegisterFunc("special", slow)
		w := build(t, wfSpec{nodes: []*nodeSpec{
			task("a", "slow"), task("b", "special", after("a")), task("c", "slow", after("b")),
			task("d", "slow", after("c")), task("e", "special", after("c")), task("f", "slow", after("d", "e")),
		}})
		var runs []string
		for range 30 {
			runs = append(runs, v.submit(w, nil))
		}
		wk := v.worker(func(o *WorkerOptions) {
			o.Queues = []string{ControlQueue, "gpu", HandlerQueue("slow")}
			o.Concurrency = 3
		})
		for _, run := range runs {
			if st := v.wait(run); st.State != RunCompleted {
				t.Fatalf("run %s: %s %s", run, st.State, st.Error)
			}
			v.check(run)
		}
		mu.Lock()
		defer mu.Unlock()
		if most > 3 {
			t.Errorf("%d handlers ran at once, concurrency 3", most)
		}
		if wk.piggybacked.Load() == 0 {
			t.Error("no completion read a message")
		}
	})
}

// Messages that are not tokens, or tokens of unknown runs, are
// acknowledged and dropped; the worker lives on and runs the rest.
func TestBadMessagesAreDropped(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		flow := build(t, wfSpec{nodes: []*nodeSpec{task("a", "noop"), task("b", "noop", after("a"))}})
		run := v.submit(flow, nil)
		stream := v.e.st.ks.stream(0, ControlQueue)
		for _, vals := range [][]any{
			{"other", "x"},
			{"t", "{not json"},
			{"t", `{"kind":"exec","node":"a"}`},
			{"t", `{"kind":"exec","run":"01nosuchrun","node":"a","item":-1}`},
		} {
			if err := v.e.st.rdb.XAdd(v.ctx, &redis.XAddArgs{Stream: stream, Values: vals}).Err(); err != nil {
				t.Fatal(err)
			}
		}
		v.worker()
		if st := v.wait(run); st.State != RunCompleted {
			t.Fatalf("%s %s", st.State, st.Error)
		}
		waitNoPending(t, v.e)
	})
}

// A read's fresh exec tokens of runs the worker keeps go to handlers at
// once, with the kept meta; the others are pre-read from Redis and follow;
// a message beyond the caller's slots waits for a free one.
func TestDispatchRead(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		flow := build(t, wfSpec{nodes: []*nodeSpec{task("a", "noop"), task("b", "noop", after("a"))}})
		run := v.submit(flow, nil)
		w := v.e.NewWorker(WorkerOptions{Handlers: v.reg, Concurrency: 2})
		w.work = make(chan *flight, 10)
		w.fresh.known.Store(true) // the same clock as the server's
		kept := &runMeta{ID: run, Status: RunRunning, Gen: 0, Workflow: "kept"}
		w.fresh.remember(run, kept)
		now := time.Now().UnixMilli()
		tok := `{"kind":"exec","run":"` + run + `","node":"a","iter":"","hop":1,"attempt":1,"item":-1,"gen":0}`
		stream := v.e.st.ks.stream(0, ControlQueue)
		res := []redis.XStream{{Stream: stream, Messages: []redis.XMessage{
			{ID: fmt.Sprintf("%d-1", now-60_000), Values: map[string]any{"t": tok}}, // old: pre-read
			{ID: fmt.Sprintf("%d-2", now), Values: map[string]any{"t": tok}},        // fresh: at once
			{ID: fmt.Sprintf("%d-3", now), Values: map[string]any{"t": "{"}},        // no token, beyond the slots
		}}}
		w.sem.acquire(v.ctx, 2) // the caller's two slots
		if got := w.dispatchRead(v.ctx, 0, res, 2); got != 3 {
			t.Fatalf("dispatchRead: %d messages, want 3", got)
		}
		// A handler counts as running from its dispatch (the read loop's
		// deferral depends on it), before any handler goroutine took it.
		if a := w.act[0].active.Load(); a < 1 {
			t.Errorf("%d handlers running after a dispatch", a)
		}
		next := func() *flight {
			select {
			case f := <-w.work:
				return f
			case <-time.After(5 * time.Second):
				t.Fatal("no message dispatched")
				return nil
			}
		}
		if f := next(); !strings.HasSuffix(f.m.ID, "-2") || f.pre == nil || f.pre.m != kept || *f.pre.state != NodeQueued {
			t.Errorf("first dispatched: %s %+v, want the fresh token with the kept meta", f.m.ID, f.pre)
		}
		if f := next(); !strings.HasSuffix(f.m.ID, "-1") || f.pre == nil || f.pre.meta["ir"] == "" || f.pre.m != nil || f.pre.state == nil || *f.pre.state != NodeQueued {
			t.Errorf("second dispatched: %s %+v, want the old token with the meta read from Redis", f.m.ID, f.pre)
		}
		select {
		case f := <-w.work:
			t.Fatalf("%s dispatched without a free slot", f.m.ID)
		case <-time.After(50 * time.Millisecond):
		}
		w.sem.release(1) // a handler ends
		if f := next(); !strings.HasSuffix(f.m.ID, "-3") || f.pre != nil || !f.notToken {
			t.Errorf("third dispatched: %s %+v", f.m.ID, f)
		}
	})
}

// A stopping worker gives a message that waits for a slot back to its
// queue instead of leaving it pending until the visibility timeout.
func TestDispatchReadReleasesOnStop(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		flow := build(t, wfSpec{nodes: []*nodeSpec{task("a", "noop"), task("b", "noop")}})
		v.submit(flow, nil) // two entry tokens
		w := v.e.NewWorker(WorkerOptions{Handlers: v.reg, Concurrency: 1})
		w.work = make(chan *flight, 10)
		stream := v.e.st.ks.stream(0, ControlQueue)
		if err := w.ensureGroups(v.ctx); err != nil {
			t.Fatal(err)
		}
		res, _, err := w.take(v.ctx, v.e.st.rdb, 0, w.takeKeys[0], w.opts.Queues, w.opts.Consumer, 2, 2, false)
		if err != nil || len(res) != 1 || len(res[0].Messages) != 2 {
			t.Fatalf("read %v, %v", res, err)
		}
		hctx, stop := context.WithCancel(v.ctx)
		w.sem.acquire(v.ctx, 1) // the caller's one slot
		w.dispatchRead(hctx, 0, res, 1)
		select {
		case <-w.work:
		case <-time.After(5 * time.Second):
			t.Fatal("the first message was not dispatched")
		}
		stop() // the second still waits for a slot
		second := res[0].Messages[1]
		deadline := time.Now().Add(5 * time.Second)
		for {
			p, err := v.e.st.rdb.XPendingExt(v.ctx, &redis.XPendingExtArgs{Stream: stream, Group: Group, Start: second.ID, End: second.ID, Count: 1}).Result()
			if err != nil {
				t.Fatal(err)
			}
			if len(p) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the waiting message is still pending after the stop")
			}
			time.Sleep(5 * time.Millisecond)
		}
		msgs, err := v.e.st.rdb.XRange(v.ctx, stream, "("+second.ID, "+").Result()
		if err != nil || len(msgs) != 1 || msgs[0].Values["t"] != second.Values["t"] {
			t.Errorf("queued again: %v, %v; want the token %v", msgs, err, second.Values["t"])
		}
		if w.released.Load() != 1 {
			t.Errorf("%d released", w.released.Load())
		}
	})
}

// TestSubmitKeepsItsCopy: a workflow changed after it was submitted does
// not change later runs of what was submitted: the engine keeps its plans
// by IR hash, and a plan works on a copy (newPlan), not the caller's
// workflow.
func TestSubmitKeepsItsCopy(t *testing.T) {
	v := newEnv(t, backends[0])
	spec := func() *ir.Workflow {
		return build(t, wfSpec{name: "orig", nodes: []*nodeSpec{task("a", "noop")}})
	}
	w := spec()
	v.submit(w, nil)
	w.Name = "changed"
	w.Settings.MaxHops = 1
	st, err := v.e.Status(v.ctx, v.submit(spec(), nil))
	if err != nil {
		t.Fatal(err)
	}
	if st.Workflow != "orig" {
		t.Errorf("a run of the submitted workflow says workflow %q", st.Workflow)
	}
}

// TestRunningWhileHandlerRuns: an execution whose handler runs longer than
// RunningAfter is shown running (state and event node.started), then
// completed; a short one is never marked (issue #13, item 10).
func TestRunningWhileHandlerRuns(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker(func(o *WorkerOptions) { o.RunningAfter = 30 * time.Millisecond })
		w := build(t, wfSpec{nodes: []*nodeSpec{task("quick", "noop"), task("slow", "block", after("quick"))}})
		id := v.submit(w, nil)
		v.waitStarted()
		deadline := time.Now().Add(5 * time.Second)
		for {
			st, err := v.e.Status(v.ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if nodeState(st, "slow") == NodeRunning {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("slow is %s, want running", nodeState(st, "slow"))
			}
			time.Sleep(10 * time.Millisecond)
		}
		close(v.unblock)
		st := v.wait(id)
		if st.State != RunCompleted || nodeState(st, "slow") != NodeCompleted {
			t.Fatalf("%s, slow %s", st.State, nodeState(st, "slow"))
		}
		evs, err := v.e.Events(v.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		started := map[string]int{}
		for _, ev := range evs {
			if ev.Type == "node.started" {
				started[ev.Fields["x"]]++
			}
		}
		if started["slow"] != 1 || started["quick"] != 0 {
			t.Errorf("node.started events: %v, want one for slow only", started)
		}
	})
}

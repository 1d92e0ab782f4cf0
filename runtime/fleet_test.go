package runtime

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/runtime/handlers"
)

func execWorkflow(t testing.TB) *ir.Workflow {
	return build(t, wfSpec{name: "ex", nodes: []*nodeSpec{
		task("a", "echo", with("v", konst("1"))),
		task("x", "exec", after("a"), with("argv", konst(`["true"]`))),
	}})
}

// TestLimitMixedFleet: one worker with exec allowed and one without serve
// the same Redis; every exec run completes (issue #14 item 10: the worker
// without exec took about half of the exec tokens and failed their nodes
// for good).
func TestLimitMixedFleet(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker(func(o *WorkerOptions) { o.Consumer = "plain" })
		v.worker(func(o *WorkerOptions) {
			o.Consumer = "trusted"
			o.Handlers = handlers.NewRegistry(handlers.Options{AllowExec: true})
		})
		w := execWorkflow(t)
		// A finally step goes to its handler's queue too.
		fin := execWorkflow(t)
		fin.Finally = &ir.Finally{Handler: "exec", With: []ir.Param{{Name: "argv", Value: konst(`["true"]`)}}}
		var runs []string
		for i := range 40 {
			runs = append(runs, v.submit([]*ir.Workflow{w, fin}[i%2], nil))
		}
		for i, r := range runs {
			st := v.wait(r)
			if st.State != RunCompleted {
				t.Fatalf("run %s: %s: %s", r, st.State, st.Error)
			}
			if i%2 == 1 && st.Finally != "done" {
				t.Fatalf("run %s: finally %s: %s", r, st.Finally, st.FinallyError)
			}
		}
	})
}

// TestLimitWaitingForWorker: an exec node waits, and status says why,
// while no worker that can run exec is running; it runs when one starts.
func TestLimitWaitingForWorker(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		run := v.submit(execWorkflow(t), nil)
		want := "no live worker serves queue h:exec"
		deadline := time.Now().Add(10 * time.Second)
		for {
			st, err := v.e.Status(v.ctx, run)
			if err != nil {
				t.Fatal(err)
			}
			if ns := st.Nodes["x"]; ns != nil && ns.Waiting == want {
				if st.State != RunRunning || ns.State != NodeQueued || st.Waiting != "" {
					t.Fatalf("waiting: %s", dump(st))
				}
				break
			}
			if time.Now().After(deadline) || st.State != RunRunning {
				t.Fatalf("no node waits for an exec worker: %s", dump(st))
			}
			time.Sleep(20 * time.Millisecond)
		}
		v.worker(func(o *WorkerOptions) { o.Handlers = handlers.NewRegistry(handlers.Options{AllowExec: true}) })
		st := v.wait(run)
		if st.State != RunCompleted || st.Nodes["x"].Waiting != "" {
			t.Fatalf("%s", dump(st))
		}
		ws, err := v.e.Workers(v.ctx)
		if err != nil || len(ws) != 2 {
			t.Fatalf("workers %v: %v", ws, err)
		}
		for _, w := range ws {
			if !w.Live || !slices.Contains(w.Queues, ControlQueue) {
				t.Errorf("worker %+v", w)
			}
		}
	})
}

// consumers returns the consumer names of the group of the shard-0 stream
// of queue q.
func consumers(t testing.TB, e *Engine, q string) []string {
	t.Helper()
	cs, err := e.st.rdb.XInfoConsumers(context.Background(), e.st.ks.stream(0, q), Group).Result()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range cs {
		names = append(names, c.Name)
	}
	slices.Sort(names)
	return names
}

// TestLimitReapDeadWorkers: workers that die (crash test mode) are removed
// from the consumer groups once their heartbeat is older than DeadAfter
// and their messages were claimed; a live idle worker stays (issue #14
// item 12: dead workers stayed registered forever).
func TestLimitReapDeadWorkers(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		const dead = 1200 * time.Millisecond
		crash := func(name string) (stop func()) {
			o := fastWorker(v.reg)
			o.crash, o.Consumer, o.DeadAfter, o.Logger = true, name, dead, testLogger(t)
			w := v.e.NewWorker(o)
			ctx, kill := context.WithCancel(v.ctx)
			done := make(chan struct{})
			go func() { defer close(done); w.Run(ctx) }()
			return func() { kill(); <-done }
		}
		// doomed1 dies holding a message; doomed2 and doomed3 idle.
		stop1 := crash("doomed1")
		run := v.submit(mixedBlock(t), nil)
		v.waitStarted()
		stop2, stop3 := crash("doomed2"), crash("doomed3")
		stop1()
		stop2()
		stop3()
		// A read that delivers nothing makes no consumer: these did read
		// (as the 34 of the crash test had).
		for _, c := range []string{"doomed2", "doomed3"} {
			if err := v.e.st.rdb.XGroupCreateConsumer(v.ctx, v.e.st.ks.stream(0, ControlQueue), Group, c).Err(); err != nil {
				t.Fatal(err)
			}
		}
		close(v.unblock)
		if got := consumers(t, v.e, HandlerQueue("block")); !slices.Equal(got, []string{"doomed1"}) {
			t.Fatalf("queue %s: consumers %v", HandlerQueue("block"), got)
		}
		lives := []*Worker{}
		for _, name := range []string{"live1", "live2"} {
			lives = append(lives, v.worker(func(o *WorkerOptions) { o.Consumer, o.DeadAfter = name, dead }))
			// Consumers of their own, whatever they read.
			for _, q := range []string{ControlQueue, HandlerQueue("block")} {
				if err := v.e.st.rdb.XGroupCreateConsumer(v.ctx, v.e.st.ks.stream(0, q), Group, name).Err(); err != nil {
					t.Fatal(err)
				}
			}
		}
		if st := v.wait(run); st.State != RunCompleted {
			t.Fatalf("%s %s", st.State, st.Error)
		}
		want := []string{"live1", "live2"}
		deadline := time.Now().Add(15 * time.Second)
		for {
			a, c := consumers(t, v.e, ControlQueue), consumers(t, v.e, HandlerQueue("block"))
			if slices.Equal(a, want) && slices.Equal(c, want) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("consumers: %v and %v, want %v", a, c, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
		// The live workers stay, idle, for several dead times.
		time.Sleep(3 * dead)
		if a := consumers(t, v.e, ControlQueue); !slices.Equal(a, want) {
			t.Errorf("after idling: consumers %v", a)
		}
		ws, _ := v.e.Workers(v.ctx)
		if len(ws) != 2 {
			t.Errorf("registry: %+v", ws)
		}
		var reaped int64
		for _, w := range lives {
			reaped += w.Stats().Reaped
		}
		if reaped < 3 {
			t.Errorf("reaped %d dead workers, want 3 or more", reaped)
		}
		// A graceful stop leaves the registry and the groups at once.
		v.e.StopWorkers()
		if a := consumers(t, v.e, ControlQueue); len(a) != 0 {
			t.Errorf("after a graceful stop: consumers %v", a)
		}
		if ws, _ := v.e.Workers(v.ctx); len(ws) != 0 {
			t.Errorf("after a graceful stop: registry %+v", ws)
		}
	})
}

// TestLimitReapKeepsPending: the reap script removes a dead consumer only
// from streams where it has no pending message (XGROUP DELCONSUMER would
// drop them), a live one never, and a consumer without a record only after
// it got one and that went stale.
func TestLimitReapKeepsPending(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		ctx := v.ctx
		rdb := v.e.st.rdb
		stream := v.e.st.ks.stream(0, ControlQueue)
		if err := v.e.st.ensureGroup(ctx, stream); err != nil {
			t.Fatal(err)
		}
		id := rdb.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: []any{"t", "x"}}).Val()
		if err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: Group, Consumer: "ghost", Streams: []string{stream, ">"}, Count: 1, Block: -1}).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.XGroupCreateConsumer(ctx, stream, Group, "old").Err(); err != nil {
			t.Fatal(err)
		}
		// A reaper worker that never reads (its queue is elsewhere) and
		// reaps by hand.
		o := fastWorker(v.reg)
		o.Queues, o.DeadAfter, o.Consumer, o.Logger = []string{ControlQueue}, 300*time.Millisecond, "reaper", testLogger(t)
		w := v.e.NewWorker(o)
		if err := w.reap(ctx, 0); err != nil {
			t.Fatal(err)
		}
		// Both got a record now; neither is dead yet.
		if got := consumers(t, v.e, ControlQueue); !slices.Equal(got, []string{"ghost", "old"}) {
			t.Fatalf("consumers %v", got)
		}
		time.Sleep(400 * time.Millisecond)
		if err := w.reap(ctx, 0); err != nil {
			t.Fatal(err)
		}
		// old had nothing pending and is gone; ghost keeps its message.
		if got := consumers(t, v.e, ControlQueue); !slices.Equal(got, []string{"ghost"}) {
			t.Fatalf("consumers %v", got)
		}
		if p := rdb.XPending(ctx, stream, Group).Val(); p == nil || p.Count != 1 {
			t.Fatalf("pending %+v", p)
		}
		rdb.XAck(ctx, stream, Group, id)
		if err := w.reap(ctx, 0); err != nil {
			t.Fatal(err)
		}
		if got := consumers(t, v.e, ControlQueue); len(got) != 0 {
			t.Fatalf("consumers %v", got)
		}
		if n := rdb.HLen(ctx, v.e.st.ks.workers(0)).Val(); n != 0 {
			t.Errorf("%d registry records left", n)
		}
	})
}

// TestLimitPrivateEngine: an engine with Options.Private (wfc run --redis)
// runs its own run only: a run another process queued on the same Redis,
// exec included, is not touched by its workers (issue #14 item 7), and
// DropPrivate deletes its queue and graph.
func TestLimitPrivateEngine(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		foreign := v.submit(execWorkflow(t), nil)
		pe, err := Open(v.ctx, Options{Prefix: v.e.opts.Prefix, RedisURL: engineURL(v.e), Logger: testLogger(t), Private: handlers.NewRegistry(handlers.Options{AllowExec: true})})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pe.Close() })
		wk := pe.StartWorkers(v.ctx, 4, fastWorker(nil))
		own, err := pe.Submit(v.ctx, execWorkflow(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(v.ctx, 20*time.Second)
		defer cancel()
		st, err := pe.Wait(ctx, own)
		if err != nil || st.State != RunCompleted {
			t.Fatalf("own run: %v %s", err, dump(st))
		}
		failed, err := pe.Submit(v.ctx, build(t, wfSpec{nodes: []*nodeSpec{task("f", "fail")}}), nil)
		if err != nil {
			t.Fatal(err)
		}
		if st, err := pe.Wait(ctx, failed); err != nil || st.State != RunFailed {
			t.Fatalf("failing run: %v %s", err, dump(st))
		}
		time.Sleep(300 * time.Millisecond)
		fst, err := v.e.Status(v.ctx, foreign)
		if err != nil {
			t.Fatal(err)
		}
		if fst.State != RunRunning || nodeState(fst, "a") != NodeQueued {
			t.Fatalf("the private engine's worker touched the foreign run: %s", dump(fst))
		}
		if h := wk.Stats().Handled; h != 3 {
			t.Errorf("the private worker handled %d messages, want 3", h)
		}
		if !strings.HasPrefix(pe.ControlQueue(), "p.") {
			t.Fatalf("control queue %q", pe.ControlQueue())
		}
		pe.StopWorkers()
		if err := pe.DropPrivate(v.ctx); err != nil {
			t.Fatal(err)
		}
		keys, _ := v.e.st.rdb.Keys(v.ctx, v.e.opts.Prefix+":*"+pe.ControlQueue()+"*").Result()
		graphs, _ := v.e.st.rdb.Keys(v.ctx, v.e.opts.Prefix+":*:graph:*").Result()
		if len(keys) != 0 || len(graphs) != 1 {
			t.Errorf("after DropPrivate: %v, graphs %v", keys, graphs)
		}
		// Its failed run cannot be retried: nobody serves its queue.
		if err := pe.Retry(v.ctx, failed); err == nil || !strings.Contains(err.Error(), "cannot be retried once that process has ended") {
			t.Errorf("retry of a dropped private run: %v", err)
		}
		// The foreign run still runs with an ordinary exec worker.
		v.worker(func(o *WorkerOptions) { o.Handlers = handlers.NewRegistry(handlers.Options{AllowExec: true}) })
		if st := v.wait(foreign); st.State != RunCompleted {
			t.Fatalf("foreign run: %s", dump(st))
		}
	})
}

// TestLimitDispatchQueues: a dispatch set's handlers share a queue: core
// handlers go with any; handlers on their default queues take the first
// one's; explicit queues must agree.
func TestLimitDispatchQueues(t *testing.T) {
	e := &Engine{ctl: ControlQueue, opts: Options{Queues: map[string]string{"g1": "gpu", "g2": "gpu", "o": "other"}}}
	for _, c := range []struct {
		hs   []string
		want string
	}{
		{[]string{"echo", "noop"}, ControlQueue},
		{[]string{"echo", "exec"}, "h:exec"},
		{[]string{"a", "b", "echo"}, "h:a"},
		{[]string{"g1", "g2", "echo"}, "gpu"},
		{[]string{"g1", "o"}, ""},
		{[]string{"g1", "a"}, ""},
	} {
		got, err := dispatchQueue("n", c.hs, e.queueOf, ControlQueue)
		if c.want == "" {
			if err == nil {
				t.Errorf("%v: %q, want an error", c.hs, got)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%v: %q, %v; want %q", c.hs, got, err, c.want)
		}
	}
	if q := HandlerQueue("a b"); !ValidQueue(q) || !strings.HasPrefix(q, "h:") {
		t.Errorf("HandlerQueue(%q) = %q", "a b", q)
	}
}

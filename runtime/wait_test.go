package runtime

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/runtime/internal/redistest"
)

// waitOut is the output type the compiler gives the built-in wait.
var waitOut = &ir.Type{Kind: ir.KindObject, Fields: []ir.Field{{Name: "until", Type: ir.Type{Kind: ir.KindString}}}}

// waitWF: w (wait, with the given config) -> done.
func waitWF(t *testing.T, name, field string, v ir.Value) *ir.Workflow {
	return build(t, wfSpec{name: name, outputs: []ir.Output{output("until", "w.output.until")}, nodes: []*nodeSpec{
		task("w", "wait", with(field, v), outType(waitOut)),
		task("done", "noop", after("w")),
	}})
}

// waitWaiting waits until run's execution x is waiting and returns the
// status.
func waitWaiting(v *env, run, x string) *Status {
	v.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, err := v.e.Status(v.ctx, run)
		if err != nil {
			v.t.Fatal(err)
		}
		if nodeState(st, x) == NodeWaiting {
			return st
		}
		if time.Now().After(deadline) || st.Done() {
			v.t.Fatalf("%s of run %s is not waiting: %s", x, run, dump(st))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// eventCount counts run's events of type typ for execution x.
func eventCount(v *env, run, typ, x string) int {
	v.t.Helper()
	evs, err := v.e.Events(v.ctx, run)
	if err != nil {
		v.t.Fatal(err)
	}
	n := 0
	for _, ev := range evs {
		if ev.Type == typ && ev.Fields["x"] == x {
			n++
		}
	}
	return n
}

// lateness returns how long after its due time run's wait x completed
// (from its node.waiting and node.completed events).
func lateness(v *env, run, x string) time.Duration {
	v.t.Helper()
	evs, err := v.e.Events(v.ctx, run)
	if err != nil {
		v.t.Fatal(err)
	}
	var due, done time.Time
	for _, ev := range evs {
		if ev.Fields["x"] != x {
			continue
		}
		switch ev.Type {
		case "node.waiting":
			ms, _ := strconv.ParseInt(ev.Fields["due"], 10, 64)
			due = time.UnixMilli(ms)
		case "node.completed":
			done = ev.Time
		}
	}
	if due.IsZero() || done.IsZero() {
		v.t.Fatalf("no node.waiting or node.completed of %s: %s", x, dump(evs))
	}
	return done.Sub(due)
}

// TestWaitFor: a wait of 300 ms completes after at least 300 ms, parked:
// a worker of one slot runs another run meanwhile, and no message is
// pending while it waits.
func TestWaitFor(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker(func(o *WorkerOptions) { o.Concurrency = 1 })
		start := time.Now()
		run := v.submit(waitWF(t, "waiter", "for", konst(`"300ms"`)), nil)
		st := waitWaiting(v, run, "w")
		if ns := st.Nodes["w"]; ns.Due.IsZero() || ns.Due.Before(start.Add(300*time.Millisecond).Truncate(time.Millisecond)) || st.Counter != 1 {
			t.Fatalf("waiting: %s", dump(st))
		}
		v.check(run)
		if n := pending(t, v.e); n != 0 {
			t.Errorf("%d messages pending while the wait is parked", n)
		}
		// The one slot is free: a run of three steps goes through.
		other := build(t, wfSpec{nodes: []*nodeSpec{task("a", "noop"), task("b", "noop", after("a")), task("c", "noop", after("b"))}})
		if st := v.run(other, nil); st.State != RunCompleted {
			t.Fatalf("other run: %s", dump(st))
		}
		st = v.wait(run)
		if el := time.Since(start); el < 300*time.Millisecond {
			t.Errorf("the wait completed after %s", el)
		}
		var res struct{ Until string }
		json.Unmarshal(st.Result, &res)
		due, err := time.Parse(time.RFC3339Nano, res.Until)
		if st.State != RunCompleted || err != nil || due.Before(start.Add(300*time.Millisecond).Truncate(time.Millisecond)) {
			t.Fatalf("%v %s", err, dump(st))
		}
		if c := eventCount(v, run, "node.waiting", "w"); c != 1 {
			t.Errorf("%d node.waiting events", c)
		}
		// Never early; late by the timer interval and a read (a generous
		// bound: a hang guard, not a measurement).
		if l := lateness(v, run, "w"); l < 0 || l > 5*time.Second {
			t.Errorf("completed %s after its due time", l)
		}
		waitNoPending(t, v.e)
	})
}

// TestWaitUntil: an until in the past completes at once (no parking); one
// computed by an expression waits until then.
func TestWaitUntil(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		st := v.run(waitWF(t, "past", "until", konst(`"2020-01-02T03:04:05Z"`)), nil)
		if st.State != RunCompleted || string(st.Result) != `{"until":"2020-01-02T03:04:05Z"}` {
			t.Fatalf("past: %s", dump(st))
		}
		if c := eventCount(v, st.RunID, "node.waiting", "w"); c != 0 {
			t.Errorf("a wait until a past time parked")
		}
		due := time.Now().Add(400 * time.Millisecond).UTC().Truncate(time.Millisecond)
		w := build(t, wfSpec{name: "expr", inputs: []ir.Input{input("due", ir.KindString)},
			outputs: []ir.Output{output("until", "w.output.until")}, nodes: []*nodeSpec{
				task("a", "cel", with("due", cexpr("input.due"))),
				task("w", "wait", after("a"), with("until", cexpr("a.output.due")), outType(waitOut)),
			}})
		st = v.run(w, map[string]any{"due": due.Format(time.RFC3339Nano)})
		if st.State != RunCompleted || string(st.Result) != `{"until":"`+due.Format(time.RFC3339Nano)+`"}` {
			t.Fatalf("expr: %s", dump(st))
		}
		if time.Now().Before(due) {
			t.Errorf("completed before its time")
		}
		// A bad time fails the node with code wait.
		st = v.run(waitWF(t, "bad", "until", konst(`"tomorrow"`)), nil)
		if st.State != RunFailed || st.Nodes["w"].Code != "wait" {
			t.Fatalf("bad: %s", dump(st))
		}
	})
}

// TestWaitCancelRetry: a cancelled run's wake is ignored; a partial retry
// parks the wait again, and it completes.
func TestWaitCancelRetry(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		run := v.submit(waitWF(t, "cancel", "for", konst(`"300ms"`)), nil)
		waitWaiting(v, run, "w")
		if err := v.e.Cancel(v.ctx, run); err != nil {
			t.Fatal(err)
		}
		time.Sleep(700 * time.Millisecond) // past the wake
		st, err := v.e.Status(v.ctx, run)
		if err != nil || st.State != RunCancelled || eventCount(v, run, "node.completed", "w") != 0 {
			t.Fatalf("cancelled: %v %s", err, dump(st))
		}
		v.check(run)
		waitNoPending(t, v.e)
		if err := v.e.Retry(v.ctx, run); err != nil {
			t.Fatal(err)
		}
		st = v.wait(run)
		if st.State != RunCompleted || eventCount(v, run, "node.waiting", "w") != 2 || eventCount(v, run, "node.completed", "w") != 1 {
			t.Fatalf("retried: %s", dump(st))
		}
	})
}

// TestWaitWorkerDies: the worker that parked a wait dies; another worker
// started later wakes it.
func TestWaitWorkerDies(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		o := fastWorker(v.reg)
		o.crash, o.Consumer = true, "doomed"
		w := v.e.NewWorker(o)
		ctx, kill := context.WithCancel(v.ctx)
		done := make(chan struct{})
		go func() { defer close(done); w.Run(ctx) }()
		run := v.submit(waitWF(t, "dies", "for", konst(`"500ms"`)), nil)
		waitWaiting(v, run, "w")
		kill()
		<-done
		time.Sleep(600 * time.Millisecond) // due meanwhile, with no worker
		v.worker()
		if st := v.wait(run); st.State != RunCompleted || eventCount(v, run, "node.completed", "w") != 1 {
			t.Fatalf("%s", dump(st))
		}
	})
}

// TestWaitDuplicateWake: a wake token delivered again, while the run goes
// on, is a dup.
func TestWaitDuplicateWake(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		wk := v.worker()
		w := build(t, wfSpec{name: "dup", outputs: []ir.Output{output("until", "w.output.until")}, nodes: []*nodeSpec{
			task("w", "wait", with("for", konst(`"300ms"`)), outType(waitOut)),
			task("b", "block", after("w")),
		}})
		run := v.submit(w, nil)
		waitWaiting(v, run, "w")
		shard, q := v.e.st.ks.shard(run), v.e.ControlQueue()
		members, err := v.e.st.rdb.ZRange(v.ctx, v.e.st.ks.timers(shard, q), 0, -1).Result()
		var wake string
		for _, m := range members {
			var tok Token
			if json.Unmarshal([]byte(m), &tok) == nil && tok.Kind == "wake" && tok.Run == run {
				wake = m
			}
		}
		if err != nil || wake == "" {
			t.Fatalf("no wake token in the timers: %v %v", members, err)
		}
		v.waitStarted() // w completed, b runs
		evs, _ := v.e.Events(v.ctx, run)
		dups := wk.Stats().Dups
		for range 2 {
			if err := v.e.st.rdb.XAdd(v.ctx, &redis.XAddArgs{Stream: v.e.st.ks.stream(shard, q), Values: []any{"t", wake}}).Err(); err != nil {
				t.Fatal(err)
			}
		}
		for end := time.Now().Add(10 * time.Second); wk.Stats().Dups < dups+2; {
			if time.Now().After(end) {
				t.Fatalf("dups %d, want %d", wk.Stats().Dups, dups+2)
			}
			time.Sleep(10 * time.Millisecond)
		}
		evs2, _ := v.e.Events(v.ctx, run)
		if len(evs2) != len(evs) {
			t.Fatalf("a duplicate wake wrote events: %s", dump(evs2[len(evs):]))
		}
		close(v.unblock)
		if st := v.wait(run); st.State != RunCompleted || eventCount(v, run, "node.completed", "w") != 1 {
			t.Fatalf("%s", dump(st))
		}
		waitNoPending(t, v.e)
	})
}

// TestWaitRedisRestart: a real redis-server with appendonly yes
// (appendfsync always) is killed and restarted while a wait is parked: the
// wait fires once, after its time.
func TestWaitRedisRestart(t *testing.T) {
	redistest.Require(t)
	srv := redistest.Start(t, redistest.Options{AOF: true})
	v := newEnv(t, backend{"redis-aof", func(testing.TB) string { return srv.URL() }})
	v.worker()
	start := time.Now()
	run := v.submit(waitWF(t, "restart", "for", konst(`"1500ms"`)), nil)
	waitWaiting(v, run, "w")
	srv.Kill()
	time.Sleep(300 * time.Millisecond)
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	st := v.wait(run)
	if st.State != RunCompleted || eventCount(v, run, "node.completed", "w") != 1 || eventCount(v, run, "node.waiting", "w") != 1 {
		t.Fatalf("%s", dump(st))
	}
	if el := time.Since(start); el < 1500*time.Millisecond {
		t.Errorf("fired after %s", el)
	}
	if l := lateness(v, run, "w"); l < 0 || l > 10*time.Second {
		t.Errorf("completed %s after its due time", l)
	}
	waitNoPending(t, v.e)
}

// TestWaitLoop: a wait in a loop body parks and wakes per iteration, and
// its wake evaluates the loop.
func TestWaitLoop(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		registerPoll(v)
		v.worker()
		w := build(t, wfSpec{outputs: []ir.Output{output("n", "check.output.n")}, nodes: []*nodeSpec{
			task("check", "poll"),
			task("w", "wait", after("check"), with("for", konst(`"50ms"`)), outType(waitOut), loop("check.output.n < 3", 5, "check")),
		}})
		st := v.run(w, nil)
		if st.State != RunCompleted || string(st.Result) != `{"n":3}` {
			t.Fatalf("%s", dump(st))
		}
		for _, x := range []string{"w@1", "w@2", "w@3"} {
			if nodeState(st, x) != NodeCompleted || eventCount(v, st.RunID, "node.waiting", x) != 1 {
				t.Errorf("%s: %s", x, nodeState(st, x))
			}
		}
	})
}

// TestWaitNotAsItem: a wait per for_each item (an IR the compiler would
// refuse) fails clearly, with code wait.
func TestWaitNotAsItem(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		w := build(t, wfSpec{nodes: []*nodeSpec{task("w", "wait", with("for", konst(`"1s"`)), forEach("x", "[1, 2]", 0))}})
		st := v.run(w, nil)
		if st.State != RunFailed || st.Nodes["w"].Code != "wait" {
			t.Fatalf("%s", dump(st))
		}
	})
}

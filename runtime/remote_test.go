package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wfc-lang/wfc/ir"
)

// remoteEnv is a test env with wfc workers for the control queue and a
// Remote for the handler queues.
func remoteEnv(t *testing.T, b backend, lease time.Duration) (*env, *Remote) {
	t.Helper()
	v := newEnv(t, b)
	v.worker()
	r, err := v.e.NewRemote(RemoteOptions{Lease: lease, MaxWait: 5 * time.Second, MaxDeliveries: 10, Blocking: 2, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	return v, r
}

// remoteWF: a (noop) -> b (crm.lookup, remote) -> c (noop); the result is
// b's output.
func remoteWF(t *testing.T, opts ...nodeOpt) *ir.Workflow {
	return build(t, wfSpec{
		inputs:  []ir.Input{input("who", ir.KindString)},
		outputs: []ir.Output{output("b", "b.output")},
		nodes: []*nodeSpec{
			task("a", "noop"),
			task("b", "crm.lookup", append([]nodeOpt{after("a"), with("who", cexpr("input.who"))}, opts...)...),
			task("c", "noop", after("b")),
		},
	})
}

// poll polls until a task comes or the test's patience ends.
func poll(t *testing.T, r *Remote, worker string, names ...string) *RemoteTask {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		task, err := r.Poll(context.Background(), worker, names, time.Second)
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		if task != nil {
			return task
		}
	}
	t.Fatal("no task came")
	return nil
}

func TestRemoteTask(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v, r := remoteEnv(t, b, 5*time.Second)
		run := v.submit(remoteWF(t), map[string]any{"who": "ada"})
		// No poller yet: status says so.
		deadline := time.Now().Add(10 * time.Second)
		for {
			st, _ := v.e.Status(v.ctx, run)
			if ns := st.Nodes["b"]; ns != nil && ns.Waiting == "no live worker serves queue h:crm.lookup" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("b does not wait for a worker: %s", dump(st))
			}
			time.Sleep(20 * time.Millisecond)
		}
		task := poll(t, r, "py-1", "crm.lookup")
		if task.Handler != "crm.lookup" || task.RunID != run || task.Node != "b" || task.Attempt != 1 || task.Item != -1 ||
			task.IdempotencyKey != run+"/b" || string(task.Config) != `{"who":"ada"}` || task.LeaseMS != 5000 || len(task.Lease) < 40 {
			t.Fatalf("task %s", dump(task))
		}
		// The poller is live in the registry; b runs.
		st, _ := v.e.Status(v.ctx, run)
		if ns := st.Nodes["b"]; ns.Waiting != "" || ns.State != NodeRunning {
			t.Fatalf("b with a poller: %s", dump(ns))
		}
		ws, _ := v.e.Workers(v.ctx)
		found := false
		for _, w := range ws {
			found = found || w.Consumer == "remote-py-1" && w.Live && len(w.Handlers) == 1 && w.Handlers[0] == "crm.lookup"
		}
		if !found {
			t.Fatalf("the poller is not in the registry: %s", dump(ws))
		}
		if d, err := r.Heartbeat(v.ctx, task.ID, task.Lease); err != nil || d != 5*time.Second {
			t.Fatalf("heartbeat: %v %v", d, err)
		}
		if err := r.Complete(v.ctx, task.ID, task.Lease, json.RawMessage(`{"name":"Ada Lovelace"}`)); err != nil {
			t.Fatal(err)
		}
		st = v.wait(run)
		if st.State != RunCompleted || string(st.Result) != `{"b":{"name":"Ada Lovelace"}}` {
			t.Fatalf("%s %s %s", st.State, st.Result, st.Error)
		}
		// A second completion is a duplicate, refused, and changes nothing.
		if err := r.Complete(v.ctx, task.ID, task.Lease, json.RawMessage(`{"name":"other"}`)); !errors.Is(err, ErrLeaseLost) {
			t.Fatalf("second completion: %v", err)
		}
		if err := r.Fail(v.ctx, task.ID, task.Lease, TaskError{Code: "x", Message: "late"}); !errors.Is(err, ErrLeaseLost) {
			t.Fatalf("failure after completion: %v", err)
		}
		if _, err := r.Heartbeat(v.ctx, task.ID, task.Lease); !errors.Is(err, ErrLeaseLost) {
			t.Fatalf("heartbeat after completion: %v", err)
		}
		if st2, _ := v.e.Status(v.ctx, run); string(st2.Result) != string(st.Result) {
			t.Fatalf("a duplicate changed the result: %s", st2.Result)
		}
		v.check(run)
		waitNoPending(t, v.e)
	})
}

// A poller that dies (never completes, never beats) loses its lease: the
// task goes to the next poller, and the dead one's late completion is a
// duplicate that changes nothing.
func TestRemoteLeaseExpiry(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v, r := remoteEnv(t, b, 300*time.Millisecond)
		run := v.submit(remoteWF(t), map[string]any{"who": "ada"})
		first := poll(t, r, "dies", "crm.lookup")
		// Before the lease expires, another poller gets nothing.
		if got, err := r.Poll(v.ctx, "other", []string{"crm.lookup"}, 100*time.Millisecond); err != nil || got != nil {
			t.Fatalf("a leased task went to a second poller: %v %v", got, err)
		}
		second := poll(t, r, "other", "crm.lookup")
		if second.ID != first.ID || second.Lease == first.Lease || second.IdempotencyKey != first.IdempotencyKey || second.Attempt != 1 {
			t.Fatalf("redelivery %s of %s", dump(second), dump(first))
		}
		if err := r.Complete(v.ctx, first.ID, first.Lease, json.RawMessage(`{"name":"late"}`)); !errors.Is(err, ErrLeaseLost) {
			t.Fatalf("late completion: %v", err)
		}
		if _, err := r.Heartbeat(v.ctx, first.ID, first.Lease); !errors.Is(err, ErrLeaseLost) {
			t.Fatalf("late heartbeat: %v", err)
		}
		if st, _ := v.e.Status(v.ctx, run); nodeState(st, "b") == NodeCompleted {
			t.Fatal("a late completion completed b")
		}
		if err := r.Complete(v.ctx, second.ID, second.Lease, json.RawMessage(`{"name":"on time"}`)); err != nil {
			t.Fatal(err)
		}
		st := v.wait(run)
		if string(st.Result) != `{"b":{"name":"on time"}}` {
			t.Fatalf("%s %s %s", st.State, st.Result, st.Error)
		}
		waitNoPending(t, v.e)
	})
}

// Heartbeats keep a task past its lease; no other poller takes it.
func TestRemoteHeartbeat(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v, r := remoteEnv(t, b, time.Second)
		run := v.submit(remoteWF(t), map[string]any{"who": "ada"})
		task := poll(t, r, "slow", "crm.lookup")
		ctx, cancel := context.WithCancel(v.ctx)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := r.Poll(ctx, "thief", []string{"crm.lookup"}, 2500*time.Millisecond)
			if err != nil && ctx.Err() == nil || got != nil {
				t.Errorf("a task kept alive went to another poller: %v %v", got, err)
			}
		}()
		for range 25 {
			time.Sleep(100 * time.Millisecond)
			if _, err := r.Heartbeat(v.ctx, task.ID, task.Lease); err != nil {
				t.Fatal(err)
			}
		}
		wg.Wait()
		cancel()
		if err := r.Complete(v.ctx, task.ID, task.Lease, json.RawMessage(`{"name":"x"}`)); err != nil {
			t.Fatal(err)
		}
		if st := v.wait(run); st.State != RunCompleted {
			t.Fatalf("%s %s", st.State, st.Error)
		}
	})
}

// A typed failure is a handler error: a retryable one is retried under
// the node's policy (the next attempt, same idempotency key), a permanent
// one fails the node with its code, which on_error routes read.
func TestRemoteFail(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v, r := remoteEnv(t, b, 5*time.Second)
		run := v.submit(remoteWF(t, retry(3, ir.BackoffFixed, 10)), map[string]any{"who": "ada"})
		t1 := poll(t, r, "p", "crm.lookup")
		if err := r.Fail(v.ctx, t1.ID, t1.Lease, TaskError{Code: "crm.busy", Message: "try later", Retryable: true}); err != nil {
			t.Fatal(err)
		}
		t2 := poll(t, r, "p", "crm.lookup")
		if t2.Attempt != 2 || t2.IdempotencyKey != t1.IdempotencyKey {
			t.Fatalf("retry %s", dump(t2))
		}
		if err := r.Fail(v.ctx, t2.ID, t2.Lease, TaskError{Code: "crm.denied", Message: "no such customer"}); err != nil {
			t.Fatal(err)
		}
		st := v.wait(run)
		ns := st.Nodes["b"]
		if st.State != RunFailed || ns == nil || ns.State != NodeFailed || ns.Code != "crm.denied" || !strings.Contains(ns.Error, "no such customer") {
			t.Fatalf("%s %s %s", st.State, st.Error, dump(ns))
		}
		// Bad codes are refused before anything is read.
		if err := r.Fail(v.ctx, t2.ID, t2.Lease, TaskError{Code: "bad code!"}); err == nil || errors.Is(err, ErrLeaseLost) {
			t.Fatalf("bad code: %v", err)
		}
	})
}

// A remote output is checked like a handler's: one that does not fit
// the handler's output type fails the attempt (code output, retried).
func TestRemoteOutputType(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v, r := remoteEnv(t, b, 5*time.Second)
		w := remoteWF(t, retry(2, ir.BackoffFixed, 10), outType(&ir.Type{Kind: ir.KindObject,
			Fields: []ir.Field{{Name: "n", Type: ir.Type{Kind: ir.KindInt}}}}))
		run := v.submit(w, map[string]any{"who": "ada"})
		t1 := poll(t, r, "p", "crm.lookup")
		if err := r.Complete(v.ctx, t1.ID, t1.Lease, json.RawMessage(`{"n":"not a number"}`)); err != nil {
			t.Fatal(err)
		}
		t2 := poll(t, r, "p", "crm.lookup")
		if t2.Attempt != 2 {
			t.Fatalf("attempt %d", t2.Attempt)
		}
		if err := r.Complete(v.ctx, t2.ID, t2.Lease, json.RawMessage(`{"m":1}`)); err != nil {
			t.Fatal(err)
		}
		st := v.wait(run)
		if ns := st.Nodes["b"]; st.State != RunFailed || ns.Code != CodeOutput {
			t.Fatalf("%s %s %s", st.State, st.Error, dump(ns))
		}
	})
}

// Concurrent pollers get distinct tasks; every run completes once.
func TestRemoteConcurrentPollers(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v, r := remoteEnv(t, b, 10*time.Second)
		w := remoteWF(t)
		const runs = 24
		ids := make([]string, runs)
		for i := range ids {
			ids[i] = v.submit(w, map[string]any{"who": fmt.Sprint(i)})
		}
		ctx, cancel := context.WithCancel(v.ctx)
		defer cancel()
		var mu sync.Mutex
		seen := map[string]string{} // idempotency key -> poller
		var wg sync.WaitGroup
		for p := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				name := fmt.Sprintf("p%d", p)
				for ctx.Err() == nil {
					task, err := r.Poll(ctx, name, []string{"crm.lookup"}, 200*time.Millisecond)
					if err != nil || task == nil {
						continue
					}
					mu.Lock()
					if prev, dup := seen[task.IdempotencyKey]; dup {
						t.Errorf("task %s went to %s and %s", task.IdempotencyKey, prev, name)
					}
					seen[task.IdempotencyKey] = name
					mu.Unlock()
					if err := r.Complete(ctx, task.ID, task.Lease, task.Config); err != nil && ctx.Err() == nil {
						t.Errorf("complete: %v", err)
					}
				}
			}()
		}
		for i, id := range ids {
			st := v.wait(id)
			if string(st.Result) != fmt.Sprintf(`{"b":{"who":"%d"}}`, i) {
				t.Errorf("run %d: %s %s", i, st.Result, st.Error)
			}
		}
		cancel()
		wg.Wait()
		if len(seen) != runs {
			t.Fatalf("%d tasks for %d runs", len(seen), runs)
		}
		waitNoPending(t, v.e)
	})
}

// A poll given up by its caller takes nothing; bad polls are refused.
func TestRemoteBadInput(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v, r := remoteEnv(t, b, 5*time.Second)
		var pe *PollError
		for _, c := range []struct {
			worker string
			names  []string
		}{
			{"ok", []string{"noop"}},
			{"ok", []string{"exec"}},
			{"ok", nil},
			{"bad name", []string{"crm.lookup"}},
			{"", []string{"crm.lookup"}},
			{strings.Repeat("x", 200), []string{"crm.lookup"}},
		} {
			if _, err := r.Poll(v.ctx, c.worker, c.names, 0); !errors.As(err, &pe) {
				t.Errorf("poll %q %q: %v", c.worker, c.names, err)
			}
		}
		for _, id := range []string{"", "!!", "MH5kZWZhdWx0fjEtMQ", taskID(0, "h:x", "nope"), taskID(99, "h:x", "1-1")} {
			if err := r.Complete(v.ctx, id, "x", json.RawMessage(`{}`)); !errors.Is(err, ErrUnknownTask) {
				t.Errorf("complete %q: %v", id, err)
			}
		}
		// A poll for a handler no run used creates no key.
		if task, err := r.Poll(v.ctx, "ok", []string{"made.up"}, 150*time.Millisecond); task != nil || err != nil {
			t.Fatalf("poll of a made-up handler: %v %v", task, err)
		}
		if n, _ := v.e.st.rdb.Exists(v.ctx, v.e.st.ks.stream(0, HandlerQueue("made.up"))).Result(); n != 0 {
			t.Fatal("a poll created a queue")
		}
		// A cancelled poll returns its context's error; the task stays
		// for the next poller at once (not after a lease).
		ctx, cancel := context.WithCancel(v.ctx)
		done := make(chan error, 1)
		go func() {
			_, err := r.Poll(ctx, "gone", []string{"crm.lookup"}, 3*time.Second)
			done <- err
		}()
		time.Sleep(100 * time.Millisecond)
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled poll: %v", err)
		}
		run := v.submit(remoteWF(t), map[string]any{"who": "ada"})
		task := poll(t, r, "p", "crm.lookup")
		// A wrong lease changes nothing.
		if err := r.Complete(v.ctx, task.ID, "guess", json.RawMessage(`{}`)); !errors.Is(err, ErrLeaseLost) {
			t.Fatalf("wrong lease: %v", err)
		}
		if err := r.Complete(v.ctx, task.ID, task.Lease, json.RawMessage(`{}`)); err != nil {
			t.Fatal(err)
		}
		v.wait(run)
	})
}

// Two processes serve the same pollers: a task polled through one is
// beaten and completed through the other (all the state is in Redis).
func TestRemoteTwoProcesses(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v, r := remoteEnv(t, b, 5*time.Second)
		e2 := openEngine(t, backend{"same", func(testing.TB) string { return engineURL(v.e) }}, Options{Prefix: v.e.opts.Prefix})
		r2, err := e2.NewRemote(RemoteOptions{Lease: 5 * time.Second, Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		run := v.submit(remoteWF(t), map[string]any{"who": "ada"})
		task := poll(t, r, "p", "crm.lookup")
		if _, err := r2.Heartbeat(v.ctx, task.ID, task.Lease); err != nil {
			t.Fatal(err)
		}
		if err := r2.Complete(v.ctx, task.ID, task.Lease, json.RawMessage(`{"name":"via two"}`)); err != nil {
			t.Fatal(err)
		}
		if err := r.Complete(v.ctx, task.ID, task.Lease, json.RawMessage(`{"name":"again"}`)); !errors.Is(err, ErrLeaseLost) {
			t.Fatalf("second completion through the first process: %v", err)
		}
		if st := v.wait(run); string(st.Result) != `{"b":{"name":"via two"}}` {
			t.Fatalf("%s %s", st.Result, st.Error)
		}
	})
}

// A task whose pollers die every time is given up after MaxDeliveries:
// its node fails with code lost, as with wfc worker.
func TestRemotePoison(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v, _ := remoteEnv(t, b, time.Second)
		r, err := v.e.NewRemote(RemoteOptions{Lease: 150 * time.Millisecond, MaxDeliveries: 2, Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		run := v.submit(remoteWF(t), map[string]any{"who": "ada"})
		for i := range 2 {
			if task := poll(t, r, fmt.Sprintf("dies%d", i), "crm.lookup"); task.Attempt != 1 {
				t.Fatalf("delivery %d: %s", i+1, dump(task))
			}
		}
		// The third delivery is not handed out.
		deadline := time.Now().Add(10 * time.Second)
		for {
			task, err := r.Poll(v.ctx, "dies2", []string{"crm.lookup"}, 300*time.Millisecond)
			if err != nil || task != nil {
				t.Fatalf("a poisoned task was handed out: %v %v", task, err)
			}
			if st, _ := v.e.Status(v.ctx, run); st.State != RunRunning || time.Now().After(deadline) {
				break
			}
		}
		st := v.wait(run)
		if ns := st.Nodes["b"]; st.State != RunFailed || ns == nil || ns.Code != CodeLost {
			t.Fatalf("%s %s %s", st.State, st.Error, dump(st.Nodes["b"]))
		}
	})
}

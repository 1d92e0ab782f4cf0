package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/wfc-lang/wfc/ir"
)

// checkTimedOut waits for run to end and checks that b failed with the
// typed timeout error (no retry left).
func checkTimedOut(t *testing.T, v *env, run string) *Status {
	t.Helper()
	st := v.wait(run)
	ns := st.Nodes["b"]
	if st.State != RunFailed || ns == nil || ns.State != NodeFailed || ns.Code != "timeout" || !strings.Contains(ns.Error, "timed out after 300ms") {
		t.Fatalf("run %s, b %s", st.State, dump(ns))
	}
	return st
}

// A remote task of a node with a timeout fails with error code timeout
// once the timeout passed, although its worker keeps heartbeating: the
// heartbeat past the deadline says so, and the worker's late completion
// is a duplicate that changes nothing.
func TestRemoteTimeoutHeartbeating(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v, r := remoteEnv(t, b, 5*time.Second)
		run := v.submit(remoteWF(t, timeout(300)), map[string]any{"who": "ada"})
		task := poll(t, r, "slow", "crm.lookup")
		var err error
		for range 300 {
			if _, err = r.Heartbeat(v.ctx, task.ID, task.Lease); err != nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if !errors.Is(err, ErrTaskTimedOut) {
			t.Fatalf("heartbeats past the timeout: %v, want ErrTaskTimedOut", err)
		}
		st := checkTimedOut(t, v, run)
		if err := r.Complete(v.ctx, task.ID, task.Lease, json.RawMessage(`{"name":"late"}`)); !errors.Is(err, ErrLeaseLost) {
			t.Fatalf("late completion: %v", err)
		}
		if _, err := r.Heartbeat(v.ctx, task.ID, task.Lease); !errors.Is(err, ErrLeaseLost) {
			t.Fatalf("heartbeat after the timeout: %v", err)
		}
		if st2, _ := v.e.Status(v.ctx, run); st2.State != st.State || st2.Nodes["b"].State != NodeFailed || st2.Nodes["c"] != nil && st2.Nodes["c"].State == NodeCompleted {
			t.Fatalf("the late completion changed the run: %s", dump(st2))
		}
		waitNoPending(t, v.e)
	})
}

// A worker that holds a task silently (its lease is long) loses it to
// the timeout all the same: the next poll of any worker fails it.
func TestRemoteTimeoutSilentWorker(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v, r := remoteEnv(t, b, time.Minute)
		run := v.submit(remoteWF(t, timeout(300)), map[string]any{"who": "ada"})
		task := poll(t, r, "silent", "crm.lookup")
		var st *Status
		for range 500 {
			// Another poller's polls (of a handler with no task) time it out.
			if _, err := r.Poll(v.ctx, "other", []string{"crm.lookup"}, 50*time.Millisecond); err != nil {
				t.Fatal(err)
			}
			if st, _ = v.e.Status(v.ctx, run); st.State != RunRunning {
				break
			}
		}
		checkTimedOut(t, v, run)
		if err := r.Complete(v.ctx, task.ID, task.Lease, json.RawMessage(`{"name":"late"}`)); !errors.Is(err, ErrLeaseLost) {
			t.Fatalf("late completion: %v", err)
		}
		waitNoPending(t, v.e)
	})
}

// With no poller at all, the sweep (which wfc serve runs) fails a task
// held past its node's timeout: the run goes on without anyone polling.
func TestRemoteTimeoutSweep(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v, r := remoteEnv(t, b, time.Minute)
		run := v.submit(remoteWF(t, timeout(300)), map[string]any{"who": "ada"})
		task := poll(t, r, "silent", "crm.lookup")
		if task.TimeoutMS != 300 {
			t.Fatalf("the task tells timeout_ms %d, want the node's 300", task.TimeoutMS)
		}
		ctx, stop := context.WithCancel(v.ctx)
		defer stop()
		go r.Sweep(ctx)
		st := checkTimedOut(t, v, run)
		// The sweep drops the lease just after it failed the attempt: a
		// completion in between is told the timeout passed, one after it
		// that the lease is gone; neither changes anything.
		if err := r.Complete(v.ctx, task.ID, task.Lease, json.RawMessage(`{"name":"late"}`)); !errors.Is(err, ErrLeaseLost) && !errors.Is(err, ErrTaskTimedOut) {
			t.Fatalf("late completion: %v", err)
		}
		if st2, _ := v.e.Status(v.ctx, run); st2.State != st.State || st2.Nodes["b"].State != NodeFailed {
			t.Fatalf("the late completion changed the run: %s", dump(st2))
		}
		waitNoPending(t, v.e)
	})
}

// A completion that comes past the timeout, before anything else noticed
// it, is not taken: the attempt timed out, and the node's retry policy
// retries it (retryable, as a Go handler's timeout); a completion in time
// completes the next attempt.
func TestRemoteTimeoutLateCompletionRetried(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v, r := remoteEnv(t, b, time.Minute)
		run := v.submit(remoteWF(t, timeout(300), retry(2, ir.BackoffFixed, 10)), map[string]any{"who": "ada"})
		t1 := poll(t, r, "w", "crm.lookup")
		_, q, msgID, err := r.parseID(t1.ID)
		if err != nil {
			t.Fatal(err)
		}
		for {
			// Wait past the deadline, reading its score (not the clock).
			due, err := v.e.st.rdb.ZScore(v.ctx, r.deadlines(0), deadlineMember(q, msgID, leaseSum(t1.Lease))).Result()
			if err != nil {
				t.Fatalf("no deadline for the task: %v", err)
			}
			if int64(due) < nowMS() {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err := r.Complete(v.ctx, t1.ID, t1.Lease, json.RawMessage(`{"name":"late"}`)); !errors.Is(err, ErrTaskTimedOut) {
			t.Fatalf("completion past the timeout: %v, want ErrTaskTimedOut", err)
		}
		t2 := poll(t, r, "w", "crm.lookup")
		if t2.Attempt != 2 || t2.IdempotencyKey != t1.IdempotencyKey {
			t.Fatalf("the retry: %s", dump(t2))
		}
		if err := r.Complete(v.ctx, t2.ID, t2.Lease, json.RawMessage(`{"name":"in time"}`)); err != nil {
			t.Fatal(err)
		}
		st := v.wait(run)
		if st.State != RunCompleted || string(st.Result) != `{"b":{"name":"in time"}}` {
			t.Fatalf("%s %s %s", st.State, st.Result, st.Error)
		}
		// The first attempt's completion, again: a duplicate.
		if err := r.Complete(v.ctx, t1.ID, t1.Lease, json.RawMessage(`{"name":"late"}`)); !errors.Is(err, ErrLeaseLost) {
			t.Fatalf("late completion: %v", err)
		}
		if n, _ := v.e.st.rdb.ZCard(v.ctx, r.deadlines(0)).Result(); n != 0 {
			t.Fatalf("%d deadlines left", n)
		}
		waitNoPending(t, v.e)
	})
}

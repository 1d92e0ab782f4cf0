package runtime

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/runtime/handlers"
)

// A run that failed while a flow node waited on its child (the child is
// cancelled with it) and is then retried: the flow node runs again with a
// new child (the old one's end, of the old generation, is no news), and
// the run completes with that child's result. Also when the old child's
// cancel races the retry.
func TestFlowRetryWhileWaiting(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		// The child's task blocks the first time (until the parent's
		// failure cancels the child), then doubles.
		kidCalls, fCalls, run := failedFlowRetried(t, v, nil)
		st := v.wait(run)
		if st.State != RunCompleted {
			t.Fatalf("after retry: %s", dump(st))
		}
		if got := string(st.Nodes["c"].Output); got != `{"doubled":6}` {
			t.Errorf("c.output = %s", got)
		}
		if kidCalls.Load() != 2 || fCalls.Load() != 2 {
			t.Errorf("child task ran %d times, f %d", kidCalls.Load(), fCalls.Load())
		}
		noDanglingChild(t, v.e, st)
		waitNoPending(t, v.e)
	})
}

// An orphans token processed after the run was retried (its end queued
// it; the retry came first) cancels the children of the old generation
// only: the child the retried flow node started runs on, and the run
// completes with it. Before, the late token cancelled the new child too
// and failed the retried run (seen once in CI in TestFlowRetryWhileWaiting).
func TestLateOrphansKeepNewChild(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		ctx := context.Background()
		release := make(chan struct{})
		// The second child's task waits until released.
		kidCalls, _, run := failedFlowRetried(t, v, release)
		waitFor(t, "the new child's task to start", func() bool { return kidCalls.Load() >= 2 })
		// The old end's orphans token, once more, now.
		tok, _ := json.Marshal(Token{Kind: "orphans", Run: run, Hop: 0, Attempt: 1, Item: -1})
		stream := v.e.st.ks.stream(v.e.st.ks.shard(run), ControlQueue)
		if err := v.e.st.rdb.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: []any{"t", string(tok)}}).Err(); err != nil {
			t.Fatal(err)
		}
		// Taken within milliseconds by the idle worker: before, its
		// cancel of the new child had ended the run by then.
		time.Sleep(500 * time.Millisecond)
		st, err := v.e.Status(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		if st.State != RunRunning || nodeState(st, "c") != NodeWaiting {
			t.Fatalf("after a late orphans token: %s", dump(st))
		}
		close(release)
		st = v.wait(run)
		if st.State != RunCompleted {
			t.Fatalf("after retry: %s", dump(st))
		}
		noDanglingChild(t, v.e, st)
		waitNoPending(t, v.e)
	})
}

// failedFlowRetried runs a parent whose flow node c starts a child while
// task f fails the run, the first time once the child's task started
// (which blocks until its run is cancelled), and retries the run. The
// child's later calls return at once, or when second is closed. It returns
// the calls of the child's task and of f, and the run.
func failedFlowRetried(t *testing.T, v *env, second <-chan struct{}) (kidCalls, fCalls *atomic.Int32, run string) {
	t.Helper()
	kidCalls, fCalls = new(atomic.Int32), new(atomic.Int32)
	v.reg.RegisterFunc("firstblocks", func(ctx context.Context, req handlers.Request) (json.RawMessage, error) {
		v.note(req)
		if kidCalls.Add(1) == 1 {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		if second != nil {
			select {
			case <-second:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return json.RawMessage(`{}`), nil
	})
	v.reg.RegisterFunc("failonce", func(ctx context.Context, req handlers.Request) (json.RawMessage, error) {
		v.note(req)
		if fCalls.Add(1) == 1 {
			waitFor(t, "the child's task to start", func() bool { return kidCalls.Load() >= 1 })
			return nil, handlers.Permanentf("failonce: first call")
		}
		return json.RawMessage(`{"ok":true}`), nil
	})
	v.worker()
	child := childWF(t, "kid", "firstblocks")
	w := build(t, wfSpec{name: "parent", children: []*ir.Workflow{child}, nodes: []*nodeSpec{
		flowNode(t, "c", child, fwith("n", konst("3"))),
		task("f", "failonce"),
	}})
	run = v.submit(w, nil)
	if st := v.wait(run); st.State != RunFailed || nodeState(st, "c") == NodeCompleted {
		t.Fatalf("first end: %s", dump(st))
	}
	if err := v.e.Retry(context.Background(), run); err != nil {
		t.Fatal(err)
	}
	return kidCalls, fCalls, run
}

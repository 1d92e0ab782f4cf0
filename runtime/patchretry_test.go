package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/runtime/handlers"
)

// patcher applies patches to run in a loop, each adding a node behind
// behind (running noop, which the workflows declare), until stop is closed (or 40 applied): the run's graph changes
// under whoever reads it meanwhile. started is closed after the first
// patch applied (or refused); done says how many applied.
func patcher(v *env, run, behind, prefix string, stop <-chan struct{}) (started <-chan struct{}, done <-chan int) {
	first, out := make(chan struct{}), make(chan int, 1)
	go func() {
		n := 0
		defer func() { out <- n }()
		for i := 0; n < 40; i++ {
			_, err := patchRun(v, run, addNode(fmt.Sprintf("%s%d", prefix, i), "noop", behind), false)
			if err == nil {
				n++
			} else if !errors.As(err, new(*PatchRefusedError)) && !errors.Is(err, ErrPatchConflict) {
				v.t.Errorf("patch: %v", err)
			}
			if i == 0 {
				close(first)
			}
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	return first, out
}

// TestOutsideCallsRacePatches: Cancel, Decide, Signal and Retry, each
// racing a loop of patches of the same run, never fail with
// errGraphChanged (they read the run again, as workers do), and the run
// ends as the call says, its log replaying to its live state.
func TestOutsideCallsRacePatches(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		// hold keeps a node running a while, without taking a worker
		// slot for long.
		v.reg.RegisterFunc("hold", func(ctx context.Context, req handlers.Request) (json.RawMessage, error) {
			select {
			case <-time.After(300 * time.Millisecond):
				return json.RawMessage(`{}`), nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		})
		// stay keeps a node running until its run ends (the worker's
		// heartbeat cancels it then): a cancel that must find the run
		// running cannot depend on how long the patches before it take.
		v.reg.RegisterFunc("stay", func(ctx context.Context, req handlers.Request) (json.RawMessage, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		})
		v.worker()
		const rounds = 8
		patched := 0
		race := func(run, behind string, call func() error) {
			t.Helper()
			stop := make(chan struct{})
			started, n := patcher(v, run, behind, "p", stop)
			<-started
			err := call()
			close(stop)
			patched += <-n
			if errors.Is(err, errGraphChanged) {
				t.Fatalf("run %s: the call raced a patch and gave up: %v", run, err)
			}
			if err != nil {
				t.Fatalf("run %s: %v", run, err)
			}
		}

		t.Run("cancel", func(t *testing.T) {
			w := build(t, wfSpec{nodes: []*nodeSpec{task("h", "stay"), task("z", "noop", after("h"))}})
			for range rounds {
				run := v.submit(w, nil)
				waitNode(t, v, run, "h", NodeRunning)
				race(run, "h", func() error { return v.e.Cancel(v.ctx, run) })
				if st := v.wait(run); st.State != RunCancelled {
					t.Fatalf("run %s is %s, want cancelled", run, st.State)
				}
			}
		})
		t.Run("decide", func(t *testing.T) {
			w := approvalWF(t, false)
			for range rounds {
				run := v.submit(w, nil)
				waitOpen(v, run, "review")
				race(run, "review", func() error {
					return v.e.Decide(v.ctx, run, "review", Decision{Approve: true, By: "ann@example.com"})
				})
				if st := v.wait(run); st.State != RunCompleted || nodeState(st, "send") != NodeCompleted {
					t.Fatalf("run %s: %s", run, dump(st))
				}
			}
		})
		t.Run("signal", func(t *testing.T) {
			w := signalWF(t, false)
			for i := range rounds {
				run := v.submit(w, map[string]any{"order": fmt.Sprint("o", i)})
				waitNode(t, v, run, "s", NodeWaiting)
				race(run, "s", func() error {
					x, err := v.e.Signal(v.ctx, run, "reply", fmt.Sprint("o", i), json.RawMessage(`{"text":"hi"}`))
					if err == nil && x == "" {
						return errors.New("the signal was kept, not taken by the waiting s")
					}
					return err
				})
				if st := v.wait(run); st.State != RunCompleted || resultText(t, st) != "hi" {
					t.Fatalf("run %s: %s", run, dump(st))
				}
			}
		})
		t.Run("retry", func(t *testing.T) {
			// x fails the run at once while h still runs; each retry runs
			// x again. A patch lands only while the run runs, so the race
			// is between concurrent retries and patches of the retried
			// run: a retry that read the run before another retry and a
			// patch must read it again.
			w := build(t, wfSpec{nodes: []*nodeSpec{task("x", "perm"), task("h", "hold"), task("z", "noop", after("h"))}})
			run := v.submit(w, nil)
			if st := v.wait(run); st.State != RunFailed {
				t.Fatalf("run %s is %s, want failed", run, st.State)
			}
			stop := make(chan struct{})
			_, n := patcher(v, run, "h", "r", stop)
			var ok atomic.Int32
			var wg sync.WaitGroup
			for g := range 3 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range rounds {
						err := v.e.Retry(v.ctx, run)
						if errors.Is(err, errGraphChanged) {
							t.Errorf("retry %d raced a patch and gave up: %v", g, err)
						}
						if err == nil {
							ok.Add(1)
						}
						time.Sleep(time.Duration(g) * time.Millisecond)
					}
				}()
			}
			wg.Wait()
			close(stop)
			patched += <-n
			if ok.Load() == 0 {
				t.Fatal("no retry applied")
			}
			if st := v.wait(run); st.State != RunFailed {
				t.Fatalf("run %s: %s", run, dump(st))
			}
		})
		t.Logf("%d patches applied during the calls", patched)
		if patched == 0 {
			t.Error("no patch raced the calls")
		}
	})
}

// TestPatchRefusesFinishingRun: a run whose work is done waits for its
// finish token (its outputs) on the control queue, which no worker serves
// here: a patch then is refused, nothing changed, and the run ends with
// its outputs once a worker serves that queue.
func TestPatchRefusesFinishingRun(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b, Options{Queues: map[string]string{"count": "side"}})
		// The output naming run is not evaluated ahead (ahead.go): the
		// run ends through its finish token.
		w := build(t, wfSpec{outputs: []ir.Output{output("r", "a.output"), output("ok", `run.id != ""`)},
			nodes: []*nodeSpec{task("a", "count", with("n", konst(`1`)))}})
		v.worker(func(o *WorkerOptions) { o.Queues = []string{"side"} })
		run := v.submit(w, nil)
		waitNode(t, v, run, "a", NodeCompleted)
		deadline := time.Now().Add(10 * time.Second)
		for {
			st, err := v.e.Status(v.ctx, run)
			if err != nil {
				t.Fatal(err)
			}
			if st.Counter == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("never finishing: %s", dump(st))
			}
			time.Sleep(10 * time.Millisecond)
		}
		before := runSnapshot(t, v, run)
		_, err := patchRun(v, run, addNode("late", "count", "a"), false)
		var pr *PatchRefusedError
		if !errors.As(err, &pr) || !strings.Contains(err.Error(), "finishing") {
			t.Fatalf("patch of a finishing run: %v", err)
		}
		if after := runSnapshot(t, v, run); after != before {
			t.Fatalf("a refused patch changed the run:\n%s\n%s", before, after)
		}
		v.worker(func(o *WorkerOptions) { o.Queues = []string{ControlQueue} })
		st := v.wait(run)
		if st.State != RunCompleted || string(st.Result) != `{"r":{"n":1},"ok":true}` || st.Nodes["late"] != nil {
			t.Fatalf("status: %s", dump(st))
		}
	})
}

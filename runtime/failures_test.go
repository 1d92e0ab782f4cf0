package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/runtime/handlers"
)

// The payment retry of seed 000: a loop whose condition combines the
// output, a list membership and a cross-node comparison, an exhausted
// path, a branch evaluated when the loop ends, and a handler-level retry.
func TestPaymentRetryCompositeCondition(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		var mu sync.Mutex
		calls := map[string]int{}
		// payment: the first config.transient calls fail (retryable error),
		// the next config.soft calls answer status "failed" with a
		// retryable error code, then it succeeds.
		v.reg.RegisterFunc("payment", func(ctx context.Context, req handlers.Request) (json.RawMessage, error) {
			var c struct {
				Amount    float64 `json:"amount"`
				Transient int     `json:"transient"`
				Soft      int     `json:"soft"`
			}
			json.Unmarshal(req.Config, &c)
			mu.Lock()
			calls[req.RunID]++
			n := calls[req.RunID]
			mu.Unlock()
			switch {
			case n <= c.Transient:
				return nil, fmt.Errorf("connection reset")
			case n <= c.Transient+c.Soft:
				return json.RawMessage(fmt.Sprintf(`{"status":"failed","error_code":"TEMP_ERROR","amount":%v}`, c.Amount)), nil
			}
			return json.RawMessage(fmt.Sprintf(`{"status":"success","error_code":"","amount":%v}`, c.Amount)), nil
		})
		v.worker()
		mk := func(soft int) *ir.Workflow {
			return build(t, wfSpec{
				inputs: []ir.Input{input("amount", ir.KindNumber)},
				outputs: []ir.Output{
					output("path", "has(send_premium_confirmation.output) ? 'premium' : has(send_standard_confirmation.output) ? 'standard' : has(refund_customer.output) ? 'refund' : has(manual_review.output) ? 'review' : 'none'"),
					output("crm", "has(update_crm.output)"),
				},
				nodes: []*nodeSpec{
					task("calculate_total", "cel", with("final_amount", cexpr("input.amount"))),
					task("call_payment_api", "payment", after("calculate_total"),
						with("amount", cexpr("calculate_total.output.final_amount")),
						with("transient", konst("1")), with("soft", konst(fmt.Sprint(soft))),
						retry(3, ir.BackoffExponential, 30),
						loop("output.status != 'success' && output.error_code in ['TIMEOUT', 'RATE_LIMIT', 'TEMP_ERROR'] && output.amount == calculate_total.output.final_amount", 5, "", "refund_customer"),
						branch([]string{"manual_review"},
							rule("output.status == 'success' && output.amount >= 1000.0", "send_premium_confirmation", "update_crm"),
							rule("output.status == 'success'", "send_standard_confirmation"))),
					task("send_premium_confirmation", "noop"),
					task("update_crm", "noop"),
					task("send_standard_confirmation", "noop"),
					task("manual_review", "noop"),
					task("refund_customer", "noop"),
				},
			})
		}
		st := v.run(mk(2), map[string]any{"amount": 1500})
		if st.State != RunCompleted || string(st.Result) != `{"path":"premium","crm":true}` {
			t.Fatalf("premium: %s %s", st.State, st.Result)
		}
		if nodeState(st, "call_payment_api@3") != NodeCompleted {
			t.Errorf("want 3 iterations: %s", dump(st.Nodes))
		}
		st = v.run(mk(1), map[string]any{"amount": 20})
		if string(st.Result) != `{"path":"standard","crm":false}` {
			t.Errorf("standard: %s", st.Result)
		}
		st = v.run(mk(10), map[string]any{"amount": 20})
		if string(st.Result) != `{"path":"refund","crm":false}` {
			t.Errorf("refund: %s", st.Result)
		}
	})
}

func TestRetryBackoffTiming(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		for _, c := range []struct {
			backoff string
			gaps    []time.Duration
		}{
			{ir.BackoffFixed, []time.Duration{150, 150, 150}},
			{ir.BackoffLinear, []time.Duration{100, 200, 300}},
			{ir.BackoffExponential, []time.Duration{100, 200, 400}},
		} {
			delay := int64(c.gaps[0])
			w := build(t, wfSpec{nodes: []*nodeSpec{
				task("f", "flaky", with("fails", konst("3")), retry(4, c.backoff, delay)),
			}})
			st := v.run(w, nil)
			if st.State != RunCompleted || string(st.Output("f")) != `{"attempt":4}` {
				t.Fatalf("%s: %s %s", c.backoff, st.State, st.Output("f"))
			}
			v.mu.Lock()
			ts := v.times[st.RunID+"/f"]
			v.mu.Unlock()
			if len(ts) != 4 {
				t.Fatalf("%s: %d attempts", c.backoff, len(ts))
			}
			// Each retry's due time (its node.retry event) is the delay
			// the worker chose after the failed attempt: between that
			// attempt's start and the event's time (ts, taken after the
			// due time), so it is checked by causal bounds, not by a
			// tolerance on how soon the next attempt ran, which a loaded
			// machine stretches (it failed in CI). The next attempt must
			// not start before it (whole milliseconds: up to 1 ms early).
			evs, err := v.e.Events(v.ctx, st.RunID)
			if err != nil {
				t.Fatal(err)
			}
			var retries []Event
			for _, ev := range evs {
				if ev.Type == "node.retry" && ev.Fields["x"] == "f" {
					retries = append(retries, ev)
				}
			}
			if len(retries) != len(c.gaps) {
				t.Fatalf("%s: %d node.retry events, want %d", c.backoff, len(retries), len(c.gaps))
			}
			for i, want := range c.gaps {
				want *= time.Millisecond
				ms, err := strconv.ParseInt(retries[i].Fields["due"], 10, 64)
				if err != nil {
					t.Fatalf("%s: retry %d: due %q", c.backoff, i+1, retries[i].Fields["due"])
				}
				due := time.UnixMilli(ms)
				if lo, hi := due.Sub(retries[i].Time), due.Sub(ts[i]); lo > want || hi < want-time.Millisecond {
					t.Errorf("%s: retry %d due %v after its event and %v after its attempt started, want a delay of %v between them", c.backoff, i+1, lo, hi, want)
				}
				if early := due.Sub(ts[i+1]); early > time.Millisecond {
					t.Errorf("%s: attempt %d started %v before its due time", c.backoff, i+2, early)
				}
			}
		}
	})
}

func TestRetryExhaustedAndPermanent(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		w := build(t, wfSpec{nodes: []*nodeSpec{
			task("f", "flaky", with("fails", konst("5")), retry(2, ir.BackoffFixed, 10)),
			task("g", "noop", after("f")),
		}})
		st := v.run(w, nil)
		if st.State != RunFailed || st.FailedNode != "f" || !strings.Contains(st.Error, "attempt 2 of 2") {
			t.Fatalf("%s %q %q", st.State, st.FailedNode, st.Error)
		}
		if v.callCount(st.RunID+"/f") != 2 {
			t.Errorf("%d attempts", v.callCount(st.RunID+"/f"))
		}
		if nodeState(st, "g") != "absent" {
			t.Errorf("g is %s after fail-fast", nodeState(st, "g"))
		}
		// A permanent error does not use the remaining attempts.
		w = build(t, wfSpec{nodes: []*nodeSpec{task("p", "perm", retry(5, ir.BackoffFixed, 10))}})
		st = v.run(w, nil)
		if st.State != RunFailed || v.callCount(st.RunID+"/p") != 1 {
			t.Errorf("permanent: %s after %d calls", st.State, v.callCount(st.RunID+"/p"))
		}
	})
}

func TestBadHandlers(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		// A worker told to serve the queue of a handler it lacks fails
		// its nodes (by default it would not serve it: TestLimitWaitingForWorker).
		v.worker(func(o *WorkerOptions) { o.Queues = []string{HandlerQueue("nosuch")} })
		for _, c := range []struct{ handler, want string }{
			{"boom", "panicked: boom"},
			{"badjson", "invalid JSON"},
			{"nosuch", `no handler "nosuch"`},
		} {
			w := build(t, wfSpec{nodes: []*nodeSpec{task("a", c.handler, retry(3, ir.BackoffFixed, 10))}})
			st := v.run(w, nil)
			if st.State != RunFailed || !strings.Contains(st.Error, c.want) {
				t.Errorf("%s: %s %q", c.handler, st.State, st.Error)
			}
		}
		// A CEL evaluation error fails the node without retry.
		w := build(t, wfSpec{nodes: []*nodeSpec{task("a", "cel", with("x", cexpr("1 / (size('') - 0)")), retry(3, ir.BackoffFixed, 10))}})
		st := v.run(w, nil)
		if st.State != RunFailed || !strings.Contains(st.Error, "division by zero") {
			t.Errorf("eval: %s %q", st.State, st.Error)
		}
		// An output that does not fit the node's type fails the attempt.
		w = build(t, wfSpec{nodes: []*nodeSpec{task("a", "echo", with("n", konst(`"x"`)),
			outType(&ir.Type{Kind: ir.KindObject, Fields: []ir.Field{{Name: "n", Type: ir.Type{Kind: ir.KindInt}}}}))}})
		st = v.run(w, nil)
		if st.State != RunFailed || !strings.Contains(st.Error, "output.n: got string, want int") {
			t.Errorf("type: %s %q", st.State, st.Error)
		}
	})
}

func TestAttemptTimeout(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		w := build(t, wfSpec{nodes: []*nodeSpec{
			task("s", "sleep", with("duration", konst(`"5s"`)), timeout(100), retry(2, ir.BackoffFixed, 10)),
		}})
		start := time.Now()
		st := v.run(w, nil)
		if st.State != RunFailed || !strings.Contains(st.Error, "timed out after 100ms") {
			t.Fatalf("%s %q", st.State, st.Error)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("took %s", d)
		}
	})
}

func TestOnError(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		w := build(t, wfSpec{
			outputs: []ir.Output{output("ops", "has(notify_ops.output)"), output("next", "has(next.output)"), output("end", "has(end.output)"),
				output("both", "has(both.output)")},
			nodes: []*nodeSpec{
				task("charge", "perm", onError("notify_ops")),
				task("next", "noop", after("charge")),
				task("notify_ops", "noop"),
				// settled: runs on whichever path was taken; all: needs both.
				task("end", "noop", after("next", "notify_ops"), joinMode(ir.JoinSettled)),
				task("both", "noop", after("next", "notify_ops")),
			},
		})
		st := v.run(w, nil)
		if st.State != RunCompleted || string(st.Result) != `{"ops":true,"next":false,"end":true,"both":false}` {
			t.Fatalf("%s %s %s", st.State, st.Result, st.Error)
		}
		if nodeState(st, "charge") != NodeFailed || st.Nodes["charge"].Error == "" {
			t.Errorf("charge: %s", dump(st.Nodes["charge"]))
		}
	})
}

func TestFailFastIgnoresLateCompletions(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		w := build(t, wfSpec{nodes: []*nodeSpec{
			task("slow", "block"),
			task("pause", "sleep", with("duration", konst(`"100ms"`))),
			task("bad", "perm", after("pause")),
			task("after_slow", "noop", after("slow")),
		}})
		run := v.submit(w, nil)
		v.waitStarted()
		deadline := time.Now().Add(10 * time.Second)
		for {
			st, _ := v.e.Status(v.ctx, run)
			if st.State == RunFailed {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("run did not fail")
			}
			time.Sleep(20 * time.Millisecond)
		}
		close(v.unblock)
		waitNoPending(t, v.e)
		st := v.wait(run)
		if st.State != RunFailed || st.FailedNode != "bad" {
			t.Fatalf("%s %s", st.State, st.FailedNode)
		}
		if nodeState(st, "slow") != NodeQueued || nodeState(st, "after_slow") != "absent" {
			t.Errorf("late completion applied: slow %s, after_slow %s", nodeState(st, "slow"), nodeState(st, "after_slow"))
		}
	})
}

func TestCompensationOrder(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker(func(o *WorkerOptions) { o.Concurrency = 1 })
		comp := func() nodeOpt {
			return compensate("record", ir.Param{Name: "undo", Value: cexpr("output.step")})
		}
		w := build(t, wfSpec{nodes: []*nodeSpec{
			task("reserve", "record", with("step", konst(`"reserve"`)), comp()),
			task("charge", "record", after("reserve"), with("step", konst(`"charge"`)), comp()),
			task("log", "record", after("charge"), with("step", konst(`"log"`))), // no compensate
			task("ship", "record", after("log"), with("step", konst(`"ship"`)), comp()),
			task("fail", "fail", after("ship"), with("message", konst(`"out of stock"`))),
		}})
		st := v.run(w, nil)
		if st.State != RunFailed || st.Compensation != "done" || st.Error != "out of stock" {
			t.Fatalf("%s comp=%q err=%q", st.State, st.Compensation, st.Error)
		}
		v.mu.Lock()
		got := strings.Join(v.order, " ")
		v.mu.Unlock()
		want := "run:reserve run:charge run:log run:ship compensate:ship compensate:charge compensate:reserve"
		if got != want {
			t.Errorf("order:\n got %s\nwant %s", got, want)
		}
		evs, _ := v.e.Events(v.ctx, st.RunID)
		var undone []string
		for _, ev := range evs {
			if ev.Type == "comp.completed" {
				undone = append(undone, ev.Fields["x"]+"="+ev.Fields["output"])
			}
		}
		if strings.Join(undone, " ") != `ship={"undo":"ship"} charge={"undo":"charge"} reserve={"undo":"reserve"}` {
			t.Errorf("compensations: %v", undone)
		}
	})
}

// TestCompensationRetries: a compensation whose handler fails is retried
// with its node's retry policy, through the timers, until it succeeds or
// no attempt is left; a permanent error is not retried. The run stays
// compensating meanwhile and ends when the compensation is recorded.
func TestCompensationRetries(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		const delay = 40 // ms, fixed backoff
		flow := func(handler string, fails int) *ir.Workflow {
			return build(t, wfSpec{nodes: []*nodeSpec{
				task("reserve", "noop", retry(3, ir.BackoffFixed, delay),
					compensate(handler, ir.Param{Name: "fails", Value: konst(strconv.Itoa(fails))})),
				task("charge", "fail", after("reserve"), with("message", konst(`"declined"`))),
			}})
		}
		for _, c := range []struct {
			name, handler string
			fails         int
			outcome       string // the comp event recording it
			retries       int
			err           string
		}{
			{"succeeds on the third attempt", "flaky", 2, "comp.completed", 2, ""},
			{"no attempt left", "flaky", 5, "comp.failed", 2, "attempt 3 of 3: flaky: attempt 3 fails"},
			{"permanent error", "perm", 0, "comp.failed", 0, "perm: permanent failure"},
		} {
			st := v.run(flow(c.handler, c.fails), nil)
			if st.State != RunFailed || st.Compensation != "done" || st.Error != "declined" {
				t.Fatalf("%s: %s comp=%q err=%q", c.name, st.State, st.Compensation, st.Error)
			}
			evs, err := v.e.Events(v.ctx, st.RunID)
			if err != nil {
				t.Fatal(err)
			}
			var retries, recorded []Event
			for _, ev := range evs {
				switch ev.Type {
				case "comp.retry":
					retries = append(retries, ev)
				case "comp.completed", "comp.failed":
					recorded = append(recorded, ev)
				}
			}
			if len(retries) != c.retries {
				t.Errorf("%s: %d comp.retry events, want %d", c.name, len(retries), c.retries)
			}
			for i, ev := range retries {
				if ev.Fields["attempt"] != strconv.Itoa(i+2) || ev.Fields["x"] != "reserve" {
					t.Errorf("%s: retry %d: %v", c.name, i, ev.Fields)
				}
			}
			if len(recorded) != 1 || recorded[0].Type != c.outcome {
				t.Fatalf("%s: recorded %v, want one %s", c.name, recorded, c.outcome)
			}
			if c.outcome == "comp.completed" && recorded[0].Fields["output"] != `{"attempt":3}` {
				t.Errorf("%s: output %s", c.name, recorded[0].Fields["output"])
			}
			if c.err != "" && recorded[0].Fields["error"] != c.err {
				t.Errorf("%s: error %q, want %q", c.name, recorded[0].Fields["error"], c.err)
			}
			// Each retry waited for its backoff: the attempts' handlers ran
			// at least delay apart (due times are whole milliseconds, so a
			// retry may start up to 1 ms before the exact delay).
			v.mu.Lock()
			starts := slices.Clone(v.times["compensate/"+st.RunID+"/reserve"])
			v.mu.Unlock()
			if len(starts) != c.retries+1 {
				t.Errorf("%s: the compensation ran %d times, want %d", c.name, len(starts), c.retries+1)
			}
			for i := 1; i < len(starts); i++ {
				if d := starts[i].Sub(starts[i-1]); d < (delay-1)*time.Millisecond {
					t.Errorf("%s: attempt %d started %v after the one before, want >= %dms", c.name, i+1, d, delay)
				}
			}
		}
	})
}

func TestCancel(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		w := build(t, wfSpec{nodes: []*nodeSpec{
			task("a", "block"),
			task("b", "noop", after("a")),
		}})
		run := v.submit(w, nil)
		v.waitStarted()
		if err := v.e.Cancel(v.ctx, run); err != nil {
			t.Fatal(err)
		}
		close(v.unblock)
		st := v.wait(run)
		if st.State != RunCancelled || nodeState(st, "b") != "absent" {
			t.Fatalf("%s, b %s", st.State, nodeState(st, "b"))
		}
		waitNoPending(t, v.e)
		if err := v.e.Cancel(v.ctx, run); err == nil || !strings.Contains(err.Error(), "is cancelled, not running") {
			t.Errorf("second cancel: %v", err)
		}
	})
}

func TestPartialRetry(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		var mu sync.Mutex
		broken := true
		v.reg.RegisterFunc("fragile", func(ctx context.Context, req handlers.Request) (json.RawMessage, error) {
			v.note(req)
			mu.Lock()
			defer mu.Unlock()
			if broken {
				return nil, handlers.Permanentf("downstream is down")
			}
			return json.RawMessage(`{"ok":true}`), nil
		})
		v.worker()
		w := build(t, wfSpec{
			outputs: []ir.Output{output("a", "a.output.x"), output("c", "c.output.ok")},
			nodes: []*nodeSpec{
				task("a", "count", with("x", konst("1"))),
				task("b", "count", with("x", konst("2"))),
				task("c", "fragile", after("a", "b")),
				task("d", "count", after("c")),
			},
		})
		st := v.run(w, nil)
		if st.State != RunFailed || st.FailedNode != "c" {
			t.Fatalf("%s %q", st.State, st.FailedNode)
		}
		if err := v.e.Retry(v.ctx, st.RunID); err != nil {
			t.Fatal(err)
		}
		st = v.wait(st.RunID) // fails again: still broken
		if st.State != RunFailed || st.Gen != 1 {
			t.Fatalf("second failure: %s gen %d", st.State, st.Gen)
		}
		mu.Lock()
		broken = false
		mu.Unlock()
		if err := v.e.Retry(v.ctx, st.RunID); err != nil {
			t.Fatal(err)
		}
		st = v.wait(st.RunID)
		if st.State != RunCompleted || string(st.Result) != `{"a":1,"c":true}` || st.Gen != 2 {
			t.Fatalf("%s %s gen %d", st.State, st.Result, st.Gen)
		}
		for _, n := range []string{"a", "b", "d"} {
			if c := v.callCount(st.RunID + "/" + n); c != 1 {
				t.Errorf("%s ran %d times", n, c)
			}
		}
		if c := v.callCount(st.RunID + "/c"); c != 3 {
			t.Errorf("c ran %d times, want 3", c)
		}
		if err := v.e.Retry(v.ctx, st.RunID); err == nil || !strings.Contains(err.Error(), "is completed") {
			t.Errorf("retry of a completed run: %v", err)
		}
	})
}

func TestDeadline(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		w := build(t, wfSpec{
			set: ir.Settings{DeadlineMS: 300},
			nodes: []*nodeSpec{
				task("a", "sleep", with("duration", konst(`"3s"`)), compensate("noop")),
				task("b", "noop", compensate("record")),
			},
		})
		start := time.Now()
		st := v.run(w, nil)
		if st.State != RunFailed || !strings.Contains(st.Error, "deadline of 300ms exceeded") {
			t.Fatalf("%s %q", st.State, st.Error)
		}
		if d := time.Since(start); d > 2500*time.Millisecond {
			t.Errorf("deadline noticed after %s", d)
		}
		if st.Compensation != "done" {
			t.Errorf("compensation %q", st.Compensation)
		}
	})
}

// A partial retry of a failed for_each node runs only the items that had
// not succeeded.
func TestPartialRetryForEach(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		var mu sync.Mutex
		broken := true
		v.reg.RegisterFunc("picky", func(ctx context.Context, req handlers.Request) (json.RawMessage, error) {
			v.note(req)
			var c struct {
				V string `json:"v"`
			}
			json.Unmarshal(req.Config, &c)
			mu.Lock()
			defer mu.Unlock()
			if broken && c.V == "d" {
				return nil, handlers.Permanentf("cannot handle d")
			}
			return json.Marshal(map[string]string{"up": strings.ToUpper(c.V)})
		})
		v.worker()
		w := build(t, wfSpec{
			outputs: []ir.Output{output("ups", "each.output.map(o, o.up)")},
			nodes: []*nodeSpec{
				task("each", "picky", forEach("x", "['a', 'b', 'c', 'd', 'e']", 1), with("v", cexpr("x"))),
			},
		})
		st := v.run(w, nil)
		if st.State != RunFailed {
			t.Fatalf("%s", st.State)
		}
		mu.Lock()
		broken = false
		mu.Unlock()
		if err := v.e.Retry(v.ctx, st.RunID); err != nil {
			t.Fatal(err)
		}
		st = v.wait(st.RunID)
		if st.State != RunCompleted || string(st.Result) != `{"ups":["A","B","C","D","E"]}` {
			t.Fatalf("%s %s %s", st.State, st.Result, st.Error)
		}
		for i, want := range []int{1, 1, 1, 2, 1} {
			if c := v.callCount(fmt.Sprintf("%s/each/%d", st.RunID, i)); c != want {
				t.Errorf("item %d ran %d times, want %d", i, c, want)
			}
		}
	})
}

// An item failing a for_each node with on_error while other items run:
// the items in flight are dropped, the counter stays exact and the run
// completes through the error path. Items retry on their own.
func TestForEachItemFailures(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.reg.RegisterFunc("slowpicky", func(ctx context.Context, req handlers.Request) (json.RawMessage, error) {
			v.note(req)
			if req.Item == 1 {
				return nil, handlers.Permanentf("item 1 is bad")
			}
			select {
			case <-time.After(time.Duration(50*req.Item) * time.Millisecond):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return json.RawMessage(`{}`), nil
		})
		v.worker()
		w := build(t, wfSpec{
			outputs: []ir.Output{output("handled", "has(ops.output)"), output("each", "has(each.output)")},
			nodes: []*nodeSpec{
				task("each", "slowpicky", forEach("x", "[0, 1, 2, 3, 4, 5]", 3), onError("ops")),
				task("ops", "noop"),
				task("next", "noop", after("each")),
			},
		})
		st := v.run(w, nil)
		if st.State != RunCompleted || string(st.Result) != `{"handled":true,"each":false}` {
			t.Fatalf("%s %s %s", st.State, st.Result, st.Error)
		}
		if nodeState(st, "each") != NodeFailed || nodeState(st, "next") != NodeSkipped {
			t.Errorf("each %s, next %s", nodeState(st, "each"), nodeState(st, "next"))
		}
		waitNoPending(t, v.e)

		// Each item fails once and succeeds on its second attempt.
		w = build(t, wfSpec{
			outputs: []ir.Output{output("attempts", "each.output.map(o, o.attempt)")},
			nodes:   []*nodeSpec{task("each", "flaky", forEach("x", "[1, 2, 3]", 2), with("fails", konst("1")), retry(2, ir.BackoffFixed, 20))},
		})
		st = v.run(w, nil)
		if st.State != RunCompleted || string(st.Result) != `{"attempts":[2,2,2]}` {
			t.Fatalf("%s %s %s", st.State, st.Result, st.Error)
		}
	})
}

package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wfc-lang/wfc/ir"
)

// textOut is the output type { text: string }.
var textOut = &ir.Type{Kind: ir.KindObject, Fields: []ir.Field{{Name: "text", Type: ir.Type{Kind: ir.KindString}}}}

// signalWF: [a (block) ->] s (signal "reply", correlation input.order,
// output {text}) -> done; result: s's text.
func signalWF(t *testing.T, first bool, opts ...nodeOpt) *ir.Workflow {
	s := task("s", "signal", append([]nodeOpt{with("name", konst(`"reply"`)), with("correlation", cexpr("input.order")), outType(textOut)}, opts...)...)
	nodes := []*nodeSpec{s, task("done", "noop", after("s"))}
	if first {
		s.after = append(s.after, "a")
		nodes = append([]*nodeSpec{task("a", "block")}, nodes...)
	}
	return build(t, wfSpec{name: "signals", inputs: []ir.Input{input("order", ir.KindString)},
		outputs: []ir.Output{output("text", "has(s.output) ? s.output.text : 'none'")}, nodes: nodes})
}

// stateOf returns run's state hash and event count, to compare before and
// after a refused call.
func stateOf(v *env, run string) string {
	v.t.Helper()
	h, err := v.e.st.rdb.HGetAll(v.ctx, v.e.st.ks.state(run)).Result()
	if err != nil {
		v.t.Fatal(err)
	}
	evs, err := v.e.Events(v.ctx, run)
	if err != nil {
		v.t.Fatal(err)
	}
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, h[k])
	}
	fmt.Fprintf(&b, "events=%d\n", len(evs))
	return b.String()
}

func resultText(t *testing.T, st *Status) string {
	t.Helper()
	var r struct{ Text string }
	if err := json.Unmarshal(st.Result, &r); err != nil {
		t.Fatalf("%v: %s", err, dump(st))
	}
	return r.Text
}

// TestSignalAfterReached: a node waiting for its signal shows it in its
// status, holds no message, ignores a signal of another correlation (kept
// for later) and completes with the payload of its own.
func TestSignalAfterReached(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker(func(o *WorkerOptions) { o.Concurrency = 1 })
		run := v.submit(signalWF(t, false), map[string]any{"order": "o1"})
		st := waitWaiting(v, run, "s")
		if ns := st.Nodes["s"]; ns.Signal != "reply" || ns.Correlation != "o1" || !ns.Due.IsZero() || st.Counter != 1 {
			t.Fatalf("waiting: %s", dump(st))
		}
		v.check(run)
		if n := pending(t, v.e); n != 0 {
			t.Errorf("%d messages pending while the signal task is parked", n)
		}
		if x, err := v.e.Signal(v.ctx, run, "reply", "o2", json.RawMessage(`{"text":"other"}`)); err != nil || x != "" {
			t.Fatalf("other correlation: %q %v", x, err)
		}
		if x, err := v.e.Signal(v.ctx, run, "reply", "o1", json.RawMessage(`{"text": "hello"}`)); err != nil || x != "s" {
			t.Fatalf("signal: %q %v", x, err)
		}
		st = v.wait(run)
		if st.State != RunCompleted || resultText(t, st) != "hello" || string(st.Nodes["s"].Output) != `{"text":"hello"}` {
			t.Fatalf("%s", dump(st))
		}
		if eventCount(v, run, "signal.received", "s") != 1 {
			t.Error("no signal.received event")
		}
		// The run ended: it takes no more signals, and its state stays.
		before := stateOf(v, run)
		if _, err := v.e.Signal(v.ctx, run, "reply", "o1", json.RawMessage(`{"text":"late"}`)); err == nil || !strings.Contains(err.Error(), "is completed: it takes no more signals") {
			t.Errorf("ended run: %v", err)
		}
		if after := stateOf(v, run); after != before {
			t.Errorf("a refused signal changed the state:\n%s\n%s", before, after)
		}
	})
}

// TestSignalBeforeReached: a signal sent before its node is reached is
// kept and taken when it is.
func TestSignalBeforeReached(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		run := v.submit(signalWF(t, true), map[string]any{"order": "o1"})
		v.waitStarted()
		if x, err := v.e.Signal(v.ctx, run, "reply", "o1", json.RawMessage(`{"text":"early"}`)); err != nil || x != "" {
			t.Fatalf("early signal: %q %v", x, err)
		}
		st, err := v.e.Status(v.ctx, run)
		if err != nil || nodeState(st, "s") != "absent" {
			t.Fatalf("%v %s", err, dump(st))
		}
		v.check(run)
		close(v.unblock)
		st = v.wait(run)
		if st.State != RunCompleted || resultText(t, st) != "early" {
			t.Fatalf("%s", dump(st))
		}
		if eventCount(v, run, "signal.received", "s") != 1 || eventCount(v, run, "node.waiting", "s") != 1 {
			t.Error("events: want one node.waiting and one signal.received")
		}
		if n, _ := v.e.st.rdb.HGet(v.ctx, v.e.st.ks.state(run), "run|signals").Result(); n != "0" {
			t.Errorf("run|signals = %q after the kept signal was taken", n)
		}
	})
}

// TestSignalRefused: bad signals are refused with a clear error and change
// nothing.
func TestSignalRefused(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		run := v.submit(signalWF(t, false), map[string]any{"order": "o1"})
		waitWaiting(v, run, "s")
		before := stateOf(v, run)
		for _, c := range []struct {
			run, name, corr, payload, want string
		}{
			{"nosuchrun", "reply", "o1", `{}`, "unknown run"},
			{"bad id!", "reply", "o1", `{}`, "invalid run id"},
			{run, "reply", "o1", `{"text":3}`, "node s of run " + run + " takes signal \"reply\": payload.text: got"},
			{run, "reply", "o1", `{}`, "payload"},
			{run, "reply", "o1", `[1]`, "not a JSON object"},
			{run, "reply", "o1", `"x"`, "not a JSON object"},
			{run, "reply", "o1", `{"text":`, "not JSON"},
			{run, "other", "o1", `{"text":"x"}`, `waits for signal "other" (its signals: "reply" (s))`},
			{run, "", "o1", `{"text":"x"}`, "1 to 128 bytes"},
			{run, "a|b", "o1", `{"text":"x"}`, "which a name may not"},
			{run, "reply", strings.Repeat("c", 257), `{"text":"x"}`, "at most 256 bytes"},
		} {
			_, err := v.e.Signal(v.ctx, c.run, c.name, c.corr, json.RawMessage(c.payload))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s %q %s: %v, want %q", c.run, c.name, c.payload, err, c.want)
			}
		}
		if after := stateOf(v, run); after != before {
			t.Errorf("a refused signal changed the state:\n%s\n%s", before, after)
		}
		v.check(run)
		// A cancelled run takes no more signals.
		if err := v.e.Cancel(v.ctx, run); err != nil {
			t.Fatal(err)
		}
		before = stateOf(v, run)
		if _, err := v.e.Signal(v.ctx, run, "reply", "o1", json.RawMessage(`{"text":"x"}`)); err == nil || !strings.Contains(err.Error(), "is cancelled: it takes no more signals") {
			t.Errorf("cancelled run: %v", err)
		}
		if after := stateOf(v, run); after != before {
			t.Errorf("a refused signal changed the state:\n%s\n%s", before, after)
		}
		v.check(run)
		// A workflow with no signal task takes no signal.
		other := v.submit(build(t, wfSpec{nodes: []*nodeSpec{task("a", "block")}}), nil)
		v.waitStarted()
		before = stateOf(v, other)
		if _, err := v.e.Signal(v.ctx, other, "reply", "", nil); err == nil || !strings.Contains(err.Error(), "waits for a signal") {
			t.Errorf("no signal task: %v", err)
		}
		if after := stateOf(v, other); after != before {
			t.Errorf("a refused signal changed the state:\n%s\n%s", before, after)
		}
		close(v.unblock)
		v.wait(other)
	})
}

// TestSignalTimeout: with no signal within its timeout, the node fails
// with code timeout, which on_error "timeout" routes; a signal sent after
// that is kept (the node no longer waits), not given to it.
func TestSignalTimeout(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		w := build(t, wfSpec{name: "late", inputs: []ir.Input{input("order", ir.KindString)},
			outputs: []ir.Output{output("text", "has(s.output) ? s.output.text : 'none'"), output("late", "has(remind.output)")},
			nodes: []*nodeSpec{
				task("s", "signal", with("name", konst(`"reply"`)), with("correlation", cexpr("input.order")), outType(textOut), timeout(300),
					func(s *nodeSpec) {
						s.n.OnError = []string{"remind"}
						s.n.ErrorRoutes = []ir.ErrorRoute{{Codes: []string{"timeout"}, Targets: []string{"remind"}}}
					}),
				task("remind", "noop"),
			}})
		run := v.submit(w, map[string]any{"order": "o1"})
		st := waitWaiting(v, run, "s")
		if ns := st.Nodes["s"]; ns.Due.IsZero() {
			t.Errorf("no due time: %s", dump(st))
		}
		st = v.wait(run)
		if st.State != RunCompleted || nodeState(st, "s") != NodeFailed || st.Nodes["s"].Code != "timeout" || nodeState(st, "remind") != NodeCompleted {
			t.Fatalf("%s", dump(st))
		}
		if eventCount(v, run, "signal.timeout", "s") != 1 {
			t.Error("no signal.timeout event")
		}
	})
}

// TestSignalTimeoutRetry: a timeout is retryable: the next attempt waits
// again, and a signal then completes it.
func TestSignalTimeoutRetry(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		run := v.submit(signalWF(t, false, timeout(200), retry(3, ir.BackoffFixed, 10)), map[string]any{"order": "o1"})
		// The first attempt times out; the second waits.
		deadline := time.Now().Add(20 * time.Second)
		for {
			st := waitWaiting(v, run, "s")
			if st.Nodes["s"].Attempt == 2 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no second attempt: %s", dump(st))
			}
			time.Sleep(10 * time.Millisecond)
		}
		if x, err := v.e.Signal(v.ctx, run, "reply", "o1", json.RawMessage(`{"text":"second"}`)); err != nil || x != "s" {
			t.Fatalf("signal: %q %v", x, err)
		}
		st := v.wait(run)
		if st.State != RunCompleted || resultText(t, st) != "second" {
			t.Fatalf("%s", dump(st))
		}
	})
}

// TestSignalConcurrent: of 50 signals sent at once to a waiting node,
// exactly one completes it; the others are kept (the run goes on: a
// blocked node after it).
func TestSignalConcurrent(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		w := build(t, wfSpec{name: "many", nodes: []*nodeSpec{
			task("s", "signal", with("name", konst(`"reply"`)), with("correlation", konst(`"o1"`)), outType(textOut)),
			task("b", "block", after("s")),
		}})
		run := v.submit(w, nil)
		waitWaiting(v, run, "s")
		var mu sync.Mutex
		took, kept := 0, 0
		var wg sync.WaitGroup
		for i := range 50 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				x, err := v.e.Signal(context.Background(), run, "reply", "o1", json.RawMessage(fmt.Sprintf(`{"text":"%d"}`, i)))
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					t.Error(err)
				case x == "s":
					took++
				case x == "":
					kept++
				}
			}()
		}
		wg.Wait()
		if took != 1 || kept != 49 {
			t.Fatalf("took %d, kept %d", took, kept)
		}
		close(v.unblock)
		st := v.wait(run)
		if st.State != RunCompleted || eventCount(v, run, "signal.received", "s") != 1 {
			t.Fatalf("%s", dump(st))
		}
		if n, _ := v.e.st.rdb.HGet(v.ctx, v.e.st.ks.state(run), "run|signals").Result(); n != "49" {
			t.Errorf("run|signals = %q", n)
		}
	})
}

// TestSignalLoop: each iteration of a loop waits for its own signal; kept
// signals are taken first sent, first taken.
func TestSignalLoop(t *testing.T) {
	nOut := &ir.Type{Kind: ir.KindObject, Fields: []ir.Field{{Name: "n", Type: ir.Type{Kind: ir.KindInt}}}}
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		w := build(t, wfSpec{name: "loop", outputs: []ir.Output{output("n", "s.output.n")}, nodes: []*nodeSpec{
			task("a", "block"),
			task("s", "signal", after("a"), with("name", konst(`"tick"`)), outType(nOut), loop("output.n < 3", 5, "")),
		}})
		run := v.submit(w, nil)
		v.waitStarted()
		for _, p := range []string{`{"n":1}`, `{"n":2}`} {
			if x, err := v.e.Signal(v.ctx, run, "tick", "", json.RawMessage(p)); err != nil || x != "" {
				t.Fatalf("%s: %q %v", p, x, err)
			}
		}
		close(v.unblock)
		waitWaiting(v, run, "s@3")
		if x, err := v.e.Signal(v.ctx, run, "tick", "", json.RawMessage(`{"n":3}`)); err != nil || x != "s@3" {
			t.Fatalf("third: %q %v", x, err)
		}
		st := v.wait(run)
		if st.State != RunCompleted || string(st.Result) != `{"n":3}` ||
			string(st.Nodes["s@1"].Output) != `{"n":1}` || string(st.Nodes["s@2"].Output) != `{"n":2}` {
			t.Fatalf("%s", dump(st))
		}
	})
}

// TestSignalLimits: a payload over max_output_bytes, kept signals over
// max_state_bytes or over MaxKeptSignals are refused, nothing changed; a
// name set by an expression takes any name.
func TestSignalLimits(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		w := build(t, wfSpec{name: "limits", inputs: []ir.Input{input("order", ir.KindString)},
			set: ir.Settings{MaxOutputBytes: 100, MaxStateBytes: 1000}, nodes: []*nodeSpec{
				task("a", "block"),
				task("s", "signal", after("a"), with("name", tmpl("reply-", &ir.Expr{CEL: "input.order"}))),
			}})
		run := v.submit(w, map[string]any{"order": "o1"})
		v.waitStarted()
		before := stateOf(v, run)
		big := `{"t":"` + strings.Repeat("x", 100) + `"}`
		if _, err := v.e.Signal(v.ctx, run, "reply-o1", "", json.RawMessage(big)); err == nil || !strings.Contains(err.Error(), "(max_output_bytes)") {
			t.Errorf("big payload: %v", err)
		}
		if after := stateOf(v, run); after != before {
			t.Errorf("a refused signal changed the state:\n%s\n%s", before, after)
		}
		// Kept signals count in max_state_bytes.
		payload := json.RawMessage(`{"t":"` + strings.Repeat("y", 80) + `"}`)
		var err error
		for i := 0; i < 20 && err == nil; i++ {
			_, err = v.e.Signal(v.ctx, run, "any-name", "", payload)
		}
		if err == nil || !strings.Contains(err.Error(), "(max_state_bytes)") {
			t.Errorf("kept signals over max_state_bytes: %v", err)
		}
		close(v.unblock)
		if x, err := v.e.Signal(v.ctx, run, "reply-o1", "", nil); err != nil || x != "" && x != "s" {
			t.Fatalf("%q %v", x, err)
		}
		if st := v.wait(run); st.State != RunCompleted || string(st.Nodes["s"].Output) != `{}` {
			t.Fatalf("%s", dump(st))
		}

		// At most MaxKeptSignals kept signals.
		w2 := build(t, wfSpec{name: "many", nodes: []*nodeSpec{task("s", "signal", with("name", konst(`"n"`)))}})
		run2 := v.submit(w2, nil)
		waitWaiting(v, run2, "s") // so that the last signal is taken, not refused
		for i := range MaxKeptSignals + 1 {
			corr := fmt.Sprint(i)
			_, err := v.e.Signal(v.ctx, run2, "n", corr, nil)
			if i < MaxKeptSignals && err != nil {
				t.Fatalf("signal %d: %v", i, err)
			}
			if i == MaxKeptSignals && (err == nil || !strings.Contains(err.Error(), "keeps 1000 signals for nodes it has not reached")) {
				t.Errorf("signal %d: %v", i, err)
			}
		}
		if _, err := v.e.Signal(v.ctx, run2, "n", "", nil); err != nil {
			t.Fatal(err)
		}
		v.wait(run2)
	})
}

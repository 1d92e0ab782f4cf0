package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/runtime/handlers"
)

// forEachWF is a for_each over input.xs (ints) whose items run handler
// with v = x; its output res is the items' v in order.
func forEachWF(t testing.TB, handler string, parallel int, opts ...nodeOpt) *ir.Workflow {
	return forEachWFOut(t, []ir.Output{output("res", "each.output.map(o, o.v)")}, handler, parallel, opts...)
}

func forEachWFOut(t testing.TB, outs []ir.Output, handler string, parallel int, opts ...nodeOpt) *ir.Workflow {
	return build(t, wfSpec{
		set:     ir.Settings{MaxFanout: 200_000},
		inputs:  []ir.Input{{Name: "xs", Type: ir.Type{Kind: ir.KindList, Elem: &ir.Type{Kind: ir.KindInt}}, Required: true}},
		outputs: outs,
		nodes:   []*nodeSpec{task("each", handler, append([]nodeOpt{forEach("x", "input.xs", parallel), with("v", cexpr("x"))}, opts...)...)},
	})
}

func ints(n int) []int {
	xs := make([]int, n)
	for i := range xs {
		xs[i] = i
	}
	return xs
}

func intsJSON(n int) string {
	b, _ := json.Marshal(ints(n))
	return string(b)
}

// itemsOnce checks from a run's events that its for_each node each was
// loaded once (every item in one chunk, in order), and each item queued
// and completed once.
func (v *env) itemsOnce(run string, n int) {
	v.t.Helper()
	evs, err := v.e.Events(context.Background(), run)
	if err != nil {
		v.t.Fatal(err)
	}
	queued, completed := map[string]int{}, map[string]int{}
	expanded, loaded := 0, -1 // loaded: where the next chunk starts, -1 unknown
	for _, ev := range evs {
		switch ev.Type {
		case "node.expanded":
			expanded++
		case "node.loaded":
			from, _ := strconv.Atoi(ev.Fields["from"])
			c, _ := strconv.Atoi(ev.Fields["count"])
			if loaded >= 0 && from != loaded {
				v.t.Errorf("a chunk loaded from %d, after %d", from, loaded)
			}
			loaded = from + c
		case "item.queued":
			queued[ev.Fields["i"]]++
		case "item.completed":
			completed[ev.Fields["i"]]++
		}
	}
	if loaded >= 0 && loaded != n {
		v.t.Errorf("the load ended at %d of %d", loaded, n)
	}
	if expanded != 1 {
		v.t.Errorf("node.expanded %d times", expanded)
	}
	for i := range n {
		k := strconv.Itoa(i)
		if queued[k] != 1 || completed[k] != 1 {
			v.t.Errorf("item %d queued %d times, completed %d times", i, queued[k], completed[k])
		}
	}
}

// TestLimitForEachChunkedLoad: a for_each loaded in several expand calls
// (issue #14 item 2: one call held Redis for the whole list) runs every
// item once, at any parallelism, with messages handled twice at once or
// delivered twice, and with an item that fails the node while the load is
// still going on (the run ends, its counter exact).
func TestLimitForEachChunkedLoad(t *testing.T) {
	const n = 10
	want := `{"res":` + intsJSON(n) + `}`
	forBackends(t, func(t *testing.T, b backend) {
		for _, c := range []struct {
			name     string
			parallel int
			mod      func(*WorkerOptions)
		}{
			{"parallel 2", 2, nil},
			{"parallel 0", 0, nil},
			{"parallel 4, dup", 4, func(o *WorkerOptions) { o.dup = 2 }},
			{"parallel 0, redeliver", 0, func(o *WorkerOptions) { o.redeliver = 2 }},
		} {
			t.Run(c.name, func(t *testing.T) {
				v := newEnv(t, b)
				v.worker(func(o *WorkerOptions) {
					o.expandChunk = 3
					if c.mod != nil {
						c.mod(o)
					}
				})
				st := v.run(forEachWF(t, "count", c.parallel), map[string]any{"xs": ints(n)})
				if st.State != RunCompleted || string(st.Result) != want {
					t.Fatalf("%s %s %s", st.State, st.Result, st.Error)
				}
				v.itemsOnce(st.RunID, n)
			})
		}
		t.Run("item fails mid-load", func(t *testing.T) {
			v := newEnv(t, b)
			v.reg.RegisterFunc("onebad", func(ctx context.Context, req handlers.Request) (json.RawMessage, error) {
				if req.Item == 1 {
					return nil, handlers.Permanentf("item 1 is bad")
				}
				return req.Config, nil
			})
			var run string
			ready := make(chan string, 1)
			v.worker(func(o *WorkerOptions) {
				o.expandChunk = 3
				o.afterChunk = func(_ context.Context, from, end int) {
					if from != 0 {
						return
					}
					// The first chunk's items run; the load goes on once
					// item 1 has failed the node.
					id := <-ready
					ready <- id
					for range 200 {
						if st, err := v.e.Status(v.ctx, id); err == nil && nodeState(st, "each") == NodeFailed {
							return
						}
						time.Sleep(20 * time.Millisecond)
					}
					t.Error("item 1 did not fail the node")
				}
			})
			w := build(t, wfSpec{
				set:    ir.Settings{MaxFanout: 100},
				inputs: []ir.Input{{Name: "xs", Type: ir.Type{Kind: ir.KindList, Elem: &ir.Type{Kind: ir.KindInt}}, Required: true}},
				nodes: []*nodeSpec{
					task("each", "onebad", forEach("x", "input.xs", 0), with("v", cexpr("x")), onError("ops")),
					task("ops", "noop"),
				},
			})
			run = v.submit(w, map[string]any{"xs": ints(n)})
			ready <- run
			st := v.wait(run)
			if st.State != RunCompleted || nodeState(st, "each") != NodeFailed || nodeState(st, "ops") != NodeCompleted {
				t.Fatalf("%s %s: each %s, ops %s", st.State, st.Error, nodeState(st, "each"), nodeState(st, "ops"))
			}
		})
	})
}

// TestLimitForEachLoadSurvivesCrash: a worker that dies between two
// chunks of a load leaves its message pending; the worker that claims it
// continues where the load stopped, and every item runs once.
func TestLimitForEachLoadSurvivesCrash(t *testing.T) {
	const n = 10
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		o := fastWorker(v.reg)
		// One slot: the doomed worker runs no item before it dies.
		o.crash, o.Consumer, o.Concurrency, o.expandChunk = true, "doomed", 1, 3
		ctx1, kill := context.WithCancel(v.ctx)
		chunks := 0
		o.afterChunk = func(hctx context.Context, from, end int) {
			if chunks++; chunks == 2 {
				kill()
				// The worker cancels its handlers once its read loops
				// have stopped: wait for it, or the load could go on to
				// its end (and acknowledge) before it sees the stop.
				waitDone(t, hctx)
			}
		}
		w1 := v.e.NewWorker(o)
		done1 := make(chan struct{})
		go func() { defer close(done1); w1.Run(ctx1) }()
		run := v.submit(forEachWF(t, "count", 2), map[string]any{"xs": ints(n)})
		select {
		case <-done1:
		case <-time.After(20 * time.Second):
			t.Fatal("the doomed worker did not load two chunks")
		}
		if pending(t, v.e) == 0 {
			t.Fatal("the killed worker's message is not pending")
		}
		v.worker(func(o *WorkerOptions) { o.Consumer, o.expandChunk = "rescuer", 4 })
		st := v.wait(run)
		if want := `{"res":` + intsJSON(n) + `}`; st.State != RunCompleted || string(st.Result) != want {
			t.Fatalf("%s %s %s", st.State, st.Result, st.Error)
		}
		v.itemsOnce(run, n)
		for i := range n {
			if c := v.callCount(fmt.Sprintf("%s/each/%d", run, i)); c != 1 {
				t.Errorf("item %d ran %d times", i, c)
			}
		}
		waitNoPending(t, v.e)
	})
}

// TestLimitForEach100k: a for_each of 100,000 items completes (issue #14
// item 2; Redis's longest script meanwhile: docs/performance.md; before,
// each item read and decoded the whole input list, and it did not end in
// 5 minutes). The embedded backend runs 10,000: it is a Go
// reimplementation, several times slower per command (20,000 take 25 s).
func TestLimitForEach100k(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		n := 100_000
		if b.name == "miniredis" {
			n = 10_000
		}
		t0 := time.Now()
		defer func() { t.Logf("%d items: %s", n, time.Since(t0)) }()
		v := newEnv(t, b)
		v.worker(func(o *WorkerOptions) { o.Concurrency = 32; o.MaxOutputBytes = 4 << 20 })
		// Outputs that cost little to evaluate: mapping 100,000 items
		// takes longer than an expression may.
		w := forEachWFOut(t, []ir.Output{output("n", "size(each.output)"), output("first", "each.output[0].v"),
			output("last", fmt.Sprintf("each.output[%d].v", n-1))}, "count", 0)
		run := v.submit(w, map[string]any{"xs": ints(n)})
		ctx, cancel := context.WithTimeout(v.ctx, 5*time.Minute)
		defer cancel()
		st, err := v.e.Wait(ctx, run)
		if err != nil {
			cur, _ := v.e.Status(context.Background(), run)
			t.Fatalf("%v: %s counter %d", err, cur.State, cur.Counter)
		}
		if want := fmt.Sprintf(`{"n":%d,"first":0,"last":%d}`, n, n-1); st.State != RunCompleted || string(st.Result) != want {
			t.Fatalf("%s %s %s, want %s", st.State, st.Result, st.Error, want)
		}
	})
}

// TestLimitFanOut10k: a node with 10,000 successors runs (issue #14 item
// 2; the longest script: docs/performance.md).
func TestLimitFanOut10k(t *testing.T) {
	const n = 9_999 // and the root: ir.MaxNodes
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker(func(o *WorkerOptions) { o.Concurrency = 32 })
		nodes := []*nodeSpec{task("root", "noop")}
		for i := range n {
			nodes = append(nodes, task(fmt.Sprintf("leaf%d", i), "noop", after("root")))
		}
		w := build(t, wfSpec{name: "wide", set: ir.Settings{MaxFanout: n}, nodes: nodes})
		run := v.submit(w, nil)
		ctx, cancel := context.WithTimeout(v.ctx, 5*time.Minute)
		defer cancel()
		st, err := v.e.Wait(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		done := 0
		for _, ns := range st.Nodes {
			if ns.State == NodeCompleted {
				done++
			}
		}
		if st.State != RunCompleted || done != n+1 {
			t.Errorf("%s with %d of %d nodes completed (%s)", st.State, done, n+1, st.Error)
		}
	})
}

// TestLimitInputsDecodedOnlyWhenRead: a run's inputs are decoded only for
// evaluations that read input (issue #14 item 2: every execution decoded
// them, and each item of a for_each over a 100,000-element input decoded
// it all), and a node that reads them after executions that did not still
// gets them (its worker may have read the run's meta without them).
func TestLimitInputsDecodedOnlyWhenRead(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		w := build(t, wfSpec{
			inputs:  []ir.Input{input("s", ir.KindString), {Name: "xs", Type: ir.Type{Kind: ir.KindList, Elem: &ir.Type{Kind: ir.KindInt}}}},
			outputs: []ir.Output{output("s", "c.output.v"), output("n", "size(b.output)")},
			nodes: []*nodeSpec{
				task("a", "count", with("v", cexpr("'const'"))),
				task("b", "count", after("a"), forEach("x", "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]", 2), with("v", cexpr("x + size(a.output.v)"))),
				task("c", "count", after("b"), when("size(b.output) > 0"), with("v", cexpr("input.s"))),
			},
		})
		st := v.run(w, map[string]any{"s": "hello", "xs": ints(1000)})
		if st.State != RunCompleted || string(st.Result) != `{"s":"hello","n":10}` {
			t.Fatalf("%s %s %s", st.State, st.Result, st.Error)
		}
		p := v.e.st.plan(st.IR)
		if p == nil {
			t.Fatal("the plan is not kept")
		}
		// c's with (once; its when does not read input).
		if n := p.inputsDecoded.Load(); n != 1 {
			t.Errorf("the inputs were decoded %d times, want 1", n)
		}
		if !p.readsInput("c", "exec") || p.readsInput("b", "exec") || p.readsInput("b", "item") || p.readsInput("a", "exec") || !p.readsInput("", "finish") {
			t.Error("readsInput is wrong")
		}
	})
}

// TestLimitForEachPoisonMidLoad: the message of a for_each whose load
// stopped half-way (its worker died) comes back once too often and fails
// the node while items run; the items in flight and the load end with it,
// so the run goes on down on_error and completes with its counter exact.
func TestLimitForEachPoisonMidLoad(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		o := fastWorker(v.reg)
		o.crash, o.Consumer, o.Concurrency, o.expandChunk = true, "doomed", 1, 3
		ctx1, kill := context.WithCancel(v.ctx)
		o.afterChunk = func(hctx context.Context, from, end int) { kill(); waitDone(t, hctx) }
		w1 := v.e.NewWorker(o)
		done1 := make(chan struct{})
		go func() { defer close(done1); w1.Run(ctx1) }()
		w := build(t, wfSpec{
			set:    ir.Settings{MaxFanout: 100},
			inputs: []ir.Input{{Name: "xs", Type: ir.Type{Kind: ir.KindList, Elem: &ir.Type{Kind: ir.KindInt}}, Required: true}},
			nodes: []*nodeSpec{
				task("each", "block", forEach("x", "input.xs", 2), with("v", cexpr("x")), onError("ops")),
				task("ops", "noop"),
			},
		})
		run := v.submit(w, map[string]any{"xs": ints(10)})
		select {
		case <-done1:
		case <-time.After(20 * time.Second):
			t.Fatal("the doomed worker did not load a chunk")
		}
		v.worker(func(o *WorkerOptions) { o.Consumer, o.MaxDeliveries = "rescuer", 1 })
		// Items 0 and 1 run (blocked) while the message comes back.
		v.waitStarted()
		v.waitStarted()
		for i := 0; ; i++ {
			if st, err := v.e.Status(v.ctx, run); err == nil && nodeState(st, "each") == NodeFailed {
				break
			}
			if i == 400 {
				t.Fatal("the node did not fail")
			}
			time.Sleep(20 * time.Millisecond)
		}
		close(v.unblock)
		st := v.wait(run)
		if st.State != RunCompleted || nodeState(st, "each") != NodeFailed || nodeState(st, "ops") != NodeCompleted {
			t.Fatalf("%s %s: each %s, ops %s", st.State, st.Error, nodeState(st, "each"), nodeState(st, "ops"))
		}
		if n := st.Nodes["each"]; n == nil || !strings.Contains(n.Error, "deliveries") {
			t.Errorf("each: %+v", n)
		}
	})
}

// TestLimitForEachChunkedRetry: a partial retry of a for_each loaded in
// chunks keeps the items done before (whole chunks of them, and some of a
// chunk) and runs the others once more.
func TestLimitForEachChunkedRetry(t *testing.T) {
	const n = 10
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		var broken atomic.Bool
		broken.Store(true)
		v.reg.RegisterFunc("picky", func(ctx context.Context, req handlers.Request) (json.RawMessage, error) {
			v.note(req)
			if broken.Load() && req.Item == 7 {
				return nil, handlers.Permanentf("cannot handle 7")
			}
			return req.Config, nil
		})
		v.worker(func(o *WorkerOptions) { o.expandChunk = 3 })
		st := v.run(forEachWF(t, "picky", 1), map[string]any{"xs": ints(n)})
		if st.State != RunFailed {
			t.Fatalf("%s", st.State)
		}
		broken.Store(false)
		if err := v.e.Retry(v.ctx, st.RunID); err != nil {
			t.Fatal(err)
		}
		st = v.wait(st.RunID)
		if want := `{"res":` + intsJSON(n) + `}`; st.State != RunCompleted || string(st.Result) != want {
			t.Fatalf("%s %s %s", st.State, st.Result, st.Error)
		}
		for i := range n {
			want := 1
			if i == 7 {
				want = 2
			}
			if c := v.callCount(fmt.Sprintf("%s/each/%d", st.RunID, i)); c != want {
				t.Errorf("item %d ran %d times, want %d", i, c, want)
			}
		}
	})
}

// waitDone waits for ctx to be done (a hang guard fails the test).
func waitDone(t *testing.T, ctx context.Context) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(30 * time.Second):
		t.Error("the worker did not cancel its handlers")
	}
}

package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/runtime/handlers"
)

// outsReads counts the commands sent on their own (a round trip each, not
// in a pipeline) that read outputs: an HMGET or HGET of an out| field.
type outsReads struct{ n atomic.Int64 }

func (c *outsReads) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *outsReads) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if n := cmd.Name(); n == "hmget" || n == "hget" {
			for _, a := range cmd.Args()[2:] {
				if s, ok := a.(string); ok && strings.HasPrefix(s, "out|") {
					c.n.Add(1)
					break
				}
			}
		}
		return next(ctx, cmd)
	}
}

func (c *outsReads) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func countOutsReads(v *env) *outsReads {
	c := &outsReads{}
	v.e.st.rdb.AddHook(c)
	return c
}

// benchWorkflow loads a workflow of the benchmark (runtime/bench).
func benchWorkflow(t *testing.T, name string) *ir.Workflow {
	t.Helper()
	data, err := os.ReadFile("bench/workflows/" + name + ".ir.json")
	if err != nil {
		t.Fatal(err)
	}
	w, err := ir.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// The cel diamond's b, c and d read their parents' outputs: the tokens
// carry them (the join d's token both b's and c's), and no execution reads
// them on its own — the round trip each did before (and the evaluation of
// the run's outputs reads them with its token's pre-read). The runs' results are
// those of reading, and so is a run whose worker takes the general scripts
// only (complete.lua's dispatch, not advance.lua).
func TestCarryDiamond(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		for _, general := range []bool{false, true} {
			v := newEnv(t, b)
			reads := countOutsReads(v)
			v.worker(func(o *WorkerOptions) { o.generalOnly = general })
			w := benchWorkflow(t, "cel-diamond")
			const runs = 8
			var ids []string
			for range runs {
				ids = append(ids, v.submit(w, nil))
			}
			for _, id := range ids {
				st := v.wait(id)
				if st.State != RunCompleted || string(st.Result) != `{"v":6}` {
					t.Fatalf("general %v: %s %s %s", general, st.State, st.Result, st.Error)
				}
				if o := string(st.Nodes["d"].Output); o != `{"v":6}` {
					t.Errorf("general %v: d's output %s", general, o)
				}
			}
			// None for the nodes; the finish tokens (the workflow's
			// output) are pre-read, but for a run whose meta the worker
			// did not keep.
			if n := reads.n.Load(); n > runs {
				t.Errorf("general %v: %d reads of outputs for %d runs, want at most %d (the outputs' evaluations)", general, n, runs, runs)
			}
		}
	})
}

// outputsOf returns each node's output by id.
func outputsOf(st *Status) map[string]string {
	m := map[string]string{}
	for x, n := range st.Nodes {
		m[x] = string(n.Output)
	}
	return m
}

// Values over carryMax travel as before (read by the execution), and the
// results equal those of values carried: the same workflow with a small
// and a large text, a join reading both parents, a node reading a
// grandparent, and x.error of a node that failed onto its error path.
func TestCarryOverThreshold(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		w := func(text string) *ir.Workflow {
			return build(t, wfSpec{nodes: []*nodeSpec{
				task("a", "count", with("s", konst(fmt.Sprintf("%q", text)))),
				task("f", "perm", with("s", konst(`"x"`)), onError("h")),
				task("h", "count", with("code", cexpr("f.error.code"))),
				task("b", "count", after("a"), with("n", cexpr("size(a.output.s)"))),
				task("c", "count", after("a"), with("n", cexpr("size(a.output.s) + 1"))),
				task("d", "count", after("b", "c"), with("n", cexpr("b.output.n + c.output.n + size(a.output.s)"))),
			}})
		}
		for _, size := range []int{10, carryMax + 1} {
			v := newEnv(t, b)
			reads := countOutsReads(v)
			v.worker()
			st := v.run(w(strings.Repeat("é", size/2)), nil)
			got := outputsOf(st)
			n := len(strings.Repeat("é", size/2)) / 2 // size() counts code points
			want := map[string]string{
				"b": fmt.Sprintf(`{"n":%d}`, n), "c": fmt.Sprintf(`{"n":%d}`, n+1), "d": fmt.Sprintf(`{"n":%d}`, 3*n+1),
				"h": `{"code":"error"}`,
			}
			for x, o := range want {
				if got[x] != o {
					t.Errorf("size %d: %s's output %s, want %s", size, x, got[x], o)
				}
			}
			if r := reads.n.Load(); size <= carryMax && r != 0 || size > carryMax && r == 0 {
				t.Errorf("size %d: %d reads of outputs", size, r)
			}
		}
	})
}

// lateEnv is an env whose first worker cannot run handler late: a token
// of a late node waits in its queue, where the test reads and rewrites it,
// until startLate starts a worker that can.
func lateEnv(t *testing.T, b backend) *env {
	v := newEnv(t, b)
	v.worker()
	return v
}

func startLate(v *env, mod ...func(*WorkerOptions)) {
	reg := handlers.NewRegistry(handlers.Options{})
	reg.RegisterFunc("late", func(ctx context.Context, req handlers.Request) (json.RawMessage, error) {
		v.note(req)
		return req.Config, nil
	})
	o := fastWorker(reg)
	o.Queues = []string{HandlerQueue("late")}
	for _, m := range mod {
		m(&o)
	}
	v.e.StartWorkers(v.ctx, 1, o)
}

// lateMsg waits for the single message of x's queue and returns it.
func lateMsg(t *testing.T, v *env, run string) (stream string, msg redis.XMessage, tok Token) {
	t.Helper()
	stream = v.e.st.ks.stream(v.e.st.ks.shard(run), HandlerQueue("late"))
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		ms, err := v.e.st.rdb.XRange(v.ctx, stream, "-", "+").Result()
		if err != nil || len(ms) == 0 {
			continue
		}
		if len(ms) != 1 {
			t.Fatalf("%d messages in %s", len(ms), stream)
		}
		raw, _ := ms[0].Values["t"].(string)
		if err := decodeToken(raw, &tok); err != nil {
			t.Fatal(err)
		}
		return stream, ms[0], tok
	}
	t.Fatal("no token in the late queue")
	return
}

// replaceMsg replaces the queue's message (not delivered yet) by tok.
func replaceMsg(t *testing.T, v *env, stream string, msg redis.XMessage, tok Token) {
	t.Helper()
	data, err := json.Marshal(tok)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.e.st.rdb.XDel(v.ctx, stream, msg.ID).Err(); err != nil {
		t.Fatal(err)
	}
	if err := v.e.st.rdb.XAdd(v.ctx, &redis.XAddArgs{Stream: stream, Values: map[string]any{"t": string(data)}}).Err(); err != nil {
		t.Fatal(err)
	}
}

func strp(s string) *string { return &s }

// A worker uses what the token carries, and reads what it does not carry:
// a token rewritten to carry another value of a's output runs with it; one
// that lacks a field the node reads (as after a patch, or from a graph of
// an older runtime) reads them all.
func TestCarryUsedAndFallback(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		w := build(t, wfSpec{nodes: []*nodeSpec{
			task("a", "count", with("v", konst("1"))),
			task("b", "count", with("v", konst("2"))),
			task("x", "late", after("a", "b"), with("v", cexpr("a.output.v * 10 + b.output.v"))),
		}})
		for _, c := range []struct {
			name string
			outs map[string]*string
			want string
		}{
			{"carried", map[string]*string{"out|a": strp(`{"v":5}`), "out|b": strp(`{"v":2}`)}, `{"v":52}`},
			{"carried absent", map[string]*string{"out|a": strp(`{"v":5}`), "out|b": nil}, ""},
			{"partial", map[string]*string{"out|a": strp(`{"v":5}`)}, `{"v":12}`},
			{"none", nil, `{"v":12}`},
		} {
			v := lateEnv(t, b)
			run := v.submit(w, nil)
			stream, msg, tok := lateMsg(t, v, run)
			if tok.Outs["out|a"] == nil || *tok.Outs["out|a"] != `{"v":1}` || tok.Outs["out|b"] == nil || *tok.Outs["out|b"] != `{"v":2}` || len(tok.Outs) != 2 {
				t.Fatalf("x's token carries %v", tok.Outs)
			}
			tok.Outs = c.outs
			replaceMsg(t, v, stream, msg, tok)
			startLate(v)
			st := v.wait(run)
			if c.want == "" {
				// b.output absent: the expression fails (no such key).
				if st.State != RunFailed || !strings.Contains(st.Error, "output") {
					t.Errorf("%s: %s %s", c.name, st.State, st.Error)
				}
				continue
			}
			if st.State != RunCompleted || string(st.Nodes["x"].Output) != c.want {
				t.Errorf("%s: %s, x's output %s, want %s (%s)", c.name, st.State, st.Nodes["x"].Output, c.want, st.Error)
			}
		}
	})
}

// A patch that makes a node read a parent it did not read before: the
// token queued after it carries what the patched node reads.
func TestCarryPatchedReads(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		w := build(t, wfSpec{nodes: []*nodeSpec{
			task("a", "count", with("v", konst("3"))),
			task("b", "block", with("v", konst("4"))),
			task("x", "count", after("a", "b"), with("v", cexpr("b.output.v"))),
		}})
		v.worker()
		run := v.submit(w, nil)
		v.waitStarted()
		waitNode(t, v, run, "a", NodeCompleted)
		patch := `[{"op":"replace","path":"/nodes/2/with/0/value/expr/cel","value":"a.output.v * 10 + b.output.v"}]`
		if _, err := patchRun(v, run, patch, false); err != nil {
			t.Fatal(err)
		}
		close(v.unblock)
		st := v.wait(run)
		if st.State != RunCompleted || string(st.Nodes["x"].Output) != `{"v":34}` {
			t.Fatalf("%s %s: x's output %s", st.State, st.Error, st.Nodes["x"].Output)
		}
	})
}

// A token that carries outputs and is delivered again (its worker died
// while the handler ran) runs again with the same values; a retry's token
// carries none and reads them.
func TestCarryRedeliveryAndRetry(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		var failed atomic.Bool
		v.reg.RegisterFunc("failonce", func(ctx context.Context, req handlers.Request) (json.RawMessage, error) {
			if !failed.Swap(true) {
				return nil, fmt.Errorf("failonce: the first attempt fails")
			}
			return req.Config, nil
		})
		w := build(t, wfSpec{nodes: []*nodeSpec{
			task("a", "count", with("v", konst("7"))),
			task("x", "block", after("a"), with("v", cexpr("a.output.v + 1"))),
			task("y", "failonce", after("x"), with("v", cexpr("x.output.v + a.output.v")), retry(2, "fixed", 10)),
		}})
		kill := v.crashingWorker("doomed")
		run := v.submit(w, nil)
		key := v.waitStarted()
		kill()
		close(v.unblock)
		v.worker(func(o *WorkerOptions) { o.Consumer = "rescuer" })
		st := v.wait(run)
		if st.State != RunCompleted || string(st.Nodes["x"].Output) != `{"v":8}` || string(st.Nodes["y"].Output) != `{"v":15}` {
			t.Fatalf("%s %s: %s", st.State, st.Error, dump(outputsOf(st)))
		}
		if c := v.callCount(key); c != 2 {
			t.Errorf("x ran %d times, want 2", c)
		}
		if !failed.Load() || st.Nodes["y"].Attempt != 2 {
			t.Errorf("y: attempt %d", st.Nodes["y"].Attempt)
		}
	})
}

// A for_each's items read the outputs their expressions name (pre-read
// with the batch, or read), and the node behind it gets the collected list
// in its token.
func TestCarryForEach(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := lateEnv(t, b)
		w := build(t, wfSpec{nodes: []*nodeSpec{
			task("a", "count", with("items", konst("[1, 2, 3, 4, 5]")), with("k", konst("10"))),
			task("each", "count", after("a"), forEach("x", "a.output.items", 2), with("v", cexpr("x * a.output.k"))),
			task("sum", "late", after("each"), with("n", cexpr("each.output[0].v + each.output[4].v + size(each.output)"))),
		}})
		run := v.submit(w, nil)
		_, _, tok := lateMsg(t, v, run)
		if o := tok.Outs["out|each"]; o == nil || *o != `[{"v":10},{"v":20},{"v":30},{"v":40},{"v":50}]` || len(tok.Outs) != 1 {
			t.Errorf("sum's token carries %s", dump(tok.Outs))
		}
		startLate(v)
		st := v.wait(run)
		if st.State != RunCompleted || string(st.Nodes["sum"].Output) != `{"n":65}` {
			t.Fatalf("%s %s: sum's output %s", st.State, st.Error, st.Nodes["sum"].Output)
		}
	})
}

// Tokens carry stored values only: an output is masked before it is
// stored, so a token carrying it holds the mask, never the secret; the
// run's inputs, where secret values are resolved, are never carried.
func TestCarrySecrets(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker(func(o *WorkerOptions) { o.Secrets = testSecrets(t) })
		w := build(t, wfSpec{
			inputs: []ir.Input{input("token", ir.KindSecret, `"API_TOKEN"`)},
			nodes: []*nodeSpec{
				task("a", "count", with("auth", tmpl("Bearer ", &ir.Expr{CEL: "input.token"}))),
				task("b", "late", after("a"), with("copy", cexpr("a.output.auth")), with("raw", cexpr("input.token"))),
			},
		})
		run := v.submit(w, nil)
		_, msg, tok := lateMsg(t, v, run)
		if o := tok.Outs["out|a"]; o == nil || *o != `{"auth":"Bearer ***"}` || len(tok.Outs) != 1 {
			t.Errorf("b's token carries %s", dump(tok.Outs))
		}
		noSecretIn(t, "b's token", dump(msg.Values))
		startLate(v, func(o *WorkerOptions) { o.Secrets = testSecrets(t) })
		st := v.wait(run)
		if st.State != RunCompleted || string(st.Nodes["b"].Output) != `{"copy":"Bearer ***","raw":"***"}` {
			t.Fatalf("%s %s: b's output %s", st.State, st.Error, st.Nodes["b"].Output)
		}
	})
}

// The scripts bound what a token carries as the runtime says (carryMax).
func TestCarryMaxAgrees(t *testing.T) {
	src, err := ScriptSource("advance")
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("local CARRYMAX = %d\n", carryMax); !strings.Contains(src, want) {
		t.Errorf("step.lua does not define %q", want)
	}
}

// A fresh exec token of a run the worker has not seen runs without its
// pre-read when it carries all its node reads: a task whose expressions
// read no input, without for_each, its token carrying every field.
func TestCarryTold(t *testing.T) {
	w := build(t, wfSpec{
		inputs: []ir.Input{input("n", ir.KindInt, "1")},
		nodes: []*nodeSpec{
			task("a", "count", with("v", konst("1"))),
			task("b", "count", after("a"), with("v", cexpr("a.output.v + 1"))),
			task("c", "count", after("a"), with("v", cexpr("a.output.v + input.n"))),
			task("d", "count", after("a"), forEach("x", "[1, 2]", 1), with("v", cexpr("x + a.output.v"))),
			task("e", "count", after("a"), with("v", cexpr("1 + 2"))),
		},
	})
	p, err := newPlan(w, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	outs := map[string]*string{"out|a": strp(`{"v":1}`)}
	for _, c := range []struct {
		node string
		outs map[string]*string
		want bool
	}{
		{"b", outs, true}, {"b", nil, false}, {"b", map[string]*string{"out|x": nil}, false},
		{"c", outs, false}, {"d", outs, false}, {"e", nil, true},
	} {
		tok := &Token{Kind: "exec", Node: c.node, Outs: c.outs}
		if got := p.carriesAll(tok); got != c.want {
			t.Errorf("%s carrying %v: %v, want %v", c.node, c.outs, got, c.want)
		}
	}
	if g := p.graph["b"]; !slices.Equal(g.Rd, []string{"out|a"}) {
		t.Errorf("b's rd %v", g.Rd)
	}
	if g := p.graph["e"]; len(g.Rd) != 0 {
		t.Errorf("e's rd %v", g.Rd)
	}
}

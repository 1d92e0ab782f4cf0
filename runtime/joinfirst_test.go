package runtime

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/runtime/handlers"
)

// Races (docs/waiting.md, "Races"): a join first runs at the first real
// token and cancels the pending work of the nodes that only feed it, in
// the same script. Every test checks replay == live state (v.wait).

// timersOf returns the members of the control queue's timers in run's
// shard (every timer of these tests is there: wait, human and signal
// nodes run on the control queue).
func timersOf(v *env, run string) []string {
	v.t.Helper()
	ks := v.e.st.ks
	m, err := v.e.st.rdb.ZRange(v.ctx, ks.timers(ks.shard(run), v.e.ControlQueue()), 0, -1).Result()
	if err != nil {
		v.t.Fatal(err)
	}
	var out []string
	for _, t := range m {
		if strings.Contains(t, `"run":"`+run+`"`) {
			out = append(out, t)
		}
	}
	return out
}

// cancelledOf returns the executions run's join.cancelled events list.
func cancelledOf(v *env, run string) []string {
	v.t.Helper()
	evs, err := v.e.Events(v.ctx, run)
	if err != nil {
		v.t.Fatal(err)
	}
	var out []string
	for _, ev := range evs {
		if ev.Type == "join.cancelled" {
			out = append(out, strings.Split(ev.Fields["cancelled"], ",")...)
		}
	}
	return out
}

// approvalRaceWF: draft -> approve (human, timeout 1h) and draft ->
// patience (wait for) -> decide after approve, patience join first.
func approvalRaceWF(t *testing.T, patience string) *ir.Workflow {
	return build(t, wfSpec{name: "race", outputs: []ir.Output{output("approved", "has(approve.output) && approve.output.approved")},
		nodes: []*nodeSpec{
			task("draft", "cel", with("text", konst(`"offer"`))),
			human("approve", []string{"ann@example.com"}, after("draft"), approvalTimeout(3_600_000, ir.TimeoutFail)),
			task("patience", "wait", after("draft"), with("for", konst(`"`+patience+`"`)), outType(waitOut)),
			task("decide", "noop", after("approve", "patience"), joinMode(ir.JoinFirst)),
			task("linger", "wait", after("decide"), with("for", konst(`"600ms"`)), outType(waitOut)),
		}})
}

func TestJoinFirstCancels(t *testing.T) {
	w := approvalRaceWF(t, "1s")
	n := w.Node("decide")
	if got := strings.Join(n.JoinInfo.Cancels, " "); got != "draft approve patience" {
		t.Fatalf("cancels = %q", got)
	}
	// A node that also feeds another is needed: not cancelled.
	w2 := build(t, wfSpec{nodes: []*nodeSpec{
		task("a", "noop"), task("b", "noop"), task("c", "noop", after("b")),
		task("j", "noop", after("a", "b"), joinMode(ir.JoinFirst)),
	}})
	if got := strings.Join(w2.Node("j").JoinInfo.Cancels, " "); got != "a" {
		t.Fatalf("cancels = %q", got)
	}
	// Validate refuses what the runtime cannot cancel.
	w3 := build(t, wfSpec{nodes: []*nodeSpec{
		task("a", "noop"), task("b", "noop", forEach("x", "[1, 2]", 0)),
		task("j", "noop", after("a", "b"), joinAny()),
	}})
	w3.Nodes[2].Join = ir.JoinFirst
	if err := ir.Analyze(w3); err != nil {
		t.Fatal(err)
	}
	ps := ir.Validate(w3)
	if len(ps) == 0 || !strings.Contains(ir.Problems(ps).Error(), "a join first cannot cancel a for_each node") {
		t.Fatalf("problems: %v", ps)
	}
}

// The timer wins: the approval is cancelled (a later decision is refused,
// its timeout token gone), and the run completes at once, not after the
// approval's hour.
func TestJoinFirstTimerWins(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		start := time.Now()
		run := v.submit(approvalRaceWF(t, "300ms"), nil)
		waitOpen(v, run, "approve")
		waitWaiting(v, run, "linger")
		// The run still runs: a decision is refused, and changes nothing.
		before := stateOf(v, run)
		err := v.e.Decide(v.ctx, run, "approve", Decision{Approve: true, By: "ann@example.com"})
		if err == nil || !strings.Contains(err.Error(), "is closed: it was cancelled (join decide ran first)") {
			t.Fatalf("a late decision: %v", err)
		}
		if after := stateOf(v, run); after != before {
			t.Fatalf("a refused decision changed the run:\n%s\n---\n%s", before, after)
		}
		st := v.wait(run)
		if st.State != RunCompleted || string(st.Result) != `{"approved":false}` || time.Since(start) > 10*time.Second {
			t.Fatalf("%s", dump(st))
		}
		if nodeState(st, "approve") != NodeCancelled || nodeState(st, "patience") != NodeCompleted || nodeState(st, "decide") != NodeCompleted {
			t.Fatalf("%s", dump(st))
		}
		if got := strings.Join(cancelledOf(v, run), ","); got != "approve" {
			t.Fatalf("join.cancelled lists %q", got)
		}
		if a := st.Approvals[0]; a.State != ApprovalCancelled {
			t.Fatalf("approval %+v", a)
		}
		if tm := timersOf(v, run); len(tm) != 0 {
			t.Fatalf("timers left: %v", tm)
		}
		if err := v.e.Decide(v.ctx, run, "approve", Decision{Approve: true, By: "ann@example.com"}); err == nil {
			t.Fatal("a decision on the ended run applied")
		}
		if open, _ := v.e.OpenApprovals(v.ctx); len(open) != 0 {
			t.Fatalf("still open: %v", open)
		}
	})
}

// The approval wins: the timer is removed from the timers set and never
// fires.
func TestJoinFirstApprovalWins(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		run := v.submit(approvalRaceWF(t, "1h"), nil)
		waitOpen(v, run, "approve")
		waitWaiting(v, run, "patience")
		if tm := timersOf(v, run); len(tm) != 2 { // the wake and the approval's timeout
			t.Fatalf("timers: %v", tm)
		}
		if err := v.e.Decide(v.ctx, run, "approve", Decision{Approve: true, By: "ann@example.com"}); err != nil {
			t.Fatal(err)
		}
		st := v.wait(run)
		if st.State != RunCompleted || string(st.Result) != `{"approved":true}` || nodeState(st, "patience") != NodeCancelled {
			t.Fatalf("%s", dump(st))
		}
		if tm := timersOf(v, run); len(tm) != 0 {
			t.Fatalf("timers left: %v", tm)
		}
		if n := eventCount(v, run, "node.completed", "patience"); n != 0 {
			t.Fatalf("the cancelled wait completed %d times", n)
		}
	})
}

// Two providers race: the fast one wins. The slow one's handler, still
// running, is cancelled (a heartbeat sees its execution cancelled) while
// the run goes on; a retrying one loses its timer; a node after a loser
// never runs. The run completes without waiting for any of them.
func TestJoinFirstProviders(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		stopped := make(chan error, 4)
		v.reg.RegisterFunc("slow", func(ctx context.Context, req handlers.Request) (json.RawMessage, error) {
			v.note(req)
			v.started <- req.IdempotencyKey
			<-ctx.Done()
			stopped <- context.Cause(ctx)
			return nil, ctx.Err()
		})
		v.worker()
		w := build(t, wfSpec{name: "providers", outputs: []ir.Output{output("winner", "fast.output.who")},
			nodes: []*nodeSpec{
				task("slow_a", "slow"),
				task("slow_b", "count", after("slow_a")),
				task("flaky", "flaky", with("fails", konst(`100`)), retry(5, "fixed", 3_600_000)),
				task("gate", "wait", with("for", konst(`"400ms"`)), outType(waitOut)),
				task("fast", "cel", after("gate"), with("who", konst(`"fast"`))),
				task("pick", "noop", after("slow_b", "flaky", "fast"), joinMode(ir.JoinFirst)),
				task("after_pick", "wait", after("pick"), with("for", konst(`"1s"`)), outType(waitOut)),
			}})
		run := v.submit(w, nil)
		v.waitStarted()
		st := v.wait(run)
		if st.State != RunCompleted || string(st.Result) != `{"winner":"fast"}` {
			t.Fatalf("%s", dump(st))
		}
		for x, want := range map[string]string{"slow_a": NodeCancelled, "slow_b": NodeCancelled, "flaky": NodeCancelled, "gate": NodeCompleted, "fast": NodeCompleted, "pick": NodeCompleted} {
			if got := nodeState(st, x); got != want {
				t.Errorf("%s: %s, want %s", x, got, want)
			}
		}
		select {
		case err := <-stopped:
			if err != errExecCancelled {
				t.Errorf("the slow handler stopped with %v, want its execution's cancel", err)
			}
		default:
			t.Errorf("the slow handler still runs after the run completed")
		}
		if tm := timersOf(v, run); len(tm) != 0 {
			t.Fatalf("timers left (flaky's retry): %v", tm)
		}
		if n := v.callCount(run + "/slow_b"); n != 0 {
			t.Errorf("slow_b ran %d times", n)
		}
	})
}

// A signal races a timeout branch (a wait): the signal wins and the wait's
// timer goes; then the timer wins, and the signal wait is dropped from its
// waiters, so a signal sent to the still running run is kept, not taken.
func TestJoinFirstSignal(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		wf := func(patience string) *ir.Workflow {
			return build(t, wfSpec{name: "reply", outputs: []ir.Output{output("text", "has(s.output) ? s.output.text : 'none'")},
				nodes: []*nodeSpec{
					task("s", "signal", with("name", konst(`"reply"`)), with("correlation", konst(`"c"`)), outType(textOut), timeout(3_600_000)),
					task("patience", "wait", with("for", konst(`"`+patience+`"`)), outType(waitOut)),
					task("got", "noop", after("s", "patience"), joinMode(ir.JoinFirst)),
					task("linger", "wait", after("got"), with("for", konst(`"500ms"`)), outType(waitOut)),
				}})
		}
		run := v.submit(wf("1h"), nil)
		waitWaiting(v, run, "s")
		waitWaiting(v, run, "patience")
		if x, err := v.e.Signal(v.ctx, run, "reply", "c", json.RawMessage(`{"text":"yes"}`)); err != nil || x != "s" {
			t.Fatalf("signal: %q %v", x, err)
		}
		st := v.wait(run)
		if st.State != RunCompleted || string(st.Result) != `{"text":"yes"}` || nodeState(st, "patience") != NodeCancelled {
			t.Fatalf("%s", dump(st))
		}
		if tm := timersOf(v, run); len(tm) != 0 {
			t.Fatalf("timers left: %v", tm)
		}

		run = v.submit(wf("200ms"), nil)
		waitWaiting(v, run, "s")
		waitWaiting(v, run, "linger")
		st, err := v.e.Status(v.ctx, run)
		if err != nil || nodeState(st, "s") != NodeCancelled {
			t.Fatalf("%v %s", err, dump(st))
		}
		if x, err := v.e.Signal(v.ctx, run, "reply", "c", json.RawMessage(`{"text":"late"}`)); err != nil || x != "" {
			t.Fatalf("a late signal: %q %v (want kept)", x, err)
		}
		st = v.wait(run)
		if st.State != RunCompleted || string(st.Result) != `{"text":"none"}` || nodeState(st, "s") != NodeCancelled {
			t.Fatalf("%s", dump(st))
		}
		if tm := timersOf(v, run); len(tm) != 0 {
			t.Fatalf("timers left (the signal's timeout): %v", tm)
		}
	})
}

// A child flow loses: its child run (and the child's own child) is
// cancelled, and its late end changes nothing in the parent.
func TestJoinFirstChildLoses(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		inner := childWF(t, "inner", "block")
		mid := build(t, wfSpec{name: "mid", inputs: []ir.Input{input("n", "int")}, children: []*ir.Workflow{inner},
			nodes: []*nodeSpec{flowNode(t, "in", inner, fwith("n", cexpr("input.n")))}})
		w := build(t, wfSpec{name: "parent", children: []*ir.Workflow{mid}, outputs: []ir.Output{output("child", "has(m.output)")},
			nodes: []*nodeSpec{
				flowNode(t, "m", mid, fwith("n", konst("1"))),
				task("patience", "wait", with("for", konst(`"300ms"`)), outType(waitOut)),
				task("go_on", "noop", after("m", "patience"), joinMode(ir.JoinFirst)),
			}})
		run := v.submit(w, nil)
		v.waitStarted()
		st := v.wait(run)
		if st.State != RunCompleted || string(st.Result) != `{"child":false}` || nodeState(st, "m") != NodeCancelled {
			t.Fatalf("%s", dump(st))
		}
		midRun := st.Nodes["m"].Child
		if midRun == "" {
			t.Fatalf("no child recorded: %s", dump(st))
		}
		mst := v.wait(midRun)
		ist := v.wait(mst.Nodes["in"].Child)
		if mst.State != RunCancelled || ist.State != RunCancelled {
			t.Fatalf("children not cancelled: mid %s, inner %s", mst.State, ist.State)
		}
		// The cancelled child's end queued a child token to the parent:
		// handled as a duplicate, the parent unchanged.
		before := stateOf(v, run)
		time.Sleep(300 * time.Millisecond)
		if after := stateOf(v, run); after != before {
			t.Fatalf("the child's late end changed the parent:\n%s\n---\n%s", before, after)
		}
		close(v.unblock)
	})
}

// A flow node's timeout bounds its child: the attempt's child is
// cancelled (with its own child) when it passes, the attempt fails with
// code timeout, and retry starts a new child, which here finishes in
// time. Without attempts left the node fails with code timeout. The
// cancelled children's late ends change nothing.
func TestFlowTimeoutBoundsChild(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		var calls atomic.Int64
		v.reg.RegisterFunc("first_slow", func(ctx context.Context, req handlers.Request) (json.RawMessage, error) {
			if calls.Add(1) == 1 {
				<-ctx.Done() // the first child blocks until it is cancelled
				return nil, ctx.Err()
			}
			return req.Config, nil
		})
		v.worker()
		inner := childWF(t, "inner", "first_slow")
		mid := build(t, wfSpec{name: "mid", inputs: []ir.Input{input("n", "int")}, children: []*ir.Workflow{inner},
			outputs: []ir.Output{output("doubled", "sub.output.doubled")},
			nodes:   []*nodeSpec{flowNode(t, "sub", inner, fwith("n", cexpr("input.n")))}})
		w := build(t, wfSpec{name: "parent", children: []*ir.Workflow{mid}, outputs: []ir.Output{output("got", "m.output.doubled")},
			nodes: []*nodeSpec{flowNode(t, "m", mid, fwith("n", konst("4")), timeout(800), retry(2, "fixed", 10))}})
		start := time.Now()
		st := v.run(w, nil)
		if st.State != RunCompleted || string(st.Result) != `{"got":8}` || time.Since(start) > 15*time.Second {
			t.Fatalf("%s", dump(st))
		}
		var first string
		for c, x := range st.Children {
			if x == "m" && c != st.Nodes["m"].Child {
				first = c
			}
		}
		if first == "" || len(st.Children) != 2 {
			t.Fatalf("children %v", st.Children)
		}
		fst := v.wait(first)
		if fst.State != RunCancelled || !strings.Contains(fst.Error, "the timeout of 800ms of flow node m") {
			t.Fatalf("the timed-out child: %s", dump(fst))
		}
		if ist := v.wait(fst.Nodes["sub"].Child); ist.State != RunCancelled {
			t.Fatalf("the timed-out child's child: %s", ist.State)
		}
		evs, _ := v.e.Events(v.ctx, st.RunID)
		var retried bool
		for _, ev := range evs {
			if ev.Type == "node.retry" && strings.Contains(ev.Fields["error"], "attempt timed out after 800ms: child run "+first+" cancelled") {
				retried = true
			}
		}
		if !retried {
			t.Fatalf("no retry for the timeout: %s", dump(evs))
		}
		if tm := timersOf(v, st.RunID); len(tm) > 1 { // the second attempt's, due later: a no-op then
			t.Fatalf("timers: %v", tm)
		}

		// No attempt left: the node fails with code timeout.
		calls.Store(0) // its first call blocks again
		w = build(t, wfSpec{name: "parent2", children: []*ir.Workflow{inner},
			nodes: []*nodeSpec{flowNode(t, "c", inner, fwith("n", konst("1")), timeout(300))}})
		st = v.run(w, nil)
		if st.State != RunFailed || st.Nodes["c"].Code != handlers.CodeTimeout {
			t.Fatalf("%s", dump(st))
		}
		if cst := v.wait(st.Nodes["c"].Child); cst.State != RunCancelled {
			t.Fatalf("child %s", cst.State)
		}
		before := stateOf(v, st.RunID)
		time.Sleep(200 * time.Millisecond)
		if after := stateOf(v, st.RunID); after != before {
			t.Fatalf("the child's late end changed the parent")
		}
	})
}

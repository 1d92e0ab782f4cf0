package runtime

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wfc-lang/wfc/ir"
)

// escalation gives a human node escalate_to and escalate_after.
func escalation(afterMS int64, to ...string) nodeOpt {
	return func(s *nodeSpec) { s.n.Human.EscalateTo, s.n.Human.EscalateAfterMS = to, afterMS }
}

// waitEscalated waits until run's approval x has escalated and returns it.
func waitEscalated(v *env, run, x string) Approval {
	v.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		aps, err := v.e.Approvals(v.ctx, run)
		if err != nil {
			v.t.Fatal(err)
		}
		for _, a := range aps {
			if a.Exec == x && !a.Escalated.IsZero() {
				return a
			}
		}
		if time.Now().After(deadline) {
			v.t.Fatalf("approval %s of run %s did not escalate: %s", x, run, dump(aps))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// eventsOf returns the types of run's events, in order, with their exec
// key: "approval.escalated review".
func eventsOf(v *env, run string) []string {
	v.t.Helper()
	evs, err := v.e.Events(v.ctx, run)
	if err != nil {
		v.t.Fatal(err)
	}
	var out []string
	for _, ev := range evs {
		if strings.HasPrefix(ev.Type, "approval.") {
			out = append(out, ev.Type+" "+ev.Fields["x"])
		}
	}
	return out
}

// escalateTimers returns the escalate tokens in the control queue's
// timers.
func escalateTimers(v *env, run string) []string {
	v.t.Helper()
	all, err := v.e.st.rdb.ZRange(v.ctx, v.e.st.ks.timers(v.e.st.ks.shard(run), ControlQueue), 0, -1).Result()
	if err != nil {
		v.t.Fatal(err)
	}
	var out []string
	for _, m := range all {
		if strings.Contains(m, `"escalate"`) && strings.Contains(m, run) {
			out = append(out, m)
		}
	}
	return out
}

// The escalation fires: the approval escalates once (approval.escalated),
// and the escalation approvers may decide from then on; before, they are
// refused.
func TestApprovalEscalation(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		run := v.submit(approvalWF(t, false, escalation(200, "cfo@example.com", "ceo@example.com")), nil)
		a := waitOpen(v, run, "review")
		if len(a.EscalateTo) != 2 || a.EscalateAt.Sub(a.Created) != 200*time.Millisecond {
			t.Fatalf("approval %+v", a)
		}
		a = waitEscalated(v, run, "review")
		if a.State != ApprovalOpen || a.Escalated.Before(a.EscalateAt) {
			t.Fatalf("escalated approval %+v", a)
		}
		v.check(run)
		if got := eventsOf(v, run); strings.Join(got, ",") != "approval.created review,approval.escalated review" {
			t.Fatalf("events %v", got)
		}
		if left := escalateTimers(v, run); len(left) != 0 {
			t.Fatalf("escalate timers left: %v", left)
		}
		// Someone else is still refused, and told who may decide.
		err := v.e.Decide(v.ctx, run, "review", Decision{Approve: true, By: "eve@example.com"})
		if err == nil || !strings.Contains(err.Error(), `"eve@example.com" is not an approver of review (approvers: ann@example.com, bob@example.com; after escalation: cfo@example.com, ceo@example.com)`) {
			t.Fatalf("eve: %v", err)
		}
		if err := v.e.Decide(v.ctx, run, "review", Decision{Approve: true, By: "ceo@example.com", Comment: "go"}); err != nil {
			t.Fatal(err)
		}
		st := v.wait(run)
		if st.State != RunCompleted || string(st.Result) != `{"sent":true,"decision":{"approved":true,"approver":"ceo@example.com","comment":"go"}}` {
			t.Fatalf("%s", dump(st))
		}
		if ap := st.Approvals[0]; ap.State != ApprovalApproved || ap.By != "ceo@example.com" || ap.Escalated.IsZero() {
			t.Fatalf("approval after: %+v", ap)
		}
		v.check(run)
	})
}

// Before the escalation an escalation approver is refused (nothing
// changes); a decision by an approver closes the approval and removes the
// escalation's timer, so it never escalates.
func TestApprovalEscalationBefore(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		run := v.submit(approvalWF(t, false, approvalTimeout(7_200_000, ir.TimeoutFail), escalation(3_600_000, "cfo@example.com")), nil)
		waitOpen(v, run, "review")
		if left := escalateTimers(v, run); len(left) != 1 {
			t.Fatalf("escalate timers: %v", left)
		}
		before, _ := v.e.Status(v.ctx, run)
		err := v.e.Decide(v.ctx, run, "review", Decision{Approve: true, By: "cfo@example.com"})
		if err == nil || !strings.Contains(err.Error(), `"cfo@example.com" is an escalation approver of review: they may decide once it escalates (in 3600s`) {
			t.Fatalf("early escalation approver: %v", err)
		}
		after, _ := v.e.Status(v.ctx, run)
		if d := Compare(before, after); len(d) > 0 || len(eventsOf(v, run)) != 1 {
			t.Fatalf("a refused decision changed the run: %v", d)
		}
		if err := v.e.Decide(v.ctx, run, "review", Decision{Approve: true, By: "ann@example.com"}); err != nil {
			t.Fatal(err)
		}
		if st := v.wait(run); st.State != RunCompleted || !st.Approvals[0].Escalated.IsZero() {
			t.Fatalf("%s", dump(st))
		}
		if left := escalateTimers(v, run); len(left) != 0 {
			t.Fatalf("escalate timers left after the decision: %v", left)
		}
		if got := eventsOf(v, run); strings.Join(got, ",") != "approval.created review,approval.decided review" {
			t.Fatalf("events %v", got)
		}
		v.check(run)
	})
}

// An escalate token delivered again (a worker died after the escalation,
// or the token was promoted after the decision) changes nothing: the
// approval escalates once, and a closed approval does not escalate.
func TestApprovalEscalationOnce(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		run := v.submit(approvalWF(t, false, escalation(100, "cfo@example.com")), nil)
		waitEscalated(v, run, "review")
		tok, _ := json.Marshal(Token{Kind: "escalate", Run: run, Node: "review", Hop: 1, Attempt: 1, Item: -1})
		stream := v.e.st.ks.stream(v.e.st.ks.shard(run), ControlQueue)
		again := func() {
			if err := v.e.st.rdb.XAdd(v.ctx, &redis.XAddArgs{Stream: stream, Values: []any{"t", string(tok)}}).Err(); err != nil {
				t.Fatal(err)
			}
			waitNoPending(t, v.e)
			time.Sleep(100 * time.Millisecond)
		}
		again()
		if got := eventsOf(v, run); strings.Join(got, ",") != "approval.created review,approval.escalated review" {
			t.Fatalf("events after a second escalate token %v", got)
		}
		if err := v.e.Decide(v.ctx, run, "review", Decision{By: "cfo@example.com", Comment: "no"}); err != nil {
			t.Fatal(err)
		}
		st := v.wait(run)
		if st.State != RunFailed || st.Nodes["review"].Code != CodeRejected {
			t.Fatalf("%s", dump(st))
		}
		// A run that is over drops the token.
		again()
		if got := eventsOf(v, run); strings.Join(got, ",") != "approval.created review,approval.escalated review,approval.decided review" {
			t.Fatalf("events after a late escalate token %v", got)
		}
		v.check(run)
	})
}

// The escalation and decisions race: each run applies exactly one order.
// An escalation approver's decision applies only after the escalation;
// an approver's decision that wins removes the escalation (no event
// after it).
func TestApprovalEscalationRace(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		for i := 0; i < 6; i++ {
			by := "cfo@example.com"
			if i%2 == 1 {
				by = "ann@example.com"
			}
			run := v.submit(approvalWF(t, false, escalation(40, "cfo@example.com")), nil)
			var err error
			for {
				err = v.e.Decide(v.ctx, run, "review", Decision{Approve: true, By: by})
				if err == nil {
					break
				}
				if !strings.Contains(err.Error(), "is an escalation approver") && !strings.Contains(err.Error(), "no approval") {
					t.Fatalf("%s: %v", by, err)
				}
				time.Sleep(2 * time.Millisecond)
			}
			st := v.wait(run)
			if st.State != RunCompleted {
				t.Fatalf("%s", dump(st))
			}
			time.Sleep(60 * time.Millisecond) // a token promoted before the decision comes and goes
			waitNoPending(t, v.e)
			evs := strings.Join(eventsOf(v, run), ",")
			switch evs {
			case "approval.created review,approval.escalated review,approval.decided review":
			case "approval.created review,approval.decided review":
				if by == "cfo@example.com" {
					t.Fatalf("an escalation approver decided before the escalation: %s", evs)
				}
			default:
				t.Fatalf("%s: events %s", by, evs)
			}
			if left := escalateTimers(v, run); len(left) != 0 {
				t.Fatalf("escalate timers left: %v", left)
			}
			v.check(run)
		}
	})
}

// Each iteration of a loop escalates on its own; an approver keeps the
// right to decide after the escalation.
func TestApprovalEscalationLoop(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		w := build(t, wfSpec{
			outputs: []ir.Output{output("n", "check.iteration")},
			nodes: []*nodeSpec{
				task("start", "noop"),
				human("review", []string{"ann"}, after("start"), escalation(80, "cfo")),
				task("check", "noop", after("review"), loop(`review.output.approver != "ann"`, 5, "review")),
			},
		})
		run := v.submit(w, nil)
		for _, c := range []struct{ x, by string }{{"review@1", "cfo"}, {"review@2", "cfo"}, {"review@3", "ann"}} {
			waitOpen(v, run, c.x)
			a := waitEscalated(v, run, c.x)
			if a.Escalated.Before(a.EscalateAt) {
				t.Fatalf("approval %+v", a)
			}
			v.check(run)
			if err := v.e.Decide(v.ctx, run, "review", Decision{Approve: true, By: c.by}); err != nil {
				t.Fatalf("%s: %v", c.x, err)
			}
		}
		st := v.wait(run)
		if st.State != RunCompleted || string(st.Result) != `{"n":3}` || len(st.Approvals) != 3 {
			t.Fatalf("%s", dump(st))
		}
		want := []string{"approval.created review@1", "approval.escalated review@1", "approval.decided review@1",
			"approval.created review@2", "approval.escalated review@2", "approval.decided review@2",
			"approval.created review@3", "approval.escalated review@3", "approval.decided review@3"}
		if got := eventsOf(v, run); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("events %v", got)
		}
		v.check(run)
	})
}

// A retried run's approval starts unescalated: the new approval (of the
// new generation) escalates on its own time.
func TestApprovalEscalationRetry(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		run := v.submit(approvalWF(t, false, escalation(100, "cfo@example.com")), nil)
		waitEscalated(v, run, "review")
		if err := v.e.Cancel(v.ctx, run); err != nil {
			t.Fatal(err)
		}
		if err := v.e.Retry(v.ctx, run); err != nil {
			t.Fatal(err)
		}
		a := waitOpen(v, run, "review")
		if a.Gen != 1 || !a.Escalated.IsZero() && a.Escalated.Before(a.EscalateAt) {
			t.Fatalf("approval after retry: %+v", a)
		}
		waitEscalated(v, run, "review")
		if err := v.e.Decide(v.ctx, run, "review", Decision{Approve: true, By: "cfo@example.com"}); err != nil {
			t.Fatal(err)
		}
		if st := v.wait(run); st.State != RunCompleted {
			t.Fatalf("%s", dump(st))
		}
		v.check(run)
	})
}

// Escalation approvers computed from the inputs; an empty list fails the
// node, as empty approvers do.
func TestApprovalEscalationExpr(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		w := build(t, wfSpec{
			inputs:  []ir.Input{{Name: "backup", Type: ir.Type{Kind: ir.KindList, Elem: &ir.Type{Kind: ir.KindString}}, Required: true}},
			outputs: []ir.Output{output("by", "review.output.approver")},
			nodes: []*nodeSpec{human("review", []string{"ann"}, escalation(50), func(s *nodeSpec) {
				s.n.Human.EscalateToExpr = &ir.Expr{CEL: "input.backup"}
			})},
		})
		run := v.submit(w, map[string]any{"backup": []any{"zed"}})
		if a := waitEscalated(v, run, "review"); len(a.EscalateTo) != 1 || a.EscalateTo[0] != "zed" {
			t.Fatalf("approval %+v", a)
		}
		if err := v.e.Decide(v.ctx, run, "review", Decision{Approve: true, By: "zed"}); err != nil {
			t.Fatal(err)
		}
		if st := v.wait(run); string(st.Result) != `{"by":"zed"}` {
			t.Fatalf("%s", dump(st))
		}
		st := v.run(w, map[string]any{"backup": []any{}})
		if st.State != RunFailed || st.Nodes["review"].Code != CodeExpr || !strings.Contains(st.Error, "escalate_to: the list is empty") || len(st.Approvals) != 0 {
			t.Fatalf("%s", dump(st))
		}
	})
}

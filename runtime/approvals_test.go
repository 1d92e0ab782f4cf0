package runtime

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wfc-lang/wfc/ir"
)

// humanOut is the output type the compiler gives a human node.
var humanOut = &ir.Type{Kind: ir.KindObject, Fields: []ir.Field{
	{Name: "approved", Type: ir.Type{Kind: ir.KindBool}},
	{Name: "approver", Type: ir.Type{Kind: ir.KindString}},
	{Name: "comment", Type: ir.Type{Kind: ir.KindString}, Optional: true},
}}

func human(id string, approvers []string, opts ...nodeOpt) *nodeSpec {
	s := &nodeSpec{n: ir.Node{ID: id, Type: ir.NodeHuman, Join: ir.JoinAll, Human: &ir.Human{Approvers: approvers}, OutputType: humanOut}}
	for _, o := range opts {
		o(s)
	}
	return s
}

func onReject(ids ...string) nodeOpt {
	return func(s *nodeSpec) { s.n.Human.OnReject = append(s.n.Human.OnReject, ids...) }
}

func approvalTimeout(ms int64, on string) nodeOpt {
	return func(s *nodeSpec) { s.n.Human.TimeoutMS, s.n.Human.OnTimeout = ms, on }
}

// waitOpen waits until run has an open approval x and returns it.
func waitOpen(v *env, run, x string) Approval {
	v.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		aps, err := v.e.Approvals(v.ctx, run)
		if err != nil {
			v.t.Fatal(err)
		}
		for _, a := range aps {
			if a.Exec == x && a.State == ApprovalOpen {
				return a
			}
		}
		if time.Now().After(deadline) {
			st, _ := v.e.Status(v.ctx, run)
			v.t.Fatalf("no open approval %s in run %s: %s", x, run, dump(st))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// approvalWF: draft -> review (human) -> send; review's rejection goes to
// revise when reject is set.
func approvalWF(t *testing.T, reject bool, opts ...nodeOpt) *ir.Workflow {
	ropts := append([]nodeOpt{after("draft")}, opts...)
	if reject {
		ropts = append(ropts, onReject("revise"))
	}
	nodes := []*nodeSpec{
		task("draft", "cel", with("amount", konst(`42`))),
		human("review", []string{"ann@example.com", "bob@example.com"}, ropts...),
		task("send", "noop", after("review")),
	}
	outs := []ir.Output{output("sent", "has(send.output)"), output("decision", "review.output")}
	if reject {
		nodes = append(nodes, task("revise", "noop"))
		outs = []ir.Output{output("sent", "has(send.output)"), output("revised", "has(revise.output)")}
	}
	return build(t, wfSpec{outputs: outs, nodes: nodes})
}

func TestApprovalApprove(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		w := approvalWF(t, false)
		w.Nodes[1].Human.Prompt = &ir.Value{Template: []ir.TemplatePart{{Text: "Send "}, {Expr: &ir.Expr{CEL: "draft.output.amount"}}, {Text: "?"}}}
		run := v.submit(w, nil)
		a := waitOpen(v, run, "review")
		if a.Prompt != "Send 42?" || a.ID != run+"/review" || len(a.Approvers) != 2 || !a.Due.IsZero() {
			t.Fatalf("approval %+v", a)
		}
		v.check(run)
		st, _ := v.e.Status(v.ctx, run)
		if st.State != RunRunning || nodeState(st, "review") != NodeWaiting || st.Counter != 1 || len(st.Approvals) != 1 {
			t.Fatalf("waiting run: %s", dump(st))
		}
		open, err := v.e.OpenApprovals(v.ctx)
		if err != nil || len(open) != 1 || open[0].ID != a.ID {
			t.Fatalf("open approvals %v %v", open, err)
		}
		if err := v.e.Decide(v.ctx, run, "review", Decision{Approve: true, By: "bob@example.com", Comment: "fine"}); err != nil {
			t.Fatal(err)
		}
		st = v.wait(run)
		if st.State != RunCompleted || string(st.Result) != `{"sent":true,"decision":{"approved":true,"approver":"bob@example.com","comment":"fine"}}` {
			t.Fatalf("%s", dump(st))
		}
		if st.Approvals[0].State != ApprovalApproved || st.Approvals[0].By != "bob@example.com" {
			t.Fatalf("approval after: %+v", st.Approvals[0])
		}
		if open, _ := v.e.OpenApprovals(v.ctx); len(open) != 0 {
			t.Fatalf("still open: %v", open)
		}
	})
}

func TestApprovalReject(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		// With on_reject: the rejection routes there.
		run := v.submit(approvalWF(t, true), nil)
		waitOpen(v, run, "review")
		if err := v.e.Decide(v.ctx, run, "review", Decision{By: "ann@example.com", Comment: "no"}); err != nil {
			t.Fatal(err)
		}
		st := v.wait(run)
		if st.State != RunCompleted || string(st.Result) != `{"sent":false,"revised":true}` || nodeState(st, "send") != NodeSkipped {
			t.Fatalf("%s", dump(st))
		}
		// Without on_reject: the rejection fails the node, and so the run.
		run = v.submit(approvalWF(t, false), nil)
		waitOpen(v, run, "review")
		if err := v.e.Decide(v.ctx, run, "review", Decision{By: "ann@example.com", Comment: "no"}); err != nil {
			t.Fatal(err)
		}
		st = v.wait(run)
		if st.State != RunFailed || st.Nodes["review"].Code != CodeRejected || !strings.Contains(st.Error, "rejected by ann@example.com: no") {
			t.Fatalf("%s", dump(st))
		}
	})
}

func TestApprovalTimeout(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		for _, c := range []struct{ on, state, result string }{
			{ir.TimeoutApprove, RunCompleted, `{"sent":true,"revised":false}`},
			{ir.TimeoutReject, RunCompleted, `{"sent":false,"revised":true}`},
			{ir.TimeoutFail, RunFailed, ``},
			{"", RunFailed, ``},
		} {
			run := v.submit(approvalWF(t, true, approvalTimeout(150, c.on)), nil)
			st := v.wait(run)
			if st.State != c.state || string(st.Result) != c.result {
				t.Fatalf("on_timeout %q: %s", c.on, dump(st))
			}
			if c.state == RunFailed && st.Nodes["review"].Code != "timeout" {
				t.Fatalf("on_timeout %q: %s", c.on, dump(st))
			}
			want := map[string]string{ir.TimeoutApprove: ApprovalApproved, ir.TimeoutReject: ApprovalRejected}[c.on]
			if want == "" {
				want = ApprovalTimedOut
			}
			if a := st.Approvals[0]; a.State != want || a.By != "" || a.Due.IsZero() {
				t.Fatalf("on_timeout %q: approval %+v", c.on, a)
			}
			// The timeout won: a decision now is refused.
			if err := v.e.Decide(v.ctx, run, "review", Decision{Approve: true, By: "ann@example.com"}); err == nil {
				t.Fatalf("on_timeout %q: a late decision applied", c.on)
			}
		}
	})
}

// A decision and the timeout race: exactly one applies, and a late
// decision is told the approval timed out.
func TestApprovalRaces(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		run := v.submit(approvalWF(t, true), nil)
		waitOpen(v, run, "review")
		var wg sync.WaitGroup
		errs := make([]error, 100)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				by := "ann@example.com"
				if i%2 == 1 {
					by = "bob@example.com"
				}
				errs[i] = v.e.Decide(v.ctx, run, "review", Decision{Approve: i%3 != 0, By: by})
			}()
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			if err == nil {
				won++
			} else if !strings.Contains(err.Error(), "already") && !strings.Contains(err.Error(), "closed") {
				t.Errorf("loser: %v", err)
			}
		}
		if won != 1 {
			t.Fatalf("%d decisions applied", won)
		}
		st := v.wait(run)
		if st.State != RunCompleted {
			t.Fatalf("%s", dump(st))
		}
		// The timeout against decisions: whoever comes first wins.
		for i := 0; i < 5; i++ {
			run := v.submit(approvalWF(t, true, approvalTimeout(60, ir.TimeoutReject)), nil)
			var err error
			for {
				err = v.e.Decide(v.ctx, run, "review", Decision{Approve: true, By: "ann@example.com"})
				if err == nil || strings.Contains(err.Error(), "timed out") || strings.Contains(err.Error(), "already") {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			st := v.wait(run)
			if want := err == nil; (string(st.Result) == `{"sent":true,"revised":false}`) != want {
				t.Fatalf("decision %v, result %s", err, st.Result)
			}
			if err != nil && !strings.Contains(err.Error(), "timed out") {
				t.Fatalf("the losing decision: %v", err)
			}
		}
	})
}

// Bad decisions are refused with a clear error and change nothing.
func TestApprovalBadInput(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		typed := &ir.Type{Kind: ir.KindObject, Fields: append(append([]ir.Field{}, humanOut.Fields...),
			ir.Field{Name: "discount", Type: ir.Type{Kind: ir.KindInt}}, ir.Field{Name: "note", Type: ir.Type{Kind: ir.KindString}, Optional: true})}
		w := approvalWF(t, false, outType(typed))
		run := v.submit(w, nil)
		waitOpen(v, run, "review")
		before, _ := v.e.Status(v.ctx, run)
		evs, _ := v.e.Events(v.ctx, run)
		for _, c := range []struct {
			run, x string
			d      Decision
			want   string
		}{
			{"nosuchrun", "review", Decision{Approve: true, By: "ann@example.com"}, "unknown run nosuchrun"},
			{"bad id!", "review", Decision{Approve: true, By: "ann@example.com"}, "invalid run id"},
			{run, "nosuch", Decision{Approve: true, By: "ann@example.com"}, "has no node"},
			{run, "draft", Decision{Approve: true, By: "ann@example.com"}, "not a human node"},
			{run, "review@2", Decision{Approve: true, By: "ann@example.com", Fields: map[string]any{"discount": 1}}, "no approval review@2"},
			{run, "review", Decision{Approve: true, By: "eve@example.com", Fields: map[string]any{"discount": 1}}, `"eve@example.com" is not an approver`},
			{run, "review", Decision{Approve: true}, "who decides is required"},
			{run, "review", Decision{Approve: true, By: "ann@example.com"}, "missing field discount"},
			{run, "review", Decision{Approve: true, By: "ann@example.com", Fields: map[string]any{"discount": "many"}}, `"many" is not a int`},
			{run, "review", Decision{Approve: true, By: "ann@example.com", Fields: map[string]any{"discount": 1.5}}, "discount"},
			{run, "review", Decision{Approve: true, By: "ann@example.com", Fields: map[string]any{"discount": 1, "extra": 2}}, "declares no field extra"},
			{run, "review", Decision{Approve: true, By: "ann@example.com", Fields: map[string]any{"approved": false}}, "set by the decision itself"},
		} {
			err := v.e.Decide(v.ctx, c.run, c.x, c.d)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s %s %+v: %v, want %q", c.run, c.x, c.d, err, c.want)
			}
		}
		after, _ := v.e.Status(v.ctx, run)
		evs2, _ := v.e.Events(v.ctx, run)
		if d := Compare(before, after); len(d) > 0 || len(evs2) != len(evs) {
			t.Fatalf("a refused decision changed the run: %v", d)
		}
		if err := v.e.Decide(v.ctx, run, "review", Decision{Approve: true, By: "ann@example.com", Fields: map[string]any{"discount": "3"}}); err != nil {
			t.Fatal(err)
		}
		st := v.wait(run)
		if got := string(st.Nodes["review"].Output); got != `{"approved":true,"approver":"ann@example.com","discount":3}` {
			t.Fatalf("output %s", got)
		}
		// A second decision, and one on a finished run.
		err := v.e.Decide(v.ctx, run, "review", Decision{Approve: false, By: "bob@example.com", Fields: map[string]any{"discount": 1}})
		if err == nil || !strings.Contains(err.Error(), "completed: its approvals are closed") {
			t.Fatalf("decision on a finished run: %v", err)
		}
	})
}

// Cancelling a run closes its approvals; a retry opens them again.
func TestApprovalCancel(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		run := v.submit(approvalWF(t, false), nil)
		waitOpen(v, run, "review")
		if err := v.e.Cancel(v.ctx, run); err != nil {
			t.Fatal(err)
		}
		v.check(run)
		err := v.e.Decide(v.ctx, run, "review", Decision{Approve: true, By: "ann@example.com"})
		if err == nil || !strings.Contains(err.Error(), "cancelled: its approvals are closed") {
			t.Fatalf("decision on a cancelled run: %v", err)
		}
		if open, _ := v.e.OpenApprovals(v.ctx); len(open) != 0 {
			t.Fatalf("open after cancel: %v", open)
		}
		st, _ := v.e.Status(v.ctx, run)
		if st.Approvals[0].State != ApprovalClosed {
			t.Fatalf("approval of a cancelled run: %+v", st.Approvals[0])
		}
		if err := v.e.Retry(v.ctx, run); err != nil {
			t.Fatal(err)
		}
		a := waitOpen(v, run, "review")
		if a.Gen != 1 {
			t.Fatalf("approval after retry: %+v", a)
		}
		if err := v.e.Decide(v.ctx, run, "review", Decision{Approve: true, By: "ann@example.com"}); err != nil {
			t.Fatal(err)
		}
		if st := v.wait(run); st.State != RunCompleted {
			t.Fatalf("%s", dump(st))
		}
	})
}

// An approval per iteration of a loop around the human node.
func TestApprovalLoop(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		w := build(t, wfSpec{
			outputs: []ir.Output{output("n", "check.iteration")},
			nodes: []*nodeSpec{
				task("start", "noop"),
				human("review", []string{"ann"}, after("start")),
				task("check", "noop", after("review"), loop(`!has(review.output.comment)`, 5, "review")),
			},
		})
		run := v.submit(w, nil)
		for i, x := range []string{"review@1", "review@2", "review@3"} {
			waitOpen(v, run, x)
			v.check(run)
			// The node alone names its one open approval.
			d := Decision{Approve: true, By: "ann"}
			if i == 2 {
				d.Comment = "enough"
			}
			if err := v.e.Decide(v.ctx, run, "review", d); err != nil {
				t.Fatal(err)
			}
		}
		st := v.wait(run)
		if st.State != RunCompleted || string(st.Result) != `{"n":3}` || len(st.Approvals) != 3 {
			t.Fatalf("%s", dump(st))
		}
	})
}

// A run waits without a worker: the workers stop (or die) while it waits,
// the decision applies without one, and new workers finish the run.
func TestApprovalWorkerGone(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		run := v.submit(approvalWF(t, false), nil)
		waitOpen(v, run, "review")
		waitNoPending(t, v.e)
		v.e.StopWorkers()
		if err := v.e.Decide(context.Background(), run, "review", Decision{Approve: true, By: "ann@example.com"}); err != nil {
			t.Fatal(err)
		}
		v.check(run)
		v.worker()
		if st := v.wait(run); st.State != RunCompleted {
			t.Fatalf("%s", dump(st))
		}
	})
}

// A human node runs, but not with the options the language does not give
// it (an IR may still carry them): for_each items, loops, branches.
func TestApprovalSupported(t *testing.T) {
	ok := approvalWF(t, true)
	if err := CheckSupported(ok); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what string
		mod  func(n *ir.Node)
	}{
		{"for_each", func(n *ir.Node) { n.ForEach = &ir.ForEach{Var: "x", Items: ir.Expr{CEL: "[1]"}} }},
		{"loop", func(n *ir.Node) { n.Loop = &ir.Loop{While: ir.Expr{CEL: "false"}, Max: 2, BackTo: n.ID} }},
		{"branch", func(n *ir.Node) { n.Branch = &ir.Branch{Default: []string{"send"}} }},
		{"compensate", func(n *ir.Node) { n.Compensate = &ir.Compensate{Handler: "noop"} }},
	} {
		w := approvalWF(t, true)
		c.mod(&w.Nodes[1])
		err := CheckSupported(w)
		if err == nil || !strings.Contains(err.Error(), `human node "review" has `+c.what) {
			t.Errorf("%s: %v", c.what, err)
		}
	}
}

// Approvers computed from the inputs; an empty list fails the node.
func TestApprovalApproversExpr(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		w := build(t, wfSpec{
			inputs:  []ir.Input{{Name: "who", Type: ir.Type{Kind: ir.KindList, Elem: &ir.Type{Kind: ir.KindString}}, Required: true}},
			outputs: []ir.Output{output("by", "review.output.approver")},
			nodes:   []*nodeSpec{human("review", nil)},
		})
		w.Nodes[0].Human.ApproversExpr = &ir.Expr{CEL: "input.who"}
		run := v.submit(w, map[string]any{"who": []any{"zed"}})
		if a := waitOpen(v, run, "review"); len(a.Approvers) != 1 || a.Approvers[0] != "zed" {
			t.Fatalf("approval %+v", a)
		}
		if err := v.e.Decide(v.ctx, run, "review", Decision{Approve: true, By: "ann"}); err == nil {
			t.Fatal("ann decided")
		}
		if err := v.e.Decide(v.ctx, run, "review", Decision{Approve: true, By: "zed"}); err != nil {
			t.Fatal(err)
		}
		if st := v.wait(run); string(st.Result) != `{"by":"zed"}` {
			t.Fatalf("%s", dump(st))
		}
		st := v.run(w, map[string]any{"who": []any{}})
		if st.State != RunFailed || st.Nodes["review"].Code != CodeExpr || !strings.Contains(st.Error, "nobody could decide") {
			t.Fatalf("%s", dump(st))
		}
	})
}

// A rejection without on_reject fails the node with code rejected, which
// on_error routes; a false `when` skips the node without an approval.
func TestApprovalRejectRouted(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		w := build(t, wfSpec{
			outputs: []ir.Output{output("handled", "has(handle.output)"), output("code", "review.error.code")},
			nodes: []*nodeSpec{
				human("review", []string{"ann"}, onError("handle")),
				task("handle", "noop"),
			},
		})
		run := v.submit(w, nil)
		waitOpen(v, run, "review")
		if err := v.e.Decide(v.ctx, run, "review", Decision{By: "ann"}); err != nil {
			t.Fatal(err)
		}
		if st := v.wait(run); st.State != RunCompleted || string(st.Result) != `{"handled":true,"code":"rejected"}` {
			t.Fatalf("%s", dump(st))
		}
		w = build(t, wfSpec{nodes: []*nodeSpec{human("review", []string{"ann"}, when("false"))}})
		if st := v.run(w, nil); st.State != RunCompleted || nodeState(st, "review") != NodeSkipped || len(st.Approvals) != 0 {
			t.Fatalf("%s", dump(st))
		}
	})
}

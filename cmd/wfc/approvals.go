package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/wfc-lang/wfc/runtime"
)

// The approval commands (docs/waiting.md): wfc approvals lists approvals,
// wfc approve decides one.

const approvalsDoc = `
Approvals lists approvals of human nodes. Without --run it lists the open
approvals of every run (oldest first); with --run, every approval of that
run, open or decided. Each line shows the run, the node's execution (node,
and "@" with its iteration inside loops), the state (open, approved,
rejected, timed_out, or closed: the run ended before a decision), who may
decide, when it times out, and the prompt. --wait first waits until an
approval is open; with --run, until the run waits for an approval or has
ended.`

const approveDoc = `
Approve decides the approval of node NODE in run RUN: it approves, or with
--reject rejects. NODE is the node id, or inside a loop "node@iteration"
(a node id alone names the node's one open approval). --by says who
decides (default $USER): it must be one of the node's approvers. The runtime
trusts it as given: whoever can run wfc against the Redis can decide as
anyone. --comment adds a comment. --input NAME=VALUE sets a field the
node's output declares beyond approved, approver and comment: VALUE is
taken as it is for a string field, and read as JSON for another type.

A second decision, a decision on an unknown, timed-out or closed approval
(its run cancelled or ended), by someone not among its approvers, or with
a field of the wrong type is refused with an error, and nothing changes.
Exit codes: 0 decided, 1 refused, 2 bad command line.`

func runApprovals(ctx context.Context, env *Env, args []string) int {
	fs := newFlags("approvals", "wfc approvals --redis URL [--run RUN] [--wait [--timeout D]] [--json]", approvalsDoc)
	rf := addRuntimeFlags(fs, env)
	run := fs.String("run", "", "list the approvals of run `RUN` only (open and decided)")
	jsonOut := fs.Bool("json", false, "print JSON")
	wait := fs.Bool("wait", false, "first wait until an approval is open (with --run: until the run waits for one or has ended)")
	timeout := fs.Duration("timeout", 0, "with --wait, give up after `DURATION` (exit 1; 0: wait as long as it takes)")
	env, args, code, ok := rf.parse(fs, env, args)
	if !ok {
		return code
	}
	if len(args) != 0 {
		return fs.usageError(env, "approvals takes no arguments (the run goes with --run)")
	}

	eng, code, ok := rf.openShared(ctx, fs, env)
	if !ok {
		return code
	}
	defer eng.Close()
	if *timeout < 0 || *timeout > 0 && !*wait {
		return fs.usageError(env, "--timeout is a positive duration, with --wait")
	}
	if *timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *timeout)
		defer cancel()
	}
	var aps []runtime.Approval
	var err error
	if *wait && *run != "" {
		aps, err = waitApproval(ctx, eng, *run)
	} else if *wait {
		aps, err = waitOpen(ctx, eng)
	} else if *run != "" {
		aps, err = eng.Approvals(ctx, *run)
	} else {
		aps, err = eng.OpenApprovals(ctx)
	}
	if err != nil && *timeout > 0 && errors.Is(err, context.DeadlineExceeded) {
		fmt.Fprintf(env.Stderr, "wfc approvals: no approval within %s\n", *timeout)
		return exitFailed
	}
	if err != nil {
		fmt.Fprintf(env.Stderr, "wfc approvals: %v\n", err)
		return exitFailed
	}
	if *jsonOut {
		if aps == nil {
			aps = []runtime.Approval{}
		}
		return writeJSON(env, "approvals", "the approvals", aps)
	}
	if len(aps) == 0 {
		fmt.Fprintln(env.Stderr, "no approvals")
		return exitOK
	}
	for _, a := range aps {
		line := fmt.Sprintf("%s %s  %s  approvers %s", a.Run, a.Exec, a.State, strings.Join(a.Approvers, ","))
		switch {
		case !a.Escalated.IsZero():
			line += "  escalated to " + strings.Join(a.EscalateTo, ",")
		case len(a.EscalateTo) > 0 && a.State == runtime.ApprovalOpen:
			line += fmt.Sprintf("  escalates to %s at %s", strings.Join(a.EscalateTo, ","), a.EscalateAt.Format(time.RFC3339))
		}
		if a.By != "" {
			line += "  by " + a.By
		}
		if !a.Due.IsZero() && a.State == runtime.ApprovalOpen {
			line += "  due " + a.Due.Format(time.RFC3339)
		}
		if a.Prompt != "" {
			line += fmt.Sprintf("  %q", a.Prompt)
		}
		fmt.Fprintln(env.Stdout, line)
	}
	return exitOK
}

func runApprove(ctx context.Context, env *Env, args []string) int {
	fs := newFlags("approve", "wfc approve --redis URL [flags] RUN NODE", approveDoc)
	rf := addRuntimeFlags(fs, env)
	reject := fs.Bool("reject", false, "reject instead of approving")
	by := fs.String("by", env.Getenv("USER"), "who decides, one of the node's `APPROVER`s (default $USER)")
	comment := fs.String("comment", "", "a comment `TEXT` for the decision")
	var inputs listFlag
	fs.Var(&inputs, "input", "a declared output field `NAME=VALUE`; repeatable")
	env, args, code, ok := rf.parse(fs, env, args)
	if !ok {
		return code
	}
	if len(args) != 2 {
		return fs.usageError(env, "approve takes a run id and a node")
	}
	if code, ok := rf.needRedis(fs, env); !ok {
		return code
	}
	if *by == "" {
		return fs.usageError(env, "--by is required (no $USER)")
	}
	fields := map[string]any{}
	for _, p := range inputs {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return fs.usageError(env, "--input %q: want NAME=VALUE", p)
		}
		if _, dup := fields[k]; dup {
			return fs.usageError(env, "--input %s given twice", k)
		}
		fields[k] = v
	}
	eng, code, ok := rf.openShared(ctx, fs, env)
	if !ok {
		return code
	}
	defer eng.Close()
	run, node := args[0], args[1]
	if err := eng.Decide(ctx, run, node, runtime.Decision{Approve: !*reject, By: *by, Comment: *comment, Fields: fields}); err != nil {
		fmt.Fprintf(env.Stderr, "wfc approve: %s\n", strings.TrimPrefix(err.Error(), "runtime: decide: "))
		return exitFailed
	}
	what := "approved"
	if *reject {
		what = "rejected"
	}
	fmt.Fprintf(env.Stderr, "run %s: %s %s by %s\n", run, node, what, *by)
	return exitOK
}

// waitApproval polls run until it has an open approval or has ended, and
// returns its approvals.
func waitApproval(ctx context.Context, eng *runtime.Engine, run string) ([]runtime.Approval, error) {
	for {
		st, err := eng.Status(ctx, run)
		if err != nil {
			return nil, err
		}
		if st.Done() {
			return st.Approvals, nil
		}
		for _, a := range st.Approvals {
			if a.State == runtime.ApprovalOpen {
				return st.Approvals, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitOpen polls the open approvals until there is one.
func waitOpen(ctx context.Context, eng *runtime.Engine) ([]runtime.Approval, error) {
	for {
		aps, err := eng.OpenApprovals(ctx)
		if err != nil || len(aps) > 0 {
			return aps, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

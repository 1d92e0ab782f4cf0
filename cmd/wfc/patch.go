package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/livepatch"
	"github.com/wfc-lang/wfc/runtime"
)

const patchDoc = `
Patch changes the workflow of a running run (docs/patching.md): PATCH is
an RFC 6902 JSON Patch against the run's current IR ('-' reads standard
input), or --from NEW gives the workflow the run should become (the patch
is 'wfc diff' of the two). The patched IR is checked like a build, then
against the run's live state: nodes that ran, run or hold tokens cannot be
removed or re-wired; an edge added behind a finished node delivers the
token it would have sent. A refused patch changes nothing and says why,
naming the JSON pointer at fault. --dry-run reports what the patched run
would do (nodes that may still run, new joins, new terminals) without
changing it. --tag NAME --from NEW --all-running patches every running run
started from the tag where it is safe and reports the others.`

func runPatch(ctx context.Context, env *Env, args []string) int {
	fs := newFlags("patch", "wfc patch --redis URL [flags] RUN (PATCH | --from NEW) | --tag NAME --from NEW --all-running", patchDoc)
	rf := addRuntimeFlags(fs, env)
	from := fs.String("from", "", "patch to the workflow in `FILE` (.wf or IR)")
	tag := fs.String("tag", "", "with --all-running: the tag `NAME` whose runs to patch")
	all := fs.Bool("all-running", false, "patch every running run of --tag")
	dry := fs.Bool("dry-run", false, "report what the patch would do; change nothing")
	by := fs.String("by", env.Getenv("USER"), "who patches, recorded in the run's patch.applied event")
	jsonOut := fs.Bool("json", false, "print JSON")
	env, args, code, ok := rf.parse(fs, env, args)
	if !ok {
		return code
	}
	switch {
	case *all:
		if *tag == "" || *from == "" || len(args) != 0 {
			return fs.usageError(env, "--all-running takes --tag NAME and --from NEW, and no run id")
		}
	case *tag != "":
		return fs.usageError(env, "--tag goes with --all-running")
	case *from != "" && len(args) != 1:
		return fs.usageError(env, "patch --from NEW takes one run id")
	case *from == "" && len(args) != 2:
		return fs.usageError(env, "patch takes a run id and a patch file (or --from NEW)")
	}
	if code, ok := rf.needRedis(fs, env); !ok {
		return code
	}
	req := livepatch.Request{By: *by, DryRun: *dry}
	var to *ir.Workflow
	if *from != "" {
		if to, code = loadWorkflow(ctx, env, *from); to == nil {
			return code
		}
		req.From = to
	} else {
		_, src, err := readFile(ctx, env, args[1], ir.MaxPatchBytes+1)
		if err != nil {
			fmt.Fprintf(env.Stderr, "wfc patch: %v\n", err)
			return exitFailed
		}
		req.Patch = src
	}
	eng, code, ok := rf.openShared(ctx, fs, env)
	if !ok {
		return code
	}
	defer eng.Close()
	if *all {
		out, err := livepatch.AllRunning(ctx, eng, *tag, to, *by, *dry)
		if err != nil {
			fmt.Fprintf(env.Stderr, "wfc patch: %v\n", err)
			return exitFailed
		}
		return reportAll(env, out, *jsonOut)
	}
	req.Run = args[0]
	res, err := livepatch.Apply(ctx, eng, req)
	if err != nil {
		fmt.Fprintf(env.Stderr, "wfc patch: %s\n", patchErr(err))
		return exitFailed
	}
	if *jsonOut {
		return writeJSON(env, "patch", "the patch result", res)
	}
	writePatchResult(env.Stdout, res)
	return exitOK
}

// patchErr spells why a patch was refused.
func patchErr(err error) string {
	var pr *runtime.PatchRefusedError
	if errors.As(err, &pr) {
		return fmt.Sprintf("refused by run %s, unchanged:\n  %s", pr.Run, strings.Join(pr.Reasons, "\n  "))
	}
	var ce *livepatch.CheckError
	if errors.As(err, &ce) {
		var b strings.Builder
		b.WriteString("refused, the run unchanged: the patched workflow does not check:")
		for _, d := range ce.Diags {
			fmt.Fprintf(&b, "\n  %s[%s]: %s", d.Severity, d.Code, d.Message)
		}
		return b.String()
	}
	var pe *ir.PatchError
	if errors.As(err, &pe) {
		return "refused, the run unchanged: " + pe.Error()
	}
	return err.Error()
}

func writePatchResult(w io.Writer, res *livepatch.Result) {
	switch {
	case res.Unchanged:
		fmt.Fprintf(w, "run %s already runs %s (v%d): nothing to patch\n", res.Run, res.NewHash, res.Version)
		return
	case res.DryRun:
		fmt.Fprintf(w, "run %s: the patch would apply (dry run; nothing changed): v%d %s -> %s\n", res.Run, res.Version, res.OldHash, res.NewHash)
	default:
		fmt.Fprintf(w, "run %s patched: v%d %s\n", res.Run, res.Version, res.NewHash)
	}
	list := func(what string, ids []string) {
		if len(ids) > 0 {
			fmt.Fprintf(w, "  %-13s %s\n", what+":", strings.Join(ids, ", "))
		}
	}
	list("added", res.Added)
	list("removed", res.Removed)
	list("changed", res.Changed)
	list("still to run", res.Pending)
	list("new joins", res.NewJoins)
	list("new terminals", res.NewTerminals)
	list("started", res.Delivered)
}

func reportAll(env *Env, out []livepatch.Outcome, jsonOut bool) int {
	code := exitOK
	type row struct {
		Run    string            `json:"run"`
		Result *livepatch.Result `json:"result,omitempty"`
		Error  string            `json:"error,omitempty"`
	}
	rows := make([]row, 0, len(out))
	for _, o := range out {
		r := row{Run: o.Run, Result: o.Result}
		if o.Err != nil {
			r.Error = patchErr(o.Err)
			code = exitFailed
		}
		rows = append(rows, r)
	}
	if jsonOut {
		if c := writeJSON(env, "patch", "the outcomes", rows); c != exitOK {
			return c
		}
		return code
	}
	if len(rows) == 0 {
		fmt.Fprintln(env.Stdout, "no running run of the tag")
	}
	for _, r := range rows {
		if r.Error != "" {
			fmt.Fprintf(env.Stdout, "run %s NOT patched: %s\n", r.Run, r.Error)
			continue
		}
		writePatchResult(env.Stdout, r.Result)
	}
	return code
}

package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/wfc-lang/wfc/compiler"
	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/lang/diag"
)

const buildDoc = `
Build compiles a workflow and writes its IR, the document the runtime
executes, to standard output or to the file given with -o. FILE.wf may be -
for standard input. Imports and child flows are read relative to FILE.wf.

Warnings and infos go to standard error and do not fail the build; with
errors nothing is written and the exit code is 1.

--goal NODE (repeatable) keeps only the goal nodes and the nodes they depend
on, and lists on standard error the inputs they read.

--dump-after PASS stops after the named compiler pass and writes what exists
by then: the diagnostics, and the IR if the pass produced one. The passes,
in order:

%s

Exit codes: 0 built (warnings allowed), 1 errors in the workflow or a file
that cannot be read or written, 2 bad command line, 3 a bug in wfc, 130 or
143 stopped by SIGINT or SIGTERM (at once; a file being written with -o is
renamed into place first, or not written at all).`

func runBuild(ctx context.Context, env *Env, args []string) int {
	passes := compiler.Passes()
	fs := newFlags("build", "wfc build [flags] FILE.wf", fmt.Sprintf(buildDoc, wrapList(passes, "  ", 76)))
	out := fs.String("o", "", "write the IR to `FILE` instead of standard output")
	format := fs.String("format", "json", "encoding of the IR")
	fs.metavars["format"] = "json|yaml"
	var goals listFlag
	fs.Var(&goals, "goal", "keep only `NODE` and what it needs; repeatable")
	noOpt := fs.Bool("no-optimize", false, "skip constant folding, dead-node removal and edge reduction")
	dumpAfter := fs.String("dump-after", "", "stop after compiler `PASS` and write what exists")
	jsonOut := fs.Bool("json", false, "write diagnostics to standard error as one JSON document")
	args, code, ok := fs.parse(env, args)
	if !ok {
		return code
	}
	switch {
	case len(args) == 0:
		return fs.usageError(env, "no input file")
	case len(args) > 1:
		return fs.usageError(env, "build takes one file, got %d (%s); 'wfc check' takes several", len(args), strings.Join(args, " "))
	}
	if *format != "json" && *format != "yaml" {
		return fs.usageError(env, "--format must be json or yaml, not %q", *format)
	}
	if *dumpAfter != "" && !slices.Contains(passes, *dumpAfter) {
		return fs.usageError(env, "--dump-after: unknown pass %q; the passes are, in order:\n%s", *dumpAfter, wrapList(passes, "  ", 76))
	}
	for _, g := range goals {
		if g == "" {
			return fs.usageError(env, "--goal needs a node id")
		}
	}
	if *out != "" && *out != "-" && args[0] != "-" && sameFile(args[0], *out) {
		return fs.usageError(env, "-o %s would overwrite the source file", *out)
	}

	var rep report
	name, src, err := readSource(ctx, env, args[0])
	if err != nil {
		if *jsonOut {
			rep.addReadError(name, err)
			if code := rep.write(env, "build", env.Stderr); code != exitOK {
				return code
			}
		} else {
			fmt.Fprintf(env.Stderr, "wfc: %v\n", err)
		}
		return exitFailed
	}

	res := compiler.Compile(name, src, compiler.Config{
		Goals:      goals,
		NoOptimize: *noOpt,
		StopAfter:  *dumpAfter,
	})

	// The goals pass sets RequiredInputs (possibly empty) when it ran and
	// every goal exists; it is nil otherwise.
	var needed []requiredInput
	if len(goals) > 0 && res.IR != nil && res.RequiredInputs != nil {
		needed = goalInputs(res.IR, res.RequiredInputs)
	}

	if *jsonOut {
		rep.addFile(name, res.Diags)
		rep.RequiredInputs = needed
		if code := rep.write(env, "build", env.Stderr); code != exitOK {
			return code
		}
	} else {
		diag.WriteText(env.Stderr, res.Diags, res.Files)
		writeSummary(env.Stderr, res.Diags.Count(diag.Error), res.Diags.Count(diag.Warning), "")
		if needed != nil {
			writeGoalInputs(env.Stderr, goals, needed)
		}
	}
	if res.Diags.HasErrors() {
		return exitFor(res.Diags)
	}
	if res.IR == nil {
		// Only --dump-after gets here without errors: the pass ran before
		// the IR existed.
		if !*jsonOut {
			fmt.Fprintf(env.Stderr, "wfc build: stopped after pass %q, before the IR is built; no IR written\n", *dumpAfter)
		}
		return exitOK
	}

	var data []byte
	if *format == "yaml" {
		data, err = ir.MarshalYAML(res.IR)
	} else {
		data, err = ir.Marshal(res.IR)
	}
	if err != nil {
		panic(fmt.Sprintf("encoding the IR of %s: %v", name, err))
	}
	if err := writeOutput(env, *out, data); err != nil {
		fmt.Fprintf(env.Stderr, "wfc: %v\n", err)
		return exitFailed
	}
	return exitOK
}

// sameFile reports whether a and b name the same existing file.
func sameFile(a, b string) bool {
	sa, err := os.Stat(a)
	if err != nil {
		return false
	}
	sb, err := os.Stat(b)
	if err != nil {
		return false
	}
	return os.SameFile(sa, sb)
}

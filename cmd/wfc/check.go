package main

import (
	"context"
	"fmt"

	"github.com/wfc-lang/wfc/compiler"
	"github.com/wfc-lang/wfc/lang/diag"
	"github.com/wfc-lang/wfc/lang/source"
)

const checkDoc = `
Check compiles each file without optimising it and reports its
diagnostics, sorted by file and position, on standard error (at most 100
a file, errors first, then one WF0011 saying how many more there are); a
file may be - for standard input. Like go vet it prints nothing when all is well, unless
-v is given. The optimiser's diagnostics (WF5xxx) come only from 'wfc build'.

With --json, check writes one JSON document to standard output instead:

  {"files": [{"file": "a.wf", "diagnostics": [...]}], "errors": 0, "warnings": 0}

A file that cannot be read has an "error" string (and no diagnostics: an
empty list) and counts as one error. Each diagnostic has code, severity, span (file, start and end with
offset, line, col), message, and when present hint, related and fixes.

Exit codes: 0 no errors (warnings allowed), 1 errors or a file that cannot
be read, 2 bad command line, 3 a bug in wfc, 130 or 143 stopped by SIGINT
or SIGTERM (at once, even in the middle of a file).`

func runCheck(ctx context.Context, env *Env, args []string) int {
	fs := newFlags("check", "wfc check [flags] FILE.wf...", checkDoc)
	jsonOut := fs.Bool("json", false, "write one JSON document with all diagnostics to standard output")
	verbose := fs.Bool("v", false, "also print a status line for each file")
	args, code, ok := fs.parse(env, args)
	if !ok {
		return code
	}
	if len(args) == 0 {
		return fs.usageError(env, "no input files")
	}
	stdin := 0
	for _, a := range args {
		if a == "-" {
			stdin++
		}
	}
	if stdin > 1 {
		return fs.usageError(env, "standard input (-) can be checked only once")
	}

	var (
		rep    report
		all    diag.List
		files  = map[string]*source.File{}
		status []string // for -v
	)
	for _, arg := range args {
		if ctx.Err() != nil {
			fmt.Fprintln(env.Stderr, "wfc check: interrupted")
			return exitFailed
		}
		name, src, err := readSource(ctx, env, arg)
		if err != nil {
			rep.addReadError(name, err)
			if !*jsonOut {
				fmt.Fprintf(env.Stderr, "wfc: %v\n", err)
			}
			continue
		}
		res := compiler.Compile(name, src, compiler.Config{NoOptimize: true})
		rep.addFile(name, res.Diags)
		all = append(all, res.Diags...)
		mergeFiles(files, res.Files)
		if *verbose {
			status = append(status, fileStatus(name, res))
		}
	}

	if *jsonOut {
		if code := rep.write(env, "check", env.Stdout); code != exitOK {
			return code
		}
	} else {
		diag.WriteText(env.Stderr, all.Sorted(), files)
		for _, s := range status {
			fmt.Fprintln(env.Stderr, s)
		}
		suffix := ""
		if len(args) > 1 {
			suffix = fmt.Sprintf(" in %d files", len(args))
		}
		writeSummary(env.Stderr, rep.Errors, rep.Warnings, suffix)
	}
	if code := exitFor(all); code != exitOK {
		return code
	}
	if rep.Errors > 0 { // files that could not be read
		return exitFailed
	}
	return exitOK
}

// fileStatus is the -v line of one compiled file.
func fileStatus(name string, res *compiler.Result) string {
	var counts string
	if n := res.Diags.Count(diag.Error); n > 0 {
		counts = plural(n, "error")
	}
	if n := res.Diags.Count(diag.Warning); n > 0 {
		if counts != "" {
			counts += ", "
		}
		counts += plural(n, "warning")
	}
	if res.IR == nil {
		return fmt.Sprintf("%s: %s", name, counts)
	}
	s := fmt.Sprintf("%s: ok, workflow %s with %s", name, res.IR.Name, plural(len(res.IR.Nodes), "node"))
	if counts != "" {
		s += ", " + counts
	}
	return s
}

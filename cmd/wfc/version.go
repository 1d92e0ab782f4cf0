package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/wfc-lang/wfc/ir"
)

func runVersion(ctx context.Context, env *Env, args []string) int {
	fs := newFlags("version", "wfc version", `
Version prints the version of wfc (its Go module version, and the commit it
was built from when known), the Go version it was built with, and the
version of the IR format it writes and reads.`)
	args, code, ok := fs.parse(env, args)
	if !ok {
		return code
	}
	if len(args) > 0 {
		return fs.usageError(env, "version takes no arguments")
	}
	var b strings.Builder
	version, commit := "(devel)", ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v := bi.Main.Version; v != "" {
			version = v
		}
		var rev, modified string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value
			}
		}
		if rev != "" {
			commit = rev[:min(12, len(rev))]
			if modified == "true" {
				commit += " (modified)"
			}
		}
	}
	fmt.Fprintf(&b, "wfc %s\n", version)
	if commit != "" {
		fmt.Fprintf(&b, "commit:     %s\n", commit)
	}
	fmt.Fprintf(&b, "go version: %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(&b, "ir version: %s\n", ir.Version)
	fmt.Fprint(env.Stdout, b.String())
	return exitOK
}

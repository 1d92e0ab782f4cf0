package main

import (
	"context"
	"fmt"

	"github.com/wfc-lang/wfc/ir"
)

const diffDoc = `
Diff prints the RFC 6902 JSON Patch that turns OLD's IR into NEW's: what
'wfc patch RUN --from NEW' applies to a run of OLD. Nodes, handlers,
inputs, outputs and children are addressed by index with a test of their
key first (a patch made for one version fails cleanly on another);
removals come first, in descending index order, then changes field by
field, then insertions (appends as /-). Source locations and the fields
derived from the graph are left out. OLD and NEW as for 'wfc run'.`

func runDiff(ctx context.Context, env *Env, args []string) int {
	fs := newFlags("diff", "wfc diff OLD NEW", diffDoc)
	args, code, ok := fs.parse(env, args)
	if !ok {
		return code
	}
	if len(args) != 2 {
		return fs.usageError(env, "diff takes two workflow files")
	}
	old, code := loadWorkflow(ctx, env, args[0])
	if old == nil {
		return code
	}
	nw, code := loadWorkflow(ctx, env, args[1])
	if nw == nil {
		return code
	}
	patch, err := ir.Diff(old, nw)
	if err != nil {
		fmt.Fprintf(env.Stderr, "wfc diff: %v\n", err)
		return exitFailed
	}
	fmt.Fprintf(env.Stdout, "%s\n", patch)
	return exitOK
}

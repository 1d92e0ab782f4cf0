package main

import (
	"context"
	"fmt"
	"time"

	"github.com/wfc-lang/wfc/runtime"
)

const deployDoc = `
Deploy stores a workflow in a Redis by its content hash and moves the tag
NAME to it: the tag's next version, unless it names that workflow already.
'wfc submit --tag NAME' starts a run of the tag's current version; a run
keeps the version it started with when the tag moves, unless it is patched
(docs/patching.md). FILE as for 'wfc run'.`

func runDeploy(ctx context.Context, env *Env, args []string) int {
	fs := newFlags("deploy", "wfc deploy --redis URL --tag NAME [flags] FILE", deployDoc)
	rf := addRuntimeFlags(fs, env)
	tag := fs.String("tag", "", "the tag `NAME` to move (1 to 64 of letters, digits and . _ - :)")
	by := fs.String("by", env.Getenv("USER"), "who deploys, recorded with the version")
	jsonOut := fs.Bool("json", false, "print the version as JSON")
	env, args, code, ok := rf.parse(fs, env, args)
	if !ok {
		return code
	}
	if len(args) != 1 {
		return fs.usageError(env, "deploy takes one workflow file")
	}
	if !runtime.ValidTag(*tag) {
		return fs.usageError(env, "--tag NAME is required: 1 to 64 of letters, digits and . _ - :")
	}
	if code, ok := rf.needRedis(fs, env); !ok {
		return code
	}
	w, code := loadWorkflow(ctx, env, args[0])
	if w == nil {
		return code
	}
	eng, code, ok := rf.openShared(ctx, fs, env)
	if !ok {
		return code
	}
	defer eng.Close()
	v, err := eng.Deploy(ctx, w, *tag, *by)
	if err != nil {
		fmt.Fprintf(env.Stderr, "wfc deploy: %v\n", err)
		return exitFailed
	}
	if *jsonOut {
		return writeJSON(env, "deploy", "the version", v)
	}
	fmt.Fprintf(env.Stdout, "%s v%d %s\n", v.Tag, v.Version, v.Hash)
	return exitOK
}

const versionsDoc = `
Versions lists the versions of a tag (wfc deploy), oldest first: the
version number, the IR hash, when and by whom it was deployed. The last
is the one 'wfc submit --tag' runs.`

func runVersions(ctx context.Context, env *Env, args []string) int {
	fs := newFlags("versions", "wfc versions --redis URL [flags] NAME", versionsDoc)
	rf := addRuntimeFlags(fs, env)
	jsonOut := fs.Bool("json", false, "print JSON")
	env, args, code, ok := rf.parse(fs, env, args)
	if !ok {
		return code
	}
	if len(args) != 1 {
		return fs.usageError(env, "versions takes one tag name")
	}
	eng, code, ok := rf.openShared(ctx, fs, env)
	if !ok {
		return code
	}
	defer eng.Close()
	vs, err := eng.Versions(ctx, args[0])
	if err != nil {
		fmt.Fprintf(env.Stderr, "wfc versions: %v\n", err)
		return exitFailed
	}
	if *jsonOut {
		return writeJSON(env, "versions", "the versions", vs)
	}
	for _, v := range vs {
		fmt.Fprintf(env.Stdout, "v%d  %s  %s", v.Version, v.Hash, v.At.Format(time.RFC3339))
		if v.By != "" {
			fmt.Fprintf(env.Stdout, "  by %s", v.By)
		}
		fmt.Fprintln(env.Stdout)
	}
	return exitOK
}

// submitTag is 'wfc submit --tag NAME': a run of the tag's current version.
func submitTag(ctx context.Context, env *Env, fs *flags, rf runtimeFlags, tag string, args, pairs []string, file string, wait, quiet bool) int {
	if len(args) != 0 {
		return fs.usageError(env, "submit --tag NAME takes no workflow file")
	}
	eng, code, ok := rf.openShared(ctx, fs, env)
	if !ok {
		return code
	}
	defer eng.Close()
	w, _, err := eng.Tagged(ctx, tag)
	if err != nil {
		fmt.Fprintf(env.Stderr, "wfc submit: %v\n", err)
		return exitFailed
	}
	in, err := parseInputs(w, pairs, file)
	if err != nil {
		fmt.Fprintf(env.Stderr, "wfc submit: %v\n", err)
		return exitFailed
	}
	id, v, err := eng.SubmitTag(ctx, tag, in)
	if err != nil {
		fmt.Fprintf(env.Stderr, "wfc submit: %v\n", err)
		return exitFailed
	}
	fmt.Fprintln(env.Stdout, id)
	fmt.Fprintf(env.Stderr, "wfc submit: run %s of %s v%d (%s)\n", id, tag, v.Version, v.Hash)
	return submitted(ctx, env, eng, w, id, wait, quiet)
}

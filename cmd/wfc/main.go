package main

import (
	"context"
	"fmt"
	"os"
	"runtime/debug"

	"github.com/wfc-lang/wfc/runtime/heapfloor"
)

func main() {
	os.Exit(Main())
}

// Main runs wfc with the process's arguments, standard streams and
// environment, and returns the exit code. The test binary registers it as
// the `wfc` command of the CLI scripts.
func Main() int {
	cmd := ""
	if len(os.Args) > 1 {
		cmd = os.Args[1]
	}
	// SIGINT and SIGTERM cancel ctx; most commands end at once
	// (signals.go).
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := watchSignals(cmd, cancel, os.Stderr)
	defer sigs.stop()
	env := &Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}
	setGCTarget(cmd, os.Getenv("GOGC"))
	return sigs.exitCode(Run(ctx, env, os.Args[1:]))
}

// setGCTarget sets the garbage collector's policy of the process, unless
// GOGC is set in the environment (which wins). build and check get a
// target of 400: short runs whose heap stays mostly live until they end,
// where collecting at every doubling of the heap is wasted work (a
// 10,000-node workflow builds with about a quarter less CPU for about 1.6
// times the peak memory; docs/performance.md). The commands that run
// workflows (run, worker, serve, bench) keep a heap floor: their live heap
// is a few megabytes, which Go's default collects many times a second
// under load, and the heap may grow to 64 MiB before a collection
// (runtime/heapfloor). lsp and the others keep Go's default. Only in the
// process's own Main: tests of Run leave the test binary's policy alone.
// It returns what undoes it (for its test).
func setGCTarget(command, gogc string) (undo func()) {
	if gogc != "" {
		return func() {}
	}
	switch command {
	case "build", "check":
		old := debug.SetGCPercent(400)
		return func() { debug.SetGCPercent(old) }
	case "run", "worker", "serve", "bench":
		return heapfloor.Start(heapfloor.Default)
	}
	return func() {}
}

// Run dispatches args (without the program name) to a command. It never
// panics: a panic anywhere below is reported as an internal error, exit 3.
func Run(ctx context.Context, env *Env, args []string) (code int) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(env.Stderr, "wfc: internal error: %v\n", r)
			fmt.Fprintln(env.Stderr, "This is a bug in wfc; please report it with the input that caused it.")
			if env.Getenv("WFC_TRACEBACK") != "" {
				env.Stderr.Write(debug.Stack())
			} else {
				fmt.Fprintln(env.Stderr, "(set WFC_TRACEBACK=1 to print the stack trace)")
			}
			code = exitInternal
		}
	}()
	return dispatch(ctx, env, args)
}

package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
)

func main() {
	os.Exit(Main())
}

// Main runs wfc with the process's arguments, standard streams and
// environment, and returns the exit code. The test binary registers it as
// the `wfc` command of the CLI scripts.
func Main() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	env := &Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}
	if len(os.Args) > 1 {
		setGCTarget(os.Args[1], os.Getenv("GOGC"))
	}
	return Run(ctx, env, os.Args[1:])
}

// setGCTarget raises the garbage collector's target for build and check:
// short runs whose heap stays mostly live until they end, where collecting
// at every doubling of the heap is wasted work (a 10,000-node workflow
// builds with about a quarter less CPU for about 1.6 times the peak
// memory; docs/performance.md). Only in the process's own Main, so the
// long-running commands (run, worker, lsp) keep Go's default; a GOGC
// setting in the environment wins.
func setGCTarget(command, gogc string) {
	if gogc == "" && (command == "build" || command == "check") {
		debug.SetGCPercent(400)
	}
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

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
	return Run(ctx, env, os.Args[1:])
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

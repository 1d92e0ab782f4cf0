package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/wfc-lang/wfc/runtime"
)

// wfc signal sends a signal to a run (docs/waiting.md, "Signals").

const signalDoc = `
Signal sends the signal NAME to run RUN, with --correlation C (default
none: "") and a payload: --data JSON or --data-file F (a JSON object;
default {}). A signal task of the run that waits for NAME and C (the one
that began waiting first, if several do) completes with the payload as its
output. When none waits yet, the run keeps the signal until a signal task
reaches NAME and C, or the run ends (first sent, first taken).

The payload must fit the declared output of the run's signal tasks that
wait for NAME. An unknown or ended run, a name no signal task of the run
waits for, a payload that is not a JSON object, too large or of the wrong
type is refused with an error, and nothing changes. --wait first waits
until a signal task of the run waits for NAME and C (or the run ended),
so that the signal is not kept.
Exit codes: 0 sent, 1 refused, 2 bad command line.`

func runSignal(ctx context.Context, env *Env, args []string) int {
	fs := newFlags("signal", "wfc signal --redis URL [flags] RUN NAME", signalDoc)
	rf := addRuntimeFlags(fs, env)
	corr := fs.String("correlation", "", "the signal's correlation `C` (default none)")
	data := fs.String("data", "", "the payload, a JSON object `JSON` (default {})")
	dataFile := fs.String("data-file", "", "read the payload from file `F` (- for standard input)")
	wait := fs.Bool("wait", false, "first wait until a signal task of the run waits for the signal (or the run ended)")
	env, args, code, ok := rf.parse(fs, env, args)
	if !ok {
		return code
	}
	if len(args) != 2 {
		return fs.usageError(env, "signal takes a run id and a signal name")
	}
	if code, ok := rf.needRedis(fs, env); !ok {
		return code
	}
	if *data != "" && *dataFile != "" {
		return fs.usageError(env, "give --data or --data-file, not both")
	}
	payload := json.RawMessage(*data)
	if *dataFile != "" {
		var b []byte
		var err error
		if *dataFile == "-" {
			b, err = readStdin(ctx, env.Stdin, maxInputFile)
		} else {
			b, err = readInputFile(*dataFile)
		}
		if err != nil {
			fmt.Fprintf(env.Stderr, "wfc signal: --data-file: %v\n", err)
			return exitFailed
		}
		payload = b
	}
	eng, code, ok := rf.openShared(ctx, fs, env)
	if !ok {
		return code
	}
	defer eng.Close()
	run, name := args[0], args[1]
	if *wait {
		if err := waitSignal(ctx, eng, run, name, *corr); err != nil {
			fmt.Fprintf(env.Stderr, "wfc signal: %v\n", err)
			return exitFailed
		}
	}
	x, err := eng.Signal(ctx, run, name, *corr, payload)
	if err != nil {
		fmt.Fprintf(env.Stderr, "wfc signal: %s\n", strings.TrimPrefix(err.Error(), "runtime: signal: "))
		return exitFailed
	}
	if x == "" {
		fmt.Fprintf(env.Stderr, "run %s: signal %s kept until a node waits for it\n", run, name)
	} else {
		fmt.Fprintf(env.Stderr, "run %s: signal %s taken by %s\n", run, name, x)
	}
	return exitOK
}

// waitSignal polls run until one of its executions waits for the signal
// (name, corr) or the run has ended.
func waitSignal(ctx context.Context, eng *runtime.Engine, run, name, corr string) error {
	for {
		st, err := eng.Status(ctx, run)
		if err != nil {
			return err
		}
		if st.Done() {
			return nil
		}
		for _, ns := range st.Nodes {
			if ns.State == runtime.NodeWaiting && ns.Signal == name && ns.Correlation == corr {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

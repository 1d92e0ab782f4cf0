package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/wfc-lang/wfc/runtime"
)

// openEngine opens the engine of command fs.cmd (runtimeFlags.open). When
// it does not open it prints "wfc CMD: the error" and returns
// exitFailed with ok false; the caller returns that code. The caller
// closes the engine.
func (r runtimeFlags) openEngine(ctx context.Context, fs *flags, env *Env, logLevel slog.Level, mods ...func(*runtime.Options)) (_ *runtime.Engine, code int, ok bool) {
	eng, err := r.open(ctx, env, logLevel, mods...)
	if err != nil {
		fmt.Fprintf(env.Stderr, "wfc %s: %v\n", fs.cmd, err)
		return nil, exitFailed, false
	}
	return eng, exitOK, true
}

// openShared is the start of a command that acts on a shared Redis
// (approvals, status, deploy ...): the usage error of needRedis when
// there is none, else openEngine, logging warnings only.
func (r runtimeFlags) openShared(ctx context.Context, fs *flags, env *Env) (_ *runtime.Engine, code int, ok bool) {
	if code, ok := r.needRedis(fs, env); !ok {
		return nil, code, false
	}
	return r.openEngine(ctx, fs, env, slog.LevelWarn)
}

// parse parses the flags of a runtime command and applies check: it
// returns the env to use from then on (its standard error hides the
// --redis password) and the arguments, or ok false and the code to
// return after a usage error or --help.
func (r runtimeFlags) parse(fs *flags, env *Env, args []string) (_ *Env, _ []string, code int, ok bool) {
	if args, code, ok = fs.parse(env, args); !ok {
		return env, nil, code, false
	}
	if env, code, ok = r.check(fs, env); !ok {
		return env, nil, code, false
	}
	return env, args, exitOK, true
}

// concurrencyFlags are the concurrency of a command's worker: wfc run,
// serve and worker take the same flags, with the same default (adaptive:
// runtime.WorkerOptions without a Concurrency).
type concurrencyFlags struct {
	fs      *flags
	conc    *int
	maxConc *int
}

func addConcurrencyFlags(fs *flags) *concurrencyFlags {
	return &concurrencyFlags{
		fs:      fs,
		conc:    fs.Int("concurrency", 0, "handlers run at once (0: adaptive, from 16 per CPU, moved to what the handlers and the machine sustain)"),
		maxConc: fs.Int("max-concurrency", runtime.DefaultMaxConcurrency, "the most handlers an adaptive concurrency runs at once"),
	}
}

// check returns the usage error of a bad value (after parse).
func (c *concurrencyFlags) check(env *Env) (code int, ok bool) {
	if *c.conc < 0 {
		return c.fs.usageError(env, "--concurrency must be 0 (adaptive) or more, not %d", *c.conc), false
	}
	if *c.maxConc < 1 {
		return c.fs.usageError(env, "--max-concurrency must be at least 1, not %d", *c.maxConc), false
	}
	return exitOK, true
}

// given reports whether either flag was on the command line.
func (c *concurrencyFlags) given() bool {
	return c.fs.given("concurrency") || c.fs.given("max-concurrency")
}

// options sets o's concurrency from the flags.
func (c *concurrencyFlags) options(o runtime.WorkerOptions) runtime.WorkerOptions {
	o.Concurrency, o.MaxConcurrency = *c.conc, *c.maxConc
	return o
}

// describe says how many handlers wk runs at once, for a start message.
func (c *concurrencyFlags) describe(wk *runtime.Worker) string {
	if *c.conc > 0 {
		return fmt.Sprintf("concurrency %d", *c.conc)
	}
	return fmt.Sprintf("concurrency adaptive, %d to start, at most %d", wk.Stats().Limit, *c.maxConc)
}

// startInProcess starts the in-process worker of wfc run or wfc serve.
func startInProcess(ctx context.Context, eng *runtime.Engine, o runtime.WorkerOptions) *runtime.Worker {
	wk := eng.StartWorkers(ctx, 0, o)
	inProcessStarted(o, wk)
	return wk
}

// inProcessStarted is called with each in-process worker started and its
// options: the tests' window on what the flags made of them.
var inProcessStarted = func(runtime.WorkerOptions, *runtime.Worker) {}

// given reports whether flag name was on the command line (after parse).
func (f *flags) given(name string) bool {
	set := false
	f.Visit(func(fl *flag.Flag) { set = set || fl.Name == name })
	return set
}

// legacyWorkers is the --workers N of wfc run and serve, kept for the
// scripts that give it: unset, its help shows no default (serve's
// --workers 0 means no worker, which is not the default).
type legacyWorkers struct {
	n   int
	set bool
}

func (w *legacyWorkers) String() string {
	if w == nil || !w.set {
		return ""
	}
	return strconv.Itoa(w.n)
}

func (w *legacyWorkers) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return errors.New("not an integer")
	}
	w.n, w.set = n, true
	return nil
}

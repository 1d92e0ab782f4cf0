package main

import (
	"context"
	"fmt"
	"log/slog"

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

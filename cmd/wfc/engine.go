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

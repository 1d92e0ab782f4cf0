package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"

	"github.com/wfc-lang/wfc/lsp"
)

const lspDoc = `
Lsp runs the wfc language server: it speaks the Language Server Protocol
on standard input and output until the editor sends exit or closes the
input. Editors start it themselves (docs/editors.md shows how); it is not
meant to be run by hand.

The server publishes the diagnostics of 'wfc check' as you type, and offers
completion, hover, go to definition, references, rename, document symbols,
formatting (the layout of 'wfc fmt'), quick fixes and "fix all", signature
help, inlay hints, selection ranges, semantic highlighting and folding.

Standard output carries protocol messages only; the log goes to standard
error (or to --log-file).

Exit codes: 0 after shutdown and exit or at the end of the input, 1 when the
editor sent exit without shutdown or the connection failed, 2 bad command
line, 130 or 143 stopped by SIGINT or SIGTERM (at once).`

func runLSP(ctx context.Context, env *Env, args []string) int {
	fs := newFlags("lsp", "wfc lsp [--stdio] [flags]", lspDoc)
	fs.Bool("stdio", false, "use standard input and output: the only transport, the flag is accepted because editors pass it")
	pid := fs.Int("clientProcessId", 0, "exit when the editor process with this id is gone")
	level := fs.String("log-level", "info", "least severe log messages to write: debug, info, warn or error")
	fs.metavars["log-level"] = "debug|info|warn|error"
	logFile := fs.String("log-file", "", "append the log to this file instead of standard error")
	args, code, ok := fs.parse(env, args)
	if !ok {
		return code
	}
	if len(args) > 0 {
		return fs.usageError(env, "lsp takes no arguments, found %q", args[0])
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*level)); err != nil {
		return fs.usageError(env, "--log-level must be debug, info, warn or error, not %q", *level)
	}
	var logOut io.Writer = env.Stderr
	if *logFile != "" {
		f, err := os.OpenFile(*logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			fmt.Fprintf(env.Stderr, "wfc lsp: %v\n", err)
			return exitFailed
		}
		defer f.Close()
		logOut = f
	}
	log := slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: lvl}))
	version := "(devel)"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		version = bi.Main.Version
	}
	log.Info("wfc language server starting", "version", version, "pid", os.Getpid())
	err := lsp.Serve(ctx, env.Stdin, env.Stdout, lsp.Options{Logger: log, ClientProcessID: *pid, Version: version})
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, lsp.ErrExitWithoutShutdown):
		log.Warn(err.Error())
	case errors.Is(err, context.Canceled):
		log.Info("interrupted")
	default:
		log.Error("language server stopped", "err", strings.TrimSpace(err.Error()))
	}
	return exitFailed
}

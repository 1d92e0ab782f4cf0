package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/runtime"
	"github.com/wfc-lang/wfc/server"
	"github.com/wfc-lang/wfc/server/client"
	"github.com/wfc-lang/wfc/server/tasksapi"
)

const serveDoc = `
Serve runs the HTTP API of wfc (docs/api.md) over a Redis: deploy
workflows, submit and follow runs, decide approvals, send signals. Without
--redis it starts an embedded Redis whose runs live as long as the process.
Several servers may share one Redis behind a load balancer (give them the
same --completion-key-file).

Requests carry a bearer token of the token file (--tokens, reloaded when it
changes) or of $WFC_SERVE_TOKENS; each line is
"TOKEN SUBJECT SCOPES [expires=TIME]", the scopes read, submit, decide,
admin, work. Without tokens the server listens on loopback only: it refuses
to start on any other address. --tls-cert and --tls-key serve HTTPS.

The server runs an in-process worker (built-in handlers) whose
concurrency adapts as that of 'wfc worker' does ('wfc help worker'), unless
--concurrency N fixes it; --workers 0 runs none. With a shared Redis,
'wfc worker' processes may serve the runs too. SIGINT or
SIGTERM drains: new requests are refused, event streams end, requests in
flight finish (at most --drain).

The commands submit, status, events, cancel, retry, approve and signal
speak to a server instead of Redis when given --server URL (the token from
$WFC_TOKEN).`

func runServe(ctx context.Context, env *Env, args []string) int {
	fs := newFlags("serve", "wfc serve [--redis URL] [--listen ADDR] [flags]", serveDoc)
	rf := addRuntimeFlags(fs, env)
	listen := fs.String("listen", "127.0.0.1:8080", "listen on `ADDR` (host:port)")
	tokens := fs.String("tokens", env.Getenv("WFC_SERVE_TOKENS_FILE"), "bearer tokens from `FILE` (default $WFC_SERVE_TOKENS_FILE)")
	cert := fs.String("tls-cert", "", "serve HTTPS with the certificate in `FILE` (PEM)")
	key := fs.String("tls-key", "", "the private key of --tls-cert in `FILE` (PEM)")
	ckey := fs.String("completion-key-file", env.Getenv("WFC_COMPLETION_KEY_FILE"), "sign completion tokens with the key in `FILE` (at least 32 bytes; default a random key of this process, $WFC_COMPLETION_KEY_FILE)")
	cf := addConcurrencyFlags(fs)
	var workers legacyWorkers
	fs.Var(&workers, "workers", "0: no in-process worker ('wfc worker' processes serve the runs); `N` > 0: the former name of --concurrency N")
	maxBody := fs.Int64("max-body", 4<<20, "largest request body in `BYTES`")
	taskLease := fs.Duration("task-lease", 30*time.Second, "how long a task polled from /v1/tasks/ stays with its worker without a heartbeat")
	taskWait := fs.Duration("task-max-wait", 30*time.Second, "the longest a /v1/tasks/poll waits for a task")
	drain := fs.Duration("drain", 10*time.Second, "on SIGINT or SIGTERM, wait at most `DURATION` for requests in flight")
	args, code, ok := fs.parse(env, args)
	if !ok {
		return code
	}
	if env, code, ok = rf.check(fs, env); !ok {
		return code
	}
	if len(args) != 0 {
		return fs.usageError(env, "serve takes no arguments")
	}
	if code, ok := cf.check(env); !ok {
		return code
	}
	inProcess := true
	if workers.set {
		switch {
		case workers.n < 0:
			return fs.usageError(env, "--workers must be 0 (no in-process worker) or more, not %d", workers.n)
		case cf.given() && workers.n == 0:
			return fs.usageError(env, "--workers 0 runs no in-process worker: it takes no --concurrency or --max-concurrency")
		case cf.given():
			return fs.usageError(env, "--workers N is the former name of --concurrency N: give --concurrency only")
		case workers.n == 0:
			inProcess = false
		default:
			*cf.conc = workers.n
		}
	}
	if (*cert == "") != (*key == "") {
		return fs.usageError(env, "give --tls-cert and --tls-key together")
	}
	log := slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	tok, err := server.LoadTokens(*tokens, env.Getenv("WFC_SERVE_TOKENS"), log)
	if err != nil {
		fmt.Fprintf(env.Stderr, "wfc serve: %v\n", err)
		return exitFailed
	}
	if tok.Empty() && !server.IsLoopback(*listen) {
		fmt.Fprintf(env.Stderr, "wfc serve: refusing to listen on %s without tokens: give --tokens FILE or $WFC_SERVE_TOKENS, or listen on a loopback address\n", *listen)
		return exitUsage
	}
	var completionKey []byte
	if *ckey != "" {
		if completionKey, err = os.ReadFile(*ckey); err != nil {
			fmt.Fprintf(env.Stderr, "wfc serve: %v\n", err)
			return exitFailed
		}
		completionKey = []byte(strings.TrimSpace(string(completionKey)))
	}
	var tlsCfg *tls.Config
	if *cert != "" {
		pair, err := tls.LoadX509KeyPair(*cert, *key)
		if err != nil {
			fmt.Fprintf(env.Stderr, "wfc serve: TLS: %v\n", err)
			return exitFailed
		}
		tlsCfg = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	}
	eng, err := rf.open(ctx, env, slog.LevelWarn)
	if err != nil {
		fmt.Fprintf(env.Stderr, "wfc serve: %v\n", err)
		return exitFailed
	}
	defer eng.Close()
	wctx, stopWorkers := context.WithCancel(context.Background())
	defer stopWorkers()
	worker := "no in-process worker"
	if inProcess {
		wk := startInProcess(wctx, eng, cf.options(runtime.WorkerOptions{}))
		defer eng.StopWorkers()
		worker = "in-process worker " + cf.describe(wk)
	}
	// The remote task queue (docs/handlers.md): handlers in any language
	// poll /v1/tasks/, behind the server's tokens with scope "work".
	remote, err := eng.NewRemote(runtime.RemoteOptions{Lease: *taskLease, MaxWait: *taskWait, Logger: log})
	if err != nil {
		fmt.Fprintf(env.Stderr, "wfc serve: %v\n", err)
		return exitFailed
	}
	// Timed-out tasks fail even when no worker polls (runtime.Remote.Sweep).
	go remote.Sweep(wctx)
	tasks := tasksapi.New(tasksapi.Config{Remote: remote, Authorize: server.Authorized, Logger: log})
	srv, err := server.New(server.Config{Engine: eng, Tokens: tok, CompletionKey: completionKey, MaxBodyBytes: *maxBody, Logger: log, TasksHandler: tasks})
	if err != nil {
		fmt.Fprintf(env.Stderr, "wfc serve: %v\n", err)
		return exitFailed
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintf(env.Stderr, "wfc serve: %v\n", err)
		return exitFailed
	}
	if tlsCfg != nil {
		ln = tls.NewListener(ln, tlsCfg)
	}
	// WriteTimeout outlasts the longest task poll (a long poll answers
	// after up to MaxWait); event streams extend their own deadline.
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		WriteTimeout: remote.MaxWait() + time.Minute,
		ErrorLog:     slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	scheme := "http"
	if tlsCfg != nil {
		scheme = "https"
	}
	redis := "embedded Redis"
	if *rf.redis != "" {
		redis = "Redis " + eng.RedisAddr()
	}
	fmt.Fprintf(env.Stderr, "wfc serve: listening on %s://%s (%s; %s)\n", scheme, ln.Addr(), redis, worker)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		fmt.Fprintf(env.Stderr, "wfc serve: %v\n", err)
		return exitFailed
	case <-ctx.Done():
	}
	fmt.Fprintln(env.Stderr, "wfc serve: draining")
	dctx, cancel := context.WithTimeout(context.Background(), *drain)
	defer cancel()
	srv.Shutdown(dctx)
	if err := hs.Shutdown(dctx); err != nil {
		fmt.Fprintf(env.Stderr, "wfc serve: drain: %v\n", err)
		hs.Close()
	}
	return exitOK
}

// viaServer wraps a runtime command: given --server URL (or --server=URL)
// it runs the command against `wfc serve` (clientCmd) instead of Redis.
func viaServer(name string, direct func(context.Context, *Env, []string) int) func(context.Context, *Env, []string) int {
	return func(ctx context.Context, env *Env, args []string) int {
		for i, a := range args {
			if a == "--" {
				break
			}
			if v, ok := strings.CutPrefix(a, "--server="); ok {
				return clientCmd(ctx, env, name, v, append(args[:i:i], args[i+1:]...))
			}
			if a == "--server" || a == "-server" {
				if i+1 >= len(args) {
					fmt.Fprintf(env.Stderr, "wfc %s: --server needs a URL\n", name)
					return exitUsage
				}
				return clientCmd(ctx, env, name, args[i+1], append(args[:i:i], args[i+2:]...))
			}
		}
		return direct(ctx, env, args)
	}
}

// clientCmd is a command run against a server.
func clientCmd(ctx context.Context, env *Env, name, url string, args []string) int {
	fs := newFlags(name, "wfc "+name+" --server URL [flags] ARGS", "Runs "+name+" against `wfc serve` at URL (token from $WFC_TOKEN).")
	jsonOut := fs.Bool("json", false, "print JSON")
	var inputs listFlag
	var inputFile, workflow, idem, corr, data, comment *string
	var wait, reject *bool
	switch name {
	case "submit":
		fs.Var(&inputs, "input", "input `NAME=VALUE`; repeatable")
		inputFile = fs.String("input-file", "", "read inputs from a JSON object in `FILE`")
		workflow = fs.String("workflow", "", "a deployed workflow's `TAG` or hash, instead of a FILE")
		idem = fs.String("idempotency-key", "", "a retried submit with the same `KEY` starts one run")
		wait = fs.Bool("wait", false, "follow the run's events until it ends")
	case "approve":
		reject = fs.Bool("reject", false, "reject instead of approving")
		comment = fs.String("comment", "", "a comment `TEXT`")
		fs.Var(&inputs, "input", "a declared output field `NAME=VALUE`; repeatable")
	case "signal":
		corr = fs.String("correlation", "", "the signal's correlation `C`")
		data = fs.String("data", "", "the payload, a JSON object")
	case "events":
		wait = fs.Bool("follow", false, "stream the events until the run ends (Server-Sent Events, resumed after a break)")
	}
	args, code, ok := fs.parse(env, args)
	if !ok {
		return code
	}
	c, err := client.New(url, env.Getenv("WFC_TOKEN"))
	if err != nil {
		return fs.usageError(env, "%v", err)
	}
	fail := func(err error) int {
		fmt.Fprintf(env.Stderr, "wfc %s: %v\n", name, err)
		return exitFailed
	}
	printJSON := func(v any) int {
		b, _ := json.MarshalIndent(v, "", "  ")
		fmt.Fprintln(env.Stdout, string(b))
		return exitOK
	}
	printEvent := func(ev runtime.Event) error {
		if *jsonOut {
			b, _ := json.Marshal(ev)
			fmt.Fprintln(env.Stdout, string(b))
			return nil
		}
		var kv []string
		for k, v := range ev.Fields {
			kv = append(kv, k+"="+v)
		}
		slices.Sort(kv)
		fmt.Fprintf(env.Stdout, "%s %s %s\n", ev.Time.Format(time.RFC3339Nano), ev.Type, strings.Join(kv, " "))
		return nil
	}
	switch name {
	case "submit":
		req := client.SubmitRequest{Workflow: *workflow}
		var w *ir.Workflow
		switch {
		case len(args) == 1 && *workflow == "":
			if w, code = loadWorkflow(ctx, env, args[0]); w == nil {
				return code
			}
			irDoc, err := ir.Marshal(w)
			if err != nil {
				return fail(err)
			}
			req.IR, req.File = irDoc, filepath.Base(args[0])
		case len(args) == 0 && *workflow != "":
			if w, err = c.Workflow(ctx, *workflow); err != nil {
				return fail(err)
			}
		default:
			return fs.usageError(env, "submit takes one workflow FILE, or --workflow TAG")
		}
		if req.Inputs, err = parseInputs(w, inputs, *inputFile); err != nil {
			return fail(err)
		}
		run, err := c.Submit(ctx, req, *idem)
		if err != nil {
			return fail(err)
		}
		fmt.Fprintln(env.Stdout, run)
		if !*wait {
			return exitOK
		}
		if err := c.Follow(ctx, run, printEvent); err != nil {
			return fail(err)
		}
		st, err := c.Status(ctx, run)
		if err != nil {
			return fail(err)
		}
		return finish(env, "submit", st, false)
	case "status", "cancel", "retry", "events":
		if len(args) != 1 {
			return fs.usageError(env, "%s takes one run id", name)
		}
		run := args[0]
		switch name {
		case "cancel":
			err = c.Cancel(ctx, run)
		case "retry":
			err = c.Retry(ctx, run)
		case "events":
			if *wait {
				err = c.Follow(ctx, run, printEvent)
			} else {
				var evs []runtime.Event
				if evs, err = c.Events(ctx, run); err == nil {
					for _, ev := range evs {
						printEvent(ev)
					}
				}
			}
			if err != nil {
				return fail(err)
			}
			return exitOK
		}
		if err != nil {
			return fail(err)
		}
		st, err := c.Status(ctx, run)
		if err != nil {
			return fail(err)
		}
		if *jsonOut || name == "status" {
			return printJSON(st)
		}
		fmt.Fprintf(env.Stderr, "run %s: %s\n", run, st.State)
		return exitOK
	case "approve":
		if len(args) != 2 {
			return fs.usageError(env, "approve takes a run id and an approval (node id)")
		}
		fields := map[string]any{}
		for _, p := range inputs {
			k, v, ok := strings.Cut(p, "=")
			if !ok {
				return fs.usageError(env, "--input wants NAME=VALUE, not %q", p)
			}
			var x any
			if json.Unmarshal([]byte(v), &x) != nil {
				x = v
			}
			fields[k] = x
		}
		a, err := c.Decide(ctx, args[0], args[1], !*reject, *comment, fields)
		if err != nil {
			return fail(err)
		}
		if *jsonOut {
			return printJSON(a)
		}
		fmt.Fprintf(env.Stderr, "run %s: approval %s %s by %s\n", args[0], args[1], a.State, a.By)
		return exitOK
	case "signal":
		if len(args) != 2 {
			return fs.usageError(env, "signal takes a run id and a signal name")
		}
		x, err := c.Signal(ctx, args[0], args[1], *corr, json.RawMessage(*data))
		if err != nil {
			return fail(err)
		}
		if x == "" {
			fmt.Fprintf(env.Stderr, "run %s: signal %s kept for a node that does not wait yet\n", args[0], args[1])
		} else {
			fmt.Fprintf(env.Stderr, "run %s: signal %s taken by %s\n", args[0], args[1], x)
		}
		return exitOK
	}
	return fail(errors.New("no client mode for this command"))
}

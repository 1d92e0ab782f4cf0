package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/wfc-lang/wfc/compiler"
	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/lang/diag"
	"github.com/wfc-lang/wfc/runtime"
	"github.com/wfc-lang/wfc/runtime/handlers"
)

// The runtime commands. They share the --redis flag (default $WFC_REDIS);
// `wfc run` alone may go without it and then uses an embedded in-memory
// Redis with in-process workers.

const runDoc = `
Run executes a workflow and waits for it to end. FILE is a .wf source
(compiled first), or a compiled IR (.json, .yaml or .yml); - reads either
from standard input (wfc build flow.wf | wfc run -).

Without --redis (and without $WFC_REDIS) it starts an embedded, in-memory
Redis and in-process workers: nothing needs to be installed, and nothing is
kept after wfc exits. With --redis the run is stored in that Redis, and the
in-process workers run this run only, on a queue of their own; a handler
they cannot run (exec without --allow-exec, a handler of your own) goes to
its queue for the 'wfc worker' processes that run it, and wfc refuses to
start when no live worker serves that queue. When the run ends wfc deletes
its private queue; interrupted, it cancels the run, which no other process
can serve.

The in-process workers' concurrency, the handlers they run at once, adapts
as that of 'wfc worker' does ('wfc help worker'): --max-concurrency bounds
it, --concurrency N fixes it at N.

Inputs are given with --input NAME=VALUE (repeatable) and --input-file
F.json (a JSON object). A VALUE is taken as it is for an input declared
string, is a duration literal for one declared duration (--input
timeout=100ms, --input wait=1h30m), and is read as JSON for any other type
(--input n=3, --input tags='["a","b"]').

While it runs, wfc prints each change of a node's state (queued, running,
retrying, completed, skipped, failed; compensating, compensated) to
standard error as the run's event log records it, in the order the changes
happened; -q leaves these lines out. A task shows as queued while its
handler runs. wfc waits until the run has ended and its compensations are
done, then prints the run's result (the workflow's output block) as JSON
to standard output; with --json, the run's whole status instead.

Exit codes: 0 the run completed, 1 it failed or was cancelled (or the
workflow has errors), 2 bad command line, 3 a bug in wfc, 130 or 143
stopped by SIGINT or SIGTERM: the run is left as it is, handlers still
running get 0.5 s, then are cancelled (an exec program's process group
gets SIGTERM, and SIGKILL 2 s later); a second signal exits at once.`

type runtimeFlags struct {
	redis     *string
	shards    *int
	retention *time.Duration // nil for commands that start no run
	values    valueFlags     // the value bounds the command has flags for
}

func addRuntimeFlags(fs *flags, env *Env) runtimeFlags {
	return runtimeFlags{
		redis:  fs.String("redis", env.Getenv("WFC_REDIS"), "Redis `URL`: redis://host:6379/0, or a Redis Cluster as redis+cluster://host:port,host:port (default $WFC_REDIS)"),
		shards: fs.Int("shards", 1, "number of shards runs are spread over; the same for every process"),
	}
}

// addRetention adds --retention to a command that starts runs.
func (r *runtimeFlags) addRetention(fs *flags) {
	r.retention = fs.Duration("retention", runtime.DefaultRetention,
		"keep a run's keys (status, outputs, events) for `DURATION` after it ends, then let them expire; 0 keeps them forever")
}

// check applies to every runtime command once its flags are parsed: it
// reports a --shards that is not a count of shards (a usage error; ok is
// false and the command returns code), and returns the env the command
// must use from then on, whose standard error never shows the password of
// the --redis URL (as a malformed URL's error would).
func (r runtimeFlags) check(fs *flags, env *Env) (_ *Env, code int, ok bool) {
	env = withRedactedStderr(env, *r.redis)
	if *r.shards < 1 {
		return env, fs.usageError(env, "--shards must be at least 1, not %d", *r.shards), false
	}
	return env, exitOK, true
}

// needRedis is the usage error of a command that acts on a shared Redis
// (no embedded one: there would be nothing to act on) given none.
func (r runtimeFlags) needRedis(fs *flags, env *Env) (code int, ok bool) {
	if *r.redis == "" {
		return fs.usageError(env, "--redis (or $WFC_REDIS) is required"), false
	}
	return exitOK, true
}

// badRetention reports a negative --retention, which means nothing.
func (r runtimeFlags) badRetention() bool { return r.retention != nil && *r.retention < 0 }

// handlerFlags are the flags of the commands that run handlers (run,
// worker): --allow-exec and the http handler's network policy.
type handlerFlags struct {
	allowExec           *bool
	httpAllow, httpDeny *commaList
}

func addHandlerFlags(fs *flags, env *Env) handlerFlags {
	h := handlerFlags{
		allowExec: fs.Bool("allow-exec", false, "let the exec handler run programs"),
		httpAllow: newCommaList(env.Getenv("WFC_HTTP_ALLOW")),
		httpDeny:  newCommaList(env.Getenv("WFC_HTTP_DENY")),
	}
	fs.Var(h.httpAllow, "http-allow", "let the http handler reach `HOSTS` even if loopback, private or link-local (refused by default): comma-separated IPs, CIDRs, host names, each may end in :port, or *; repeatable (default $WFC_HTTP_ALLOW)")
	fs.Var(h.httpDeny, "http-deny", "never let the http handler reach `HOSTS`, whatever --http-allow says; as --http-allow (default $WFC_HTTP_DENY)")
	return h
}

// registry returns the built-in handlers the flags configure, or a usage
// error for a policy entry that means nothing.
func (h handlerFlags) registry() (*handlers.Registry, error) {
	if err := handlers.CheckHTTPPolicy(h.httpAllow.vals, h.httpDeny.vals); err != nil {
		return nil, err
	}
	return handlers.NewRegistry(handlers.Options{AllowExec: *h.allowExec, HTTPAllow: h.httpAllow.vals, HTTPDeny: h.httpDeny.vals}), nil
}

// A commaList is a repeatable flag of comma-separated values. Its default
// (from the environment) is replaced by the first use of the flag.
type commaList struct {
	vals []string
	set  bool
}

func newCommaList(def string) *commaList { return &commaList{vals: splitComma(def)} }

func (l *commaList) String() string {
	if l == nil {
		return ""
	}
	return strings.Join(l.vals, ",")
}

func (l *commaList) Set(s string) error {
	if !l.set {
		l.vals, l.set = nil, true
	}
	l.vals = append(l.vals, splitComma(s)...)
	return nil
}

func splitComma(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

func (r runtimeFlags) open(ctx context.Context, env *Env, logLevel slog.Level, mods ...func(*runtime.Options)) (*runtime.Engine, error) {
	log := slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: logLevel}))
	o := runtime.Options{RedisURL: *r.redis, Shards: *r.shards, Logger: log}
	r.values.engine(&o)
	for _, m := range mods {
		m(&o)
	}
	if r.retention != nil {
		o.Retention = *r.retention
		if o.Retention == 0 {
			o.Retention = runtime.KeepForever
		}
	}
	// (Open names the cause when Redis is down: "connection refused".)
	return runtime.Open(ctx, o)
}

func runRun(ctx context.Context, env *Env, args []string) int {
	fs := newFlags("run", "wfc run [flags] FILE", runDoc)
	rf := addRuntimeFlags(fs, env)
	rf.addRetention(fs)
	rf.values.addInputBound(fs)
	rf.values.addWorkerBounds(fs)
	var inputs listFlag
	fs.Var(&inputs, "input", "input `NAME=VALUE`; repeatable")
	inputFile := fs.String("input-file", "", "read inputs from a JSON object in `FILE`")
	cf := addConcurrencyFlags(fs)
	var workers legacyWorkers
	fs.Var(&workers, "workers", "the former name of --concurrency: a fixed concurrency of `N`")
	hf := addHandlerFlags(fs, env)
	mf := addModelFlags(fs, env)
	secretsFile := fs.String("secrets-file", "", "the in-process workers' secrets: a JSON object of name -> value in `FILE` (mode 0600); also $WFC_SECRET_<name>")
	jsonOut := fs.Bool("json", false, "print the run's final status as JSON")
	quiet := fs.Bool("q", false, "do not print node progress")
	env, args, code, ok := rf.parse(fs, env, args)
	if !ok {
		return code
	}
	if len(args) != 1 {
		return fs.usageError(env, "run takes one workflow file")
	}
	if rf.badRetention() {
		return fs.usageError(env, "--retention must be 0 (keep forever) or a positive duration")
	}
	if code, ok := cf.check(env); !ok {
		return code
	}
	if workers.set {
		if workers.n < 1 {
			return fs.usageError(env, "--workers must be at least 1")
		}
		if cf.given() {
			return fs.usageError(env, "--workers is the former name of --concurrency: give --concurrency only")
		}
		*cf.conc = workers.n
	}
	reg, err := hf.registry()
	if err != nil {
		return fs.usageError(env, "%v", err)
	}
	w, in, code := prepareRun(ctx, env, "run", args[0], inputs, *inputFile)
	if w == nil {
		return code
	}
	secrets, err := runtime.LoadSecrets(*secretsFile, os.Environ())
	if err != nil {
		fmt.Fprintf(env.Stderr, "wfc run: %v\n", err)
		return exitFailed
	}
	model, err := mf.client(env, nil)
	if err != nil {
		return fs.usageError(env, "%v", err)
	}
	toolset, err := mf.toolset(env)
	if err != nil {
		return fs.usageError(env, "%v", err)
	}
	// With --redis the run is private to this process's workers (issue
	// #14 item 7: they took other runs' work, exec included).
	eng, code, ok := rf.openEngine(ctx, fs, env, slog.LevelWarn, func(o *runtime.Options) {
		if o.RedisURL != "" {
			o.Private = reg
		}
	})
	if !ok {
		return code
	}
	defer eng.Close()
	if eng.Embedded() {
		fmt.Fprintln(env.Stderr, "wfc: embedded Redis (in memory only: the run is lost when wfc exits; use --redis for a durable one)")
		// Only the in-process workers can serve an embedded run: a handler
		// they lack would leave it waiting forever.
		if hs := runtime.HumanNodes(w); len(hs) > 0 {
			fmt.Fprintf(env.Stderr, "wfc run: workflow %s has human nodes (%s), whose approvals are decided with 'wfc approve' from another process, which cannot reach an embedded Redis; run it with --redis (or 'wfc submit' it to a Redis served by 'wfc worker')\n", w.Name, strings.Join(hs, ", "))
			return exitFailed
		}
		if ss := runtime.SignalNodes(w); len(ss) > 0 {
			fmt.Fprintf(env.Stderr, "wfc run: workflow %s has signal tasks (%s), whose signals are sent with 'wfc signal' from another process, which cannot reach an embedded Redis; run it with --redis (or 'wfc submit' it to a Redis served by 'wfc worker')\n", w.Name, strings.Join(ss, ", "))
			return exitFailed
		}
		if missing := runtime.MissingHandlers(w, reg); len(missing) > 0 {
			fmt.Fprintf(env.Stderr, "wfc run: no implementation of handler %s in this process%s; run it against a Redis (--redis) served by a 'wfc worker' (or a worker of your own) that provides it\n", strings.Join(missing, ", "), execHint(missing, *hf.allowExec))
			return exitFailed
		}
	} else if code := checkServed(ctx, env, eng, w, *hf.allowExec); code != exitOK {
		return code
	}
	// Short blocking reads: stopping waits for the reads in progress, and
	// these workers stop as soon as the run ends (a 1 s block made every
	// `wfc run` last at least a second). A short grace: when the run has
	// ended (its deadline, a failure elsewhere), the handlers still running
	// are of an ended run and are cancelled (exec's process group killed).
	startInProcess(ctx, eng, cf.options(rf.values.worker(runtime.WorkerOptions{Handlers: reg, Secrets: secrets, Model: model, Tools: toolset, AgentPatch: agentPatch(eng), Block: 100 * time.Millisecond, ShutdownGrace: 500 * time.Millisecond})))
	defer eng.StopWorkers()
	// Once the run has ended (or been cancelled), its private queue and
	// graph go: no other process serves them.
	ended := false
	defer func() {
		if !ended || eng.Embedded() {
			return
		}
		eng.StopWorkers()
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := eng.DropPrivate(cctx); err != nil {
			fmt.Fprintf(env.Stderr, "wfc run: deleting the run's private queue %s: %v\n", eng.ControlQueue(), err)
		}
	}()
	id, err := eng.Submit(ctx, w, in)
	if err != nil {
		fmt.Fprintf(env.Stderr, "wfc run: %v\n", err)
		ended = true
		return exitFailed
	}
	fmt.Fprintf(env.Stderr, "run %s: %s started\n", id, w.Name)
	st, err := watch(ctx, env, eng, id, !*quiet)
	if err != nil {
		switch {
		case ctx.Err() != nil && eng.Embedded():
			fmt.Fprintf(env.Stderr, "wfc run: interrupted; run %s is left as it is\n", id)
		case ctx.Err() != nil:
			// Only this process's workers serve the run: cancel it rather
			// than leave it running for ever.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := eng.Cancel(cctx, id); err != nil {
				fmt.Fprintf(env.Stderr, "wfc run: interrupted; cancelling run %s: %v\n", id, err)
			} else {
				fmt.Fprintf(env.Stderr, "wfc run: interrupted; run %s cancelled (only this process serves it)\n", id)
				ended = true
			}
		default:
			fmt.Fprintf(env.Stderr, "wfc run: %v\n", err)
		}
		return exitFailed
	}
	ended = true
	return finish(env, "run", st, *jsonOut)
}

// servedGrace is how long wfc run waits for a worker serving a queue it
// cannot serve itself to register.
const servedGrace = 5 * time.Second

// execHint adds to the list of missing handlers why exec is missing.
func execHint(missing []string, allowExec bool) string {
	if !allowExec && slices.Contains(missing, "exec") {
		return " (exec runs programs only with --allow-exec)"
	}
	return ""
}

// checkServed checks, for `wfc run --redis`, that every queue of the run
// that this process's workers do not serve (the queues of handlers they
// cannot run) has a live worker in the Redis's registry; else the run
// would wait for ever. It reports and returns exitFailed if not.
//
// A worker started at the same time as the run (a script, a compose file)
// registers within moments: checkServed waits up to servedGrace for one.
func checkServed(ctx context.Context, env *Env, eng *runtime.Engine, w *ir.Workflow, allowExec bool) int {
	deadline := time.Now().Add(servedGrace)
	var missing, hs []string
	for {
		var err error
		missing, hs, err = unserved(ctx, eng, w, eng.ControlQueue())
		if err != nil {
			fmt.Fprintf(env.Stderr, "wfc run: %v\n", err)
			return exitFailed
		}
		if len(missing) == 0 {
			return exitOK
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
	fmt.Fprintf(env.Stderr, "wfc run: this process cannot run handler %s%s, and no live worker on this Redis serves queue %s; start a 'wfc worker' that runs it\n",
		strings.Join(hs, ", "), execHint(hs, allowExec), strings.Join(missing, ", "))
	return exitFailed
}

// unserved returns the queues of a run of w (but skip) that no live worker
// in the registry serves, as "queue (handler h, ...)", and their handlers.
func unserved(ctx context.Context, eng *runtime.Engine, w *ir.Workflow, skip string) (missing, hs []string, err error) {
	queues, err := eng.QueuesOf(w)
	if err != nil {
		return nil, nil, err
	}
	workers, err := eng.Workers(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the worker registry: %w", err)
	}
	live := map[string]bool{}
	for _, wk := range workers {
		for _, q := range wk.Queues {
			live[q] = live[q] || wk.Live
		}
	}
	for _, q := range slices.Sorted(maps.Keys(queues)) {
		if q == skip || live[q] {
			continue
		}
		if len(queues[q]) == 0 {
			missing = append(missing, q+" (the control queue)")
			continue
		}
		missing = append(missing, fmt.Sprintf("%s (handler %s)", q, strings.Join(queues[q], ", ")))
		hs = append(hs, queues[q]...)
	}
	return missing, hs, nil
}

// watch waits for the run to end (with its compensations, if any) and
// returns its final status. With progress it prints a line to standard
// error for each change of an execution's state, as the run's event log
// records it: in the log's order, which is the order the changes happened.
func watch(ctx context.Context, env *Env, eng *runtime.Engine, id string, progress bool) (*runtime.Status, error) {
	if !progress {
		return eng.Wait(ctx, id)
	}
	p := &progressPrinter{w: env.Stderr, state: map[string]string{}}
	return eng.Follow(ctx, id, func(ev runtime.Event) error {
		p.event(ev)
		return nil
	})
}

// A progressPrinter prints the progress lines of a run from its events.
type progressPrinter struct {
	w     io.Writer
	state map[string]string // exec key -> the state last printed
}

func (p *progressPrinter) event(ev runtime.Event) {
	for _, t := range ev.Transitions() {
		if p.state[t.Exec] == t.State {
			continue
		}
		p.state[t.Exec] = t.State
		p.line(t.Exec, t.State, t.Error)
	}
	x := ev.Fields["x"]
	switch ev.Type {
	case "comp.queued":
		p.line(x, "compensating", "")
	case "comp.retry":
		p.line(x, "compensation retrying", "")
	case "comp.completed":
		p.line(x, "compensated", "")
	case "comp.failed":
		p.line(x, "compensation failed", ev.Fields["error"])
	case "node.waiting", "item.flow":
		if c := ev.Fields["child"]; c != "" {
			if it := ev.Fields["item"]; it != "" {
				x += "#" + it
			}
			p.line(x, "child run "+c, "")
		}
	case "signal.received":
		p.line(x, fmt.Sprintf("signal %q received", ev.Fields["signal"]), "")
	case "approval.escalated":
		p.line(x, "approval escalated to "+ev.Fields["escalate_to"], "")
	case "approval.decided":
		what := "approval " + ev.Fields["outcome"]
		if by := ev.Fields["by"]; by != "" {
			what += " by " + by
		}
		p.line(x, what, "")
	}
}

func (p *progressPrinter) line(x, state, errText string) {
	line := fmt.Sprintf("  %-24s %s", x, state)
	if errText != "" {
		line += ": " + errText
	}
	fmt.Fprintln(p.w, line)
}

// finish prints the end of a run for command cmd (run, submit --wait):
// its result (or with jsonOut its status) and its state, and returns the
// exit code. A result or status it cannot print is an internal error.
func finish(env *Env, cmd string, st *runtime.Status, jsonOut bool) int {
	printed := exitOK
	if jsonOut {
		printed = writeJSON(env, cmd, "the run's status", st)
	} else if len(st.Result) > 0 {
		// Numbers as written: a float64 would round an int of more
		// than 53 bits.
		dec := json.NewDecoder(bytes.NewReader(st.Result))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			printed = encodeError(env, cmd, "the run's result", err)
		} else {
			printed = writeJSON(env, cmd, "the run's result", v)
		}
	}
	code := exitOK
	switch st.State {
	case runtime.RunCompleted:
		fmt.Fprintf(env.Stderr, "run %s: completed\n", st.RunID)
	default:
		msg := st.State
		if st.Error != "" {
			msg += ": " + st.Error
		}
		fmt.Fprintf(env.Stderr, "run %s: %s\n", st.RunID, msg)
		code = exitFailed
	}
	return max(code, printed)
}

// prepareRun loads the workflow, checks that the runtime can execute its
// node kinds, and reads the inputs; run and submit share it. On failure it
// reports and returns a nil workflow and the exit code.
func prepareRun(ctx context.Context, env *Env, cmd, path string, pairs []string, file string) (*ir.Workflow, map[string]any, int) {
	w, code := loadWorkflow(ctx, env, path)
	if w == nil {
		return nil, nil, code
	}
	if err := runtime.CheckSupported(w); err != nil {
		fmt.Fprintf(env.Stderr, "wfc %s: %v\n", cmd, err)
		return nil, nil, exitFailed
	}
	in, err := parseInputs(w, pairs, file)
	if err != nil {
		fmt.Fprintf(env.Stderr, "wfc %s: %v\n", cmd, err)
		return nil, nil, exitFailed
	}
	return w, in, exitOK
}

// loadWorkflow compiles a .wf file or decodes an IR file. On failure it
// reports and returns a nil workflow and the exit code.
func loadWorkflow(ctx context.Context, env *Env, path string) (*ir.Workflow, int) {
	var decode func([]byte) (*ir.Workflow, error)
	switch strings.ToLower(filepath.Ext(path)) {
	case ".json":
		decode = ir.Decode
	case ".yaml", ".yml":
		decode = ir.DecodeYAML
	}
	limit := int64(maxRead)
	if decode != nil {
		limit = maxIRFile
	}
	name, src, err := readFile(ctx, env, path, limit)
	if err != nil {
		fmt.Fprintf(env.Stderr, "wfc: %v\n", err)
		return nil, exitFailed
	}
	if path == "-" {
		// Standard input has no extension: `wfc build x.wf | wfc run -`
		// pipes an IR, `cat x.wf | wfc run -` a source. (The decoders
		// refuse a document larger than maxIRFile.)
		switch sniffIR(src) {
		case "json":
			decode = ir.Decode
		case "yaml":
			decode = ir.DecodeYAML
		}
	}
	if decode != nil {
		w, err := decode(src)
		if err != nil {
			fmt.Fprintf(env.Stderr, "wfc: %s: %v\n", name, err)
			return nil, exitFailed
		}
		if probs := ir.Validate(w); len(probs) > 0 {
			fmt.Fprintf(env.Stderr, "wfc: %s: invalid IR: %v\n", name, ir.Problems(probs))
			return nil, exitFailed
		}
		return w, exitOK
	}
	res := compiler.Compile(name, src, compiler.Config{})
	if len(res.Diags) > 0 {
		diag.WriteText(env.Stderr, res.Diags, res.Files)
	}
	if res.IR == nil {
		return nil, exitFor(res.Diags)
	}
	return res.IR, exitOK
}

// sniffIR tells a compiled workflow from a .wf source: "json" for a JSON
// document (its first character other than white space is "{", which no
// source starts with), "yaml" for a YAML one (its first line other than
// blank lines and # comments is "---", a %directive or a "key:" line, as
// `wfc build --format yaml` writes; a source starts with a keyword and a
// name, or a // comment), else "".
func sniffIR(src []byte) string {
	s := strings.TrimPrefix(string(src), "\ufeff")
	if t := strings.TrimLeft(s, " \t\r\n"); strings.HasPrefix(t, "{") {
		return "json"
	}
	for line := range strings.Lines(s) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if line == "---" || strings.HasPrefix(line, "--- ") || strings.HasPrefix(line, "%") || yamlKey.MatchString(line) {
			return "yaml"
		}
		return ""
	}
	return ""
}

var yamlKey = regexp.MustCompile(`^["']?[A-Za-z_][A-Za-z0-9_]*["']?\s*:(\s|$)`)

// parseInputs reads --input-file and --input values, typed by the
// workflow's declared inputs: a string input takes VALUE as it is, a
// duration input a duration literal (100ms, 1h30m), kept as that string
// as in JSON inputs; any other type parses the whole of VALUE as one JSON
// value, with the rules of --input-file (runtime.ParseInput).
func parseInputs(w *ir.Workflow, pairs []string, file string) (map[string]any, error) {
	in := map[string]any{}
	if file != "" {
		b, err := readInputFile(file)
		if err != nil {
			return nil, fmt.Errorf("--input-file: %w", err)
		}
		if in, err = runtime.DecodeInputs(b); err != nil {
			return nil, fmt.Errorf("--input-file %s: not a JSON object: %v", file, err)
		}
	}
	types := map[string]ir.Type{}
	for _, i := range w.Inputs {
		types[i.Name] = i.Type
	}
	for _, p := range pairs {
		name, val, ok := strings.Cut(p, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("--input %q: want NAME=VALUE", p)
		}
		t, known := types[name]
		if !known {
			return nil, fmt.Errorf("--input %s: the workflow has no input %q%s", p, name, inputList(w))
		}
		v, err := runtime.ParseInput(w, name, val)
		if err != nil {
			if t.Kind == ir.KindDuration {
				return nil, fmt.Errorf("--input %s: %s must be a duration like 100ms, 1h30m or 2s (units ns, us, ms, s, m, h)", p, name)
			}
			if t.Kind == ir.KindSecret {
				// Not the text: it may be the secret itself.
				return nil, fmt.Errorf("--input %s=…: %v; the secret's value comes from the worker ($WFC_SECRET_<name> or --secrets-file)", name, err)
			}
			return nil, fmt.Errorf("--input %s: %s must be %s written as JSON (%v)", p, name, t.String(), err)
		}
		in[name] = v
	}
	return in, nil
}

func inputList(w *ir.Workflow) string {
	if len(w.Inputs) == 0 {
		return " (it declares none)"
	}
	names := make([]string, len(w.Inputs))
	for i, in := range w.Inputs {
		names[i] = in.Name
	}
	return " (its inputs: " + strings.Join(names, ", ") + ")"
}

const workerDoc = `
Worker runs the nodes of workflows stored in a Redis: it reads ready
tokens from the queues, runs their handlers, and commits each transition
with one script. Start as many as you like, on as many machines as you
like; they share the work. On SIGINT or SIGTERM a worker stops claiming new
work and finishes (or releases) what it holds.

By default a worker serves the control queue (default), where every
built-in handler but exec runs, and with --allow-exec the queue h:exec, so
that it takes only work it can do; a node whose queue no live worker serves
waits, and 'wfc status' says so. --queues replaces that list (the worker
then fails a node whose handler it lacks); each is a queue name, 1 to 64
letters, digits, '.', '_', '-' or ':'. Workers record themselves in
the Redis and refresh the record every few seconds; one whose record is
older than --dead-after is removed from the queues' consumer groups once
its pending messages were claimed by others.

By default a worker adapts its concurrency, the handlers it runs at once:
it starts at 16 per CPU and, while its queues keep it busy, moves it (from
one per CPU to --max-concurrency) to the smallest that gets the most
executions through: high for handlers that wait on slow services, about
the knee where the CPU or Redis saturates for quick ones; it samples both
(the machine's CPU, its own, each Redis master's INFO cpu) and keeps
adding slots while neither is saturated (-v logs each change). --concurrency N fixes it at N.`

func runWorker(ctx context.Context, env *Env, args []string) int {
	fs := newFlags("worker", "wfc worker --redis URL [flags]", workerDoc)
	rf := addRuntimeFlags(fs, env)
	rf.values.addWorkerBounds(fs)
	queues := fs.String("queues", "", "comma-separated `QUEUES` to serve (default: the control queue, default, and h:exec with --allow-exec)")
	deadAfter := fs.Duration("dead-after", runtime.DefaultDeadAfter, "count a worker dead, and remove its consumer from the queues once it has no pending messages, when its registry heartbeat is older than `DURATION`")
	cf := addConcurrencyFlags(fs)
	hf := addHandlerFlags(fs, env)
	services := &serviceFlags{}
	fs.Var(services, "handler", "run handler `NAME=URL` as an HTTP service: each task is POSTed to URL and the JSON response is its output (docs/handlers.md); repeatable")
	mf := addModelFlags(fs, env)
	secretsFile := fs.String("secrets-file", "", "secrets for secret inputs: a JSON object of name -> value in `FILE` (mode 0600); also $WFC_SECRET_<name>")
	verbose := fs.Bool("v", false, "log each node execution")
	args, code, ok := fs.parse(env, args)
	if !ok {
		return code
	}
	if env, code, ok = rf.check(fs, env); !ok {
		return code
	}
	if len(args) > 0 {
		return fs.usageError(env, "worker takes no arguments")
	}
	var qs []string
	if *queues != "" {
		qs = strings.Split(*queues, ",")
		for _, q := range qs {
			// A name the runtime never routes to would be served forever
			// for nothing.
			if !runtime.ValidQueue(q) {
				return fs.usageError(env, "--queues: %q is not a queue name (1 to 64 letters, digits, '.', '_', '-' or ':')", q)
			}
		}
	}
	if *deadAfter <= 0 {
		return fs.usageError(env, "--dead-after must be a positive duration")
	}
	if code, ok := cf.check(env); !ok {
		return code
	}
	if *rf.redis == "" {
		return fs.usageError(env, "--redis (or $WFC_REDIS) is required: a worker serves a shared Redis")
	}
	reg, err := hf.registry()
	if err == nil {
		err = services.register(reg)
	}
	if err != nil {
		return fs.usageError(env, "%v", err)
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	secrets, err := runtime.LoadSecrets(*secretsFile, os.Environ())
	if err != nil {
		fmt.Fprintf(env.Stderr, "wfc worker: %v\n", err)
		return exitFailed
	}
	model, err := mf.client(env, slog.Default())
	if err != nil {
		return fs.usageError(env, "%v", err)
	}
	toolset, err := mf.toolset(env)
	if err != nil {
		return fs.usageError(env, "%v", err)
	}
	eng, err := rf.open(ctx, env, level)
	if err != nil {
		fmt.Fprintf(env.Stderr, "wfc worker: %v\n", err)
		return exitFailed
	}
	defer eng.Close()
	if secrets.Len() > 0 {
		// The names only, never a value.
		fmt.Fprintf(env.Stderr, "wfc worker: secrets %s\n", strings.Join(secrets.Names(), ", "))
	}
	wk := eng.StartWorkers(ctx, 0, cf.options(rf.values.worker(runtime.WorkerOptions{Queues: qs, Handlers: reg, Secrets: secrets, Model: model, Tools: toolset, AgentPatch: agentPatch(eng), DeadAfter: *deadAfter})))
	fmt.Fprintf(env.Stderr, "wfc worker: serving %s, queues %s (%s)\n", eng.RedisAddr(), strings.Join(wk.Queues(), ", "), cf.describe(wk))
	<-ctx.Done()
	fmt.Fprintln(env.Stderr, "wfc worker: stopping")
	eng.StopWorkers()
	return exitOK
}

const submitDoc = `
Submit starts a run of a workflow in a Redis and prints its run id; the
'wfc worker' processes serving that Redis execute it. FILE and inputs as
for 'wfc run'; --tag NAME runs the tag's current version instead (wfc
deploy). With --wait it then waits for the run like 'wfc run', -q
leaving out the progress lines. It warns when no live worker serves a
queue of the run (exec's h:exec needs a 'wfc worker --allow-exec'): the
run then waits until one starts.`

func runSubmit(ctx context.Context, env *Env, args []string) int {
	fs := newFlags("submit", "wfc submit --redis URL [flags] FILE", submitDoc)
	rf := addRuntimeFlags(fs, env)
	rf.addRetention(fs)
	rf.values.addInputBound(fs)
	var inputs listFlag
	fs.Var(&inputs, "input", "input `NAME=VALUE`; repeatable")
	inputFile := fs.String("input-file", "", "read inputs from a JSON object in `FILE`")
	wait := fs.Bool("wait", false, "wait for the run to end, printing progress, and exit like 'wfc run'")
	quiet := fs.Bool("q", false, "with --wait, do not print node progress")
	tag := fs.String("tag", "", "run the current version of the tag `NAME` (wfc deploy) instead of a file")
	env, args, code, ok := rf.parse(fs, env, args)
	if !ok {
		return code
	}
	if *tag != "" {
		return submitTag(ctx, env, fs, rf, *tag, args, inputs, *inputFile, *wait, *quiet)
	}
	if len(args) != 1 {
		return fs.usageError(env, "submit takes one workflow file")
	}
	if rf.badRetention() {
		return fs.usageError(env, "--retention must be 0 (keep forever) or a positive duration")
	}
	if *rf.redis == "" {
		return fs.usageError(env, "--redis (or $WFC_REDIS) is required; 'wfc run' runs a workflow without one")
	}
	w, in, code := prepareRun(ctx, env, "submit", args[0], inputs, *inputFile)
	if w == nil {
		return code
	}
	eng, code, ok := rf.openEngine(ctx, fs, env, slog.LevelWarn)
	if !ok {
		return code
	}
	defer eng.Close()
	id, err := eng.Submit(ctx, w, in)
	if err != nil {
		fmt.Fprintf(env.Stderr, "wfc submit: %v\n", err)
		return exitFailed
	}
	fmt.Fprintln(env.Stdout, id)
	return submitted(ctx, env, eng, w, id, *wait, *quiet)
}

// submitted is what submit does once its run started (of a file or of a
// tag): warn when no worker serves one of its queues, and with wait,
// watch it to its end and exit like 'wfc run'.
func submitted(ctx context.Context, env *Env, eng *runtime.Engine, w *ir.Workflow, id string, wait, quiet bool) int {
	// The run waits, visibly (wfc status), for a worker of each queue.
	if missing, _, err := unserved(ctx, eng, w, ""); err == nil && len(missing) > 0 {
		fmt.Fprintf(env.Stderr, "wfc submit: no live worker serves queue %s yet: the run waits until one starts\n", strings.Join(missing, ", "))
	}
	if !wait {
		return exitOK
	}
	st, err := watch(ctx, env, eng, id, !quiet)
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintf(env.Stderr, "wfc submit: interrupted; run %s goes on\n", id)
		} else {
			fmt.Fprintf(env.Stderr, "wfc submit: %v\n", err)
		}
		return exitFailed
	}
	return finish(env, "submit", st, false)
}

// runOnRun is the shape of status, cancel, retry and events: one run id
// against a Redis.
func runOnRun(name, doc string, act func(ctx context.Context, env *Env, eng *runtime.Engine, id string, jsonOut bool) int) func(context.Context, *Env, []string) int {
	return runOnRunFlags(name, doc, func(*flags) func(ctx context.Context, env *Env, eng *runtime.Engine, id string, jsonOut bool) int {
		return act
	})
}

// runOnRunFlags is runOnRun for a command with flags of its own: setup
// defines them and returns the action.
func runOnRunFlags(name, doc string, setup func(fs *flags) func(ctx context.Context, env *Env, eng *runtime.Engine, id string, jsonOut bool) int) func(context.Context, *Env, []string) int {
	return func(ctx context.Context, env *Env, args []string) int {
		fs := newFlags(name, "wfc "+name+" --redis URL [flags] RUN", doc)
		act := setup(fs)
		rf := addRuntimeFlags(fs, env)
		jsonOut := fs.Bool("json", false, "print JSON")
		env, args, code, ok := rf.parse(fs, env, args)
		if !ok {
			return code
		}
		if len(args) != 1 {
			return fs.usageError(env, "%s takes one run id", name)
		}
		eng, code, ok := rf.openShared(ctx, fs, env)
		if !ok {
			return code
		}
		defer eng.Close()
		return act(ctx, env, eng, args[0], *jsonOut)
	}
}

func runStatus(ctx context.Context, env *Env, eng *runtime.Engine, id string, jsonOut bool) int {
	st, err := eng.Status(ctx, id)
	if err != nil {
		fmt.Fprintf(env.Stderr, "wfc status: %v\n", err)
		return exitFailed
	}
	if jsonOut {
		return writeJSON(env, "status", "the run's status", st)
	}
	writeStatus(env.Stdout, st)
	return exitOK
}

func writeStatus(w io.Writer, st *runtime.Status) {
	fmt.Fprintf(w, "run %s  workflow %s  %s\n", st.RunID, st.Workflow, st.State)
	if st.Error != "" {
		fmt.Fprintf(w, "error: %s\n", st.Error)
	}
	keys := make([]string, 0, len(st.Nodes))
	for k := range st.Nodes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if st.Waiting != "" {
		fmt.Fprintf(w, "waiting: %s (the run's control tokens: deadline, outputs, finally)\n", st.Waiting)
	}
	for _, k := range keys {
		n := st.Nodes[k]
		line := fmt.Sprintf("  %-24s %s", k, n.State)
		if n.Error != "" {
			line += ": " + n.Error
		}
		if n.Waiting != "" {
			line += " (waiting: " + n.Waiting + ")"
		}
		switch {
		case n.Signal != "":
			line += fmt.Sprintf(" for signal %q", n.Signal)
			if n.Correlation != "" {
				line += fmt.Sprintf(" correlation %q", n.Correlation)
			}
			if !n.Due.IsZero() {
				line += " (times out at " + n.Due.Format(time.RFC3339Nano) + ")"
			}
		case !n.Due.IsZero():
			line += " until " + n.Due.Format(time.RFC3339Nano)
		}
		if n.Child != "" {
			line += " (child run " + n.Child + ")"
		}
		fmt.Fprintln(w, line)
	}
	// The other child runs: a for_each flow node's items', and earlier
	// attempts'.
	shown := map[string]bool{}
	for _, n := range st.Nodes {
		shown[n.Child] = true
	}
	var kids []string
	for c := range st.Children {
		if !shown[c] {
			kids = append(kids, c)
		}
	}
	sort.Slice(kids, func(i, j int) bool {
		a, b := st.Children[kids[i]], st.Children[kids[j]]
		return a < b || a == b && kids[i] < kids[j]
	})
	for _, c := range kids {
		fmt.Fprintf(w, "  child run %s of %s\n", c, st.Children[c])
	}
	for _, a := range st.Approvals {
		if a.State == runtime.ApprovalOpen {
			esc := ""
			switch {
			case !a.Escalated.IsZero():
				esc = "; escalated to " + strings.Join(a.EscalateTo, ", ")
			case len(a.EscalateTo) > 0:
				esc = fmt.Sprintf("; escalates to %s at %s", strings.Join(a.EscalateTo, ", "), a.EscalateAt.Format(time.RFC3339))
			}
			fmt.Fprintf(w, "approval %s: open, approvers %s%s (wfc approve %s %s)\n", a.Exec, strings.Join(a.Approvers, ", "), esc, st.RunID, a.Exec)
		}
	}
	if len(st.Result) > 0 {
		fmt.Fprintf(w, "result: %s\n", st.Result)
	}
	if !st.Expires.IsZero() {
		fmt.Fprintf(w, "expires: %s (the run's keys are deleted then; it becomes unknown)\n", st.Expires.Format(time.RFC3339))
	}
}

func runCancel(ctx context.Context, env *Env, eng *runtime.Engine, id string, _ bool) int {
	if err := eng.Cancel(ctx, id); err != nil {
		fmt.Fprintf(env.Stderr, "wfc cancel: %v\n", err)
		return exitFailed
	}
	fmt.Fprintf(env.Stderr, "run %s: cancelled\n", id)
	return exitOK
}

func runRetry(ctx context.Context, env *Env, eng *runtime.Engine, id string, _ bool) int {
	if err := eng.Retry(ctx, id); err != nil {
		fmt.Fprintf(env.Stderr, "wfc retry: %v\n", err)
		return exitFailed
	}
	fmt.Fprintf(env.Stderr, "run %s: retrying the failed part (completed nodes keep their outputs)\n", id)
	return exitOK
}

// eventsCmd is wfc events: --children adds the events of the run's child
// runs (flow nodes), each after the event that started it.
func eventsCmd(fs *flags) func(ctx context.Context, env *Env, eng *runtime.Engine, id string, jsonOut bool) int {
	children := fs.Bool("children", false, "also print the events of the run's child runs (flow nodes; their children too), each after the event that started it")
	return func(ctx context.Context, env *Env, eng *runtime.Engine, id string, jsonOut bool) int {
		if !*children || jsonOut {
			return runEvents(ctx, env, eng, id, jsonOut)
		}
		if err := writeEventTree(ctx, env.Stdout, eng, id, "", 0); err != nil {
			fmt.Fprintf(env.Stderr, "wfc events: %v\n", err)
			return exitFailed
		}
		return exitOK
	}
}

// writeEventTree prints a run's events, and after each event that started
// a child run (node.waiting, item.flow with field child) the child's
// events, indented.
func writeEventTree(ctx context.Context, w io.Writer, eng *runtime.Engine, id, indent string, depth int) error {
	evs, err := eng.Events(ctx, id)
	if err != nil {
		return err
	}
	for _, ev := range evs {
		writeEvent(w, ev, indent)
		if c := ev.Fields["child"]; c != "" && depth < ir.MaxFlowDepth {
			fmt.Fprintf(w, "%s  child run %s:\n", indent, c)
			if err := writeEventTree(ctx, w, eng, c, indent+"    ", depth+1); err != nil {
				fmt.Fprintf(w, "%s    (%v)\n", indent, err)
			}
		}
	}
	return nil
}

func writeEvent(w io.Writer, ev runtime.Event, indent string) {
	keys := make([]string, 0, len(ev.Fields))
	for k := range ev.Fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%s", k, ev.Fields[k])
	}
	fmt.Fprintf(w, "%s%s %-18s%s\n", indent, ev.Time.Format("15:04:05.000"), ev.Type, b.String())
}

func runEvents(ctx context.Context, env *Env, eng *runtime.Engine, id string, jsonOut bool) int {
	evs, err := eng.Events(ctx, id)
	if err != nil {
		fmt.Fprintf(env.Stderr, "wfc events: %v\n", err)
		return exitFailed
	}
	if jsonOut {
		if evs == nil {
			evs = []runtime.Event{}
		}
		return writeJSON(env, "events", "the run's events", evs)
	}
	for _, ev := range evs {
		writeEvent(env.Stdout, ev, "")
	}
	return exitOK
}

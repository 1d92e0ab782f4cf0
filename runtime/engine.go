package runtime

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/runtime/handlers"
	"github.com/wfc-lang/wfc/runtime/internal/trips"
)

// Options configure an Engine.
type Options struct {
	// RedisURL is the Redis server, e.g. "redis://localhost:6379/0", or a
	// Redis Cluster: "redis+cluster://host:port,host:port" (seed nodes;
	// rediss+cluster:// for TLS; go-redis cluster URL options may follow
	// after "?"). Empty starts an embedded in-process server (miniredis)
	// that keeps everything in memory: runs are lost when the process
	// exits. On a cluster, Shards spreads the runs over the slots.
	RedisURL string
	// RedisTLS, for a rediss:// URL, replaces go-redis's TLS settings
	// (the system roots; SSL_CERT_FILE names another bundle): RootCAs for
	// a private CA, Certificates for a client certificate. Its ServerName
	// defaults to the URL's host. It is an error with a URL without TLS.
	RedisTLS *tls.Config
	// Shards is the number of shards runs are spread over (default 1).
	// Every process of a deployment must use the same value.
	Shards int
	// Prefix of every key (default "wf").
	Prefix string
	// Queues maps handler names to queues. A handler not listed goes to
	// the control queue ("default") when it is a core handler
	// (handlers.Core: every worker runs it), else to a queue of its own,
	// HandlerQueue(name) ("h:exec" for exec), which by default only
	// workers that can run it serve. Submitting processes decide where
	// tokens go; workers choose the queues they serve.
	Queues map[string]string
	// Private, when set, keeps the engine's runs to the engine's own
	// workers (`wfc run --redis`): their control queue gets a random name
	// ("p." and 16 hex digits) that only workers of this engine serve by
	// default, and every handler Private can run goes there too; the
	// other handlers go to their usual queues, for other workers. Those
	// workers run Private's handlers unless WorkerOptions.Handlers says
	// otherwise; they serve no other queue by default, so that they take
	// no other run's work. DropPrivate deletes the private queues and
	// graphs once the runs ended.
	Private *handlers.Registry
	// MaxHops and MaxFanout apply when a workflow does not set them
	// (defaults 10,000 and 1,000).
	MaxHops   int
	MaxFanout int
	// MaxInputBytes bounds a run's inputs as JSON (default 1 MiB): every
	// execution of the run reads them. A workflow's max_input_bytes lowers
	// it for its runs; it cannot raise it.
	MaxInputBytes int
	// Retention is how long a run's keys (meta, state, outputs, event log,
	// ...) are kept once the run ends: when it completes, is cancelled, or
	// fails and its compensations are done, every key of the run gets this
	// expiry in the same script. 0 means DefaultRetention (7 days); a
	// negative value keeps them forever. The value is stored with the run
	// when it is submitted (WithRetention overrides it per run), so the
	// workers and the process that ends the run need not agree on it. A
	// partial retry (Retry) removes the expiry until the run ends again.
	Retention time.Duration
	// ConnectTimeout bounds how long Open waits for Redis (default 5 s);
	// the embedded server, listening once started, waits up to 2 min.
	ConnectTimeout time.Duration
	// Logger receives the engine's and its workers' logs (default
	// slog.Default()), and go-redis's own lines (failed dials, dropped
	// connections) at debug level: go-redis has one logger per process,
	// so they go to the logger of the engine opened last.
	Logger *slog.Logger

	// generalOnly (tests): runs start without the fast path
	// (begin.lua), so that a test can compare it with start.lua.
	generalOnly bool
	// flowHook (tests): called by a worker starting a flow node's child
	// run, after the flow script recorded it ("recorded") and after the
	// submit ("submitted"), so that a test can kill the worker there.
	flowHook func(ctx context.Context, phase, child string)
}

// DefaultRetention is how long the keys of an ended run are kept when
// Options.Retention is 0.
const DefaultRetention = 7 * 24 * time.Hour

// KeepForever as a retention keeps an ended run's keys forever.
const KeepForever time.Duration = -1

// An Engine runs workflows on Redis: it submits runs, reports their
// status and events, cancels and retries them, and starts workers.
type Engine struct {
	opts Options
	st   *store
	mini *miniredis.Miniredis
	url  string // the embedded server's URL, with its password (tests connect with it)
	log  *slog.Logger
	addr string

	ctl string // the control queue of the engine's runs

	mu     sync.Mutex
	stored map[int][]string // private mode: the graph suffixes stored, by shard
	plans  map[string]*plan // by IR hash
	groups map[string]bool  // streams whose consumer group exists
	bg     []*bgWorker
	closed bool

	trips trips.Counter
	subm  *submitter // Submit's batcher (submit.go)
}

// RoundTrips returns how many round trips the engine and its workers have
// made to Redis (a pipeline counts once).
func (e *Engine) RoundTrips() int64 { return e.trips.Load() }

// RunKeys returns the Redis keys that hold a run's state and event log.
func (e *Engine) RunKeys(run string) []string {
	keys := e.st.ks.runKeys(run)
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		if k != "" {
			out = append(out, k)
		}
	}
	return out
}

type bgWorker struct {
	w      *Worker
	cancel context.CancelFunc
	done   chan struct{}
}

// Open connects to Redis (or starts the embedded server), loads the
// scripts, and returns an engine. It retries with backoff for
// ConnectTimeout and then reports the server it could not reach.
func Open(ctx context.Context, opts Options) (*Engine, error) {
	if opts.Shards < 0 {
		return nil, fmt.Errorf("runtime: %d shards: want 1 or more", opts.Shards)
	}
	if opts.Shards == 0 {
		opts.Shards = 1
	}
	for h, q := range opts.Queues {
		if !ValidQueue(q) {
			return nil, fmt.Errorf("runtime: handler %s: queue %q: a queue name is 1 to 64 characters of [A-Za-z0-9._:-]", h, q)
		}
	}
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if opts.MaxHops <= 0 {
		opts.MaxHops = 10_000
	}
	if opts.MaxFanout <= 0 {
		opts.MaxFanout = 1_000
	}
	if opts.MaxInputBytes <= 0 {
		opts.MaxInputBytes = DefaultMaxValueBytes
	}
	if opts.Retention == 0 {
		opts.Retention = DefaultRetention
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = 5 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	e := &Engine{opts: opts, log: opts.Logger, plans: map[string]*plan{}, groups: map[string]bool{}, ctl: ControlQueue, stored: map[int][]string{}}
	if opts.Private != nil {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("runtime: naming the private queue: %w", err)
		}
		e.ctl = "p." + hex.EncodeToString(b[:])
	}
	routeRedisLogs(opts.Logger)
	url := opts.RedisURL
	if url == "" {
		// The embedded server listens on a loopback port; a random password
		// keeps the other processes of the machine out (they could submit
		// runs to this process's workers, exec ones included).
		m := miniredis.NewMiniRedis()
		pw, err := randomPassword()
		if err != nil {
			return nil, fmt.Errorf("runtime: starting the embedded Redis: %w", err)
		}
		m.RequireAuth(pw)
		if err := m.Start(); err != nil {
			return nil, fmt.Errorf("runtime: starting the embedded Redis: %w", err)
		}
		e.mini = m
		url = "redis://:" + pw + "@" + m.Addr()
		e.url = url
	}
	// The blocking pool holds the readers (one per shard and worker) and
	// Wait calls.
	cl, err := newClients(url, 2*opts.Shards+8, opts.RedisTLS)
	if err != nil {
		e.closeServer()
		return nil, fmt.Errorf("runtime: bad Redis URL: %w", err)
	}
	e.addr = cl.addr
	rdb, blk := cl.rdb, cl.blk
	rdb.AddHook(&e.trips)
	blk.AddHook(&e.trips)
	st, err := newStore(rdb, blk, newKeyspace(opts.Prefix, opts.Shards))
	if err != nil {
		rdb.Close()
		blk.Close()
		e.closeServer()
		return nil, err
	}
	e.st = st
	e.subm = newSubmitter(rdb, e.log)
	connect := opts.ConnectTimeout
	if e.mini != nil {
		// The embedded server listens already (Start returned): Open only
		// waits for it to answer and to load the scripts, which a loaded
		// machine slows (64 engines opening at once on 2 busy cores took
		// over 5 s) but cannot make fail. The deadline is a hang guard.
		connect = max(connect, embeddedConnectTimeout)
	}
	cctx, cancel := context.WithTimeout(ctx, connect)
	defer cancel()
	b := newBackoff()
	// last: the cause to report — the last error the connect deadline did
	// not cause ("connection refused", not "context deadline exceeded").
	var last error
	for {
		err = rdb.Ping(cctx).Err()
		if err == nil {
			err = st.load(cctx)
		}
		if err == nil {
			break
		}
		if cctx.Err() == nil || last == nil {
			last = err
		}
		if permanentConnErr(err) {
			// A refused login does not heal by retrying until the
			// deadline: say so at once.
			e.Close()
			return nil, fmt.Errorf("runtime: Redis at %s refused the login: %w", e.addr, err)
		}
		if !sleepCtx(cctx, b.next()) {
			// (Dial before Close, which stops the embedded server.)
			if errors.Is(last, context.DeadlineExceeded) {
				// go-redis retried its dials until the deadline: dial once
				// to say why.
				for _, a := range strings.Split(strings.TrimPrefix(e.addr, "cluster "), ",") {
					if c, err := net.DialTimeout("tcp", a, time.Second); err != nil {
						last = err
						break
					} else {
						c.Close()
					}
				}
			}
			e.Close()
			return nil, fmt.Errorf("runtime: cannot reach Redis at %s: %w", e.addr, last)
		}
	}
	return e, nil
}

// permanentConnErr reports a Redis error that retrying the connection
// cannot fix: wrong credentials (WRONGPASS, NOAUTH) or an ACL user lacking
// a permission the runtime needs (NOPERM), as go-redis classifies them.
// The messages carry no password.
func permanentConnErr(err error) bool {
	return err != nil && (redis.IsAuthError(err) || redis.IsPermissionError(err))
}

// embeddedConnectTimeout is Open's hang guard for the embedded server
// (Options.ConnectTimeout is for a Redis that may not be up yet).
const embeddedConnectTimeout = 2 * time.Minute

func (e *Engine) closeServer() {
	if e.mini != nil {
		e.mini.Close()
	}
}

// Embedded reports whether the engine runs on the embedded in-memory
// server. Its runs are not durable: the CLI should say "embedded Redis:
// in-memory only".
func (e *Engine) Embedded() bool { return e.mini != nil }

// RedisAddr returns the address of the Redis server in use (for the
// embedded server, the loopback address it listens on).
// For a cluster it is "cluster " and the seed nodes.
func (e *Engine) RedisAddr() string { return e.addr }

// EmbeddedURL is the URL of the embedded server, password included, for
// other clients in the same process ("" when the engine uses a Redis URL).
// It is a secret: never print or log it.
func (e *Engine) EmbeddedURL() string { return e.url }

// Close stops the workers started with StartWorkers, closes the
// connections and stops the embedded server.
func (e *Engine) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	bg := e.bg
	e.bg = nil
	e.mu.Unlock()
	for _, b := range bg {
		b.cancel()
	}
	for _, b := range bg {
		<-b.done
	}
	var errs []error
	if e.st != nil {
		errs = append(errs, e.st.rdb.Close(), e.st.blk.Close())
	}
	e.closeServer()
	return errors.Join(errs...)
}

// StartWorkers starts a background worker with concurrency n (and the
// given options, if any) that runs until ctx is done or the engine is
// closed. It returns the worker.
func (e *Engine) StartWorkers(ctx context.Context, n int, opts ...WorkerOptions) *Worker {
	var o WorkerOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	if n > 0 {
		o.Concurrency = n
	}
	if o.Logger == nil {
		o.Logger = e.log
	}
	w := e.NewWorker(o)
	wctx, cancel := context.WithCancel(ctx)
	b := &bgWorker{w: w, cancel: cancel, done: make(chan struct{})}
	go func() { defer close(b.done); w.Run(wctx) }()
	e.mu.Lock()
	e.bg = append(e.bg, b)
	e.mu.Unlock()
	return w
}

// StopWorkers stops the workers started with StartWorkers, gracefully,
// and waits for them.
func (e *Engine) StopWorkers() {
	e.mu.Lock()
	bg := e.bg
	e.bg = nil
	e.mu.Unlock()
	for _, b := range bg {
		b.cancel()
	}
	for _, b := range bg {
		<-b.done
	}
}

// queueOf is the queue of a handler's tokens (Options.Queues).
func (e *Engine) queueOf(handler string) string {
	if e.opts.Private != nil && e.opts.Private.Can(handler) {
		return e.ctl
	}
	if q := e.opts.Queues[handler]; q != "" {
		return q
	}
	if handlers.Core(handler) {
		return e.ctl
	}
	return HandlerQueue(handler)
}

// HandlerQueue is the queue of a handler that is not a core handler
// (handlers.Core) and that Options.Queues does not route: "h:" and its
// name, or for a name that cannot be part of a queue name (ValidQueue),
// "h:" and 16 hex digits of its SHA-256. A worker serves by default the
// control queue and the HandlerQueue of every other handler it can run.
func HandlerQueue(handler string) string {
	if q := "h:" + handler; ValidQueue(q) {
		return q
	}
	sum := sha256.Sum256([]byte(handler))
	return "h:" + hex.EncodeToString(sum[:8])
}

// ControlQueue returns the control queue of the engine's runs: "default",
// or with Options.Private a queue of the engine's own.
func (e *Engine) ControlQueue() string { return e.ctl }

// QueuesOf returns the queues a run of w would use, each with the handlers
// whose tokens go there (none for a queue of control tokens only), so that
// a caller can check that workers serve them.
func (e *Engine) QueuesOf(w *ir.Workflow) (map[string][]string, error) {
	p, err := e.plan(w)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, q := range p.queues {
		out[q] = nil
	}
	add := func(q, h string) {
		if h != "" && !slices.Contains(out[q], h) {
			out[q] = append(out[q], h)
		}
	}
	for _, n := range p.w.Nodes {
		g := p.graph[n.ID]
		add(g.Q, n.Handler)
		if n.Dispatch != nil {
			for _, h := range n.Dispatch.Handlers {
				add(g.Q, h)
			}
		}
		if n.Compensate != nil {
			add(g.CQ, n.Compensate.Handler)
		}
	}
	if p.w.Finally != nil {
		add(cmp.Or(p.info.FQ, p.info.Ctl), p.w.Finally.Handler)
	}
	return out, nil
}

// plan returns the prepared plan of w, caching by IR hash.
func (e *Engine) plan(w *ir.Workflow) (*plan, error) {
	if err := CheckSupported(w); err != nil {
		return nil, err
	}
	hash, err := ir.Hash(w)
	if err != nil {
		return nil, fmt.Errorf("runtime: hashing IR: %w", err)
	}
	e.mu.Lock()
	p := e.plans[hash]
	e.mu.Unlock()
	if p != nil {
		return p, nil
	}
	p, err = newPlan(w, e.queueOf, e.ctl)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	if len(e.plans) > 1000 {
		clear(e.plans)
	}
	e.plans[hash] = p
	e.mu.Unlock()
	return p, nil
}

// cachedPlan returns the plan of the IR hash when this engine planned it
// (e.plans), else nil.
func (e *Engine) cachedPlan(hash string) *plan {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.plans[hash]
}

// A SubmitOption changes how Submit starts a run.
type SubmitOption func(*submitConfig)

type submitConfig struct {
	runID     string
	parent    *parentLink // a child run of a flow node (flow.go)
	recorder  string      // the run that recorded this one as its child before the submit (recordedBy)
	retention time.Duration
	setRet    bool
}

// WithRetention sets how long this run's keys are kept once it ends,
// instead of Options.Retention; 0 or negative keeps them forever.
func WithRetention(d time.Duration) SubmitOption {
	return func(c *submitConfig) { c.retention, c.setRet = d, true }
}

// WithRunID gives the run an id chosen by the caller (1 to 128 of
// [A-Za-z0-9_.-]). Submitting the same workflow again with the same id
// returns the existing run, so a submit can be retried safely.
func WithRunID(id string) SubmitOption { return func(c *submitConfig) { c.runID = id } }

// ErrRunExists is returned when WithRunID names a run of another workflow.
var ErrRunExists = errors.New("run exists")

// Submit validates the workflow and the inputs, stores the IR by content
// hash and starts a run. Nothing is written when the workflow or the inputs
// are invalid (missing required inputs, wrong types, unknown names). It
// returns the run id. The engine plans a copy of w, so w may change
// afterwards. A caller submitting one workflow many times can Prepare it
// once and use SubmitPrepared. Concurrent Submits share round trips to
// Redis (the submit batcher, submit.go), each with its own result.
func (e *Engine) Submit(ctx context.Context, w *ir.Workflow, inputs map[string]any, opts ...SubmitOption) (string, error) {
	p, err := e.plan(w)
	if err != nil {
		return "", err
	}
	return e.submit(ctx, p, inputs, opts)
}

// submit starts a run of a plan: Submit once the workflow is planned.
func (e *Engine) submit(ctx context.Context, p *plan, inputs map[string]any, opts []SubmitOption) (string, error) {
	var c submitConfig
	for _, o := range opts {
		o(&c)
	}
	in, err := e.checkInputs(p, inputs)
	if err != nil {
		return "", err
	}
	run := c.runID
	if run == "" {
		run = newRunID()
	} else if !validRunID(run) {
		return "", fmt.Errorf("runtime: bad run id %q: use 1 to 128 of [A-Za-z0-9_.-]", run)
	}
	shard := e.st.ks.shard(run)
	if err := e.storePlan(ctx, p, shard); err != nil {
		return "", err
	}
	ret := e.opts.Retention
	if c.setRet {
		ret = c.retention
	}
	var retMS int64
	if ret > 0 {
		retMS = max(ret.Milliseconds(), 1)
	}
	maxHops, maxFan := p.w.Settings.MaxHops, p.w.Settings.MaxFanout
	if maxHops <= 0 {
		maxHops = e.opts.MaxHops
	}
	if maxFan <= 0 {
		maxFan = e.opts.MaxFanout
	}
	ref := runRef{id: run, graph: p.suffix, queues: p.queues}
	args := startArgs{
		base: e.st.base(ref, nil), IR: p.hash, Graph: p.suffix, Workflow: p.w.Name, Inputs: string(in),
		Entries: p.entries, DeadlineMS: p.w.Settings.DeadlineMS, MaxHops: maxHops, MaxFanout: maxFan,
		Retention: retMS, Parent: c.parent, Recorder: c.recorder, Admit: c.parent == nil && c.recorder == "",
	}
	if args.DeadlineMS > 0 {
		args.DeadlineAt = nowMS() + args.DeadlineMS
	}
	// The run index (runindex.go) is written in the start script's round
	// trip, before it (submitter.run).
	res, err := e.begin(ctx, p, ref, args)
	if err == nil && res == "" {
		res, err = e.start(ctx, ref, args)
	}
	if err != nil && strings.Contains(err.Error(), "is not stored") {
		// Redis lost what this process stored earlier (a restart without
		// persistence, a flush): store it again, once.
		e.forgetPlan(p, shard)
		if err = e.storePlan(ctx, p, shard); err == nil {
			res, err = e.start(ctx, ref, args)
		}
	}
	if err != nil {
		return "", fmt.Errorf("runtime: starting run: %w", err)
	}
	if res == "unrecorded" {
		return "", errChildUnrecorded
	}
	if res == "exists" {
		m, err := e.st.meta(ctx, run)
		if err != nil {
			return "", err
		}
		if m.IR != p.hash {
			return "", fmt.Errorf("runtime: %w: %s runs workflow %s (IR %s)", ErrRunExists, run, m.Workflow, m.IR)
		}
	}
	return run, nil
}

// prepare plans w and checks the inputs of a run of it: what Submit
// refuses before it writes anything (a flow node checks its child with it
// before recording the child: flow.go).
func (e *Engine) prepare(w *ir.Workflow, inputs map[string]any) (*plan, json.RawMessage, error) {
	p, err := e.plan(w)
	if err != nil {
		return nil, nil, err
	}
	in, err := e.checkInputs(p, inputs)
	if err != nil {
		return nil, nil, err
	}
	return p, in, nil
}

// checkInputs validates the inputs of a run of p and returns them as JSON.
func (e *Engine) checkInputs(p *plan, inputs map[string]any) (json.RawMessage, error) {
	in, err := ValidateInputs(p.w, inputs)
	if err != nil {
		return nil, err
	}
	if max := effectiveLimit(p.w.Settings.MaxInputBytes, e.opts.MaxInputBytes); len(in) > max {
		return nil, &InputError{Problems: []string{fmt.Sprintf("the inputs are %d bytes, over the limit of %d (max_input_bytes)", len(in), max)}}
	}
	return in, nil
}

// startArgs are start.lua's arguments (begin.lua takes the same ones, in
// positions).
type startArgs struct {
	base
	IR         string      `json:"ir"`
	Graph      string      `json:"graph"`
	Workflow   string      `json:"workflow"`
	Inputs     string      `json:"inputs"`
	Entries    [][2]string `json:"entries"`
	DeadlineMS int64       `json:"deadline_ms"`
	DeadlineAt int64       `json:"deadline_at"`
	MaxHops    int         `json:"max_hops"`
	MaxFanout  int         `json:"max_fanout"`
	Retention  int64       `json:"retention"`
	Parent     *parentLink `json:"parent,omitempty"`
	// Recorder: the run that recorded this one as its child (ch|, cp|)
	// before submitting it, without a flow node's link (an agent's
	// delegated run: agenttools.go). It starts only while that record
	// stands, as a flow node's child does.
	Recorder string `json:"recorder,omitempty"`
	// Admit: a new run, whose entry tokens wait for admission in the
	// entry streams (a child run's go to the streams: its parent is in
	// flight). docs/runtime.md, "Scheduling".
	Admit bool `json:"admit,omitempty"`
}

// start runs start.lua, with the admission keys after the run keys for a
// run that waits for admission.
func (e *Engine) start(ctx context.Context, ref runRef, a startArgs) (string, error) {
	return e.st.callWith(ctx, "start", ref, a, func(s *redis.Script, keys []string, arg string) (any, error) {
		if a.Admit {
			keys = append(keys, e.st.ks.admitKeys(ref.id, ref.queues)...)
		} else if a.Parent != nil {
			keys = append(keys, e.st.ks.state(a.Parent.Run)) // the record of the child (flow.go)
		} else if a.Recorder != "" {
			keys = append(keys, e.st.ks.state(a.Recorder))
		}
		return e.subm.run(e.startCall(ctx, s, ref.id, keys, arg))
	})
}

// startCall is a call of a script that starts run, with its index entry.
func (e *Engine) startCall(ctx context.Context, sc *redis.Script, run string, keys []string, args ...any) *startCall {
	return &startCall{ctx: ctx, sc: sc, keys: keys, args: args, idx: e.st.ks.runIndex(e.st.ks.shard(run)), run: run}
}

// begin is start's fast path (scripts/begin.lua) for a workflow whose
// entry nodes are outside loops. It returns "" when the case does not
// apply or the script declined, and start runs.
func (e *Engine) begin(ctx context.Context, p *plan, ref runRef, a startArgs) (string, error) {
	if e.opts.generalOnly || a.Parent != nil || a.Recorder != "" {
		return "", nil // begin.lua does not check a parent's record
	}
	if len(ref.queues) == 0 {
		return "", nil
	}
	i64 := func(n int64) string { return strconv.FormatInt(n, 10) }
	args := []any{a.Run, a.Now, a.IR, a.Graph, strings.Join(a.Queues, ","), a.Workflow, a.Inputs,
		i64(a.DeadlineMS), i64(a.DeadlineAt), strconv.Itoa(a.MaxHops), strconv.Itoa(a.MaxFanout), i64(a.Retention)}
	for _, en := range a.Entries {
		g := p.graph[en[0]]
		q := 0
		if g != nil {
			q = ref.queueIndex(g.Q)
		}
		if en[1] != "" || q == 0 {
			return "", nil
		}
		args = append(args, en[0], q)
	}
	res, err := replyText(e.subm.run(e.startCall(ctx, e.st.scripts["begin"], ref.id, e.st.ks.beginKeys(ref.id, ref.graph, ref.queues), args...)))
	if err != nil {
		return "", err
	}
	if res == "slow" {
		return "", nil
	}
	return res, nil
}

// Status returns the state of a run.
func (e *Engine) Status(ctx context.Context, run string) (*Status, error) {
	if !validRunID(run) {
		return nil, fmt.Errorf("%w %q", ErrUnknownRun, run)
	}
	return e.st.status(ctx, run)
}

// Events returns a run's event log, oldest first.
func (e *Engine) Events(ctx context.Context, run string) ([]Event, error) {
	if !validRunID(run) {
		return nil, fmt.Errorf("%w %q", ErrUnknownRun, run)
	}
	if _, err := e.st.meta(ctx, run); err != nil {
		return nil, err
	}
	return e.st.events(ctx, run, "", 0)
}

// Wait blocks until the run is done (completed, failed or cancelled, with
// its compensations finished) or ctx ends, and returns its status.
func (e *Engine) Wait(ctx context.Context, run string) (*Status, error) {
	if !validRunID(run) {
		return nil, fmt.Errorf("%w %q", ErrUnknownRun, run)
	}
	key := e.st.ks.events(run)
	// check reads the run's own fields (its last event first, in the same
	// round trip: an event appended after it wakes the read below) and,
	// once the run is done, its whole status (its state hash: every
	// execution; reading that on every event held Redis for 10 ms a time
	// in a run of 10,000 nodes).
	check := func() (st *Status, last string, err error) {
		pipe := e.st.rdb.Pipeline()
		lastc := pipe.XRevRangeN(ctx, key, "+", "-", 1)
		metac := e.st.ks.readMetaLean(ctx, pipe, run)
		_, _ = pipe.Exec(ctx)
		last = "0"
		if msgs, err := lastc.Result(); err == nil && len(msgs) > 0 {
			last = msgs[0].ID
		}
		vals, err := metac.Result()
		if err != nil {
			return nil, last, err
		}
		m, err := parseMeta(run, metaMapLean(vals))
		if err != nil {
			return nil, last, err
		}
		st = &Status{State: m.Status, Compensation: m.Comp, Finally: m.Finally}
		if st.Done() {
			st, err = e.st.status(ctx, run)
		}
		return st, last, err
	}
	for {
		st, last, err := check()
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if errors.Is(err, ErrUnknownRun) {
				return nil, e.st.explainUnknown(ctx, run, err)
			}
			e.log.Warn("wfc: reading run status; retrying", "run", run, "err", err)
			if !sleepCtx(ctx, time.Second) {
				return nil, ctx.Err()
			}
			continue
		}
		if st.Done() {
			return st, nil
		}
		// Wait for events, at most a second at a time, and check the run
		// again only after one that may end it (the run's, its
		// compensation's or its finally's), or after a second without any
		// (a run's keys may also expire or be deleted): the events of its
		// nodes, most of them, cost one read each.
		for {
			res, err := e.st.blk.XRead(ctx, &redis.XReadArgs{Streams: []string{key, last}, Count: 100, Block: time.Second}).Result()
			if ctx.Err() != nil {
				return st, ctx.Err()
			}
			if err != nil {
				if err != redis.Nil && !isTimeout(err) {
					sleepCtx(ctx, 100*time.Millisecond)
				}
				break
			}
			if mayEnd(res, &last) {
				break
			}
		}
	}
}

// mayEnd reports whether events read from a run's log may have ended it:
// any but a node's, an item's, an approval's, a signal's or a join's
// (which never end a run by themselves: the run's own event follows), and
// advances last to the last one read.
func mayEnd(res []redis.XStream, last *string) bool {
	end := false
	for _, s := range res {
		for _, m := range s.Messages {
			*last = m.ID
			typ, _ := m.Values["type"].(string)
			kind, _, _ := strings.Cut(typ, ".")
			switch kind {
			case "node", "item", "approval", "signal", "join":
			default:
				end = true
			}
		}
	}
	return end
}

// Follow calls fn for every event of the run's log, oldest first, as they
// are appended, until the run is done (see Wait), and returns its final
// status. An error from fn stops Follow and is returned. `wfc run` uses it
// to print progress.
func (e *Engine) Follow(ctx context.Context, run string, fn func(Event) error) (*Status, error) {
	if _, err := e.meta(ctx, run); err != nil {
		return nil, err
	}
	key := e.st.ks.events(run)
	last := "0"
	emit := func(msgs []redis.XMessage) error {
		for _, ev := range parseEvents(msgs) {
			if err := fn(ev); err != nil {
				return err
			}
			last = ev.ID
		}
		return nil
	}
	for {
		res, err := e.st.blk.XRead(ctx, &redis.XReadArgs{Streams: []string{key, last}, Count: 100, Block: time.Second}).Result()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		check := false
		switch {
		case err == nil:
			for _, s := range res {
				for _, m := range s.Messages {
					switch m.Values["type"] {
					case "run.completed", "run.failed", "run.cancelled", "comp.done":
						check = true
					}
				}
				if err := emit(s.Messages); err != nil {
					return nil, err
				}
			}
		case err == redis.Nil || isTimeout(err):
			check = true
		default:
			e.log.Warn("wfc: reading run events; retrying", "run", run, "err", err)
			sleepCtx(ctx, 500*time.Millisecond)
			continue
		}
		if !check {
			continue
		}
		st, err := e.st.status(ctx, run)
		if err != nil {
			if errors.Is(err, ErrUnknownRun) {
				return nil, err
			}
			continue
		}
		if st.Done() {
			// Deliver what was appended up to the final state.
			msgs, err := e.st.rdb.XRange(ctx, key, "("+last, "+").Result()
			if last == "0" {
				msgs, err = e.st.rdb.XRange(ctx, key, "-", "+").Result()
			}
			if err != nil {
				return nil, err
			}
			if err := emit(msgs); err != nil {
				return nil, err
			}
			return st, nil
		}
	}
}

// Cancel stops a running run. Its queued tokens are dropped when workers
// see them; handlers already running finish, and their completions are
// ignored.
func (e *Engine) Cancel(ctx context.Context, run string) error {
	return retryGraph0(func() error { return e.cancelOnce(ctx, run) })
}

func (e *Engine) cancelOnce(ctx context.Context, run string) error {
	m, err := e.meta(ctx, run)
	if err != nil {
		return err
	}
	_, err = e.st.call(ctx, "cancel", m.ref(), struct {
		base
		Reason string `json:"reason"`
	}{e.st.base(m.ref(), nil), "cancelled"})
	if err != nil {
		return fmt.Errorf("runtime: cancel: %w", err)
	}
	e.cancelChildren(ctx, run) // flow nodes' child runs (flow.go)
	return nil
}

// Retry re-runs the failed part of a failed (or cancelled) run: the
// execution that failed it and the executions that were queued, running or
// waiting on a retry run again; completed nodes keep their outputs.
func (e *Engine) Retry(ctx context.Context, run string) error {
	return retryGraph0(func() error { return e.retryOnce(ctx, run) })
}

func (e *Engine) retryOnce(ctx context.Context, run string) error {
	m, err := e.meta(ctx, run)
	if err != nil {
		return err
	}
	var at int64
	if m.DeadlineMS > 0 {
		at = nowMS() + m.DeadlineMS
	}
	_, err = e.st.call(ctx, "rerun", m.ref(), struct {
		base
		DeadlineAt int64 `json:"deadline_at"`
	}{e.st.base(m.ref(), nil), at})
	if err != nil {
		return fmt.Errorf("runtime: retry: %w", err)
	}
	return nil
}

func (e *Engine) meta(ctx context.Context, run string) (*runMeta, error) {
	if !validRunID(run) {
		return nil, fmt.Errorf("%w %q", ErrUnknownRun, run)
	}
	return e.st.meta(ctx, run)
}

// ResultInto decodes a completed run's result into v.
func (s *Status) ResultInto(v any) error {
	if s.Result == nil {
		return fmt.Errorf("run %s has no result (state %s)", s.RunID, s.State)
	}
	return json.Unmarshal(s.Result, v)
}

// ValidQueue reports whether q can name a queue: 1 to 64 letters, digits
// and . _ - : (a run keeps its queues comma-separated, and keys embed them).
func ValidQueue(q string) bool {
	if q == "" || len(q) > 64 {
		return false
	}
	for _, r := range q {
		if !(r == '.' || r == '_' || r == '-' || r == ':' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9') {
			return false
		}
	}
	return true
}

// storePlan stores p's IR and graph and creates its queues' consumer
// groups, once per process (cached).
func (e *Engine) storePlan(ctx context.Context, p *plan, shard int) error {
	if err := e.st.putPlan(ctx, p, shard); err != nil {
		return fmt.Errorf("runtime: storing the workflow: %w", err)
	}
	if e.opts.Private != nil {
		e.mu.Lock()
		if !slices.Contains(e.stored[shard], p.suffix) {
			e.stored[shard] = append(e.stored[shard], p.suffix)
		}
		e.mu.Unlock()
	}
	for _, q := range p.queues {
		stream := e.st.ks.stream(shard, q)
		e.mu.Lock()
		known := e.groups[stream]
		e.mu.Unlock()
		if known {
			continue
		}
		if err := e.st.ensureGroup(ctx, stream); err != nil {
			return fmt.Errorf("runtime: creating queue %s: %w", q, err)
		}
		e.mu.Lock()
		e.groups[stream] = true
		e.mu.Unlock()
	}
	return nil
}

// forgetPlan drops what storePlan cached for p, so that it stores again.
func (e *Engine) forgetPlan(p *plan, shard int) {
	e.st.mu.Lock()
	delete(e.st.graph, e.st.ks.graph(shard, p.suffix))
	e.st.mu.Unlock()
	e.mu.Lock()
	for _, q := range p.queues {
		delete(e.groups, e.st.ks.stream(shard, q))
	}
	e.mu.Unlock()
}

// randomPassword is the embedded server's password: 32 random bytes, hex.
func randomPassword() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

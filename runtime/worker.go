package runtime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wfc-lang/wfc/runtime/agent"
	"github.com/wfc-lang/wfc/runtime/agent/tools"
	"github.com/wfc-lang/wfc/runtime/handlers"
)

// WorkerOptions configure a Worker. Zero values take the defaults.
type WorkerOptions struct {
	// Handlers runs the task nodes; nil means the built-in handlers
	// (with exec enabled when AllowExec is set).
	Handlers *handlers.Registry
	// AllowExec enables the built-in exec handler when Handlers is nil.
	AllowExec bool
	// Secrets are the values the worker resolves secret inputs to, and
	// masks in everything it writes (LoadSecrets; nil: none).
	Secrets *Secrets
	// Model is the model server agent nodes ask (nil: an agent node
	// fails with error code agent.config); AgentTools the tools they may
	// call, each as a node's `tools` allows; AgentWallTime bounds an agent
	// execution without a timeout (default DefaultAgentWallTime).
	Model         *agent.Client
	AgentTools    []agent.Tool
	AgentWallTime time.Duration
	// Tools is the worker's set of the agent tools (execute_pipeline,
	// search_tools, openapi_action, delegate_to_agent, patch_workflow),
	// configured once (tools.NewWorker: allow-lists, OpenAPI documents);
	// an agent gets those its `tools` item names. AgentPatch is the live
	// patch applier patch_workflow uses (nil: the tool answers that it is
	// not available).
	Tools      *tools.Worker
	AgentPatch AgentPatchFunc
	// Queues the worker serves. The default is the control queue
	// ("default") and the queue of every other handler the worker can run
	// (Options.Queues, else HandlerQueue: "h:exec" for exec with
	// AllowExec, "h:NAME" for a handler a program registers), so that it
	// takes only work it can do; a private engine's workers serve its
	// control queue only (Options.Private). Listing queues overrides this:
	// the operator then decides, and a worker that receives a token of a
	// handler it lacks fails the node (error code no_handler).
	Queues []string
	// DeadAfter is how long a worker may go without refreshing its
	// registry record before other workers count it dead and remove its
	// consumer from the queues' consumer groups, once it has no pending
	// messages left (others claim them after VisibilityTimeout). Default
	// DefaultDeadAfter (10 min); the record carries each worker's own
	// value. A worker refreshes its record every DeadAfter/10 (between
	// 50 ms and 10 s).
	DeadAfter time.Duration
	// Concurrency is the number of messages handled at once. 0 (the
	// default) adapts it to the handlers and the machine (adapt.go): it
	// starts at 16 per CPU (16 to 64) and moves, between one per CPU
	// (at least 4) and MaxConcurrency, to the smallest limit that gets
	// the most throughput, and up while neither the CPU nor Redis is
	// saturated (saturation.go); Stats().Limit reports it. Either way,
	// new runs are admitted only while fewer executions run than the
	// worker's admission target, which starts at half the slots (at
	// least 16 per CPU) and rises to all of them while that buys
	// throughput (adapt.go; docs/runtime.md, "Scheduling").
	Concurrency int
	// MaxConcurrency is the ceiling of an adaptive concurrency (default
	// DefaultMaxConcurrency, 256); ignored with a Concurrency.
	MaxConcurrency int
	// Batch is the largest COUNT of one XREADGROUP (default the
	// concurrency, or its current limit).
	Batch int
	// Pipelines is how many pipelines of completions the worker keeps in
	// flight at once (default 2; see the batcher).
	Pipelines int
	// Block bounds each blocking read (default 1 s, at most 2 s).
	Block time.Duration
	// VisibilityTimeout is how long a message may stay unacknowledged and
	// silent before another worker claims it with XAUTOCLAIM (default 30 s).
	// Handlers running longer are kept alive by heartbeats.
	VisibilityTimeout time.Duration
	// ClaimInterval is how often stale messages are claimed (default
	// VisibilityTimeout/2).
	ClaimInterval time.Duration
	// HeartbeatInterval is how often an in-flight message's idle time is
	// reset (default VisibilityTimeout/3).
	HeartbeatInterval time.Duration
	// TimerInterval is how often due retries and deadlines are moved from
	// the timers to the queues (default 250 ms).
	TimerInterval time.Duration
	// MaxDeliveries is how many times a message may be delivered (first
	// read and claims after its worker died) before the execution is
	// failed as a poison message instead of being run again (default 10).
	MaxDeliveries int
	// AdmitAge is how long a new run's entry token may wait for admission
	// while the work of runs in flight keeps the workers busy: an older one
	// is moved to its queue's stream whatever that work (one per queue and
	// shard every AdmitAge), so that new runs are never starved (default
	// 1 s; docs/runtime.md, "Scheduling").
	AdmitAge time.Duration
	// TrimInterval is how often acknowledged entries are trimmed from the
	// head of the queue streams (default 1 min).
	TrimInterval time.Duration
	// MaxOutputBytes bounds a node's output as JSON, a for_each node's
	// collected list included (default 1 MiB): a bigger one fails the node
	// with error code output before anything is written.
	MaxOutputBytes int
	// MaxStateBytes bounds the values a run stores, as JSON: every output,
	// error, for_each item and item result, and the result, added up as
	// they are written (default 64 MiB). The write that would pass it is
	// refused, in the same script, and the node fails with error code
	// state. A workflow's max_state_bytes (or max_output_bytes) lowers
	// the bound for its runs; it cannot raise it.
	MaxStateBytes int
	// RunningAfter is how long a node's handler runs before the worker
	// marks its execution running (state, event node.started), so that
	// status and wfc run show it; a shorter execution is never marked, which
	// keeps the common case at no cost (default 200 ms; negative: never).
	RunningAfter time.Duration
	// ShutdownGrace is how long a stopping worker lets in-flight handlers
	// finish before cancelling them and releasing their messages
	// (default 10 s).
	ShutdownGrace time.Duration
	// Consumer names the worker in the consumer group (default
	// host-pid-random).
	Consumer string
	// Logger receives the worker's logs (default slog.Default()).
	Logger *slog.Logger

	// Test hooks. crash: a stop abandons in-flight messages like a killed
	// process (no release, no completion). dup: every message is handled
	// this many times concurrently. redeliver: every token is added to its
	// queue this many times in all (as new messages).
	crash     bool
	dup       int
	redeliver int
	// generalOnly: completions never take the fast path (advance.lua), so
	// that a test can compare it with complete.lua.
	generalOnly bool
	// expandChunk: at most this many items per expand call (0: the
	// default); afterChunk is called after each expand call that applied,
	// with the handling's context (a hook that stops the worker can wait
	// for it to be cancelled, so that the load sees the stop).
	expandChunk int
	afterChunk  func(ctx context.Context, from, end int)
}

func (o *WorkerOptions) defaults() {
	if len(o.Queues) == 0 {
		o.Queues = []string{ControlQueue}
	}
	if o.MaxConcurrency <= 0 {
		o.MaxConcurrency = DefaultMaxConcurrency
	}
	if o.Batch <= 0 || o.Batch > o.maxSlots() {
		o.Batch = o.maxSlots()
	}
	if o.Pipelines <= 0 {
		o.Pipelines = 2
	}
	if o.Block <= 0 {
		o.Block = time.Second
	}
	if o.MaxOutputBytes <= 0 {
		o.MaxOutputBytes = DefaultMaxValueBytes
	}
	if o.MaxStateBytes <= 0 {
		o.MaxStateBytes = DefaultMaxStateBytes
	}
	if o.RunningAfter == 0 {
		o.RunningAfter = 200 * time.Millisecond
	}
	o.Block = min(o.Block, 2*time.Second)
	if o.VisibilityTimeout <= 0 {
		o.VisibilityTimeout = 30 * time.Second
	}
	if o.ClaimInterval <= 0 {
		o.ClaimInterval = o.VisibilityTimeout / 2
	}
	if o.HeartbeatInterval <= 0 {
		o.HeartbeatInterval = o.VisibilityTimeout / 3
	}
	if o.TimerInterval <= 0 {
		o.TimerInterval = 250 * time.Millisecond
	}
	if o.MaxDeliveries <= 0 {
		o.MaxDeliveries = 10
	}
	if o.AdmitAge <= 0 {
		o.AdmitAge = time.Second
	}
	if o.TrimInterval <= 0 {
		o.TrimInterval = time.Minute
	}
	if o.DeadAfter <= 0 {
		o.DeadAfter = DefaultDeadAfter
	}
	if o.ShutdownGrace == 0 {
		o.ShutdownGrace = 10 * time.Second
	}
	if o.Consumer == "" {
		host, _ := os.Hostname()
		var b [3]byte
		rand.Read(b[:])
		o.Consumer = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Handlers == nil {
		o.Handlers = handlers.NewRegistry(handlers.Options{AllowExec: o.AllowExec})
	}
}

// A Worker executes node tokens from the queue streams of every shard. It
// reads with XREADGROUP in batches (bounded BLOCK, own connection pool),
// claims messages left by dead workers with XAUTOCLAIM, keeps long
// executions alive with heartbeats, and moves due timers to the queues.
type Worker struct {
	st   *store
	eng  *Engine // submits child runs (flow nodes: flow.go)
	ks   keyspace
	opts WorkerOptions
	log  *slog.Logger
	host string // host-pid, for the registry record

	sem   *slots
	adapt *limiter // nil: a fixed Concurrency
	// admission sets the admission target: how many executions may run
	// before the worker stops admitting new runs (admit). running counts
	// the executions dispatched and not yet ended.
	admission *limiter
	running   atomic.Int64
	// admitting: the admissions that takes under way may make (admit),
	// counted until what they read is dispatched, so that takes at once
	// (the read loop's, the completions' pipelines) share the target.
	admitting atomic.Int64
	sat       satGauge // an adaptive worker's saturation sample (saturation.go)
	autoBat   bool     // Batch follows the adaptive limit
	spawned   int      // handler goroutines started (spawnMu)
	spawnMu   sync.Mutex
	batch     *batcher     // completions (advance.lua) in pipelines
	work      chan *flight // dispatched messages, for the handler goroutines
	hctx      context.Context
	stopping  atomic.Bool
	fresh     freshness
	act       []activity // by shard
	// readStreams, by shard: XREADGROUP's STREAMS arguments (the worker's
	// queue streams, then as many ">"); takeKeys, by shard: take.lua's
	// KEYS for the worker's queues.
	readStreams [][]string
	takeKeys    [][]string
	// entryWaiting, by shard: the last piggyback read saw new runs' entry
	// tokens waiting (or has not looked yet), so the next one reads with
	// take.lua, which admits them; else it reads the queue streams with a
	// plain XREADGROUP and looks again (XLEN of the entry streams), which
	// costs Redis much less than the script on every completion.
	entryWaiting []atomic.Bool
	// lagAdmit: the read loop and the piggybacks that admit use admit.lua
	// and a plain read rather than take.lua, whose read passes every
	// message through Lua (admit.lua says why). Set by Run when the
	// server reports its version as Redis 7 or later (serverCountsLag),
	// cleared when admit finds a group without its lag.
	lagAdmit atomic.Bool
	// looks, by shard: what the piggybacks last saw of the entry streams
	// and the credits.
	looks    []entryLook
	inflight sync.Map // "stream id" -> *flight
	handling sync.WaitGroup
	dupSeen  sync.Map

	// Stats, for tests and logs.
	handled, applied, dups, stale, inactive, claimed, released atomic.Int64
	piggybacked                                                atomic.Int64 // messages read by completions (tests)
	blockedAtOnce                                              atomic.Int64 // reads that blocked without a take (tests)
	reaped                                                     atomic.Int64 // dead workers' consumers removed
}

// WorkerStats counts what a worker did.
type WorkerStats struct {
	Handled  int64 `json:"handled"`  // messages handled
	Applied  int64 `json:"applied"`  // transitions applied
	Dups     int64 `json:"dups"`     // transitions already applied (duplicate deliveries)
	Stale    int64 `json:"stale"`    // tokens of an older generation (partial retry)
	Inactive int64 `json:"inactive"` // tokens of runs no longer running
	Claimed  int64 `json:"claimed"`  // stale messages claimed from other workers
	Released int64 `json:"released"` // messages given back on stop
	Reaped   int64 `json:"reaped"`   // dead workers whose consumers it removed
	Limit    int64 `json:"limit"`    // its concurrency: the current limit of an adaptive one
	// Admission is its admission target: new runs wait while as many
	// executions run (docs/runtime.md, "Scheduling").
	Admission int64 `json:"admission"`
}

// Stats returns the worker's counters.
func (w *Worker) Stats() WorkerStats {
	return WorkerStats{
		Handled: w.handled.Load(), Applied: w.applied.Load(), Dups: w.dups.Load(), Stale: w.stale.Load(),
		Inactive: w.inactive.Load(), Claimed: w.claimed.Load(), Released: w.released.Load(), Reaped: w.reaped.Load(),
		Limit: int64(w.limit()), Admission: int64(w.admission.current()),
	}
}

// errAbandon means a message was given up because the worker is stopping;
// it is released (or, in crash mode, left pending).
var errAbandon = errors.New("worker stopping")

// NewWorker returns a worker on the engine's Redis. Start it with Run.
func (e *Engine) NewWorker(opts WorkerOptions) *Worker {
	if opts.Handlers == nil && e.opts.Private != nil {
		opts.Handlers = e.opts.Private
	}
	if opts.Handlers == nil {
		opts.Handlers = handlers.NewRegistry(handlers.Options{AllowExec: opts.AllowExec})
	}
	if len(opts.Queues) == 0 {
		opts.Queues = e.defaultQueues(opts.Handlers)
	}
	autoBatch := opts.Batch <= 0
	opts.defaults()
	host, _ := os.Hostname()
	var adapt *limiter
	limit := opts.Concurrency
	if limit <= 0 {
		// At least a slot per shard reader (see below).
		floor := min(opts.MaxConcurrency, max(adaptiveFloor(opts.MaxConcurrency), e.st.ks.shards))
		adapt = newLimiter(floor, adaptiveStart(opts.MaxConcurrency), opts.MaxConcurrency)
		limit = adapt.current()
	} else {
		autoBatch = false
	}
	// Each shard has a reader that holds its slots while it blocks: share
	// them, so that an idle shard's reader cannot starve the others (on a
	// cluster, shards > 1 is the rule). Concurrency should be >= Shards.
	// (An adaptive worker's readers share its current limit: batchCap.)
	if s := e.st.ks.shards; s > 1 && adapt == nil {
		opts.Batch = max(1, min(opts.Batch, opts.Concurrency/s))
	}
	log := opts.Logger
	if opts.Secrets.Len() > 0 {
		log = slog.New(maskHandler{log.Handler(), opts.Secrets})
	}
	w := &Worker{
		st: e.st, eng: e, ks: e.st.ks, opts: opts,
		log: log.With("consumer", opts.Consumer), host: fmt.Sprintf("%s-%d", host, os.Getpid()),
		sem: newSlots(limit), adapt: adapt, autoBat: autoBatch,
	}
	at := admissionFloor(opts.maxSlots())
	w.admission = newLimiter(at, at, opts.maxSlots())
	if adapt != nil {
		adapt.sat = w.sat.saturated
	}
	w.batch = newBatcher(e.st.rdb, opts.maxSlots(), opts.Pipelines, w)
	w.act = make([]activity, max(e.st.ks.shards, 1))
	w.entryWaiting = make([]atomic.Bool, len(w.act))
	w.looks = make([]entryLook, len(w.act))
	for i := range w.entryWaiting {
		w.entryWaiting[i].Store(true)
	}
	for i := range w.act {
		w.act[i].idle = make(chan struct{}, 1)
		streams := make([]string, 0, 2*len(opts.Queues))
		for _, q := range opts.Queues {
			streams = append(streams, w.ks.stream(i, q))
		}
		w.readStreams = append(w.readStreams, append(streams, slices.Repeat([]string{">"}, len(opts.Queues))...))
		w.takeKeys = append(w.takeKeys, w.ks.takeKeys(i, opts.Queues))
	}
	return w
}

// Consumer returns the worker's consumer name.
func (w *Worker) Consumer() string { return w.opts.Consumer }

// Queues returns the queues the worker serves.
func (w *Worker) Queues() []string { return slices.Clone(w.opts.Queues) }

// Run works until ctx is done, then stops gracefully: it stops reading,
// lets in-flight handlers finish for ShutdownGrace, then cancels them and
// releases their messages for other workers. Redis errors are logged and
// retried with backoff; Run returns nil after a stop.
func (w *Worker) Run(ctx context.Context) error {
	hctx, cancelHandlers := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelHandlers()
	w.hctx = hctx
	for {
		err := w.ensureGroups(ctx)
		if err == nil {
			break
		}
		w.log.Warn("wfc worker: cannot create consumer groups; retrying", "err", err)
		if !sleepCtx(ctx, time.Second) {
			return nil
		}
	}
	w.fresh.measure(ctx, w.st.rdb)
	w.lagAdmit.Store(serverCountsLag(ctx, w.st.rdb))
	// Registered before the first read, so that status sees the worker
	// at once; the registry loop then keeps the record fresh and reaps.
	if err := w.register(ctx); err != nil && ctx.Err() == nil {
		w.log.Warn("wfc worker: writing its registry record", "err", err)
	}
	regCtx, stopRegistry := context.WithCancel(context.WithoutCancel(ctx))
	var reg sync.WaitGroup
	reg.Add(1)
	go func() { defer reg.Done(); w.registryLoop(regCtx) }()
	// Handler goroutines live as long as the worker: one per slot, so a
	// dispatch never waits, and no message pays for a new goroutine and
	// the growth of its stack.
	// They end when the channel closes, after the last dispatch (one
	// stuck in a handler that ignores its context is left behind).
	// An adaptive worker starts them as its limit first reaches each
	// count (spawnHandlers).
	w.work = make(chan *flight, w.opts.maxSlots())
	w.spawnHandlers(hctx, w.limit())
	defer close(w.work)
	hbCtx, stopHeartbeats := context.WithCancel(hctx)
	var hb sync.WaitGroup
	hb.Add(1)
	go func() { defer hb.Done(); w.heartbeatLoop(hbCtx) }()
	defer func() { stopHeartbeats(); hb.Wait() }()

	var loops sync.WaitGroup
	if w.adapt != nil {
		loops.Add(1)
		go func() { defer loops.Done(); w.satLoop(ctx) }()
	}
	for s := 0; s < max(w.ks.shards, 1); s++ {
		loops.Add(1)
		go func() { defer loops.Done(); w.readLoop(ctx, hctx, s) }()
	}
	loops.Add(1)
	go func() { defer loops.Done(); w.timerLoop(ctx) }()
	w.log.Debug("wfc worker started", "queues", w.opts.Queues, "concurrency", w.limit(), "adaptive", w.adapt != nil)
	<-ctx.Done()
	w.stopping.Store(true)
	loops.Wait()

	done := make(chan struct{})
	go func() { w.handling.Wait(); close(done) }()
	grace := w.opts.ShutdownGrace
	if w.opts.crash || grace < 0 {
		grace = 0
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		cancelHandlers()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			// A handler that ignores its context: leave it; its message
			// stays pending and another worker will claim it.
			w.log.Warn("wfc worker: handlers did not stop after cancellation; leaving them")
		}
	}
	// The record stays fresh until the handlers are done (a slow stop is
	// not a death); then a graceful stop leaves the registry and the
	// consumer groups, a crash (test mode) leaves both to the reapers.
	stopRegistry()
	reg.Wait()
	if !w.opts.crash {
		w.unregister()
	}
	w.log.Debug("wfc worker stopped", "stats", w.Stats())
	return nil
}

func (w *Worker) ensureGroups(ctx context.Context) error {
	for s := 0; s < max(w.ks.shards, 1); s++ {
		for _, q := range w.opts.Queues {
			if err := w.st.ensureGroup(ctx, w.ks.stream(s, q)); err != nil {
				return err
			}
		}
	}
	return nil
}

// acquire takes between 1 and n handling slots, waiting for the first;
// it returns 0 when ctx is done.
func (w *Worker) acquire(ctx context.Context, n int) int {
	return w.sem.acquire(ctx, w.batchCap(n))
}

// tryAcquire takes up to n slots without waiting.
func (w *Worker) tryAcquire(n int) int {
	return w.sem.tryAcquire(w.batchCap(n))
}

func (w *Worker) releaseSlots(n int) {
	w.sem.release(n)
}

// batchCap bounds a take of n slots: with Batch following an adaptive
// limit, by the limit's share per shard (as a fixed Concurrency's Batch
// is, in NewWorker).
func (w *Worker) batchCap(n int) int {
	if !w.autoBat {
		return n
	}
	return min(n, max(1, w.limit()/max(w.ks.shards, 1)))
}

// limit returns the worker's concurrency: its current limit.
func (w *Worker) limit() int {
	if w.adapt == nil {
		return w.opts.Concurrency
	}
	return w.adapt.current()
}

// maxSlots is the most slots a worker may have.
func (o *WorkerOptions) maxSlots() int {
	if o.Concurrency > 0 {
		return o.Concurrency
	}
	return o.MaxConcurrency
}

// spawnHandlers starts handler goroutines up to n.
func (w *Worker) spawnHandlers(hctx context.Context, n int) {
	w.spawnMu.Lock()
	defer w.spawnMu.Unlock()
	for ; w.spawned < n; w.spawned++ {
		go func(work <-chan *flight) {
			for f := range work {
				w.handle(hctx, f)
			}
		}(w.work)
	}
}

// adapted feeds an adaptive worker's limiter with an execution that began
// at began, and applies a new limit.
func (w *Worker) adapted(hctx context.Context, began time.Time) {
	c, ok := w.adapt.end(began, time.Now())
	if !ok {
		return
	}
	w.spawnHandlers(hctx, c.Limit)
	w.sem.setLimit(c.Limit)
	w.log.Debug("wfc worker: concurrency limit", "limit", c.Limit, "from", c.From,
		"rate", int(c.Rate), "latency", c.Latency, "busy", float64(int(c.Busy*100))/100,
		"room", c.Room, "saturated", w.sat.reason())
}

// admitted feeds the admission limiter with an execution that began at
// began.
func (w *Worker) admitted(began time.Time) {
	if c, ok := w.admission.end(began, time.Now()); ok {
		w.log.Debug("wfc worker: admission target", "target", c.Limit, "from", c.From,
			"rate", int(c.Rate), "latency", c.Latency, "busy", float64(int(c.Busy*100))/100)
	}
}

// readLoop reads the shard's queues with XREADGROUP, taking only as many
// messages as it has free slots, and claims stale messages every
// ClaimInterval.
func (w *Worker) readLoop(ctx, hctx context.Context, shard int) {
	args := w.readStreams[shard]
	backoff := newBackoff()
	cursors := map[string]string{}
	lastClaim := time.Now()
	deferTimer := time.NewTimer(time.Hour)
	deferTimer.Stop()
	defer deferTimer.Stop()
	// waiting: the last read filled every slot it had, so more messages
	// are probably waiting and the next read need not block.
	waiting := false
	// held: the last take held new runs back (the admission target).
	held := false
	for ctx.Err() == nil {
		if held {
			// Leave the reading to completions for a while, holding no
			// slot: each reads the work of runs in flight first and
			// admits new runs as executions end (queueTake), with the
			// free slots. A read loop that read too, holding them, would
			// take a continuation at a time from under them, a round
			// trip each (measured: a third of the throughput of a
			// backlog). heldBlock bounds the wait: not every completion
			// reads.
			held = false
			deferTimer.Reset(heldBlock)
			select {
			case <-ctx.Done():
				return
			case <-w.act[shard].idle:
				deferTimer.Stop()
			case <-deferTimer.C:
			}
		}
		n := w.acquire(ctx, w.opts.Batch)
		if n == 0 {
			return
		}
		if time.Since(lastClaim) >= w.opts.ClaimInterval {
			lastClaim = time.Now()
			if c := w.claim(ctx, hctx, shard, n, cursors); c > 0 {
				w.releaseSlots(n - c)
				continue
			}
		}
		if !waiting {
			// While a lone handler that started moments ago runs, its
			// completion will read the next messages (the piggyback)
			// with the free slots too: a blocking read now would take
			// its tokens first and cost a round trip more per hop.
			if d := w.act[shard].deferral(); d > 0 {
				w.releaseSlots(n)
				deferTimer.Reset(d)
				select {
				case <-ctx.Done():
					deferTimer.Stop()
					return
				case <-w.act[shard].idle:
					deferTimer.Stop()
				case <-deferTimer.C:
				}
				continue
			}
		}
		// The work of runs in flight first, then new runs' entry tokens
		// (take.lua), without blocking, on the main pool. When it reads
		// nothing and no message is probably waiting, the read blocks on
		// the queues' streams: take granted the credits that let a new
		// run's entry tokens go there and wake it. Unless, with no
		// handler running, a completion's look moments ago found no new
		// run waiting and credits enough (blockAtOnce): the read then
		// blocks at once.
		var res []redis.XStream
		var err error
		a := 0 // the take's admissions (admit), given back once dispatched
		if !waiting && w.act[shard].active.Load() == 0 && w.looks[shard].blockAtOnce(n) {
			w.blockedAtOnce.Add(1)
		} else {
			a = w.admit(n, 0)
			if w.lagAdmit.Load() {
				res, held, err = w.readAdmit(ctx, shard, n, a, !waiting)
			} else {
				res, held, err = w.take(ctx, w.st.rdb, shard, w.takeKeys[shard], w.opts.Queues, w.opts.Consumer, n, a, !waiting)
			}
			if len(res) == 0 {
				// Nothing admitted: not through the blocking read below.
				w.admitDone(a)
				a = 0
			}
		}
		if held {
			// New runs wait that the admission target held back: the
			// piggybacks read with take.lua, which admits them as
			// executions end.
			w.entryWaiting[shard].Store(true)
		}
		if err == nil && len(res) == 0 {
			err = redis.Nil
			if !waiting && !held {
				res, err = w.st.blk.XReadGroup(ctx, w.readArgs(args, n, w.opts.Block)).Result()
			}
		}
		waiting = false
		if err != nil {
			w.admitDone(a)
			w.releaseSlots(n)
			if err == redis.Nil || ctx.Err() != nil || isTimeout(err) {
				continue
			}
			if strings.Contains(err.Error(), "NOGROUP") {
				err = w.ensureGroups(ctx)
			}
			if err != nil {
				w.log.Warn("wfc worker: reading queues", "shard", shard, "err", err)
				if !sleepCtx(ctx, backoff.next()) {
					return
				}
			}
			continue
		}
		backoff.reset()
		got := w.dispatchRead(hctx, shard, res, n)
		w.admitDone(a)
		w.releaseSlots(n - min(got, n))
		waiting = got >= n
	}
}

// take reads up to n messages of the shard's queues (each queue's COUNT;
// keys: keyspace.takeKeys of queues) with take.lua: the queues' streams
// first, then the entry tokens of new runs, up to admit of them, which it
// admits when those are drained or have waited AdmitAge. idle: the caller
// blocks next if nothing is read (take then grants credits). held: new
// runs wait that admit held back.
func (w *Worker) take(ctx context.Context, c redis.Scripter, shard int, keys, queues []string, consumer string, n, admit int, idle bool) (res []redis.XStream, held bool, err error) {
	v, err := w.st.scripts["take"].Run(ctx, c, keys, w.takeArgs(queues, consumer, n, admit, idle)...).Result()
	if err != nil {
		return nil, false, err
	}
	return takeReply(v)
}

func (w *Worker) takeArgs(queues []string, consumer string, n, admit int, idle bool) []any {
	admit = max(0, min(n, admit))
	grant := 0
	if idle {
		grant = min(admit, maxCredits)
	}
	args := make([]any, 0, 6+len(queues))
	args = append(args, Group, consumer, n, admit, grant, w.opts.AdmitAge.Milliseconds())
	for _, q := range queues {
		args = append(args, q)
	}
	return args
}

// admitArgs are admit.lua's arguments for a read of n messages that may
// admit up to admit new runs; idle as take's (credits when the read
// drains the streams).
func (w *Worker) admitArgs(n, admit int, idle bool) []any {
	admit = max(0, min(n, admit))
	grant := 0
	if idle {
		grant = min(admit, maxCredits)
	}
	args := make([]any, 0, 5+len(w.opts.Queues))
	args = append(args, Group, n, admit, grant, w.opts.AdmitAge.Milliseconds())
	for _, q := range w.opts.Queues {
		args = append(args, q)
	}
	return args
}

// readAdmit is take's read as a pipeline of admit.lua and a plain
// XREADGROUP (not blocking) of the shard's queue streams, for a server
// that counts a group's lag (lagAdmit).
func (w *Worker) readAdmit(ctx context.Context, shard, n, admit int, idle bool) (res []redis.XStream, held bool, err error) {
	pipe := w.st.rdb.Pipeline()
	adm := w.st.scripts["admit"].EvalSha(ctx, pipe, w.takeKeys[shard], w.admitArgs(n, admit, idle)...)
	xr := pipe.XReadGroup(ctx, w.readArgs(w.readStreams[shard], n, -1))
	_, _ = pipe.Exec(ctx) // each command's error is read below
	held = w.admitReply(ctx, adm)
	res, err = xr.Result()
	if err == redis.Nil {
		err = nil // read nothing: as take, an empty read
	}
	return res, held, err
}

// admitReply reads admit.lua's reply and returns its held: a group
// without its lag ({-1, 0}) sends the worker back to take.lua; a script
// the server lost (NOSCRIPT: a restart, a flush) is loaded again for the
// next read, the read after it being done anyway (admitting none).
func (w *Worker) admitReply(ctx context.Context, c *redis.Cmd) (held bool) {
	v, err := c.Result()
	switch {
	case err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT"):
		if lerr := w.st.scripts["admit"].Load(ctx, w.st.rdb).Err(); lerr != nil && ctx.Err() == nil {
			w.log.Debug("wfc worker: loading admit.lua", "err", lerr)
		}
	case err != nil:
		// Nothing admitted; a later read admits.
	default:
		r, ok := v.([]any)
		if ok && len(r) == 2 && r[0] == int64(-1) {
			w.lagAdmit.Store(false)
			w.log.Debug("wfc worker: a consumer group reports no lag; admitting with take.lua")
		}
		return ok && len(r) == 2 && r[1] == int64(1)
	}
	return false
}

// serverCountsLag tells whether the server reports a consumer group's
// lag (XINFO GROUPS), which admit.lua counts by: Redis 7.0 or later, by
// INFO server (a server that does not say, such as the embedded one or
// one whose ACL refuses INFO, gets take.lua).
func serverCountsLag(ctx context.Context, c redis.UniversalClient) bool {
	txt, err := c.Info(ctx, "server").Result()
	if err != nil {
		return false
	}
	for line := range strings.SplitSeq(txt, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			major, _, _ := strings.Cut(v, ".")
			n, err := strconv.Atoi(major)
			return err == nil && n >= 7
		}
	}
	return false
}

// maxCredits bounds the credits an idle worker grants a queue of a
// shard (take.lua): the new runs that may start ahead of the work of runs
// in flight. A credit is there to wake a blocked read: a start that
// spends one puts its entry token in the queue's stream, which a blocked
// reader gets; once awake, a worker admits the runs that wait as its
// reads drain. So a few credits do the job, enough for a burst to wake
// that many blocked workers at once; a grant of every free slot (up to
// 256 for an adaptive worker with room) let that many runs of a burst
// start together, ahead of the runs in flight, and a stopped worker's
// grant stayed for the next burst (docs/runtime.md, "Scheduling").
const maxCredits = 16

// admit returns how many new runs' entry tokens a take may admit: the
// admission target less the executions running (those of the reading
// completions, ending, excepted) and the admissions other takes under
// way may make. The caller gives them back with admitDone once what the
// take read is dispatched.
func (w *Worker) admit(n, ending int) int {
	a := max(0, min(n, w.admission.current()-int(w.running.Load()+w.admitting.Load())+ending))
	w.admitting.Add(int64(a))
	return a
}

// admitDone gives back a take's admissions (admit) once what it read is
// dispatched (counted as running).
func (w *Worker) admitDone(a int) { w.admitting.Add(-int64(a)) }

// heldBlock is how long the read loop leaves the reading to completions
// after a take whose admission target held new runs back (readLoop).
const heldBlock = 10 * time.Millisecond

// takeReply converts take.lua's reply, {read, held} with the read in
// XREADGROUP's shape as a script returns it, to XREADGROUP's result and
// held.
func takeReply(v any) ([]redis.XStream, bool, error) {
	bad := fmt.Errorf("runtime: take replied %T, not a read", v)
	pair, ok := v.([]any)
	if !ok || len(pair) != 2 {
		return nil, false, bad
	}
	held, ok := pair[1].(int64)
	if !ok {
		return nil, false, bad
	}
	list, ok := pair[0].([]any)
	if !ok {
		return nil, false, bad
	}
	res := make([]redis.XStream, 0, len(list))
	for _, x := range list {
		sl, ok := x.([]any)
		if !ok || len(sl) != 2 {
			return nil, false, bad
		}
		name, _ := sl[0].(string)
		ms, ok := sl[1].([]any)
		if !ok {
			return nil, false, bad
		}
		st := redis.XStream{Stream: name, Messages: make([]redis.XMessage, 0, len(ms))}
		for _, y := range ms {
			m, ok := y.([]any)
			if !ok || len(m) != 2 {
				return nil, false, bad
			}
			id, _ := m[0].(string)
			fv, _ := m[1].([]any)
			vals := make(map[string]any, len(fv)/2)
			for i := 0; i+1 < len(fv); i += 2 {
				f, _ := fv[i].(string)
				vals[f] = fv[i+1]
			}
			st.Messages = append(st.Messages, redis.XMessage{ID: id, Values: vals})
		}
		res = append(res, st)
	}
	return res, held == 1, nil
}

// readArgs are the arguments of an XREADGROUP of up to n new messages of
// each stream in streamArgs (the streams, then as many ">"); block < 0
// does not block.
func (w *Worker) readArgs(streamArgs []string, n int, block time.Duration) *redis.XReadGroupArgs {
	return &redis.XReadGroupArgs{Group: Group, Consumer: w.opts.Consumer, Streams: streamArgs, Count: int64(n), Block: block}
}

// tokenMeta returns the meta of an exec token's run as far as running it
// needs, from the token (graph suffix, hop limit, generation) and what the
// worker keeps (the plan of the graph's IR, the graph's queues), without
// reading Redis: for a node without expressions, which needs neither the
// run's inputs nor anything else of its meta, or one whose token carries
// all its expressions read (plan.carriesAll). Else nil (pre-read).
func (w *Worker) tokenMeta(tok *Token) *runMeta {
	dot := strings.LastIndexByte(tok.Graph, '.')
	if dot <= 0 || tok.MaxHops < 0 {
		return nil
	}
	p, gq := w.st.cached(tok.Graph[:dot], w.ks.graph(w.ks.shard(tok.Run), tok.Graph))
	if p == nil || p.nodes[tok.Node] == nil || p.hasExprs(tok.Node) && !p.carriesAll(tok) {
		return nil
	}
	return &runMeta{
		ID: tok.Run, Status: RunRunning, Gen: tok.Gen, IR: p.hash, Graph: tok.Graph,
		Queues: gq.list, Workflow: p.w.Name, MaxHops: tok.MaxHops,
	}
}

// dispatchRead hands the messages of a read to handlers and returns how
// many there were. The caller holds n slots for them. A message whose
// pre-read freshness lets it skip (an exec token of a run known to be
// running moments ago, whose meta the worker keeps or the token tells)
// goes at once; the others are pre-read together, in one
// pipelined round trip, by a goroutine that then dispatches them, so that
// the caller (the read loop, or the leader of a completion pipeline) does
// not wait for it. A read of several streams may bring more than n
// messages (COUNT bounds each stream): they are ours now, and each extra
// one waits for a slot in that goroutine.
func (w *Worker) dispatchRead(hctx context.Context, shard int, res []redis.XStream, n int) int {
	pre := w.fresh.prefetched(res, w.tokenMeta)
	type later struct {
		q    string
		m    redis.XMessage
		key  string
		slot bool // it has one of the n slots
	}
	var rest []later
	var unread []redis.XStream // the messages to pre-read
	got := 0
	for _, s := range res {
		q := w.queueOf(s.Stream)
		for _, m := range s.Messages {
			got++
			k := msgKey(s.Stream, m.ID)
			p := pre[k]
			if p != nil && got <= n {
				w.dispatchN(hctx, shard, q, m, 0, p)
				continue
			}
			rest = append(rest, later{q: q, m: m, key: k, slot: got <= n})
			if p == nil {
				if len(unread) == 0 || unread[len(unread)-1].Stream != s.Stream {
					unread = append(unread, redis.XStream{Stream: s.Stream})
				}
				unread[len(unread)-1].Messages = append(unread[len(unread)-1].Messages, m)
			}
		}
	}
	if len(rest) == 0 {
		return got
	}
	// Counted as handling, so that a stopping worker waits for these
	// messages' dispatch before it closes the handlers' channel; and as
	// running (dispatchN counts each again), so that the admission
	// target counts them from now.
	w.handling.Add(1)
	w.running.Add(int64(len(rest)))
	go func() {
		defer w.handling.Done()
		if len(unread) > 0 {
			maps.Copy(pre, w.prefetch(hctx, unread))
		}
		for i, l := range rest {
			if !l.slot {
				if w.sem.acquire(hctx, 1) == 0 {
					// The worker stops: what it has not handed on goes
					// back to its queue.
					w.running.Add(-int64(len(rest) - i))
					for _, r := range rest[i:] {
						if !r.slot {
							raw, _ := r.m.Values["t"].(string)
							w.release(w.ks.stream(shard, r.q), r.m.ID, raw)
						}
					}
					return
				}
			}
			w.running.Add(-1) // counted again by dispatchN
			w.dispatchN(hctx, shard, l.q, l.m, 0, pre[l.key])
		}
	}()
	return got
}

// A pendingTake is a read in a completion's pipeline, for the completing
// handlers' slots and extra free slots it holds.
type pendingTake struct {
	cmd  *redis.Cmd             // take.lua, or
	xr   *redis.XStreamSliceCmd // a plain read of the queue streams
	adm  *redis.Cmd             // admit.lua, before xr, or nil
	lens []*redis.IntCmd        // and the entry streams' lengths
	// credits: the queues' credits, read with lens.
	credits *redis.SliceCmd
	k       int // the callers' slots it reads for (reusable)
	extra   int
	admit   int // take.lua's admissions (Worker.admit)
}

// queueTake and takeDone make the worker the batcher's piggyback: a
// pipeline of completions also reads (XREADGROUP, not blocking) as many
// new messages as it completes (and the worker has free slots), and each
// goes to a completing handler's slot (or a free one).
func (w *Worker) queueTake(ctx context.Context, pipe redis.Pipeliner, shard, k int) *pendingTake {
	if w.stopping.Load() || w.hctx == nil || w.opts.dup > 1 {
		return nil
	}
	// Free slots too: while handlers run, the read loop leaves the
	// reading to their completions (readLoop) and holds none.
	// Only as many of the callers' slots as the limit keeps (an adaptive
	// one may have been lowered): the others are released.
	k = w.sem.reusable(k)
	t := &pendingTake{k: k, extra: w.tryAcquire(max(0, w.opts.Batch-k))}
	if k+t.extra == 0 {
		// No slot to read for (the limit was lowered below what runs):
		// the callers keep and release their slots.
		return nil
	}
	if w.entryWaiting[shard].Load() {
		t.admit = w.admit(k+t.extra, k)
	}
	if t.admit > 0 && w.lagAdmit.Load() {
		// admit.lua, then a plain read: the same admission as take.lua's
		// (the work of runs in flight first, then the new runs waiting),
		// without passing the messages read through Lua.
		t.adm = w.st.scripts["admit"].EvalSha(ctx, pipe, w.takeKeys[shard], w.admitArgs(k+t.extra, t.admit, false)...)
		t.xr = pipe.XReadGroup(ctx, w.readArgs(w.readStreams[shard], k+t.extra, -1))
	} else if t.admit > 0 {
		// take.lua, as the read loop reads: the work of runs in flight
		// first, then the new runs waiting. Not when the admission
		// target admits none: the script would only read (measured: a
		// tenth more Redis CPU per execution while a burst's new runs
		// waited for the target); the read loop's next take admits an
		// aged one (AdmitAge).
		t.cmd = w.st.scripts["take"].EvalSha(ctx, pipe, w.takeKeys[shard], w.takeArgs(w.opts.Queues, w.opts.Consumer, k+t.extra, t.admit, false)...)
	} else {
		t.xr = pipe.XReadGroup(ctx, w.readArgs(w.readStreams[shard], k+t.extra, -1))
	}
	// Whether new runs wait now, for the next piggybacks (and the read
	// loop's take admits them meanwhile): at most every entryLookEvery,
	// not with every completion (a lone run's chain: an XLEN per
	// execution cost Redis about a microsecond of CPU each).
	// The queues' credits tell it, as long as each has some: a start
	// spends one rather than write to the entry stream, and take grants
	// them only when it drained the entry streams. So the lengths are
	// read only when the last look saw a queue without credits. The
	// credits also serve the read loop (blockAtOnce).
	if w.looks[shard].due() {
		keys := w.takeKeys[shard]
		if !w.looks[shard].creditsLeft() {
			for i := 2; i < len(keys); i += 2 {
				t.lens = append(t.lens, pipe.XLen(ctx, keys[i]))
			}
		}
		t.credits = pipe.HMGet(ctx, keys[0], w.opts.Queues...)
	}
	return t
}

// entryLookEvery is how often at most a completion's piggyback looks
// whether new runs wait in a shard's entry streams (XLEN). A new run
// that arrives while the piggybacks read with a plain XREADGROUP so
// waits at most that long more, plus a completion, or until the read
// loop's next take.
const entryLookEvery = time.Millisecond

// lookFresh is how old a look may be for the read loop to block on its
// strength without a take first (blockAtOnce).
const lookFresh = 5 * time.Millisecond

// An entryLook is what the piggybacks of a shard last saw of its entry
// streams and credits.
type entryLook struct {
	last atomic.Int64 // when a piggyback last looked (unix ns)

	mu sync.Mutex
	// seen: when a look that found every entry stream empty was read
	// (unix ns; 0: none, or it was used); credits: the fewest credits of
	// the shard's queues it read.
	seen    int64
	credits int64
	// left: the last look found credits for every queue (so no new run
	// waited: a start spends a credit rather than wait).
	left bool
}

// creditsLeft tells whether the last look found credits for every queue.
func (l *entryLook) creditsLeft() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.left
}

// due tells whether a piggyback should look now (at most every
// entryLookEvery), and if so counts it as looking.
func (l *entryLook) due() bool {
	now := time.Now().UnixNano()
	last := l.last.Load()
	return now-last >= int64(entryLookEvery) && l.last.CompareAndSwap(last, now)
}

// saw records a look's result: empty, whether every entry stream was
// empty; credits, the fewest credits of the shard's queues.
func (l *entryLook) saw(empty bool, credits int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen, l.credits, l.left = 0, 0, credits > 0
	if empty {
		l.seen, l.credits = time.Now().UnixNano(), credits
	}
}

// blockAtOnce tells whether a read loop about to take n messages and
// block if there are none may block at once, without the take, and if
// so uses up the look it goes by. A take before blocking admits the new
// runs waiting and grants credits (take.lua): it is not needed when a
// look at most lookFresh old found no new run waiting and at least half
// the credits the take would grant (n, at most maxCredits) for each
// queue, so that new runs' entry tokens go to the streams, which wakes
// the read. Each look serves one such read (which
// may read up to n tokens those credits let through, so the next one
// needs a new look); a lone run's chain so pays a plain XREADGROUP at its
// end, as before run-first scheduling, instead of take.lua's 10-15 µs of
// Redis CPU.
func (l *entryLook) blockAtOnce(n int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen == 0 || time.Now().UnixNano()-l.seen > int64(lookFresh) || l.credits < int64((min(n, maxCredits)+1)/2) {
		return false
	}
	l.seen = 0
	return true
}

func (w *Worker) takeDone(ctx context.Context, t *pendingTake, shard int) int {
	k := t.k
	n := k + t.extra
	used := 0
	var res []redis.XStream
	var err error
	if t.adm != nil {
		w.admitReply(ctx, t.adm)
	}
	if t.xr != nil {
		res, err = t.xr.Result()
	} else {
		var v any
		if v, err = t.cmd.Result(); err == nil {
			res, _, err = takeReply(v)
		}
	}
	if t.credits != nil {
		// The fewest credits of the queues (none granted: 0; an error:
		// -1).
		least := int64(-1)
		if cs, cerr := t.credits.Result(); cerr == nil {
			for _, c := range cs {
				s, _ := c.(string)
				v, _ := strconv.ParseInt(s, 10, 64)
				if least < 0 || v < least {
					least = v
				}
			}
		}
		// Credits for every queue: no new run waits. Else, without the
		// lengths (the last look saw credits, these none), say waiting
		// until the next look reads them: take.lua is always right. An
		// error counts as waiting too.
		waiting := least < 1
		if len(t.lens) > 0 && least >= 0 {
			waiting = false
			for _, l := range t.lens {
				if n, lerr := l.Result(); lerr != nil || n > 0 {
					waiting = true
				}
			}
		}
		w.entryWaiting[shard].Store(waiting)
		w.looks[shard].saw(!waiting, least)
	}
	switch {
	case err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT"):
		// The read loop's next take loads the script (EVAL).
	case err == nil:
		used = min(w.dispatchRead(w.hctx, shard, res, n), n)
		w.piggybacked.Add(int64(used))
	case err != redis.Nil && ctx.Err() == nil:
		// Messages it read, if any, stay pending and are claimed after
		// the visibility timeout.
		w.log.Warn("wfc worker: reading with a completion", "shard", shard, "err", err)
	}
	w.admitDone(t.admit)
	w.releaseSlots(t.extra - max(0, used-k))
	return min(used, k)
}

// prefetched is what a worker reads for a message before handling it.
type prefetched struct {
	tok   Token             // the message's token, decoded once
	meta  map[string]string // the run's meta fields by name, as read
	m     *runMeta          // or the run's meta, decoded (kept or told)
	state *string           // exec tokens: the execution's state ("" if none)
	// told: m is what the token told of its run (Worker.tokenMeta),
	// enough for its own execution only; it is not kept for others.
	told bool
	// outs: the state fields the activation of the token's node reads
	// (carry.go), nil for an absent one, when they were pre-read.
	outs map[string]*string
	// item: an item token's for_each execution state and item record
	// (job.item's first read), when they were pre-read.
	item *itemRead
}

// prefetch reads, in one pipelined round trip for a whole batch, what
// handling each message reads first (by "stream id"): its run's meta, for an exec
// token the execution's state, for an item token its record (readItem),
// and the outputs its node's expressions read when the token does not
// carry them (prefetchOuts). A message it could not read for (not a
// token, or the pipeline failed) gets nothing and is read for on its own.
func (w *Worker) prefetch(ctx context.Context, res []redis.XStream) map[string]*prefetched {
	out := map[string]*prefetched{}
	pipe := w.st.rdb.Pipeline()
	metas := map[string]*redis.SliceCmd{} // one read per run
	states := map[*prefetched]*redis.StringCmd{}
	// The runs whose inputs a message of the batch may read (inputslazy.go).
	inputs := map[string]bool{}
	for _, s := range res {
		for _, m := range s.Messages {
			raw, _ := m.Values["t"].(string)
			p := &prefetched{tok: Token{Item: -1}}
			if decodeToken(raw, &p.tok) != nil || !validRunID(p.tok.Run) {
				continue
			}
			if !inputs[p.tok.Run] && w.needsInputs(&p.tok) {
				inputs[p.tok.Run] = true
			}
			out[msgKey(s.Stream, m.ID)] = p
		}
	}
	if len(out) == 0 {
		return nil
	}
	lean := map[string]bool{}
	outs := map[string]*outsRead{} // by run and node (carry.go)
	for _, p := range out {
		if metas[p.tok.Run] == nil {
			if inputs[p.tok.Run] {
				metas[p.tok.Run] = w.ks.readMeta(ctx, pipe, p.tok.Run)
			} else {
				metas[p.tok.Run], lean[p.tok.Run] = w.ks.readMetaLean(ctx, pipe, p.tok.Run), true
			}
		}
		if p.tok.Kind == "exec" && p.tok.Node != "" {
			states[p] = pipe.HGet(ctx, w.ks.state(p.tok.Run), execKey(p.tok.Node, p.tok.Iter))
		}
		if p.tok.Kind == "item" && p.tok.Node != "" {
			p.item = w.readItem(ctx, pipe, &p.tok)
		}
		w.prefetchOuts(ctx, pipe, p, outs)
	}
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return nil
	}
	for _, p := range out {
		if lean[p.tok.Run] {
			p.meta = metaMapLean(metas[p.tok.Run].Val())
		} else {
			p.meta = metaMap(metas[p.tok.Run].Val())
		}
		if c := states[p]; c != nil {
			v := c.Val() // "" when the field does not exist
			p.state = &v
		}
	}
	for _, r := range outs {
		r.done()
	}
	return out
}

// msgKey names a message among all queues: message ids are unique per
// stream only, and two queues may hold the same id.
func msgKey(stream, id string) string { return stream + " " + id }

func isTimeout(err error) bool {
	var ne interface{ Timeout() bool }
	return errors.As(err, &ne) && ne.Timeout()
}

func (w *Worker) queueOf(stream string) string {
	_, q, _ := strings.Cut(stream, "}:q:")
	return q
}

// claim takes over up to n messages of the shard's queues that stayed
// pending longer than the visibility timeout: their worker died or lost
// its connection. It dispatches them and returns how many it took.
func (w *Worker) claim(ctx, hctx context.Context, shard, n int, cursors map[string]string) int {
	used := 0
	for _, q := range w.opts.Queues {
		if used == n {
			break
		}
		stream := w.ks.stream(shard, q)
		start := cursors[stream]
		if start == "" {
			start = "0-0"
		}
		msgs, next, err := w.st.rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{
			Stream: stream, Group: Group, Consumer: w.opts.Consumer,
			MinIdle: w.opts.VisibilityTimeout, Start: start, Count: int64(n - used),
		}).Result()
		if err != nil {
			if ctx.Err() == nil && !strings.Contains(err.Error(), "NOGROUP") {
				w.log.Warn("wfc worker: claiming stale messages", "stream", stream, "err", err)
			}
			continue
		}
		cursors[stream] = next
		for _, m := range msgs {
			if _, busy := w.inflight.Load(msgKey(stream, m.ID)); busy || m.Values == nil {
				continue
			}
			used++
			w.claimed.Add(1)
			deliveries := 0
			if p, err := w.st.rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: stream, Group: Group, Start: m.ID, End: m.ID, Count: 1}).Result(); err == nil && len(p) == 1 {
				deliveries = int(p[0].RetryCount)
			}
			w.log.Info("wfc worker: claimed a stale message", "stream", stream, "id", m.ID, "deliveries", deliveries)
			if deliveries <= w.opts.MaxDeliveries {
				deliveries = 0
			}
			w.dispatchN(hctx, shard, q, m, deliveries, nil)
		}
	}
	return used
}

// timerLoop moves due timer entries (retries, deadlines) to the queues.
func (w *Worker) timerLoop(ctx context.Context) {
	t := time.NewTicker(w.opts.TimerInterval)
	defer t.Stop()
	lastTrim := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if time.Since(lastTrim) >= w.opts.TrimInterval {
			lastTrim = time.Now()
			w.fresh.measure(ctx, w.st.rdb)
			for s := 0; s < max(w.ks.shards, 1); s++ {
				for _, q := range w.opts.Queues {
					if err := w.trim(ctx, w.ks.stream(s, q)); err != nil && ctx.Err() == nil && !strings.Contains(err.Error(), "NOGROUP") {
						w.log.Warn("wfc worker: trimming a queue", "queue", q, "err", err)
					}
				}
			}
		}
		for s := 0; s < max(w.ks.shards, 1); s++ {
			for _, q := range w.opts.Queues {
				keys := []string{w.ks.timers(s, q), w.ks.stream(s, q)}
				for {
					n, err := w.st.scripts["promote"].Run(ctx, w.st.rdb, keys, nowMS(), 100).Int()
					if err != nil {
						if ctx.Err() == nil {
							w.log.Warn("wfc worker: promoting timers", "queue", q, "err", err)
						}
						break
					}
					if n < 100 {
						break
					}
				}
			}
		}
	}
}

// A flight is a message being handled.
type flight struct {
	shard  int
	q      string
	stream string
	key    string // msgKey
	m      redis.XMessage
	raw    string
	tok    Token // decoded once, here or by the read's pre-read
	// notToken: the message's t is not a token (it is acknowledged and
	// dropped).
	notToken bool
	poison   int
	pre      *prefetched
	// ctx ends early when the run ends under the handler (cancelled,
	// failed elsewhere, deadline): nothing it does could be applied.
	ctx    context.Context
	cancel context.CancelCauseFunc
	// Heartbeats (heartbeatLoop only): when the last was sent, and
	// whether they stopped (the message was lost or the run ended).
	beat time.Time
	done bool
	// gave: the handler's slot went to a message its completion read.
	gave bool
	// remote, when set, runs the execution's handler instead of the
	// registry (remote.go: a task leased to an external worker).
	remote handlers.Func
}

// dispatchN hands one message to a handler goroutine; the caller holds a
// slot for it, which is released when the message was handled. poison > 0
// is the delivery count of a message delivered too often, whose execution
// is failed instead of run; pre holds what prefetch read for it, if
// anything.
func (w *Worker) dispatchN(hctx context.Context, shard int, q string, m redis.XMessage, poison int, pre *prefetched) {
	stream := w.ks.stream(shard, q)
	f := &flight{shard: shard, q: q, stream: stream, key: msgKey(stream, m.ID), m: m, poison: poison, pre: pre, beat: time.Now()}
	f.raw, _ = m.Values["t"].(string)
	if pre != nil {
		f.tok = pre.tok
	} else {
		f.tok = Token{Item: -1}
		f.notToken = decodeToken(f.raw, &f.tok) != nil || f.tok.Run == ""
	}
	f.ctx, f.cancel = context.WithCancelCause(hctx)
	// The handler is active from its dispatch: a completion that reads
	// the next message of a lone run dispatches it before its own handler
	// ends, so the read loop, left waiting by deferral, sees no idle
	// moment in which to start a blocking read that would take the next
	// token from the completion after.
	w.act[shard%len(w.act)].start()
	w.running.Add(1)
	w.handling.Add(1)
	w.inflight.Store(f.key, f)
	w.work <- f
}

func (w *Worker) handle(hctx context.Context, f *flight) {
	defer w.act[f.shard%len(w.act)].end()
	defer w.running.Add(-1)
	defer w.handling.Done()
	// The execution's latency, completion included, for the limiters
	// (fed before handling counts it done: a stopping worker waits).
	began := time.Now()
	w.admission.begin(began)
	defer w.admitted(began)
	if w.adapt != nil {
		w.adapt.begin(began)
		defer w.adapted(hctx, began)
	}
	defer func() {
		if !f.gave {
			w.releaseSlots(1)
		}
	}()
	defer w.inflight.Delete(f.key)
	defer f.cancel(nil)
	stream, m, raw := f.stream, f.m, f.raw
	if w.opts.redeliver > 1 {
		if _, seen := w.dupSeen.LoadOrStore(raw, true); !seen {
			for range w.opts.redeliver - 1 {
				w.st.rdb.XAdd(hctx, &redis.XAddArgs{Stream: stream, Values: []any{"t", raw}})
			}
		}
	}
	mctx := f.ctx
	var err error
	if w.opts.dup > 1 {
		var wg sync.WaitGroup
		var mu sync.Mutex
		for range w.opts.dup {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if e := w.process(mctx, f, nil); e != nil {
					mu.Lock()
					err = e
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
	} else {
		err = w.process(mctx, f, &f.gave)
	}
	w.handled.Add(1)
	switch {
	case err == nil:
	case hctx.Err() == nil && errors.Is(context.Cause(mctx), errRunEnded):
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		w.st.rdb.XAck(ctx, stream, Group, m.ID)
	case errors.Is(err, errAbandon) || hctx.Err() != nil:
		w.release(stream, m.ID, raw)
	default:
		// Left pending: XAUTOCLAIM hands it to a worker after the
		// visibility timeout.
		w.log.Warn("wfc worker: handling a message failed; it will be retried", "stream", stream, "id", m.ID, "err", err)
	}
}

// release gives a message the worker will not handle back to its queue
// (the release script), unless it crashes (a test mode): else it stays
// pending until another worker claims it after the visibility timeout.
func (w *Worker) release(stream, id, raw string) {
	if w.opts.crash {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := w.st.scripts["release"].Run(ctx, w.st.rdb, []string{stream}, Group, id, raw).Err(); err != nil {
		w.log.Warn("wfc worker: releasing a message; it will be claimed after the visibility timeout", "id", id, "err", err)
	} else {
		w.released.Add(1)
	}
}

// heartbeatLoop keeps the idle time of messages whose handlers run long
// low, so that other workers do not claim them, and cancels a handler when
// its run has ended. One loop serves every message in flight: it looks
// every half HeartbeatInterval and beats for each message that has not had
// a beat (or its start) for that long, so beats are at most about
// HeartbeatInterval apart, and short executions cost nothing.
func (w *Worker) heartbeatLoop(ctx context.Context) {
	every := max(w.opts.HeartbeatInterval/2, time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		var due []*flight
		w.inflight.Range(func(_, v any) bool {
			if f := v.(*flight); !f.done && now.Sub(f.beat) >= every {
				due = append(due, f)
			}
			return true
		})
		for _, f := range due {
			if ctx.Err() != nil {
				return
			}
			f.beat = now
			w.heartbeat(ctx, f)
		}
	}
}

// heartbeat checks that a message's run still runs and resets the
// message's idle time.
func (w *Worker) heartbeat(ctx context.Context, f *flight) {
	if f.ctx.Err() != nil {
		f.done = true
		return
	}
	if f.tok.Run != "" {
		// With the run's status, an exec token's execution state: a join
		// first may have cancelled it (docs/waiting.md, "Races").
		v, err := w.st.rdb.HMGet(ctx, w.ks.state(f.tok.Run), runField("status"), execKey(f.tok.Node, f.tok.Iter)).Result()
		want := RunRunning
		if f.tok.Kind == "comp" {
			want = RunFailed
		}
		var st, xs string
		ok := false
		if err == nil && len(v) == 2 {
			st, ok = v[0].(string)
			xs, _ = v[1].(string)
		}
		if ok {
			if st != want || f.tok.Kind == "exec" && xs == NodeCancelled {
				cause := errRunEnded
				if st == want {
					cause = errExecCancelled
				}
				f.cancel(cause)
				f.done = true
				return
			}
		}
	}
	owned, err := w.st.scripts["heartbeat"].Run(ctx, w.st.rdb, []string{f.stream}, Group, w.opts.Consumer, f.m.ID).Int()
	if err != nil {
		if ctx.Err() == nil {
			w.log.Warn("wfc worker: heartbeat", "id", f.m.ID, "err", err)
		}
		return
	}
	if owned == 0 {
		w.log.Info("wfc worker: lost a message to another worker; its completion will be deduplicated", "id", f.m.ID)
		f.done = true
	}
}

// errRunEnded cancels a handler whose run is no longer running.
var errRunEnded = errors.New("the run ended")

// errExecCancelled cancels a handler whose execution a join first
// cancelled (its completion would change nothing).
var errExecCancelled = errors.New("a join first cancelled the execution")

// trim deletes the acknowledged entries at the head of a queue stream: it
// never trims at or above the oldest pending entry nor the group's last
// delivered entry, so no unacknowledged or undelivered token is lost.
func (w *Worker) trim(ctx context.Context, stream string) error {
	groups, err := w.st.rdb.XInfoGroups(ctx, stream).Result()
	if err != nil {
		return err
	}
	var minID string
	for _, g := range groups {
		id := g.LastDeliveredID
		p, err := w.st.rdb.XPending(ctx, stream, g.Name).Result()
		if err != nil {
			return err
		}
		if p.Count > 0 && streamIDLess(p.Lower, id) {
			id = p.Lower
		}
		if minID == "" || streamIDLess(id, minID) {
			minID = id
		}
	}
	if minID == "" || minID == "0-0" {
		return nil
	}
	return w.st.rdb.XTrimMinID(ctx, stream, minID).Err()
}

// streamIDLess compares stream ids "ms-seq".
func streamIDLess(a, b string) bool {
	am, as, _ := strings.Cut(a, "-")
	bm, bs, _ := strings.Cut(b, "-")
	x, _ := strconv.ParseUint(am, 10, 64)
	y, _ := strconv.ParseUint(bm, 10, 64)
	if x != y {
		return x < y
	}
	x, _ = strconv.ParseUint(as, 10, 64)
	y, _ = strconv.ParseUint(bs, 10, 64)
	return x < y
}

type backoff struct{ d time.Duration }

func newBackoff() *backoff { return &backoff{} }
func (b *backoff) reset()  { b.d = 0 }
func (b *backoff) next() time.Duration {
	if b.d == 0 {
		b.d = 100 * time.Millisecond
	} else {
		b.d = min(2*b.d, 2*time.Second)
	}
	return b.d
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// deferWindow is how long after a handler started the read loop leaves the
// reading to completions.
const deferWindow = 2 * time.Millisecond

// activity tracks a shard's handlers for the read loop: how many run and
// when the last one started.
type activity struct {
	active    atomic.Int64
	lastStart atomic.Int64  // unix ns
	idle      chan struct{} // a value when the last running handler ended
}

func (a *activity) start() {
	a.lastStart.Store(time.Now().UnixNano())
	a.active.Add(1)
}

func (a *activity) end() {
	if a.active.Add(-1) == 0 {
		select {
		case a.idle <- struct{}{}:
		default:
		}
	}
}

// deferral returns how long the read loop should leave reading to
// completions: while a lone handler that started less than deferWindow
// ago runs (a run moving alone along its nodes); else 0. With more
// handlers running the read loop reads at once: measured, leaving their
// reading to completions did not gain throughput, and the blocking read
// fills idle slots at once.
func (a *activity) deferral() time.Duration {
	if a.active.Load() != 1 {
		return 0
	}
	return deferWindow - time.Duration(time.Now().UnixNano()-a.lastStart.Load())
}

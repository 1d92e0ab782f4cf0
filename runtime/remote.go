package runtime

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/runtime/handlers"
)

// Remote tasks (docs/handlers.md): handlers that run outside wfc, in any
// language, in workers that poll for the tasks of the handlers they serve.
//
// A poller is a consumer of the handler queues' consumer groups like any
// worker, and a task is a queue message: a poll reads (or claims, once its
// lease expired) a message and handles it exactly as a worker does —
// process — up to the handler call, which it turns into a task with a
// lease instead. The completion (or failure) handles the same message
// again, from the start, with the posted result standing in for the
// handler call: the same scripts, checks (output type and size, secrets
// masked, retry policy, error routes) and guards as a Go handler's.
// Everything before the call is evaluated again (it is deterministic: the
// outputs it reads were written before the message was queued).
//
// The lease is a random token whose SHA-256 is stored, with the lease's
// time to live, in a key beside the message's stream. Only the holder of
// the token can extend it (heartbeat), complete or fail the task. When it
// expires, the message's idle time has passed the lease as well and the
// next poll claims it (XAUTOCLAIM), under a new lease: the old holder's
// late completion is refused (ErrLeaseLost) and changes nothing. A
// completion racing with the expiry is deduplicated by the execution's
// state like two workers' completions.
//
// A node's timeout bounds a remote call as it bounds a Go handler's: a
// task offered for a node with a timeout gets a deadline, an entry of the
// shard's sorted set of deadlines (member: queue, message id and lease
// hash). Once it passes, the task fails with error code timeout,
// retryable (the node's retry policy decides), whatever the worker does:
// a heartbeat past it (remotebeat.lua compares) fails it and answers
// ErrTaskTimedOut, so does a completion past it (its result is not
// taken), and every poll fails the shard's overdue tasks first. The lease
// is dropped with it, so a later completion is a duplicate (ErrLeaseLost).

// RemoteOptions configure a Remote. Zero values take the defaults.
type RemoteOptions struct {
	// Lease is how long a task stays with the worker that polled it
	// without a heartbeat; then the next poll takes it (default 30 s,
	// at least 100 ms).
	Lease time.Duration
	// MaxWait bounds how long a poll waits for a task (default 30 s).
	MaxWait time.Duration
	// Secrets, MaxOutputBytes, MaxStateBytes and MaxDeliveries are as
	// for a worker (WorkerOptions).
	Secrets        *Secrets
	MaxOutputBytes int
	MaxStateBytes  int
	MaxDeliveries  int
	// DeadAfter is how long a poller may stay silent (no poll, no
	// heartbeat) before workers remove its consumer from the queues'
	// consumer groups (default DefaultDeadAfter). It counts as live in
	// the registry for three leases after its last poll or heartbeat.
	DeadAfter time.Duration
	// Blocking is how many polls of this process may wait in a blocking
	// read at once, each holding a connection of the engine's pool
	// (default 4); the others look every 100 ms without blocking, so that
	// many idle pollers cannot take every connection.
	Blocking int
	// Logger receives the logs (default slog.Default()).
	Logger *slog.Logger
}

// idleLook is how often a poll that may not block looks for a task.
const idleLook = 100 * time.Millisecond

// Bounds of a poll.
const (
	maxPollHandlers = 32  // handler names in one poll
	maxPollerName   = 128 // bytes of a poller's name
	// pollSlice bounds one blocking read: between reads a poll moves due
	// retries to its queues and notices a client that went away.
	pollSlice = time.Second
)

// Errors of the remote task calls.
var (
	// ErrUnknownTask: the task id is malformed or names no task.
	ErrUnknownTask = errors.New("no such task")
	// ErrLeaseLost: the lease expired or another worker holds the task
	// now, or the task was completed already; the call changed nothing.
	ErrLeaseLost = errors.New("the task's lease expired or moved to another worker, or the task is done")
	// ErrTaskTimedOut: the node's timeout passed before the call; the
	// task failed with error code timeout (and is retried if the node's
	// retry policy says so); what the call posted was not taken.
	ErrTaskTimedOut = errors.New("the task's timeout passed: it failed with error code timeout")
)

// A RemoteTask is a task leased to an external worker: one handler call
// (handlers.Request) with its lease.
type RemoteTask struct {
	ID string `json:"id"`
	// Lease is the secret that completes, fails or extends the task.
	Lease string `json:"lease"`
	// LeaseMS is how long the lease lasts without a heartbeat.
	LeaseMS int64 `json:"lease_ms"`
	// TimeoutMS is the node's timeout (0: none): the attempt fails with
	// error code timeout that long after this poll, whatever the worker
	// does, so a worker should stop by then.
	TimeoutMS      int64           `json:"timeout_ms,omitempty"`
	Handler        string          `json:"handler"`
	RunID          string          `json:"run_id"`
	Workflow       string          `json:"workflow"`
	Node           string          `json:"node"`
	Iteration      string          `json:"iteration,omitempty"`
	Item           int             `json:"item"`
	Attempt        int             `json:"attempt"`
	Config         json.RawMessage `json:"config"`
	IdempotencyKey string          `json:"idempotency_key"`
	Compensation   bool            `json:"compensation,omitempty"`
}

// A Remote hands the tasks of named handlers to external workers. It is
// safe for concurrent use and keeps no state outside Redis but caches:
// any number of processes may serve the same pollers.
type Remote struct {
	e     *Engine
	w     *Worker // its scripts, options and process; never Run
	opts  RemoteOptions
	log   *slog.Logger
	beat  *redis.Script
	drop  *redis.Script
	block chan struct{} // a value per poll in a blocking read (Blocking)
	mu    sync.Mutex
	ready map[string]bool      // streams whose consumer group exists
	claim map[string]string    // stream -> XAUTOCLAIM's cursor
	moved map[string]time.Time // queue -> when its timers were last promoted
	trims map[string]time.Time // stream -> when it was last trimmed
}

// errOffered ends the handling of a message at its handler call: the call
// became a task (Poll) or, in a completion, a second call needs a new
// task (the message is released).
var errOffered = errors.New("handed to a remote worker")

// NewRemote returns the remote task queue of the engine's Redis.
func (e *Engine) NewRemote(opts RemoteOptions) (*Remote, error) {
	if opts.Lease <= 0 {
		opts.Lease = 30 * time.Second
	}
	opts.Lease = max(opts.Lease, 100*time.Millisecond)
	if opts.MaxWait <= 0 {
		opts.MaxWait = 30 * time.Second
	}
	if opts.DeadAfter <= 0 {
		opts.DeadAfter = DefaultDeadAfter
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Blocking <= 0 {
		opts.Blocking = 4
	}
	scripts := map[string]*redis.Script{}
	for _, name := range []string{"remotebeat", "remotedrop"} {
		src, err := scriptFS.ReadFile("scripts/" + name + ".lua")
		if err != nil {
			return nil, err
		}
		scripts[name] = redis.NewScript(string(src))
	}
	w := e.NewWorker(WorkerOptions{
		Handlers: handlers.NewRegistry(handlers.Options{}), Queues: []string{e.ctl}, Secrets: opts.Secrets,
		MaxOutputBytes: opts.MaxOutputBytes, MaxStateBytes: opts.MaxStateBytes, MaxDeliveries: opts.MaxDeliveries,
		VisibilityTimeout: opts.Lease, RunningAfter: -1, Consumer: "remote", Logger: opts.Logger, DeadAfter: opts.DeadAfter,
	})
	return &Remote{
		e: e, w: w, opts: opts, log: w.log, block: make(chan struct{}, opts.Blocking), beat: scripts["remotebeat"], drop: scripts["remotedrop"],
		ready: map[string]bool{}, claim: map[string]string{}, moved: map[string]time.Time{}, trims: map[string]time.Time{},
	}, nil
}

// LeaseDuration returns how long a lease lasts without a heartbeat.
func (r *Remote) LeaseDuration() time.Duration { return r.opts.Lease }

// MaxWait returns the longest wait of a poll.
func (r *Remote) MaxWait() time.Duration { return r.opts.MaxWait }

// A PollError is a poll the caller got wrong (bad handler names or
// poller name): nothing was read.
type PollError struct{ Msg string }

func (e *PollError) Error() string { return e.Msg }

// Poll waits up to wait (at most MaxWait) for a task of one of the named
// handlers and leases it to the poller, or returns nil when none came.
// worker names the poller ([A-Za-z0-9._-], at most 128 bytes); the
// registry lists it as consumer "remote-<worker>" serving the handlers'
// queues. The handlers must be ones that run outside wfc: not core
// handlers (handlers.Core), whose tokens stay on the control queue. When
// ctx ends, Poll returns ctx's error and leaves no message taken.
func (r *Remote) Poll(ctx context.Context, worker string, names []string, wait time.Duration) (*RemoteTask, error) {
	queues, serves, err := r.pollQueues(worker, names)
	if err != nil {
		return nil, err
	}
	consumer := "remote-" + worker
	if err := r.register(ctx, consumer, queues, slices.Sorted(maps.Keys(serves)), ""); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(min(max(wait, 0), r.opts.MaxWait))
	shards := max(r.w.ks.shards, 1)
	active := make([][]string, shards)
	for round := 0; ; round++ {
		blockShard := -1 // a shard with queues to read
		for i := range shards {
			s := (round + i) % shards
			if err := r.expireDue(ctx, s); err != nil {
				return nil, err
			}
			if active[s], err = r.prepare(ctx, s, queues); err != nil {
				return nil, err
			}
			if len(active[s]) == 0 {
				continue
			}
			blockShard = s
			// Leases that expired first: their tasks waited longest.
			if t, err := r.claimExpired(ctx, s, active[s], consumer, serves); t != nil || err != nil {
				return t, err
			}
		}
		left := time.Until(deadline)
		// One shard blocks per round (the others are read without
		// waiting), rotating, so that a multi-shard poll sees them all.
		blocking := false
		if left > 0 && blockShard >= 0 {
			select {
			case r.block <- struct{}{}:
				blocking = true
			default:
			}
		}
		for i := range shards {
			s := (round + i) % shards
			if len(active[s]) == 0 {
				continue
			}
			block := time.Duration(-1)
			if s == blockShard && blocking {
				// (At least 1 ms: BLOCK 0 would wait for ever.)
				block = max(min(left, pollSlice), time.Millisecond)
			}
			t, err := r.read(ctx, s, active[s], consumer, serves, block)
			if t != nil || err != nil {
				if blocking {
					<-r.block
				}
				return t, err
			}
		}
		if blocking {
			<-r.block
		} else if left > 0 && !sleepCtx(ctx, min(left, idleLook)) {
			return nil, ctx.Err()
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if time.Now().After(deadline) {
			return nil, nil
		}
	}
}

// pollQueues checks a poll's names and returns the queues of its
// handlers and the set of handlers it serves.
func (r *Remote) pollQueues(worker string, names []string) ([]string, map[string]bool, error) {
	if !validPollerName(worker) {
		return nil, nil, &PollError{fmt.Sprintf("worker name %q: want 1 to %d of A-Z a-z 0-9 . _ -", clipName(worker), maxPollerName)}
	}
	if len(names) == 0 || len(names) > maxPollHandlers {
		return nil, nil, &PollError{fmt.Sprintf("a poll names 1 to %d handlers, not %d", maxPollHandlers, len(names))}
	}
	var queues []string
	serves := map[string]bool{}
	for _, n := range names {
		if n == "" || len(n) > 256 || strings.ContainsAny(n, " \t\r\n") {
			return nil, nil, &PollError{fmt.Sprintf("bad handler name %q", clipName(n))}
		}
		if handlers.Core(n) || n == "exec" {
			return nil, nil, &PollError{fmt.Sprintf("handler %s is built in: wfc workers run it", n)}
		}
		q := r.e.queueOf(n)
		if q == r.e.ctl {
			return nil, nil, &PollError{fmt.Sprintf("handler %s is on the control queue (%s), which only wfc workers serve", n, q)}
		}
		serves[n] = true
		if !slices.Contains(queues, q) {
			queues = append(queues, q)
		}
	}
	slices.Sort(queues)
	return queues, serves, nil
}

func validPollerName(s string) bool {
	if s == "" || len(s) > maxPollerName {
		return false
	}
	for _, c := range []byte(s) {
		if !(c == '.' || c == '_' || c == '-' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

func clipName(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// prepare returns the queues of the shard that exist — some run used
// their handler, which created their stream and consumer group; a poll
// creates no key, so that polls for made-up names cost Redis nothing —
// and, as a worker's timer loop does for its queues, moves their due
// timers (retries) to them and trims them: no wfc worker serves them.
func (r *Remote) prepare(ctx context.Context, shard int, queues []string) ([]string, error) {
	now := time.Now()
	var active []string
	for _, q := range queues {
		stream := r.w.ks.stream(shard, q)
		r.mu.Lock()
		ready, moved, trimmed := r.ready[stream], r.moved[stream], r.trims[stream]
		r.mu.Unlock()
		if !ready {
			err := r.w.st.rdb.XGroupCreate(ctx, stream, Group, "0").Err()
			if err != nil && !strings.Contains(err.Error(), "BUSYGROUP") {
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				continue // no such stream (yet)
			}
			r.mu.Lock()
			if len(r.ready) > 10000 {
				clear(r.ready)
				clear(r.moved)
				clear(r.trims)
				clear(r.claim)
			}
			r.ready[stream] = true
			r.mu.Unlock()
		}
		active = append(active, q)
		if now.Sub(moved) >= r.w.opts.TimerInterval {
			r.mu.Lock()
			r.moved[stream] = now
			r.mu.Unlock()
			keys := []string{r.w.ks.timers(shard, q), stream}
			for {
				n, err := r.w.st.scripts["promote"].Run(ctx, r.w.st.rdb, keys, nowMS(), 100).Int()
				if err != nil {
					return nil, err
				}
				if n < 100 {
					break
				}
			}
		}
		if now.Sub(trimmed) >= r.w.opts.TrimInterval {
			r.mu.Lock()
			r.trims[stream] = now
			r.mu.Unlock()
			if err := r.w.trim(ctx, stream); err != nil && ctx.Err() == nil {
				r.log.Warn("wfc remote: trimming a queue", "queue", q, "err", err)
			}
		}
	}
	return active, nil
}

// claimExpired takes a message of the shard's queues whose lease expired
// (idle longer than a lease) and offers it.
func (r *Remote) claimExpired(ctx context.Context, shard int, queues []string, consumer string, serves map[string]bool) (*RemoteTask, error) {
	for _, q := range queues {
		stream := r.w.ks.stream(shard, q)
		// A cursor per stream, as a worker's: each call scans a few
		// pending entries, and the next goes on from there.
		r.mu.Lock()
		start := cmpOrStr(r.claim[stream], "0-0")
		r.mu.Unlock()
		msgs, next, err := r.w.st.rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{
			Stream: stream, Group: Group, Consumer: consumer, MinIdle: r.opts.Lease, Start: start, Count: 1,
		}).Result()
		if err == nil {
			r.mu.Lock()
			r.claim[stream] = next
			r.mu.Unlock()
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, err
		}
		for _, m := range msgs {
			if m.Values == nil {
				continue // deleted (trimmed) while pending
			}
			deliveries := 0
			if p, err := r.w.st.rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: stream, Group: Group, Start: m.ID, End: m.ID, Count: 1}).Result(); err == nil && len(p) == 1 {
				deliveries = int(p[0].RetryCount)
			}
			r.log.Info("wfc remote: a lease expired; the task goes to another poller", "stream", stream, "id", m.ID, "deliveries", deliveries)
			if deliveries <= r.w.opts.MaxDeliveries {
				deliveries = 0
			}
			if t, err := r.offer(ctx, shard, q, m, deliveries, serves); t != nil || err != nil {
				return t, err
			}
		}
	}
	return nil, nil
}

// read reads new messages of the shard's queues, one at a time, waiting
// up to block for the first (block < 0: no wait), and offers each until
// one becomes a task.
func (r *Remote) read(ctx context.Context, shard int, queues []string, consumer string, serves map[string]bool, block time.Duration) (*RemoteTask, error) {
	args := &redis.XReadGroupArgs{Group: Group, Consumer: consumer, Count: 1, Block: block}
	for _, q := range queues {
		args.Streams = append(args.Streams, r.w.ks.stream(shard, q))
	}
	args.Streams = append(args.Streams, slices.Repeat([]string{">"}, len(queues))...)
	keys := r.w.ks.takeKeys(shard, queues)
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		// The work of runs in flight first, then new runs (take.lua, as a
		// worker reads); block only when that finds nothing.
		// A remote handler's executions are not the worker's: no target.
		res, _, err := r.w.take(ctx, r.w.st.rdb, shard, keys, queues, consumer, 1, 1, args.Block >= 0)
		if err == nil && len(res) == 0 && args.Block >= 0 {
			res, err = r.w.st.rdb.XReadGroup(ctx, args).Result()
		}
		if err == redis.Nil || err == nil && len(res) == 0 {
			return nil, nil
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, err
		}
		for _, s := range res {
			for _, m := range s.Messages {
				q := r.w.queueOf(s.Stream)
				if ctx.Err() != nil {
					// The poller went away with the message read: give it
					// back at once rather than after a lease.
					raw, _ := m.Values["t"].(string)
					r.w.release(s.Stream, m.ID, raw)
					return nil, ctx.Err()
				}
				if t, err := r.offer(ctx, shard, q, m, 0, serves); t != nil || err != nil {
					return t, err
				}
			}
		}
		args.Block = -1 // the next message only if it is there already
	}
}

// offer handles a message as a worker does up to its handler call, which
// it turns into a leased task. A message handled to the end (a skipped
// node, a duplicate, a token of an ended run, ...) gives nil.
func (r *Remote) offer(ctx context.Context, shard int, q string, m redis.XMessage, poison int, serves map[string]bool) (*RemoteTask, error) {
	var req *handlers.Request
	f := r.flight(ctx, shard, q, m)
	defer f.cancel(nil)
	f.poison = poison
	f.remote = func(_ context.Context, rq handlers.Request) (json.RawMessage, error) {
		if !serves[rq.Handler] {
			return nil, handlers.Errorf(CodeNoHandler, false, "handler %q is not one the remote worker polled for", rq.Handler)
		}
		req = &rq
		f.cancel(errOffered)
		return nil, errOffered
	}
	err := r.w.process(f.ctx, f, nil)
	if req == nil || !errors.Is(context.Cause(f.ctx), errOffered) {
		if err != nil {
			// Left pending, as a worker leaves it: the next poll after a
			// lease claims it.
			r.log.Warn("wfc remote: handling a message failed; it will be retried", "stream", f.stream, "id", m.ID, "err", err)
		}
		return nil, nil
	}
	lease, sum := newLease()
	wctx := context.WithoutCancel(ctx)
	timeout, err := r.nodeTimeout(wctx, f.tok.Run, f.tok.Node)
	if err != nil {
		r.w.release(f.stream, m.ID, f.raw)
		return nil, err
	}
	pipe := r.w.st.rdb.TxPipeline()
	pipe.Set(wctx, r.leaseKey(shard, q, m.ID), sum, r.opts.Lease)
	if timeout > 0 {
		pipe.ZAdd(wctx, r.deadlines(shard), redis.Z{Score: float64(nowMS() + timeout.Milliseconds()), Member: deadlineMember(q, m.ID, sum)})
	}
	if _, err := pipe.Exec(wctx); err != nil {
		return nil, err
	}
	if f.tok.Kind == "exec" {
		r.started(context.WithoutCancel(ctx), f, req.Attempt)
	}
	return &RemoteTask{
		ID: taskID(shard, q, m.ID), Lease: lease, LeaseMS: r.opts.Lease.Milliseconds(), TimeoutMS: timeout.Milliseconds(),
		Handler: req.Handler, RunID: req.RunID, Workflow: req.Workflow, Node: req.Node, Iteration: req.Iteration,
		Item: req.Item, Attempt: req.Attempt, Config: req.Config, IdempotencyKey: req.IdempotencyKey, Compensation: req.Compensation,
	}, nil
}

// started marks a task's execution running (started.lua, as a worker
// does for a handler that runs a while): status and events show that a
// worker has it. The script guards against a late or repeated mark.
func (r *Remote) started(ctx context.Context, f *flight, attempt int) {
	m, err := r.w.st.meta(ctx, f.tok.Run)
	if err != nil {
		return
	}
	b := r.w.st.base(m.ref(), nil)
	a := struct {
		base
		Node    string `json:"node"`
		Iter    string `json:"iter"`
		Gen     int    `json:"gen"`
		Attempt int    `json:"attempt"`
	}{b, f.tok.Node, f.tok.Iter, f.tok.Gen, attempt}
	if _, err := r.w.st.call(ctx, "started", m.ref(), a); err != nil {
		r.log.Debug("wfc remote: marking an execution running", "run", f.tok.Run, "node", f.tok.Node, "err", err)
	}
}

// flight returns a flight for a message handled outside a worker's loops;
// its context outlives the caller's (a handling once started finishes)
// but is bounded.
func (r *Remote) flight(ctx context.Context, shard int, q string, m redis.XMessage) *flight {
	stream := r.w.ks.stream(shard, q)
	f := &flight{shard: shard, q: q, stream: stream, key: msgKey(stream, m.ID), m: m, tok: Token{Item: -1}}
	f.raw, _ = m.Values["t"].(string)
	f.notToken = decodeToken(f.raw, &f.tok) != nil || f.tok.Run == ""
	cctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	tctx, stop := context.WithTimeout(cctx, 30*time.Second)
	f.ctx, f.cancel = tctx, func(cause error) { cancel(cause); stop() }
	return f
}

// Heartbeat extends a task's lease by a lease duration and returns it.
// It reports ErrLeaseLost when the lease is no longer the holder's, and
// ErrRunEnded when the task's run is no longer running (the worker should
// stop working on it; its completion would change nothing).
func (r *Remote) Heartbeat(ctx context.Context, id, lease string) (time.Duration, error) {
	shard, q, msgID, err := r.parseID(id)
	if err != nil {
		return 0, err
	}
	sum := leaseSum(lease)
	res, err := r.beat.Run(ctx, r.w.st.rdb, []string{r.w.ks.stream(shard, q), r.leaseKey(shard, q, msgID), r.deadlines(shard)},
		Group, msgID, sum, r.opts.Lease.Milliseconds(), deadlineMember(q, msgID, sum), nowMS()).Result()
	if err != nil {
		return 0, err
	}
	if n, ok := res.(int64); ok && n == -2 {
		// Past the node's timeout: the task fails now, heartbeats or not.
		if err := r.timeOut(ctx, shard, q, msgID, sum); err != nil {
			return 0, err
		}
		return 0, ErrTaskTimedOut
	}
	consumer, ok := res.(string)
	if !ok {
		return 0, ErrLeaseLost
	}
	if err := r.refresh(ctx, consumer); err != nil {
		r.log.Warn("wfc remote: refreshing a poller's registry record", "err", err)
	}
	// The run: a cancelled one's task is of no use any more.
	raw, err := r.message(ctx, shard, q, msgID)
	if err != nil || raw == "" {
		return r.opts.Lease, err
	}
	tok := Token{Item: -1}
	if decodeToken(raw, &tok) == nil && validRunID(tok.Run) && (tok.Kind == "exec" || tok.Kind == "item") {
		st, err := r.w.st.rdb.HGet(ctx, r.w.ks.state(tok.Run), runField("status")).Result()
		if err == nil && st != RunRunning {
			return 0, ErrRunEnded
		}
	}
	return r.opts.Lease, nil
}

// ErrRunEnded: the task's run ended (cancelled, failed elsewhere, past
// its deadline); working on the task is of no use.
var ErrRunEnded = errors.New("the task's run is no longer running")

// Complete records a task's output, as a handler's return value: checked
// against the node's output type and bounds, then routed. It reports
// ErrLeaseLost, changing nothing, when the lease is not the holder's
// (expired, moved, or the task was completed).
func (r *Remote) Complete(ctx context.Context, id, lease string, output json.RawMessage) error {
	return r.finish(ctx, id, lease, func() (json.RawMessage, error) { return output, nil })
}

// A TaskError is a remote handler's failure: an error code (the
// workflow's on_error routes and retry filters read it), a message, and
// whether another attempt may help.
type TaskError struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	Retryable bool   `json:"retryable"`
}

// Fail records a task's failure as a handler error (handlers.Error): the
// node's retry policy retries a retryable one, its error routes take the
// code. The code must be [A-Za-z0-9._-]+ (empty: "error"). ErrLeaseLost
// as for Complete.
func (r *Remote) Fail(ctx context.Context, id, lease string, te TaskError) error {
	if te.Code == "" {
		te.Code = handlers.CodeError
	}
	if !ir.ValidCode(te.Code) || len(te.Code) > 128 {
		return &PollError{fmt.Sprintf("error code %q: want [A-Za-z0-9._-]+, at most 128 bytes", clipName(te.Code))}
	}
	if te.Message == "" {
		te.Message = "remote handler failed (" + te.Code + ")"
	}
	return r.finish(ctx, id, lease, func() (json.RawMessage, error) {
		return nil, &handlers.Error{Code: te.Code, Message: te.Message, Retryable: te.Retryable}
	})
}

// finish handles a task's message again with result standing in for its
// handler call, when lease holds the task. Past the task's deadline the
// result is not taken: the task fails with error code timeout and finish
// returns ErrTaskTimedOut.
func (r *Remote) finish(ctx context.Context, id, lease string, result func() (json.RawMessage, error)) error {
	shard, q, msgID, err := r.parseID(id)
	if err != nil {
		return err
	}
	sum := leaseSum(lease)
	timedOut, err := r.finishMsg(ctx, shard, q, msgID, sum, result)
	if err == nil && timedOut {
		err = ErrTaskTimedOut
	}
	return err
}

// finishMsg is finish once the task is known: its lease's hash is sum.
// It reports whether the task's deadline had passed (then result is not
// used: a timeout error stands in for it).
func (r *Remote) finishMsg(ctx context.Context, shard int, q, msgID, sum string, result func() (json.RawMessage, error)) (timedOut bool, _ error) {
	key := r.leaseKey(shard, q, msgID)
	// The lease and the task's deadline in one round trip.
	pipe := r.w.st.rdb.Pipeline()
	get := pipe.Get(ctx, key)
	member := deadlineMember(q, msgID, sum)
	due := pipe.ZScore(ctx, r.deadlines(shard), member)
	_, _ = pipe.Exec(ctx)
	cur, err := get.Result()
	if err == redis.Nil || err == nil && subtle.ConstantTimeCompare([]byte(cur), []byte(sum)) != 1 {
		return false, ErrLeaseLost
	}
	if err != nil {
		return false, err
	}
	if err := due.Err(); err != nil && err != redis.Nil {
		return false, err
	} else if err == nil && int64(due.Val()) <= nowMS() {
		timedOut = true
	}
	ms, err := r.w.st.rdb.XRangeN(ctx, r.w.ks.stream(shard, q), msgID, msgID, 1).Result()
	if err != nil {
		return false, err
	}
	if len(ms) == 0 {
		return false, ErrLeaseLost // acknowledged and trimmed: done
	}
	f := r.flight(ctx, shard, q, ms[0])
	defer f.cancel(nil)
	if timedOut {
		timeout, _ := r.nodeTimeout(ctx, f.tok.Run, f.tok.Node)
		result = func() (json.RawMessage, error) {
			return nil, handlers.Errorf(handlers.CodeTimeout, true, "attempt timed out after %s (the remote worker had not completed it)", timeout)
		}
	}
	used := false
	f.remote = func(context.Context, handlers.Request) (json.RawMessage, error) {
		if used {
			// A second call in one handling (a finally step's retry):
			// it needs a task of its own.
			f.cancel(errOffered)
			return nil, errOffered
		}
		used = true
		return result()
	}
	err = r.w.process(f.ctx, f, nil)
	if errors.Is(context.Cause(f.ctx), errOffered) {
		r.w.release(f.stream, msgID, f.raw)
		err = nil
	}
	if derr := r.drop.Run(context.WithoutCancel(ctx), r.w.st.rdb, []string{key, r.deadlines(shard)}, sum, member).Err(); derr != nil && err == nil {
		r.log.Warn("wfc remote: dropping a lease", "err", derr)
	}
	return timedOut, err
}

// timeOut fails a task whose deadline passed (its lease's hash is sum).
// A task done or moved meanwhile is left as it is.
func (r *Remote) timeOut(ctx context.Context, shard int, q, msgID, sum string) error {
	_, err := r.finishMsg(ctx, shard, q, msgID, sum, func() (json.RawMessage, error) {
		return nil, errors.New("unreachable: a timed-out task's result") // finishMsg replaces it
	})
	if errors.Is(err, ErrLeaseLost) {
		err = nil
	}
	return err
}

// Sweep fails timed-out tasks of every shard until ctx is done, every
// timer interval: without it a task whose worker went silent is failed
// only by the next poll, and with no poller at all its run would wait
// past the node's timeout. wfc serve runs it for as long as it serves.
func (r *Remote) Sweep(ctx context.Context) {
	t := time.NewTicker(r.w.opts.TimerInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for s := 0; s < max(r.w.ks.shards, 1); s++ {
			if err := r.expireDue(ctx, s); err != nil && ctx.Err() == nil {
				r.log.Warn("wfc remote: failing timed-out tasks", "shard", s, "err", err)
			}
		}
	}
}

// expireDue fails the shard's tasks whose deadline passed (at most 100 a
// call; the next poll goes on), at most once per timer interval per
// process, and drops deadlines of leases gone.
func (r *Remote) expireDue(ctx context.Context, shard int) error {
	now := time.Now()
	k := r.deadlines(shard)
	r.mu.Lock()
	last := r.moved[k]
	if now.Sub(last) >= r.w.opts.TimerInterval {
		r.moved[k] = now
	}
	r.mu.Unlock()
	if now.Sub(last) < r.w.opts.TimerInterval {
		return nil
	}
	due, err := r.w.st.rdb.ZRangeByScore(ctx, k, &redis.ZRangeBy{Min: "-inf", Max: strconv.FormatInt(nowMS(), 10), Count: 100}).Result()
	if err != nil {
		return err
	}
	for _, m := range due {
		parts := strings.Split(m, "~")
		if len(parts) != 3 {
			r.w.st.rdb.ZRem(ctx, k, m)
			continue
		}
		r.log.Info("wfc remote: a task's timeout passed; it fails with error code timeout", "queue", parts[0], "id", parts[1])
		if err := r.timeOut(ctx, shard, parts[0], parts[1], parts[2]); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			r.log.Warn("wfc remote: failing a timed-out task", "queue", parts[0], "id", parts[1], "err", err)
			continue
		}
		// A lease gone (done, or redelivered under another lease) leaves
		// its deadline: drop it.
		r.w.st.rdb.ZRem(ctx, k, m)
	}
	return nil
}

// nodeTimeout returns the timeout of a run's node (0: none), as a worker
// bounds its handler call with (job.call).
func (r *Remote) nodeTimeout(ctx context.Context, run, node string) (time.Duration, error) {
	if run == "" || node == "" {
		return 0, nil
	}
	m, err := r.w.st.meta(ctx, run)
	if err != nil {
		if errors.Is(err, ErrUnknownRun) {
			return 0, nil
		}
		return 0, err
	}
	p, err := r.w.st.planFor(ctx, m.IR)
	if err != nil {
		return 0, err
	}
	if n := p.nodes[node]; n != nil && n.TimeoutMS > 0 {
		return time.Duration(n.TimeoutMS) * time.Millisecond, nil
	}
	return 0, nil
}

// deadlines is the shard's sorted set of remote tasks' deadlines (ms).
func (r *Remote) deadlines(shard int) string { return r.w.ks.tag(shard) + ":rdeadlines" }

// A deadline's member: queue~message id~lease hash (a redelivered
// task's new lease has an entry of its own).
func deadlineMember(q, msgID, sum string) string { return q + "~" + msgID + "~" + sum }

// message returns a pending message's token ("" when it is gone).
func (r *Remote) message(ctx context.Context, shard int, q, id string) (string, error) {
	ms, err := r.w.st.rdb.XRangeN(ctx, r.w.ks.stream(shard, q), id, id, 1).Result()
	if err != nil || len(ms) == 0 {
		return "", err
	}
	raw, _ := ms[0].Values["t"].(string)
	return raw, nil
}

// register writes a poller's registry record on every shard; with host
// "" it keeps the record's host.
func (r *Remote) register(ctx context.Context, consumer string, queues, names []string, host string) error {
	if host == "" {
		host = "remote"
	}
	rec, err := json.Marshal(regRecord{
		Queues: queues, Handlers: names, Seen: nowMS(), Beat: r.opts.Lease.Milliseconds(),
		Dead: r.opts.DeadAfter.Milliseconds(), Host: host,
	})
	if err != nil {
		return err
	}
	pipe := r.w.st.rdb.Pipeline()
	for s := range max(r.w.ks.shards, 1) {
		pipe.HSet(ctx, r.w.ks.workers(s), consumer, rec)
	}
	_, err = pipe.Exec(ctx)
	return err
}

// refresh marks a poller seen now (a heartbeat), keeping its record.
func (r *Remote) refresh(ctx context.Context, consumer string) error {
	raw, err := r.w.st.rdb.HGet(ctx, r.w.ks.workers(0), consumer).Result()
	if err == redis.Nil {
		return nil
	}
	if err != nil {
		return err
	}
	var rec regRecord
	if err := json.Unmarshal([]byte(raw), &rec); err != nil {
		return nil
	}
	return r.register(ctx, consumer, rec.Queues, rec.Handlers, rec.Host)
}

// A task id names its message: shard, queue and message id, in base64url
// (it is no secret: the lease is).
func taskID(shard int, q, msgID string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(shard) + "~" + q + "~" + msgID))
}

func (r *Remote) parseID(id string) (shard int, q, msgID string, err error) {
	if len(id) > 256 {
		return 0, "", "", ErrUnknownTask
	}
	b, err := base64.RawURLEncoding.DecodeString(id)
	if err != nil {
		return 0, "", "", ErrUnknownTask
	}
	parts := strings.Split(string(b), "~")
	if len(parts) != 3 {
		return 0, "", "", ErrUnknownTask
	}
	shard, err = strconv.Atoi(parts[0])
	if err != nil || shard < 0 || shard >= max(r.w.ks.shards, 1) || !ValidQueue(parts[1]) || parts[1] == r.e.ctl || !validStreamID(parts[2]) {
		return 0, "", "", ErrUnknownTask
	}
	return shard, parts[1], parts[2], nil
}

func validStreamID(s string) bool {
	ms, seq, ok := strings.Cut(s, "-")
	if !ok {
		return false
	}
	_, e1 := strconv.ParseUint(ms, 10, 64)
	_, e2 := strconv.ParseUint(seq, 10, 64)
	return e1 == nil && e2 == nil
}

// leaseKey is the key of a message's lease, in its stream's slot.
func (r *Remote) leaseKey(shard int, q, msgID string) string {
	return r.w.ks.tag(shard) + ":lease:" + q + ":" + msgID
}

// newLease returns a new lease (256 random bits) and its hash, which is
// all Redis keeps.
func newLease() (lease, sum string) {
	var b [32]byte
	rand.Read(b[:])
	lease = base64.RawURLEncoding.EncodeToString(b[:])
	return lease, leaseSum(lease)
}

func leaseSum(lease string) string {
	h := sha256.Sum256([]byte(lease))
	return hex.EncodeToString(h[:])
}

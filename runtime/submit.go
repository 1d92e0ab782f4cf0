package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/wfc-lang/wfc/ir"
)

// A Prepared is a workflow checked, copied, hashed and planned once, for
// submitting many runs of it with SubmitPrepared: Submit does that work on
// every call (hashing the IR alone is canonical JSON and SHA-256 of the
// whole workflow). A Prepared holds its own copy of the workflow, so the
// workflow given to Prepare may change afterwards; it is immutable and
// safe for concurrent use, and belongs to the engine that made it.
type Prepared struct {
	e *Engine
	p *plan
}

// Prepare checks w as Submit does (CheckSupported, the IR's validity),
// plans a copy of it and returns it for SubmitPrepared. It writes nothing:
// the workflow is stored with its first run.
func (e *Engine) Prepare(w *ir.Workflow) (*Prepared, error) {
	p, err := e.plan(w)
	if err != nil {
		return nil, err
	}
	return &Prepared{e: e, p: p}, nil
}

// Hash is the prepared workflow's IR hash (ir.Hash), as its runs record it.
func (p *Prepared) Hash() string { return p.p.hash }

// Name is the prepared workflow's name.
func (p *Prepared) Name() string { return p.p.w.Name }

// SubmitPrepared starts a run of a prepared workflow: Submit without the
// checking, copying, hashing and planning of the workflow, which Prepare
// did once. The inputs are validated and the run written as by Submit,
// with the same options and errors.
func (e *Engine) SubmitPrepared(ctx context.Context, p *Prepared, inputs map[string]any, opts ...SubmitOption) (string, error) {
	if p == nil || p.p == nil {
		return "", errors.New("runtime: SubmitPrepared of a nil Prepared")
	}
	if p.e != e {
		// Its queues and control queue are another engine's.
		return "", errors.New("runtime: SubmitPrepared of a workflow another engine prepared")
	}
	return e.submit(ctx, p.p, inputs, opts)
}

// The submit batcher: the script that starts a run (begin.lua, or
// start.lua) goes to Redis with the run's index entry (runindex.go) in one
// pipeline, and the calls of concurrent Submits share it (commitGroup, as
// the worker's completions do: batch.go). So a lone Submit waits for
// nothing, and a burst of them costs Redis a read, a write and an epoll
// wake per pipeline instead of per run. Each call keeps its own reply and
// error: a pipeline is no transaction, and each script is atomic and
// idempotent on its own, as when each Submit sent its own.
type submitter struct {
	rdb redis.UniversalClient
	log *slog.Logger
	commitGroup[*startCall]

	// sent (tests) is called with the calls of each pipeline before it
	// goes.
	sent func(n int)
}

// maxSubmitBatch bounds the calls of one pipeline: Redis runs a pipeline's
// scripts back to back, and the workers' commands wait behind them.
const maxSubmitBatch = 64

// submitLanes is how many submit pipelines may be in flight at once: with
// two, one pipeline's scripts run in Redis while the next is encoded, or
// its replies decoded (8 goroutines submitting with no worker: 1.3-1.7
// times the submits/s of one lane, at 0.35-0.40 round trips a run instead
// of 0.24, and the same Redis CPU a run).
const submitLanes = 2

// A startCall is one run's start script with its index entry.
type startCall struct {
	ctx  context.Context
	sc   *redis.Script
	keys []string
	args []any
	idx  string // the run index of the run's shard
	run  string

	res any
	err error
	groupTurn
}

func newSubmitter(rdb redis.UniversalClient, log *slog.Logger) *submitter {
	return &submitter{rdb: rdb, log: log, commitGroup: commitGroup[*startCall]{max: maxSubmitBatch, lanes: submitLanes}}
}

// run writes c.run's index entry (ZADD NX: a first time stays) and then
// calls the script, and returns the script's reply. A caller whose context
// ends while its call waits for a pipeline returns the context's error
// and its call is not sent; once its call is in a pipeline, it waits for
// the outcome (bounded by the client's timeouts), which it returns: the
// run may have started.
func (s *submitter) run(c *startCall) (any, error) {
	if err := c.ctx.Err(); err != nil {
		return nil, err
	}
	if !s.do(c, c.ctx.Done(), s.send) {
		return nil, c.ctx.Err()
	}
	return c.res, c.err
}

// send runs a batch of calls in one pipeline, each its ZADD NX then its
// EVALSHA, and those that met NOSCRIPT (the server restarted or flushed its
// scripts) again in a second one, with EVAL. A call whose context ended
// before it was sent is not sent (the leader's own included). The
// pipeline is not cancelled with any one caller's context.
func (s *submitter) send(batch []*startCall) {
	live := make([]*startCall, 0, len(batch))
	for _, c := range batch {
		if err := c.ctx.Err(); err != nil {
			c.err = err
		} else {
			live = append(live, c)
		}
	}
	if len(live) == 0 {
		return
	}
	if s.sent != nil {
		s.sent(len(live))
	}
	ctx := context.WithoutCancel(live[0].ctx)
	s.exec(ctx, live, false)
	var again []*startCall
	for _, c := range live {
		if c.err != nil && strings.HasPrefix(c.err.Error(), "NOSCRIPT") {
			again = append(again, c)
		}
	}
	if len(again) > 0 {
		s.exec(ctx, again, true)
	}
}

// exec sends calls in one pipeline, by SHA or (eval) with their source.
// On a cluster go-redis splits it by node, each node's commands in their
// order, so a run's index entry still goes before its script (both are in
// the run's shard's slot).
func (s *submitter) exec(ctx context.Context, calls []*startCall, eval bool) {
	pipe := s.rdb.Pipeline()
	adds := make([]*redis.IntCmd, len(calls))
	cmds := make([]*redis.Cmd, len(calls))
	now := float64(nowMS())
	for i, c := range calls {
		adds[i] = pipe.ZAddNX(ctx, c.idx, redis.Z{Score: now, Member: c.run})
		if eval {
			cmds[i] = c.sc.Eval(ctx, pipe, c.keys, c.args...)
		} else {
			cmds[i] = c.sc.EvalSha(ctx, pipe, c.keys, c.args...)
		}
	}
	// The commands carry their own errors; each script's is its caller's.
	_, _ = pipe.Exec(ctx)
	for i, c := range calls {
		c.res, c.err = cmds[i].Result()
		if err := adds[i].Err(); err != nil && c.err == nil {
			// The run starts unlisted (GET /v1/runs misses it); it runs
			// as any other.
			s.log.Warn("wfc: indexing a run", "run", c.run, "err", err)
		}
	}
}

// replyText is a script's status reply as text.
func replyText(res any, err error) (string, error) {
	if err != nil {
		return "", err
	}
	if v, ok := res.(string); ok {
		return v, nil
	}
	return "", fmt.Errorf("unexpected reply %v (%T)", res, res)
}

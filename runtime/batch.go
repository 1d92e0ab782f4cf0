package runtime

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// A batcher sends script calls made by concurrent handlers in pipelines:
// group commit. A call made while no pipeline is in flight goes at once,
// alone; calls made while one is in flight wait for it and then go
// together in the next. So a lone run pays no delay, and under load many
// completions share one round trip — one write and one read for the worker
// and for Redis instead of one each, which on this kind of machine costs
// more than the scripts themselves. Each call stays its own EVALSHA,
// atomic and idempotent as before: a pipeline is not a transaction, and
// need not be.
type batcher struct {
	rdb redis.UniversalClient
	max int // calls per pipeline

	mu      sync.Mutex
	busy    bool // a leader is sending
	pending []*batchCall

	pipelined atomic.Int64 // calls sent in pipelines of two or more (tests)
}

type batchCall struct {
	sc   *redis.Script
	keys []string
	args []any

	res  any
	err  error
	wake chan struct{} // closed when done, or when the call is to lead
	lead bool
}

func newBatcher(rdb redis.UniversalClient, n int) *batcher {
	return &batcher{rdb: rdb, max: max(n, 1)}
}

// run calls the script and returns its reply. The caller whose call finds
// no pipeline in flight leads: it sends its call with every call waiting
// (up to max), hands the lead to the first call that arrived meanwhile,
// and returns.
func (b *batcher) run(ctx context.Context, sc *redis.Script, keys []string, args ...any) (any, error) {
	c := &batchCall{sc: sc, keys: keys, args: args, wake: make(chan struct{})}
	b.mu.Lock()
	if b.busy {
		b.pending = append(b.pending, c)
		b.mu.Unlock()
		// No select on ctx: the call may be in a pipeline already, and
		// its outcome must be known; the client's timeouts bound the wait.
		<-c.wake
		if !c.lead {
			return c.res, c.err
		}
		b.mu.Lock()
	} else {
		b.busy = true
	}
	n := min(len(b.pending), b.max-1)
	batch := append([]*batchCall{c}, b.pending[:n]...)
	b.pending = b.pending[n:]
	b.mu.Unlock()

	b.send(context.WithoutCancel(ctx), batch)

	b.mu.Lock()
	if len(b.pending) > 0 {
		next := b.pending[0]
		b.pending = b.pending[1:]
		next.lead = true
		close(next.wake)
	} else {
		b.busy = false
	}
	b.mu.Unlock()
	for _, o := range batch[1:] {
		close(o.wake)
	}
	return c.res, c.err
}

// send runs the batch: one EVALSHA alone, several in a pipeline. A call
// that meets NOSCRIPT (the server restarted or flushed its scripts) is
// repeated on its own with the script's EVALSHA-then-EVAL.
func (b *batcher) send(ctx context.Context, batch []*batchCall) {
	if len(batch) == 1 {
		c := batch[0]
		c.res, c.err = c.sc.Run(ctx, b.rdb, c.keys, c.args...).Result()
		return
	}
	b.pipelined.Add(int64(len(batch)))
	pipe := b.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(batch))
	for i, c := range batch {
		cmds[i] = c.sc.EvalSha(ctx, pipe, c.keys, c.args...)
	}
	pipe.Exec(ctx) // each command's error is read below
	for i, c := range batch {
		c.res, c.err = cmds[i].Result()
		if c.err != nil && strings.HasPrefix(c.err.Error(), "NOSCRIPT") {
			c.res, c.err = c.sc.Run(ctx, b.rdb, c.keys, c.args...).Result()
		}
	}
}

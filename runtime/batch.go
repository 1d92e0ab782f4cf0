package runtime

import (
	"context"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// A batcher sends script calls made by concurrent handlers in pipelines:
// group commit (commitGroup). A call made while fewer than lanes pipelines are in flight
// goes at once; calls made while all lanes are busy wait for one and then
// go together in the next. So a lone run pays no delay, and under load many
// completions share one round trip — one write and one read for the worker
// and for Redis instead of one each, which on this kind of machine costs
// more than the scripts themselves. With one lane the worker and Redis
// take turns (while a pipeline is in Redis, its completions' handlers
// cannot have been dispatched yet, and the worker's finished ones wait);
// with two, one pipeline's scripts run while the worker handles the
// other's reads, and a worker's throughput rises by a fifth or more. Each
// call stays its own EVALSHA, atomic and idempotent as before: a pipeline
// is not a transaction, and need not be, and two in flight may be applied
// in either order, as two workers' calls may.
type batcher struct {
	rdb redis.UniversalClient
	pb  piggyback // nil: none
	commitGroup[*batchCall]

	pipelined atomic.Int64 // calls sent in pipelines of two or more (tests)
	// offered: slots that went beyond one per call, from calls that
	// carry several completions (runOffer; tests).
	offered atomic.Int64
}

// A piggyback lets a batch's pipeline also read the next messages for the
// slots its callers are about to free: the worker's take. A completion
// then costs no read of its own while work is waiting.
type piggyback interface {
	// queueTake adds a read of the shard's queues to the pipeline, for
	// the k callers' slots and any free ones it takes, or returns nil (the
	// worker is stopping).
	queueTake(ctx context.Context, pipe redis.Pipeliner, shard, k int) *pendingTake
	// takeDone dispatches what the read returned, each message with a
	// slot, the callers' first (t.k of them: queueTake may have kept
	// fewer than it was offered), and returns how many of the callers'
	// slots it used.
	takeDone(ctx context.Context, t *pendingTake, shard int) int
}

type batchCall struct {
	sc    *redis.Script
	keys  []string
	args  []any
	give  bool // the caller's slot may go to a message the batch reads
	shard int  // the shard of the caller's run
	gave  bool // it went
	// offer, when set, offers the slots of the handlers whose
	// completions the call carries instead (give is then false); slots
	// is how many it offered.
	offer slotOffer
	slots int

	res any
	err error
	groupTurn
}

// A slotOffer offers the handling slots of several completions that one
// call carries (a group of for_each items, items.go): seal closes the
// call to more of them and returns how many slots it offers, and took
// hands n of them to messages the batch read, before the call returns.
type slotOffer interface {
	seal() int
	took(n int)
}

func newBatcher(rdb redis.UniversalClient, n, lanes int, pb piggyback) *batcher {
	return &batcher{rdb: rdb, pb: pb, commitGroup: commitGroup[*batchCall]{max: max(n, 1), lanes: max(lanes, 1)}}
}

// run calls the script and returns its reply. The caller whose call finds
// a lane free leads: it sends its call with every call waiting
// (up to max), hands the lead to the first call that arrived meanwhile,
// and returns. With give, the caller offers its handling slot to a message
// the batch reads; gave reports that the slot went (the caller must not
// release it).
func (b *batcher) run(ctx context.Context, sc *redis.Script, keys []string, give bool, shard int, args ...any) (res any, gave bool, err error) {
	c := &batchCall{sc: sc, keys: keys, args: args, give: give, shard: shard}
	b.call(ctx, c)
	return c.res, c.gave, c.err
}

// runOffer is run for a call that carries several completions: it offers
// their slots (offer) to the messages the batch reads.
func (b *batcher) runOffer(ctx context.Context, sc *redis.Script, keys []string, offer slotOffer, shard int, args ...any) (any, error) {
	c := &batchCall{sc: sc, keys: keys, args: args, offer: offer, shard: shard}
	b.call(ctx, c)
	return c.res, c.err
}

func (b *batcher) call(ctx context.Context, c *batchCall) {
	// No cancel: the call may be in a pipeline already, and its outcome
	// must be known; the client's timeouts bound the wait.
	b.do(c, nil, func(batch []*batchCall) { b.send(context.WithoutCancel(ctx), batch) })
}

// send runs the batch: one EVALSHA alone, several in a pipeline. A call
// that meets NOSCRIPT (the server restarted or flushed its scripts) is
// repeated on its own with the script's EVALSHA-then-EVAL.
func (b *batcher) send(ctx context.Context, batch []*batchCall) {
	var givers []*batchCall
	slots := 0
	if b.pb != nil {
		for _, c := range batch {
			if c.offer != nil {
				c.slots = c.offer.seal()
			} else if c.give {
				c.slots = 1
			}
			if c.slots > 0 {
				givers = append(givers, c)
				slots += c.slots
			}
		}
	}
	if len(batch) == 1 && len(givers) == 0 {
		c := batch[0]
		c.res, c.err = c.sc.Run(ctx, b.rdb, c.keys, c.args...).Result()
		return
	}
	if len(batch) > 1 {
		b.pipelined.Add(int64(len(batch)))
	}
	pipe := b.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(batch))
	for i, c := range batch {
		cmds[i] = c.sc.EvalSha(ctx, pipe, c.keys, c.args...)
	}
	// After the completions: it may read the tokens they just queued.
	var take *pendingTake
	if len(givers) > 0 {
		take = b.pb.queueTake(ctx, pipe, givers[0].shard, slots)
	}
	pipe.Exec(ctx) // each command's error is read below
	if take != nil {
		used := b.pb.takeDone(ctx, take, givers[0].shard)
		for _, c := range givers {
			n := min(used, c.slots)
			used -= n
			if c.offer != nil {
				c.offer.took(n)
				b.offered.Add(int64(max(n-1, 0)))
			} else {
				c.gave = n > 0
			}
		}
	}
	for i, c := range batch {
		c.res, c.err = cmds[i].Result()
		if c.err != nil && strings.HasPrefix(c.err.Error(), "NOSCRIPT") {
			c.res, c.err = c.sc.Run(ctx, b.rdb, c.keys, c.args...).Result()
		}
	}
}

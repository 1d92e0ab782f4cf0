package runtime

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wfc-lang/wfc/ir"
)

// What `wfc serve` (package server) needs of the runtime beyond running
// workflows: reading a run's events from a position, readiness, single-use
// claims, and a catalog of deployed workflows (IR by hash, tags).

// EventsAfter returns up to count events of run's log after the event id
// after ("" or "0": from the start), oldest first. When there is none yet
// it waits up to block for one (0: does not wait). A server streams a run
// with it and resumes a stream from the last id a client saw.
func (e *Engine) EventsAfter(ctx context.Context, run, after string, count int64, block time.Duration) ([]Event, error) {
	if !validRunID(run) {
		return nil, fmt.Errorf("%w %q", ErrUnknownRun, run)
	}
	if after == "" {
		after = "0"
	}
	if _, _, err := splitStreamID(after); err != nil {
		return nil, fmt.Errorf("runtime: bad event id %q", after)
	}
	if count <= 0 {
		count = 100
	}
	key := e.st.ks.events(run)
	msgs, err := e.st.rdb.XRangeN(ctx, key, "("+after, "+", count).Result()
	if after == "0" {
		msgs, err = e.st.rdb.XRangeN(ctx, key, "-", "+", count).Result()
	}
	if err != nil || len(msgs) > 0 || block <= 0 {
		return parseEvents(msgs), err
	}
	res, err := e.st.blk.XRead(ctx, &redis.XReadArgs{Streams: []string{key, after}, Count: count, Block: block}).Result()
	if err == redis.Nil || err != nil && ctx.Err() == nil && isTimeout(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Event
	for _, s := range res {
		out = append(out, parseEvents(s.Messages)...)
	}
	return out, nil
}

// splitStreamID parses a stream entry id "ms-seq" (or "ms").
func splitStreamID(id string) (int64, int64, error) {
	ms, seq, found := cutDash(id)
	a, err := strconv.ParseUint(ms, 10, 64)
	if err != nil {
		return 0, 0, err
	}
	var b uint64
	if found {
		if b, err = strconv.ParseUint(seq, 10, 64); err != nil {
			return 0, 0, err
		}
	}
	return int64(a), int64(b), nil
}

func cutDash(s string) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == '-' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// Ready reports whether Redis answers and has every script of the runtime
// in its script cache (SCRIPT EXISTS); it loads missing ones again, as
// after a Redis restart, and fails only when that fails.
func (e *Engine) Ready(ctx context.Context) error {
	if err := e.st.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	names := make([]string, 0, len(e.st.scripts))
	hashes := make([]string, 0, len(e.st.scripts))
	for name, sc := range e.st.scripts {
		names = append(names, name)
		hashes = append(hashes, sc.Hash())
	}
	ok, err := e.st.rdb.ScriptExists(ctx, hashes...).Result()
	if err != nil {
		return fmt.Errorf("redis: script exists: %w", err)
	}
	for i, have := range ok {
		if !have {
			if err := e.st.scripts[names[i]].Load(ctx, e.st.rdb).Err(); err != nil {
				return fmt.Errorf("redis: loading script %s: %w", names[i], err)
			}
		}
	}
	return nil
}

// ClaimOnce records that the single-use name of run was used, and reports
// whether this call was the first (SET NX, atomic in Redis). The claim is
// kept as long as the run's keys would be by default (DefaultRetention,
// or the engine's Retention when longer), so that a replay after the run
// ended is still refused. Completion tokens of `wfc serve` use it.
func (e *Engine) ClaimOnce(ctx context.Context, run, name string) (bool, error) {
	if !validRunID(run) {
		return false, fmt.Errorf("%w %q", ErrUnknownRun, run)
	}
	ttl := max(DefaultRetention, e.opts.Retention)
	if e.opts.Retention < 0 {
		ttl = 0
	}
	return e.st.rdb.SetNX(ctx, e.st.ks.runKey(run, "once:"+name), nowMS(), ttl).Result()
}

// ReleaseOnce undoes a ClaimOnce whose use failed before it changed
// anything (the run refused the signal), so that the token can be used
// again.
func (e *Engine) ReleaseOnce(ctx context.Context, run, name string) error {
	return e.st.rdb.Del(ctx, e.st.ks.runKey(run, "once:"+name)).Err()
}

// The workflows wfc serve deploys live in the versioned store
// (versions.go); StoreIR is its tagless deployment.

// ErrUnknownWorkflow is returned for a hash or name that names no stored
// workflow.
var ErrUnknownWorkflow = errors.New("unknown workflow")

// StoreIR validates w and stores its IR under its content hash (once: the
// content under a hash never changes), without a tag: a deployment of
// wfc serve that names no tag. It returns the hash, for StoredIR.
func (e *Engine) StoreIR(ctx context.Context, w *ir.Workflow) (string, error) {
	p, err := e.plan(w)
	if err != nil {
		return "", err
	}
	if err := e.storeIR(ctx, p); err != nil {
		return "", err
	}
	return p.hash, nil
}

// IsIRHash reports whether s is an IR content hash as ir.Hash writes it:
// "sha256:" and 64 lower-case hex digits. Anything else names a tag.
func IsIRHash(s string) bool {
	s, ok := strings.CutPrefix(s, "sha256:")
	if !ok || len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

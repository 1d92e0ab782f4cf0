package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
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

// The workflow catalog: deployed IR documents by content hash (the key
// Submit stores them under, "<prefix>:ir:<hash>"), a sorted set of the
// deployed hashes by first deployment time ("<prefix>:workflows") and a
// hash of tags ("<prefix>:tags": tag -> IR hash) and one of names
// ("<prefix>:workflow-names": IR hash -> workflow name). It is read and written
// with plain commands, never inside a script, so it needs no hash tag.

func (k keyspace) workflowIndex() string { return k.prefix + ":workflows" }
func (k keyspace) workflowTags() string  { return k.prefix + ":tags" }
func (k keyspace) workflowNames() string { return k.prefix + ":workflow-names" }

// ErrUnknownWorkflow is returned for a hash or tag that names no deployed
// workflow.
var ErrUnknownWorkflow = errors.New("unknown workflow")

// A Deployed is a workflow of the catalog.
type Deployed struct {
	Hash     string    `json:"hash"`
	Name     string    `json:"name"`
	Deployed time.Time `json:"deployed"`
	Tags     []string  `json:"tags,omitempty"`
}

// DeployWorkflow validates w, stores its IR by content hash, adds it to
// the catalog and, when tag is not empty, points tag at it (a tag moves;
// the IR under a hash never changes). It returns the hash.
func (e *Engine) DeployWorkflow(ctx context.Context, w *ir.Workflow, tag string) (string, error) {
	if probs := ir.Validate(w); len(probs) > 0 {
		return "", fmt.Errorf("runtime: invalid IR: %v", ir.Problems(probs))
	}
	hash, err := ir.Hash(w)
	if err != nil {
		return "", err
	}
	data, err := ir.Marshal(w)
	if err != nil {
		return "", err
	}
	pipe := e.st.rdb.TxPipeline()
	pipe.SetNX(ctx, e.st.ks.ir(hash), data, 0)
	pipe.ZAddNX(ctx, e.st.ks.workflowIndex(), redis.Z{Score: float64(nowMS()), Member: hash})
	pipe.HSet(ctx, e.st.ks.workflowNames(), hash, w.Name)
	if tag != "" {
		pipe.HSet(ctx, e.st.ks.workflowTags(), tag, hash)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return "", err
	}
	return hash, nil
}

// DeployedWorkflow returns the IR of a deployed hash, or of the hash a tag
// names (IsIRHash tells them apart).
func (e *Engine) DeployedWorkflow(ctx context.Context, ref string) (*ir.Workflow, string, error) {
	hash := ref
	if !IsIRHash(ref) {
		h, err := e.st.rdb.HGet(ctx, e.st.ks.workflowTags(), ref).Result()
		if err == redis.Nil {
			return nil, "", fmt.Errorf("%w: no tag %q", ErrUnknownWorkflow, ref)
		}
		if err != nil {
			return nil, "", err
		}
		hash = h
	}
	data, err := e.st.rdb.Get(ctx, e.st.ks.ir(hash)).Bytes()
	if err == redis.Nil {
		return nil, "", fmt.Errorf("%w: no IR %s", ErrUnknownWorkflow, hash)
	}
	if err != nil {
		return nil, "", err
	}
	w, err := ir.Decode(data)
	if err != nil {
		return nil, "", fmt.Errorf("runtime: stored IR %s: %w", hash, err)
	}
	return w, hash, nil
}

// DeployedWorkflows lists the catalog, oldest first, with each hash's tags.
func (e *Engine) DeployedWorkflows(ctx context.Context) ([]Deployed, error) {
	zs, err := e.st.rdb.ZRangeWithScores(ctx, e.st.ks.workflowIndex(), 0, -1).Result()
	if err != nil {
		return nil, err
	}
	tags, err := e.st.rdb.HGetAll(ctx, e.st.ks.workflowTags()).Result()
	if err != nil {
		return nil, err
	}
	byHash := map[string][]string{}
	for t, h := range tags {
		byHash[h] = append(byHash[h], t)
	}
	names, err := e.st.rdb.HGetAll(ctx, e.st.ks.workflowNames()).Result()
	if err != nil {
		return nil, err
	}
	out := make([]Deployed, 0, len(zs))
	for _, z := range zs {
		h, _ := z.Member.(string)
		d := Deployed{Hash: h, Deployed: msTime(int64(z.Score)), Name: names[h], Tags: byHash[h]}
		slices.Sort(d.Tags)
		out = append(out, d)
	}
	return out, nil
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

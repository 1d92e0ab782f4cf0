package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wfc-lang/wfc/runtime/handlers"
)

// The worker registry (docs/runtime.md, "Workers"): every worker records
// itself in each shard's registry hash and refreshes the record
// periodically; `wfc status` reads it to say which queued nodes no live
// worker can take, and workers read it to remove dead workers' consumers
// from the queues' consumer groups (the reap script). Deadness rests on
// these records, not on XINFO's idle times, which a consumer's blocked
// reads keep changing.

// DefaultDeadAfter is WorkerOptions.DeadAfter's default.
const DefaultDeadAfter = 10 * time.Minute

// A regRecord is a worker's registry record, as stored (JSON).
type regRecord struct {
	Queues   []string `json:"q"`
	Handlers []string `json:"h,omitempty"`
	Seen     int64    `json:"seen"`           // ms, the last heartbeat (the worker's clock)
	Beat     int64    `json:"beat"`           // ms between heartbeats; 0: a consumer found without a record
	Dead     int64    `json:"dead"`           // ms: dead when its last heartbeat is older
	Host     string   `json:"host,omitempty"` // host-pid, for people
}

// live reports whether the record's worker counts as running: its last
// heartbeat is less than three heartbeat intervals old.
func (r *regRecord) live(now int64) bool {
	return r.Beat > 0 && now-r.Seen < 3*r.Beat
}

// WorkerInfo describes a worker as the registry records it.
type WorkerInfo struct {
	Consumer string    `json:"consumer"`
	Queues   []string  `json:"queues"`
	Handlers []string  `json:"handlers,omitempty"` // the handlers it runs besides the core ones
	Seen     time.Time `json:"seen"`               // its last heartbeat
	// Live: its last heartbeat is less than three heartbeat intervals
	// old. A worker that stopped gracefully is not listed at all; a dead
	// one is until it is reaped (WorkerOptions.DeadAfter).
	Live bool `json:"live"`
}

// Workers returns the workers the registry lists, sorted by consumer name.
// Workers register on every shard; this reads shard 0.
func (e *Engine) Workers(ctx context.Context) ([]WorkerInfo, error) {
	h, err := e.st.rdb.HGetAll(ctx, e.st.ks.workers(0)).Result()
	if err != nil {
		return nil, err
	}
	now := nowMS()
	var out []WorkerInfo
	for _, name := range slices.Sorted(maps.Keys(h)) {
		var r regRecord
		if json.Unmarshal([]byte(h[name]), &r) != nil {
			continue
		}
		out = append(out, WorkerInfo{Consumer: name, Queues: r.Queues, Handlers: r.Handlers, Seen: msTime(r.Seen), Live: r.live(now)})
	}
	return out, nil
}

// served returns the queues some live worker of a registry hash serves.
func served(h map[string]string, now int64) map[string]bool {
	out := map[string]bool{}
	for _, raw := range h {
		var r regRecord
		if json.Unmarshal([]byte(raw), &r) != nil || !r.live(now) {
			continue
		}
		for _, q := range r.Queues {
			out[q] = true
		}
	}
	return out
}

// defaultQueues are the queues a worker of e serves when WorkerOptions
// does not list them: the control queue and the queue of every handler
// reg can run (Engine.queueOf). A private engine's workers serve its
// control queue only: they take no other run's work.
func (e *Engine) defaultQueues(reg *handlers.Registry) []string {
	qs := []string{e.ctl}
	if e.opts.Private != nil {
		return qs
	}
	for _, h := range reg.Names() {
		if q := e.queueOf(h); reg.Can(h) && !slices.Contains(qs, q) {
			qs = append(qs, q)
		}
	}
	return qs
}

// capable returns the handlers reg runs besides the core ones.
func capable(reg *handlers.Registry) []string {
	var out []string
	for _, h := range reg.Names() {
		if !handlers.Core(h) && reg.Can(h) {
			out = append(out, h)
		}
	}
	return out
}

// beatEvery is how often a worker refreshes its registry record:
// DeadAfter/10, between 50 ms and 10 s.
func (w *Worker) beatEvery() time.Duration {
	return min(max(w.opts.DeadAfter/10, 50*time.Millisecond), 10*time.Second)
}

// register writes the worker's record to every shard's registry.
func (w *Worker) register(ctx context.Context) error {
	rec, err := json.Marshal(regRecord{
		Queues: w.opts.Queues, Handlers: capable(w.opts.Handlers), Seen: nowMS(),
		Beat: w.beatEvery().Milliseconds(), Dead: w.opts.DeadAfter.Milliseconds(), Host: w.host,
	})
	if err != nil {
		return err
	}
	pipe := w.st.rdb.Pipeline()
	for s := range max(w.ks.shards, 1) {
		pipe.HSet(ctx, w.ks.workers(s), w.opts.Consumer, rec)
	}
	_, err = pipe.Exec(ctx)
	return err
}

// registryLoop refreshes the worker's record every beatEvery and reaps
// dead workers every DeadAfter/2 (at most every minute), until ctx is done.
func (w *Worker) registryLoop(ctx context.Context) {
	t := time.NewTicker(w.beatEvery())
	defer t.Stop()
	reapEvery := min(w.opts.DeadAfter/2, time.Minute)
	lastReap := time.Time{}
	for {
		if time.Since(lastReap) >= reapEvery {
			lastReap = time.Now()
			for s := range max(w.ks.shards, 1) {
				if ctx.Err() != nil {
					return
				}
				if err := w.reap(ctx, s); err != nil && ctx.Err() == nil {
					w.log.Warn("wfc worker: removing dead workers", "shard", s, "err", err)
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := w.register(ctx); err != nil && ctx.Err() == nil {
			w.log.Warn("wfc worker: refreshing its registry record", "err", err)
		}
	}
}

// reap removes from the shard's consumer groups the consumers of dead
// workers (a record older than its dead time) that have no pending
// messages: the streams of the queues their record lists and of the
// queues this worker serves where they appear. A consumer found there
// without a record (a worker of an earlier version, or one whose record
// went) gets one, as if it had just beaten, so that it is reaped after
// this worker's DeadAfter.
func (w *Worker) reap(ctx context.Context, shard int) error {
	reg := w.ks.workers(shard)
	h, err := w.st.rdb.HGetAll(ctx, reg).Result()
	if err != nil {
		return err
	}
	streams := map[string]map[string]bool{} // consumer -> its streams
	add := func(c, stream string) {
		if streams[c] == nil {
			streams[c] = map[string]bool{}
		}
		streams[c][stream] = true
	}
	recs := map[string]*regRecord{}
	for c, raw := range h {
		r := &regRecord{}
		if json.Unmarshal([]byte(raw), r) != nil {
			continue
		}
		recs[c] = r
		for _, q := range r.Queues {
			if ValidQueue(q) {
				add(c, w.ks.stream(shard, q))
			}
		}
	}
	now := nowMS()
	var unknown []string
	for _, q := range w.opts.Queues {
		stream := w.ks.stream(shard, q)
		cs, err := w.st.rdb.XInfoConsumers(ctx, stream, Group).Result()
		if err != nil {
			if strings.Contains(err.Error(), "NOGROUP") || strings.Contains(err.Error(), "no such key") {
				continue
			}
			return err
		}
		for _, c := range cs {
			add(c.Name, stream)
			if recs[c.Name] == nil && !slices.Contains(unknown, c.Name) {
				unknown = append(unknown, c.Name)
			}
		}
	}
	for _, c := range unknown {
		var qs []string
		for s := range streams[c] {
			qs = append(qs, w.queueOf(s))
		}
		slices.Sort(qs)
		rec, _ := json.Marshal(regRecord{Queues: qs, Seen: now, Dead: w.opts.DeadAfter.Milliseconds()})
		if err := w.st.rdb.HSetNX(ctx, reg, c, rec).Err(); err != nil {
			return err
		}
	}
	for c, r := range recs {
		if c == w.opts.Consumer || now-r.Seen <= r.Dead || len(streams[c]) == 0 {
			continue
		}
		keys := append([]string{reg}, slices.Sorted(maps.Keys(streams[c]))...)
		kept, err := w.st.scripts["reap"].Run(ctx, w.st.rdb, keys, Group, c, now, "").Int()
		if err != nil {
			return err
		}
		if kept == 0 {
			w.reaped.Add(1)
			w.log.Info("wfc worker: removed a dead worker's consumer", "dead", c, "last_seen", msTime(r.Seen))
		}
	}
	return nil
}

// unregister removes a gracefully stopping worker: its consumer from the
// groups of the queues it served, where it has no pending message left,
// and its registry record.
func (w *Worker) unregister() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for s := range max(w.ks.shards, 1) {
		keys := []string{w.ks.workers(s)}
		for _, q := range w.opts.Queues {
			keys = append(keys, w.ks.stream(s, q))
		}
		if err := w.st.scripts["reap"].Run(ctx, w.st.rdb, keys, Group, w.opts.Consumer, nowMS(), "force").Err(); err != nil {
			w.log.Warn("wfc worker: leaving the registry", "shard", s, "err", err)
		}
	}
}

// waiting fills in why queued executions of a running run wait: no live
// worker serves their queue (reg is the shard's registry hash).
func (s *store) waiting(ctx context.Context, st *Status, graph string, reg map[string]string) {
	if st.State != RunRunning || graph == "" {
		return
	}
	gq, err := s.graphQueues(ctx, s.ks.graph(s.ks.shard(st.RunID), graph))
	if err != nil || len(gq.list) == 0 {
		return
	}
	live := served(reg, nowMS())
	why := func(q string) string {
		if live[q] {
			return ""
		}
		return fmt.Sprintf("no live worker serves queue %s", q)
	}
	st.Waiting = why(gq.list[0])
	for _, ns := range st.Nodes {
		if ns.State != NodeQueued && ns.State != NodeRetrying {
			continue
		}
		if q := gq.node[ns.Node]; q != "" {
			ns.Waiting = why(q)
		}
	}
}

// DropPrivate deletes what a private engine (Options.Private) made for
// its runs: its control queue's streams (and entry stream and credits) and timers, and the graphs it
// stored, on every shard. Call it once those runs have ended (or been
// cancelled): no other worker serves their queue. It does nothing for an
// engine that is not private.
func (e *Engine) DropPrivate(ctx context.Context) error {
	if e.opts.Private == nil {
		return nil
	}
	var errs []error
	for s := range max(e.st.ks.shards, 1) {
		keys := []string{e.st.ks.stream(s, e.ctl), e.st.ks.entries(s, e.ctl), e.st.ks.timers(s, e.ctl)}
		if err := e.st.rdb.HDel(ctx, e.st.ks.admit(s), e.ctl).Err(); err != nil {
			errs = append(errs, err)
		}
		e.mu.Lock()
		for _, g := range e.stored[s] {
			keys = append(keys, e.st.ks.graph(s, g))
		}
		e.mu.Unlock()
		for _, k := range keys {
			// One key at a time: on a cluster, a multi-key DEL must stay
			// in one slot (these do, but a plain loop is simpler to trust).
			if err := e.st.rdb.Del(ctx, k).Err(); err != nil && !errors.Is(err, redis.Nil) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

package runtime

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// freshWindow is how young a token must be for its pre-read to be skipped.
const freshWindow = 10 * time.Millisecond

// freshness lets a worker skip the pre-read of a message (a round trip
// before its handler starts) when it is an exec token that was written
// moments ago — the script that wrote it had just checked that the run was
// running and queued the execution, which is what the pre-read checks — or
// one of a run that the worker's own transition script found running
// moments ago (confirm), for a run whose meta the worker keeps from an
// earlier token (the meta that matters to a worker does not change while a
// run runs, but for its status and generation) or whose meta the token
// tells: the scripts copy the run's graph and hop limit into exec tokens,
// and the rest of what running a node without expressions needs comes from
// the plan and the graph, when the worker keeps them (Worker.tokenMeta).
// This is what a read delivers while runs move along their nodes, and it
// removes a round trip from every such hop; only the other messages of a
// batch are pre-read.
//
// How old a token is, is told by its message id (the Redis server's clock,
// in ms) against the worker's clock corrected by the offset to the
// server's, measured with TIME. The check's guarantee is unchanged in kind:
// a pre-read is also a moment old when the handler starts. A handler may
// start for a run that was cancelled or failed within the window; its
// completion is then not applied, as for any handler that was running.
type freshness struct {
	known  atomic.Bool  // the offset was measured
	offset atomic.Int64 // server ms - local ms

	mu   sync.Mutex
	runs map[string]*runMeta // run -> meta read while it ran
	// live: run -> when (local ms) and in which generation a transition
	// script of this worker last found it running (it replied ok).
	live map[string]liveRun
}

type liveRun struct {
	ms  int64
	gen int
}

// confirm records that a transition script just found the run running in
// generation gen: what a fresh token says of its run, said of every token
// of the run for the next freshWindow, however long the token waited in
// its queue — the siblings of a fan-out wait behind each other for longer
// than the window, while the worker completes them one after the other.
func (f *freshness) confirm(run string, gen int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.live == nil || len(f.live) >= 4096 {
		f.live = map[string]liveRun{}
	}
	f.live[run] = liveRun{time.Now().UnixMilli(), gen}
}

// measure reads the offset between the server's clock and the worker's
// (TIME, corrected by half the round trip). On an error the skipping
// stops until the next measure succeeds.
func (f *freshness) measure(ctx context.Context, rdb redis.UniversalClient) {
	t0 := time.Now()
	tm, err := rdb.Time(ctx).Result()
	if err != nil {
		f.known.Store(false)
		return
	}
	mid := t0.Add(time.Since(t0) / 2)
	f.offset.Store(tm.UnixMilli() - mid.UnixMilli())
	f.known.Store(true)
}

// remember keeps the meta of a running run, read for one of its tokens.
func (f *freshness) remember(run string, m *runMeta) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.runs == nil || len(f.runs) >= 4096 {
		f.runs = map[string]*runMeta{}
	}
	f.runs[run] = m
}

// kept returns the meta the worker keeps of a run, or nil.
func (f *freshness) kept(run string) *runMeta {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.runs[run]
}

// prefetched returns, for each message of a batch that is a fresh exec
// token of a run whose meta is kept (with the token's generation), or whose
// meta the token itself tells (told, which may return nil), what prefetch
// would have read for it; the other messages need their pre-read.
func (f *freshness) prefetched(res []redis.XStream, told func(*Token) *runMeta) map[string]*prefetched {
	out := map[string]*prefetched{}
	if !f.known.Load() {
		return out
	}
	local := time.Now().UnixMilli()
	now := local + f.offset.Load()
	win := freshWindow.Milliseconds()
	f.mu.Lock()
	defer f.mu.Unlock()
	queued := NodeQueued
	for _, s := range res {
		for _, m := range s.Messages {
			raw, _ := m.Values["t"].(string)
			p := &prefetched{tok: Token{Item: -1}, state: &queued}
			if decodeToken(raw, &p.tok) != nil || p.tok.Kind != "exec" || p.tok.Node == "" {
				continue
			}
			id := m.ID
			if e, ok := m.Values["e"].(string); ok {
				id = e // an entry token take admitted: written then (take.lua)
			}
			ms, _, _ := strings.Cut(id, "-")
			at, err := strconv.ParseInt(ms, 10, 64)
			fresh := err == nil && now-at <= win && now-at >= -win
			if l, ok := f.live[p.tok.Run]; !fresh && (!ok || l.gen != p.tok.Gen || local-l.ms > win || local < l.ms) {
				continue
			}
			rm := f.runs[p.tok.Run]
			if rm == nil && told != nil {
				rm, p.told = told(&p.tok), true
			}
			if rm == nil || rm.Gen != p.tok.Gen || p.tok.Graph != "" && rm.Graph != p.tok.Graph {
				continue
			}
			p.m = rm
			out[msgKey(s.Stream, m.ID)] = p
		}
	}
	return out
}

package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wfc-lang/wfc/ir"
)

// submitBackends are the backends the submit batcher is tested on: both
// of forBackends, and a Redis Cluster with runs over 6 shards (go-redis
// splits a pipeline by node there).
func submitBackends(t *testing.T, f func(t *testing.T, b backend, o Options)) {
	for _, b := range append(slices.Clone(backends), clusterBackend) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			var o Options
			if b.name == "cluster" {
				o.Shards = 6
			}
			f(t, b, o)
		})
	}
}

// holdSubmits makes the engine's first submit pipelines, one per lane,
// wait as if they were in flight until release is called: the submits made
// meanwhile queue. held is closed once every lane holds one. before runs
// once, when they are released, before they go. sizes returns the number
// of calls of each pipeline sent so far.
func holdSubmits(e *Engine, before func()) (held <-chan struct{}, release func(), sizes func() []int) {
	var mu sync.Mutex
	var ns []int
	h, r := make(chan struct{}), make(chan struct{})
	var beforeOnce sync.Once
	e.subm.sent = func(n int) {
		mu.Lock()
		ns = append(ns, n)
		k := len(ns)
		mu.Unlock()
		if k <= e.subm.lanes {
			if k == e.subm.lanes {
				close(h)
			}
			<-r
			if before != nil {
				beforeOnce.Do(before)
			}
		}
	}
	var once sync.Once
	return h, func() { once.Do(func() { close(r) }) }, func() []int {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(ns)
	}
}

// pendingSubmits returns the number of submit calls queued.
func pendingSubmits(e *Engine) int {
	e.subm.mu.Lock()
	defer e.subm.mu.Unlock()
	return len(e.subm.pending)
}

// waitPending waits until n submit calls are queued.
func waitPending(t *testing.T, e *Engine, n int) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); pendingSubmits(e) < n; {
		if time.Now().After(deadline) {
			t.Fatalf("%d submits queued, want %d", pendingSubmits(e), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func submitTestWorkflow(t testing.TB) *ir.Workflow {
	return build(t, wfSpec{
		name:    "batched",
		inputs:  []ir.Input{input("n", ir.KindInt)},
		outputs: []ir.Output{output("n", "input.n")},
		nodes:   []*nodeSpec{task("a", "noop"), task("b", "count", after("a"), with("n", cexpr("input.n")))},
	})
}

// Concurrent submits share pipelines and each gets its own outcome: new
// runs, duplicates of a run id (one run, every caller its id), a run id of
// another workflow (ErrRunExists), invalid inputs and run ids (refused
// before Redis), and a caller cancelled while its call waits (not sent:
// no run, no index entry). The runs then complete, and the run index
// lists exactly the runs started.
func TestSubmitBatcher(t *testing.T) {
	submitBackends(t, func(t *testing.T, b backend, o Options) {
		v := newEnv(t, b, o)
		e := v.e
		w := submitTestWorkflow(t)
		pw, err := e.Prepare(w)
		if err != nil {
			t.Fatal(err)
		}
		other := build(t, wfSpec{name: "other", nodes: []*nodeSpec{task("z", "noop")}})
		taken, err := e.Submit(v.ctx, other, nil, WithRunID("taken"))
		if err != nil {
			t.Fatal(err)
		}
		held, release, sizes := holdSubmits(e, nil)
		defer release()
		type result struct {
			id  string
			err error
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		results := map[string][]result{} // by case
		calls := 0
		submit := func(name string, ctx context.Context, inputs map[string]any, opts ...SubmitOption) {
			calls++
			prepared := calls%2 == 0
			wg.Add(1)
			go func() {
				defer wg.Done()
				var id string
				var err error
				if !prepared {
					id, err = e.Submit(ctx, w, inputs, opts...)
				} else {
					id, err = e.SubmitPrepared(ctx, pw, inputs, opts...)
				}
				mu.Lock()
				results[name] = append(results[name], result{id, err})
				mu.Unlock()
			}()
		}
		for i := range e.subm.lanes {
			submit(fmt.Sprint("leader", i), v.ctx, map[string]any{"n": -1 - i})
		}
		<-held
		queued := 0
		const fresh = 30
		for i := range fresh {
			submit(fmt.Sprint("new", i), v.ctx, map[string]any{"n": i})
			queued++
		}
		for i := range 4 {
			for range 3 {
				submit(fmt.Sprint("dup", i), v.ctx, map[string]any{"n": 100 + i}, WithRunID(fmt.Sprint("dup-", i)))
				queued++
			}
		}
		submit("taken", v.ctx, map[string]any{"n": 1}, WithRunID("taken"))
		queued++
		waitPending(t, e, queued)
		// Refused before anything is queued or written.
		submit("badinput", v.ctx, map[string]any{"n": "x"})
		submit("noinput", v.ctx, nil)
		submit("badid", v.ctx, map[string]any{"n": 1}, WithRunID("bad id!"))
		cctx, cancel := context.WithCancel(v.ctx)
		submit("cancelled", cctx, map[string]any{"n": 7}, WithRunID("cancelled-run"))
		waitPending(t, e, queued+1)
		cancel()
		for pendingSubmits(e) > queued {
			time.Sleep(time.Millisecond)
		}
		release()
		wg.Wait()

		// The queued calls went in one pipeline per lane at most after
		// the held ones (two leaders may take the lead at once).
		lanes := e.subm.lanes
		if got := sizes(); len(got) <= lanes || len(got) > 2*lanes || slices.Max(got[:lanes]) != 1 || sum(got[lanes:]) != queued {
			t.Errorf("pipelines of %v calls, want %d of 1 then at most %d of %d in all", got, lanes, lanes, queued)
		}
		one := func(name string) result {
			t.Helper()
			rs := results[name]
			if len(rs) != 1 {
				t.Fatalf("%s: %d results", name, len(rs))
			}
			return rs[0]
		}
		v.worker()
		started := []string{taken}
		for i := range fresh {
			r := one(fmt.Sprint("new", i))
			if r.err != nil || !validRunID(r.id) {
				t.Fatalf("new%d: %q %v", i, r.id, r.err)
			}
			st := v.wait(r.id)
			if st.State != RunCompleted || string(st.Result) != fmt.Sprintf(`{"n":%d}`, i) {
				t.Errorf("new%d: %s %s %s", i, st.State, st.Result, st.Error)
			}
			started = append(started, r.id)
		}
		for i := range lanes {
			if r := one(fmt.Sprint("leader", i)); r.err != nil {
				t.Fatalf("leader %d: %v", i, r.err)
			} else {
				started = append(started, r.id)
			}
		}
		for i := range 4 {
			id := fmt.Sprint("dup-", i)
			for _, r := range results[fmt.Sprint("dup", i)] {
				if r.err != nil || r.id != id {
					t.Errorf("dup%d: %q %v, want %s", i, r.id, r.err, id)
				}
			}
			started = append(started, id)
		}
		if r := one("taken"); !errors.Is(r.err, ErrRunExists) {
			t.Errorf("taken: %q %v, want ErrRunExists", r.id, r.err)
		}
		var ie *InputError
		if r := one("badinput"); !errors.As(r.err, &ie) {
			t.Errorf("badinput: %v", r.err)
		}
		if r := one("noinput"); !errors.As(r.err, &ie) {
			t.Errorf("noinput: %v", r.err)
		}
		if r := one("badid"); r.err == nil || !strings.Contains(r.err.Error(), "bad run id") {
			t.Errorf("badid: %v", r.err)
		}
		if r := one("cancelled"); !errors.Is(r.err, context.Canceled) {
			t.Errorf("cancelled: %q %v", r.id, r.err)
		}
		if _, err := e.Status(v.ctx, "cancelled-run"); !errors.Is(err, ErrUnknownRun) {
			t.Errorf("the cancelled submit's run: %v", err)
		}
		for i := range 4 {
			if st := v.wait(fmt.Sprint("dup-", i)); st.State != RunCompleted || string(st.Result) != fmt.Sprintf(`{"n":%d}`, 100+i) {
				t.Errorf("dup-%d: %s %s %s", i, st.State, st.Result, st.Error)
			}
		}
		page, err := e.ListRuns(v.ctx, RunQuery{Limit: 500})
		if err != nil {
			t.Fatal(err)
		}
		var listed []string
		for _, r := range page.Runs {
			listed = append(listed, r.RunID)
		}
		sort.Strings(listed)
		sort.Strings(started)
		if !slices.Equal(listed, started) {
			t.Errorf("the run index lists %v, want %v", listed, started)
		}
		// A context done before the call: nothing is written.
		dead, kill := context.WithCancel(v.ctx)
		kill()
		if _, err := e.SubmitPrepared(dead, pw, map[string]any{"n": 1}, WithRunID("dead-run")); !errors.Is(err, context.Canceled) {
			t.Errorf("submit with a done context: %v", err)
		}
		if _, err := e.Status(v.ctx, "dead-run"); !errors.Is(err, ErrUnknownRun) {
			t.Errorf("the done context's run: %v", err)
		}
	})
}

// N concurrent submits take fewer than N round trips: those made while a
// pipeline is in flight share the next one.
func TestSubmitSharesRoundTrips(t *testing.T) {
	submitBackends(t, func(t *testing.T, b backend, o Options) {
		e := openEngine(t, b, o)
		ctx := context.Background()
		pw, err := e.Prepare(submitTestWorkflow(t))
		if err != nil {
			t.Fatal(err)
		}
		// Store the workflow and create the queues on every shard first:
		// what a process does once.
		for s := range max(o.Shards, 1) {
			if err := e.storePlan(ctx, pw.p, s); err != nil {
				t.Fatal(err)
			}
		}
		// And a connection to send on (a new one costs its handshake's
		// round trips): one submit on each master.
		for s := range max(o.Shards, 1) {
			if _, err := e.SubmitPrepared(ctx, pw, map[string]any{"n": s}, WithRunID(fmt.Sprint("warm-", s))); err != nil {
				t.Fatal(err)
			}
		}
		var hellos atomic.Int64
		e.st.rdb.AddHook(helloCounter{&hellos})
		held, release, sizes := holdSubmits(e, nil)
		defer release()
		const n = 40
		trips0 := e.RoundTrips()
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := e.SubmitPrepared(ctx, pw, map[string]any{"n": i})
				errs <- err
			}()
			if i == e.subm.lanes-1 {
				<-held
			}
		}
		waitPending(t, e, n-e.subm.lanes)
		release()
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		// One pipeline for each of the first (one per lane), at most one
		// per lane for the others; a connection the pool opened for a
		// lane costs its handshake's round trips besides (HELLO, then a
		// pipeline of CLIENT SETINFO).
		trips := e.RoundTrips() - trips0 - 2*hellos.Load()
		if want := int64(2 * e.subm.lanes); trips > want || trips < int64(e.subm.lanes+1) {
			t.Errorf("%d submits took %d round trips, want %d to %d (pipelines of %v calls)", n, trips, e.subm.lanes+1, want, sizes())
		}
		page, err := e.ListRuns(ctx, RunQuery{Limit: 500})
		if err != nil || len(page.Runs) != n+max(o.Shards, 1) {
			t.Errorf("%d runs listed (%v), want %d", len(page.Runs), err, n)
		}
	})
}

// A batch whose scripts the server lost (SCRIPT FLUSH while its pipeline
// was about to go) is sent again with EVAL, each run started once; so is
// a batch of runs whose workflow Redis lost ("is not stored": each caller
// stores it again and starts its run).
func TestSubmitBatchNoScript(t *testing.T) {
	submitBackends(t, func(t *testing.T, b backend, o Options) {
		v := newEnv(t, b, o)
		e := v.e
		pw, err := e.Prepare(submitTestWorkflow(t))
		if err != nil {
			t.Fatal(err)
		}
		flush := func() {
			if cc, ok := e.st.rdb.(*redis.ClusterClient); ok {
				err = cc.ForEachMaster(v.ctx, func(ctx context.Context, c *redis.Client) error { return c.ScriptFlush(ctx).Err() })
			} else {
				err = e.st.rdb.ScriptFlush(v.ctx).Err()
			}
			if err != nil {
				t.Error(err)
			}
		}
		dropKeys := func() {
			var keys []string
			scan := func(ctx context.Context, c redis.UniversalClient) error {
				it := c.Scan(ctx, 0, e.opts.Prefix+":*", 1000).Iterator()
				for it.Next(ctx) {
					keys = append(keys, it.Val())
				}
				return it.Err()
			}
			if cc, ok := e.st.rdb.(*redis.ClusterClient); ok {
				var mu sync.Mutex
				err = cc.ForEachMaster(v.ctx, func(ctx context.Context, c *redis.Client) error {
					mu.Lock()
					defer mu.Unlock()
					return scan(ctx, c)
				})
			} else {
				err = scan(v.ctx, e.st.rdb)
			}
			if err != nil || len(keys) == 0 {
				t.Fatalf("scanning: %v (%d keys)", err, len(keys))
			}
			for _, k := range keys {
				if err := e.st.rdb.Del(v.ctx, k).Err(); err != nil {
					t.Fatal(err)
				}
			}
		}
		if _, err := e.SubmitPrepared(v.ctx, pw, map[string]any{"n": 0}); err != nil {
			t.Fatal(err)
		}
		for round, lose := range []func(){flush, dropKeys} {
			held, release, sizes := holdSubmits(e, lose)
			const n = 12
			ids := make([]string, n)
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ids[i], errs[i] = e.SubmitPrepared(v.ctx, pw, map[string]any{"n": i})
				}()
				if i == e.subm.lanes-1 {
					<-held
				}
			}
			lanes := e.subm.lanes
			waitPending(t, e, n-lanes)
			release()
			wg.Wait()
			// (The first callers' start, after their begin found no
			// graph, may join the next pipelines.)
			if got := sizes(); len(got) < lanes+1 || slices.Max(got[lanes:]) < (n-lanes)/lanes {
				t.Errorf("round %d: pipelines of %v calls", round, got)
			}
			e.subm.sent = nil
			for i := range n {
				if errs[i] != nil {
					t.Fatalf("round %d, submit %d: %v", round, i, errs[i])
				}
			}
			if round == 0 {
				v.worker()
			}
			for i, id := range ids {
				st := v.wait(id)
				if st.State != RunCompleted || string(st.Result) != fmt.Sprintf(`{"n":%d}`, i) {
					t.Errorf("round %d, run %d: %s %s %s", round, i, st.State, st.Result, st.Error)
				}
				evs, err := e.Events(v.ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if c := countEvents(evs, "run.started"); c != 1 {
					t.Errorf("round %d, run %d: started %d times", round, i, c)
				}
			}
		}
	})
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

// helloCounter counts the HELLO commands of new connections.
type helloCounter struct{ n *atomic.Int64 }

func (h helloCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h helloCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "hello" {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (h helloCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func countEvents(evs []Event, typ string) int {
	n := 0
	for _, ev := range evs {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

// A prepared workflow starts the same runs as Submit: same IR, graph,
// queues, inputs, events and result; it keeps the workflow as prepared
// when the caller changes it; it refuses what Submit refuses, writing
// nothing, and belongs to its engine.
func TestSubmitPrepared(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		e := v.e
		w := submitTestWorkflow(t)
		pw, err := e.Prepare(w)
		if err != nil {
			t.Fatal(err)
		}
		hash, err := ir.Hash(w)
		if err != nil {
			t.Fatal(err)
		}
		if pw.Hash() != hash || pw.Name() != "batched" {
			t.Errorf("prepared %s %s, want %s batched", pw.Name(), pw.Hash(), hash)
		}
		// Refused, nothing written.
		var ie *InputError
		if _, err := e.SubmitPrepared(v.ctx, pw, map[string]any{"n": "x"}); !errors.As(err, &ie) {
			t.Errorf("bad input: %v", err)
		}
		if keys, err := e.st.rdb.Keys(v.ctx, e.opts.Prefix+":*").Result(); err != nil || len(keys) != 0 {
			t.Errorf("a refused submit wrote %v (%v)", keys, err)
		}
		v.worker()
		a, err := e.Submit(v.ctx, w, map[string]any{"n": 5}, WithRunID("by-submit"))
		if err != nil {
			t.Fatal(err)
		}
		// The caller's workflow changes: the prepared one does not.
		w.Nodes[1].ID = "changed"
		w.Name = "changed"
		p, err := e.SubmitPrepared(v.ctx, pw, map[string]any{"n": 5}, WithRunID("by-prepared"))
		if err != nil {
			t.Fatal(err)
		}
		sa, sp := v.wait(a), v.wait(p)
		ma, _ := e.st.meta(v.ctx, a)
		mp, _ := e.st.meta(v.ctx, p)
		if sa.State != RunCompleted || sp.State != sa.State || sp.IR != sa.IR || sp.IR != hash || string(sp.Result) != string(sa.Result) ||
			mp.Graph != ma.Graph || strings.Join(mp.Queues, ",") != strings.Join(ma.Queues, ",") || mp.Inputs != ma.Inputs || mp.Workflow != "batched" {
			t.Errorf("Submit: %s %s %s %+v\nSubmitPrepared: %s %s %s %+v", sa.State, sa.IR, sa.Result, ma, sp.State, sp.IR, sp.Result, mp)
		}
		types := func(run string) []string {
			evs, err := e.Events(v.ctx, run)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, ev := range evs {
				out = append(out, ev.Type+" "+ev.Fields["x"])
			}
			return out
		}
		if ta, tp := types(a), types(p); !slices.Equal(ta, tp) {
			t.Errorf("events differ:\nSubmit:         %v\nSubmitPrepared: %v", ta, tp)
		}
		// Idempotent by run id, as Submit.
		if id, err := e.SubmitPrepared(v.ctx, pw, map[string]any{"n": 5}, WithRunID("by-submit")); err != nil || id != "by-submit" {
			t.Errorf("resubmit: %q %v", id, err)
		}
		// Another engine's prepared workflow is refused.
		e2 := openEngine(t, b, Options{Prefix: e.opts.Prefix})
		if _, err := e2.SubmitPrepared(v.ctx, pw, map[string]any{"n": 1}); err == nil {
			t.Error("SubmitPrepared of another engine's Prepared: no error")
		}
		if _, err := e.Prepare(&ir.Workflow{Name: "empty"}); err == nil {
			t.Error("Prepare of an invalid workflow: no error")
		}
	})
}

// SubmitTag of a version this engine planned reads the tag and starts the
// run, without reading the IR again: three round trips (the tag, the
// start, the tag's run set).
func TestSubmitTagPlannedOnce(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		e := openEngine(t, b, Options{})
		ctx := context.Background()
		w := submitTestWorkflow(t)
		if _, err := e.Deploy(ctx, w, "batched", "test"); err != nil {
			t.Fatal(err)
		}
		if _, _, err := e.SubmitTag(ctx, "batched", map[string]any{"n": 1}); err != nil {
			t.Fatal(err)
		}
		trips0 := e.RoundTrips()
		run, ver, err := e.SubmitTag(ctx, "batched", map[string]any{"n": 2})
		if err != nil {
			t.Fatal(err)
		}
		if trips := e.RoundTrips() - trips0; trips != 3 {
			t.Errorf("SubmitTag took %d round trips, want 3", trips)
		}
		if st, err := e.Status(ctx, run); err != nil || st.IR != ver.Hash {
			t.Errorf("run %s: %v %v, want IR %s", run, st, err, ver.Hash)
		}
	})
}

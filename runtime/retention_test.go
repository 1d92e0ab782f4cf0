package runtime

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// runKeyNames names the keys of runKeys (the graph slot is not a key of
// the run).
var runKeyNames = []string{"state", "applied", "events", "", "items", "comp"}

// ttls returns the PTTL of every run key that exists, by name; with must,
// the keys every run has must be there.
func ttls(t *testing.T, e *Engine, run string, must bool) map[string]time.Duration {
	t.Helper()
	out := map[string]time.Duration{}
	for i, k := range e.st.ks.runKeys(run) {
		if i == graphSlot {
			continue
		}
		d, err := e.st.rdb.PTTL(context.Background(), k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if d == -2 { // no such key: the run never wrote it
			continue
		}
		out[runKeyNames[i]] = d
	}
	for _, k := range []string{"state", "events"} { // applied exists once an operation key was recorded
		if _, ok := out[k]; must && !ok {
			t.Errorf("run %s has no %s key", run, k)
		}
	}
	return out
}

// checkExpiring checks that every key of an ended run expires within
// retention.
func checkExpiring(t *testing.T, e *Engine, name, run string, retention time.Duration) {
	t.Helper()
	for k, d := range ttls(t, e, run, true) {
		if d <= 0 || d > retention {
			t.Errorf("%s: key %s of ended run %s has TTL %v, want (0, %v]", name, k, run, d, retention)
		}
	}
	st, err := e.Status(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	if st.Expires.IsZero() || time.Until(st.Expires) > retention {
		t.Errorf("%s: status expires %v", name, st.Expires)
	}
}

// checkPersistent checks that no key of the run expires.
func checkPersistent(t *testing.T, e *Engine, name, run string) {
	t.Helper()
	for k, d := range ttls(t, e, run, true) {
		if d != -1 {
			t.Errorf("%s: key %s of run %s has TTL %v, want none", name, k, run, d)
		}
	}
}

// TestRetention: every way a run ends gives each of its keys the
// retention as TTL, in the same script; a running run, the shared graph
// and the IR never expire; a partial retry removes the expiry.
func TestRetention(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		const ret = time.Hour
		v := newEnv(t, b, Options{Shards: 2, Retention: ret})
		m := newMixedRuns(t, v)
		var mu sync.Mutex
		broken := true
		prw := partialRetryFlow(t, v, &broken, &mu)
		v.worker()
		sts := m.run(t, 2)
		sts["cancelled"] = cancelRun(t, v)
		for name, st := range sts {
			checkExpiring(t, v.e, name, st.RunID, ret)
		}
		// Shared keys: the graph of each shard and the IR document.
		ctx := context.Background()
		for _, st := range sts {
			meta, err := v.e.st.meta(ctx, st.RunID)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{v.e.st.ks.graph(v.e.st.ks.shard(st.RunID), meta.Graph), v.e.st.ks.ir(meta.IR)} {
				if d, err := v.e.st.rdb.PTTL(ctx, k).Result(); err != nil || d != -1 {
					t.Errorf("shared key %s: TTL %v, %v", k, d, err)
				}
			}
		}

		// A run that is still running has no expiry; a partial retry of a
		// failed run removes it, and the run's end sets it again.
		st := v.run(prw, nil)
		if st.State != RunFailed {
			t.Fatalf("partial retry: %s", st.State)
		}
		checkExpiring(t, v.e, "failed before retry", st.RunID, ret)
		v.e.StopWorkers()
		if err := v.e.Retry(v.ctx, st.RunID); err != nil {
			t.Fatal(err)
		}
		checkPersistent(t, v.e, "retried", st.RunID)
		if cur, err := v.e.Status(ctx, st.RunID); err != nil || !cur.Expires.IsZero() {
			t.Errorf("retried run: expires %v (%v)", cur.Expires, err)
		}
		mu.Lock()
		broken = false
		mu.Unlock()
		v.worker()
		st = v.wait(st.RunID)
		if st.State != RunCompleted {
			t.Fatalf("after retry: %s", st.State)
		}
		checkExpiring(t, v.e, "completed after retry", st.RunID, ret)

		// A negative retention (and WithRetention(0)) keeps the keys forever.
		keep := newEnv(t, b, Options{Retention: KeepForever})
		keep.worker()
		st = keep.run(m.fanout, nil)
		checkPersistent(t, keep.e, "KeepForever", st.RunID)
		if !st.Expires.IsZero() {
			t.Errorf("KeepForever: expires %v", st.Expires)
		}
		id, err := v.e.Submit(v.ctx, m.fanout, nil, WithRetention(0))
		if err != nil {
			t.Fatal(err)
		}
		v.wait(id)
		checkPersistent(t, v.e, "WithRetention(0)", id)
	})
}

// TestRetentionExpiry: after the retention period a run's keys are gone
// and every command says the run is unknown, naming expiry as a cause.
func TestRetentionExpiry(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		ret := 1500 * time.Millisecond
		if b.name == "miniredis" {
			ret = time.Hour // miniredis's clock moves with FastForward only
		}
		v := newEnv(t, b, Options{Retention: ret})
		m := newMixedRuns(t, v)
		v.worker()
		done := v.run(m.fanout, nil)
		failed := v.run(m.flows["failed"], nil)
		for _, st := range []*Status{done, failed} {
			checkExpiring(t, v.e, st.State, st.RunID, ret)
		}
		if v.e.mini != nil {
			v.e.mini.FastForward(ret + time.Second)
		}
		ctx := context.Background()
		deadline := time.Now().Add(10 * time.Second)
		for _, st := range []*Status{done, failed} {
			for {
				n, err := v.e.st.rdb.Exists(ctx, v.e.st.ks.state(st.RunID)).Result()
				if err != nil {
					t.Fatal(err)
				}
				if n == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("run %s still exists", st.RunID)
				}
				time.Sleep(100 * time.Millisecond)
			}
			if left := ttls(t, v.e, st.RunID, false); len(left) > 0 {
				t.Errorf("run %s: keys left after expiry: %v", st.RunID, left)
			}
			_, err := v.e.Status(ctx, st.RunID)
			if !errors.Is(err, ErrUnknownRun) || !strings.Contains(err.Error(), "retention period") {
				t.Errorf("status of an expired run: %v", err)
			}
			if _, err := v.e.Events(ctx, st.RunID); !errors.Is(err, ErrUnknownRun) {
				t.Errorf("events of an expired run: %v", err)
			}
		}
		if err := v.e.Retry(ctx, failed.RunID); !errors.Is(err, ErrUnknownRun) {
			t.Errorf("retry of an expired run: %v", err)
		}
		if err := v.e.Cancel(ctx, done.RunID); !errors.Is(err, ErrUnknownRun) {
			t.Errorf("cancel of an expired run: %v", err)
		}
		// The workflow can still run: graph and IR did not expire.
		st := v.run(m.fanout, nil)
		if st.State != RunCompleted {
			t.Errorf("a new run after expiry: %s", st.State)
		}
	})
}

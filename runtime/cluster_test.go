package runtime

import (
	"context"
	"os"
	"sort"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/wfc-lang/wfc/runtime/internal/redistest"
)

// The Redis Cluster shared by the cluster tests: three masters, no
// replicas, on free loopback ports; started on first use.
var sharedCl struct {
	once sync.Once
	c    *redistest.Cluster
	dir  string
	err  error
}

func sharedCluster(t testing.TB) string {
	t.Helper()
	redistest.RequireCluster(t)
	sharedCl.once.Do(func() {
		sharedCl.dir, sharedCl.err = os.MkdirTemp("", "wfc-cluster-")
		if sharedCl.err == nil {
			sharedCl.c, sharedCl.err = redistest.NewCluster(sharedCl.dir, 3)
		}
	})
	if sharedCl.err != nil {
		t.Fatalf("starting a Redis Cluster: %v", sharedCl.err)
	}
	return sharedCl.c.URL()
}

func stopSharedCluster() {
	if sharedCl.c != nil {
		sharedCl.c.Kill()
		os.RemoveAll(sharedCl.dir)
	}
}

var clusterBackend = backend{"cluster", sharedCluster}

// mastersOf returns, for each run, the address of the cluster master that
// holds its keys, after checking on that master itself (not through the
// cluster client) that every run key it has is there.
func mastersOf(t *testing.T, e *Engine, runs []string) map[string]string {
	t.Helper()
	cc, ok := e.st.rdb.(*redis.ClusterClient)
	if !ok {
		t.Fatalf("the engine's client is a %T, not a cluster client", e.st.rdb)
	}
	ctx := context.Background()
	out := map[string]string{}
	for _, run := range runs {
		keys := e.st.ks.runKeys(run)
		m, err := cc.MasterForKey(ctx, keys[0])
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range []int{0, 2} { // state, events: every run has them
			k := keys[i]
			if n, err := m.Exists(ctx, k).Result(); err != nil || n != 1 {
				t.Errorf("run %s: key %s is not on master %s (%d, %v)", run, k, m.Options().Addr, n, err)
			}
		}
		out[run] = m.Options().Addr
	}
	return out
}

// TestCluster runs the representative scenarios on a real 3-master Redis
// Cluster with 6 shards: every script runs on the master of its run's
// shard, blocking reads go per shard, the IR document (no hash tag) is
// read with plain commands, and the runs spread over the masters.
func TestCluster(t *testing.T) {
	t.Parallel()
	v := newEnv(t, clusterBackend, Options{Shards: 6})
	if v.e.RedisAddr()[:8] != "cluster " {
		t.Fatalf("RedisAddr %q", v.e.RedisAddr())
	}
	m := newMixedRuns(t, v)
	var mu sync.Mutex
	broken := true
	prw := partialRetryFlow(t, v, &broken, &mu)
	v.worker()

	sts := m.run(t, 8)
	var runs []string
	for _, st := range sts {
		runs = append(runs, st.RunID)
	}

	// Cancel and partial retry.
	runs = append(runs, cancelRun(t, v).RunID)
	st := v.run(prw, nil)
	if st.State != RunFailed || st.FailedNode != "c" {
		t.Fatalf("partial retry: first run %s %q", st.State, st.FailedNode)
	}
	mu.Lock()
	broken = false
	mu.Unlock()
	if err := v.e.Retry(v.ctx, st.RunID); err != nil {
		t.Fatal(err)
	}
	st = v.wait(st.RunID)
	if st.State != RunCompleted || string(st.Result) != `{"a":1,"c":true}` || st.Gen != 1 {
		t.Fatalf("partial retry: %s %s gen %d", st.State, st.Result, st.Gen)
	}
	for _, n := range []string{"a", "b", "d"} {
		if c := v.callCount(st.RunID + "/" + n); c != 1 {
			t.Errorf("partial retry: %s ran %d times", n, c)
		}
	}
	runs = append(runs, st.RunID)
	waitNoPending(t, v.e)

	// Open loaded every script on every master; after a SCRIPT FLUSH
	// (a restarted or new master) calls fall back to EVAL.
	cc := v.e.st.rdb.(*redis.ClusterClient)
	var loaded sync.Map
	err := cc.ForEachMaster(v.ctx, func(ctx context.Context, c *redis.Client) error {
		for name, sc := range v.e.st.scripts {
			ok, err := c.ScriptExists(ctx, sc.Hash()).Result()
			if err != nil {
				return err
			}
			if !ok[0] {
				t.Errorf("script %s is not loaded on master %s", name, c.Options().Addr)
			}
		}
		loaded.Store(c.Options().Addr, true)
		return c.ScriptFlush(ctx).Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	loaded.Range(func(any, any) bool { n++; return true })
	if n != 3 {
		t.Errorf("%d masters", n)
	}
	for i := 0; i < 4; i++ {
		st := v.run(m.fanout, nil)
		if st.State != RunCompleted || string(st.Result) != `{"sum":9}` {
			t.Errorf("after SCRIPT FLUSH: %s %s %s", st.State, st.Result, st.Error)
		}
		runs = append(runs, st.RunID)
	}

	// Ended runs expire after the retention period (default 7 days).
	for _, run := range runs {
		checkExpiring(t, v.e, "cluster", run, DefaultRetention)
	}

	// The runs really live on more than one master, and on the master of
	// their shard's slot.
	masters := map[string]int{}
	shards := map[int]bool{}
	for run, addr := range mastersOf(t, v.e, runs) {
		masters[addr]++
		shards[v.e.st.ks.shard(run)] = true
	}
	var list []string
	for a, n := range masters {
		list = append(list, a)
		t.Logf("master %s holds %d runs", a, n)
	}
	sort.Strings(list)
	if len(masters) < 2 {
		t.Errorf("all %d runs (shards %v) are on one master: %v", len(runs), shards, list)
	}
}

package bench

import (
	"context"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	wfrt "github.com/wfc-lang/wfc/runtime"
	"github.com/wfc-lang/wfc/runtime/internal/redistest"
)

// TestRunCluster runs the benchmark briefly on a 3-master Redis Cluster
// started by the test harness: the runs are spread over every master,
// each master's CPU is read and the figure is their sum, and every key is
// deleted at the end, on every master.
func TestRunCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("benchmark smoke test")
	}
	c := redistest.StartCluster(t, 3)
	rep, err := Run(context.Background(), Options{
		RedisURL: c.URL(), Duration: 600 * time.Millisecond, Rounds: 1, Workers: []int{2}, InFlight: 8,
		Concurrency: 12, Shapes: []string{"cel-diamond"}, Baseline: true, MemoryRuns: 10, Burst: 20, Paced: []float64{0.5},
		LoadShapes: []string{"cel-diamond"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Clusters) != 1 {
		t.Fatalf("clusters: %+v", rep.Clusters)
	}
	cl := rep.Clusters[0]
	slots, shards := 0, 0
	for _, m := range cl.Masters {
		slots += m.Slots
		shards += m.Shards
	}
	if len(cl.Masters) != 3 || slots != 16384 || shards != 12 || cl.Shards != 12 || cl.Name != "3m" {
		t.Fatalf("cluster %+v", cl)
	}
	if len(rep.Scenarios) != 1 || len(rep.Baselines) != 1 || len(rep.Loads) != 2 || len(rep.Memory) != 1 {
		t.Fatalf("report %+v", rep)
	}
	sc := rep.Scenarios[0]
	if sc.Cluster != "3m" || sc.Name != "cel-diamond/2w" || sc.Runs == 0 || sc.Executions != 4*int64(sc.Runs) {
		t.Errorf("scenario %+v", sc)
	}
	if len(sc.MasterCPUus) != 3 {
		t.Fatalf("per-master CPU %v", sc.MasterCPUus)
	}
	var sum float64
	for i, us := range sc.MasterCPUus {
		// Every master holds some of the 12 shards' runs (4, 5 and 3 of
		// them with the slots split evenly).
		if cl.Masters[i].Shards > 0 && us <= 0 {
			t.Errorf("master %s (%d shards) used no CPU: %v", cl.Masters[i].Addr, cl.Masters[i].Shards, sc.MasterCPUus)
		}
		sum += us
	}
	if sc.RedisCPUus <= 0 || math.Abs(sum-sc.RedisCPUus) > 1e-6*sc.RedisCPUus {
		t.Errorf("Redis CPU %.3f µs/exec is not the sum of the masters' %v", sc.RedisCPUus, sc.MasterCPUus)
	}
	// Counted on every master, as the CPU is.
	if sc.ScriptsPer <= 0 || sc.CmdsPer < 2*sc.ScriptsPer {
		t.Errorf("on the cluster: %.2f commands, %.2f script calls per execution", sc.CmdsPer, sc.ScriptsPer)
	}
	if b := rep.Baselines[0]; b.Hops == 0 || b.RedisCPUus <= 0 {
		t.Errorf("reference on the cluster: %+v", b)
	}
	for _, l := range rep.Loads {
		if l.RunsPerSec <= 0 || l.RedisCPUus <= 0 {
			t.Errorf("load on the cluster: %+v", l)
		}
	}
	if m := rep.Memory[0]; m.InFlightBytes <= 0 || m.CompletedBytes <= 0 {
		t.Errorf("memory on the cluster: %+v", m)
	}
	// Every master got work: the runs' keys were written on each (and
	// deleted from each at the end).
	for _, n := range c.Nodes {
		rdb := redis.NewClient(&redis.Options{Addr: n.Addr()})
		info, err := rdb.Info(context.Background(), "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(info, "cmdstat_evalsha:") && !strings.Contains(info, "cmdstat_fcall:") {
			t.Errorf("master %s ran no script", n.Addr())
		}
		keys, err := rdb.Keys(context.Background(), "wfbench*").Result()
		rdb.Close()
		if err != nil || len(keys) > 0 {
			t.Errorf("master %s kept %d benchmark keys (%v): %.3q", n.Addr(), len(keys), err, keys[:min(3, len(keys))])
		}
	}
}

// TestRunLocalClusters starts a cluster of one and of two masters itself
// and measures the same scenario on each, in turn, with the same shards.
func TestRunLocalClusters(t *testing.T) {
	if testing.Short() {
		t.Skip("benchmark smoke test")
	}
	redistest.Require(t)
	rep, err := Run(context.Background(), Options{
		ClusterMasters: []int{1, 2}, Duration: 400 * time.Millisecond, Rounds: 1, Workers: []int{1}, InFlight: 4,
		Shapes: []string{"diamond"}, MemoryRuns: -1, LoadShapes: []string{"diamond"}, PacedPerMaster: []float64{20},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Clusters) != 2 || len(rep.Clusters[0].Masters) != 1 || len(rep.Clusters[1].Masters) != 2 || rep.Clusters[1].Shards != 8 {
		t.Fatalf("clusters %+v", rep.Clusters)
	}
	if len(rep.Scenarios) != 2 {
		t.Fatalf("scenarios %+v", rep.Scenarios)
	}
	for i, want := range []string{"diamond/1w/1m", "diamond/1w/2m"} {
		sc := rep.Scenarios[i]
		if sc.Name != want || len(sc.MasterCPUus) != i+1 || sc.RedisCPUus <= 0 || sc.Executions != 4*int64(sc.Runs) {
			t.Errorf("scenario %d: %+v", i, sc)
		}
	}
	// One paced load per cluster at 20 runs/s per master, no burst.
	if len(rep.Loads) != 2 {
		t.Fatalf("loads %+v", rep.Loads)
	}
	for i, want := range []string{"diamond/1w/20-per-master/1m", "diamond/1w/20-per-master/2m"} {
		l := rep.Loads[i]
		if l.Name != want || l.Kind != "paced" || math.Abs(l.Rate-20*float64(i+1)) > 0.5 || l.RedisCPUus <= 0 {
			t.Errorf("load %d: %+v", i, l)
		}
	}
}

// BenchmarkCluster measures the same scenarios on a local Redis Cluster of
// one master and of three (12 shards on each, workers of concurrency 12):
// b.N runs of each (ns/op is per run), reporting Redis CPU per execution
// summed over the masters and the busiest master's over the mean; then
// paced loads at the same rate per master (WFC_BENCH_PER_MASTER runs/s,
// default 50 and 150, b.N runs each at most).
func BenchmarkCluster(b *testing.B) {
	redistest.Require(b)
	ctx := context.Background()
	var ss []*Session
	for _, n := range []int{1, 3} {
		c, err := StartCluster(ctx, n)
		if err != nil {
			b.Fatal(err)
		}
		s, err := Open(ctx, Options{RedisURL: c.URL(), Shards: 12, Concurrency: 12, Duration: time.Second})
		if err != nil {
			c.Close()
			b.Fatal(err)
		}
		s.local = c
		b.Cleanup(s.Close)
		ss = append(ss, s)
	}
	name := func(s *Session) string { return s.Cluster().Name }
	for _, shape := range []string{"cel-diamond", "diamond"} {
		for _, workers := range []int{1, 2, 4} {
			for _, s := range ss {
				b.Run(shape+"/"+itoa(workers)+"w/"+name(s), func(b *testing.B) {
					sc, err := s.Scenario(ctx, shape, workers, 32, max(b.N, 32))
					if err != nil {
						b.Fatal(err)
					}
					var most, sum float64
					for _, us := range sc.MasterCPUus {
						most, sum = max(most, us), sum+us
					}
					b.ReportMetric(sc.ExecPerSec, "exec/s")
					b.ReportMetric(sc.TripsPer, "trips/exec")
					b.ReportMetric(sc.RedisCPUus, "redis-µs/exec")
					b.ReportMetric(div(most, sum/float64(len(sc.MasterCPUus))), "busiest/mean")
					b.ReportMetric(sc.GoCPUus, "go-µs/exec")
				})
			}
		}
	}
	rates := []float64{50, 150}
	if v := os.Getenv("WFC_BENCH_PER_MASTER"); v != "" {
		rates = nil
		for _, f := range strings.Split(v, ",") {
			r, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil || r <= 0 {
				b.Fatalf("WFC_BENCH_PER_MASTER=%q: want rates in runs/s, e.g. 50,150", v)
			}
			rates = append(rates, r)
		}
	}
	for _, rate := range rates {
		for _, s := range ss {
			b.Run("cel-diamond/paced-"+strconv.FormatFloat(rate, 'f', -1, 64)+"-per-master/"+name(s), func(b *testing.B) {
				rps := rate * float64(len(s.Cluster().Masters))
				// b.N runs, at least a second's worth.
				l, err := s.Paced(ctx, "cel-diamond", 1, rps, time.Duration(float64(max(b.N, int(rps)))/rps*float64(time.Second)))
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(l.RunsPerSec, "runs/s")
				b.ReportMetric(l.P50ms, "run-p50-ms")
				b.ReportMetric(l.RedisCPUus, "redis-µs/exec")
				b.ReportMetric(l.GoCPUus, "go-µs/exec")
			})
		}
	}
}

func TestBadClusters(t *testing.T) {
	ctx := context.Background()
	if _, err := Run(ctx, Options{ClusterMasters: []int{0}}); err == nil || !strings.Contains(err.Error(), "at least one master") {
		t.Errorf("a cluster of no masters: %v", err)
	}
	if _, err := Run(ctx, Options{ClusterMasters: []int{1}, RedisURL: "redis://127.0.0.1:1/0"}); err == nil || !strings.Contains(err.Error(), "not both") {
		t.Errorf("a URL and clusters to start: %v", err)
	}
	if _, err := Run(ctx, Options{PacedPerMaster: []float64{10}}); err == nil || !strings.Contains(err.Error(), "need a Redis Cluster") {
		t.Errorf("paced loads per master on a single server: %v", err)
	}
	if _, err := StartCluster(ctx, 0); err == nil {
		t.Error("a cluster of no masters started")
	}
	if _, err := clusterOptions("redis+cluster://"); err == nil {
		t.Error("a cluster URL without nodes parsed")
	}
}

// A local cluster's nodes require its password: another local user
// cannot reach them while the bench runs; the URL carries it.
func TestLocalClusterPassword(t *testing.T) {
	redistest.Require(t)
	ctx := context.Background()
	c, err := StartCluster(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	anon := redis.NewClient(&redis.Options{Addr: c.Addrs[0]})
	defer anon.Close()
	if err := anon.Ping(ctx).Err(); err == nil || !redis.IsAuthError(err) {
		t.Fatalf("PING without the password: %v, want NOAUTH", err)
	}
	e, err := wfrt.Open(ctx, wfrt.Options{RedisURL: c.URL()})
	if err != nil {
		t.Fatalf("opening the runtime on the URL: %v", err)
	}
	e.Close()
}

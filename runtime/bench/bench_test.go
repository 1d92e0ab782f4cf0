package bench

import (
	"context"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wfc-lang/wfc/runtime/heapfloor"
	"github.com/wfc-lang/wfc/runtime/internal/redistest"
)

// TestMain gives the benchmarks the garbage collection policy of `wfc
// bench` (cmd/wfc's setGCTarget), so that both measure the same process.
func TestMain(m *testing.M) {
	if os.Getenv("GOGC") == "" {
		heapfloor.Start(heapfloor.Default)
	}
	os.Exit(m.Run())
}

// server starts a redis-server of the test's own (a failure, not a skip,
// when CI=true and the binary is missing).
func server(tb testing.TB) string {
	tb.Helper()
	return redistest.Start(tb, redistest.Options{}).URL()
}

func open(tb testing.TB, url string, d time.Duration) *Session {
	tb.Helper()
	s, err := Open(context.Background(), Options{RedisURL: url, Duration: d})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Close)
	return s
}

// TestRun runs the whole benchmark briefly on a real Redis and checks that
// every figure was measured and is consistent.
func TestRun(t *testing.T) {
	if testing.Short() {
		t.Skip("benchmark smoke test")
	}
	url := server(t)
	rep, err := Run(context.Background(), Options{
		RedisURL: url, Duration: 300 * time.Millisecond, Workers: []int{1, 2}, InFlight: 4,
		Baseline: true, MemoryRuns: 20, Burst: 40, Paced: []float64{0.5}, Backlog: 30,
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Redis == "embedded" || rep.Redis == "" {
		t.Errorf("redis version %q", rep.Redis)
	}
	// chain/latency, then each shape with 1 and 2 workers.
	if len(rep.Scenarios) != 1+2*len(Shapes) {
		t.Fatalf("%d scenarios: %+v", len(rep.Scenarios), rep.Scenarios)
	}
	perRun := map[string]int64{
		"chain": 10, "diamond": 4, "fanout": 102,
		"cel-chain": 10, "cel-diamond": 4, "cel-fanout": 102, "template": 3, "foreach": 102,
	}
	for _, s := range rep.Scenarios {
		if s.Runs == 0 || s.Executions != int64(s.Runs)*perRun[s.Shape] {
			t.Errorf("%s: %d executions for %d runs", s.Name, s.Executions, s.Runs)
		}
		// Every node but the entry has a hop.
		if want := s.Runs * int(perRun[s.Shape]-1); s.Hops != want {
			t.Errorf("%s: %d hops, want %d", s.Name, s.Hops, want)
		}
		// A chain has at most one token per run in flight; a fan-out
		// up to a hundred.
		if s.Tokens <= 0 || s.Shape == "chain" && s.Tokens > float64(s.InFlight)+0.01 {
			t.Errorf("%s: %.2f tokens in flight for %d runs", s.Name, s.Tokens, s.InFlight)
		}
		if s.ExecPerSec <= 0 || s.HopP50ms <= 0 || s.HopP99ms < s.HopP50ms || s.TripsPer <= 0 || s.RedisCPUus <= 0 {
			t.Errorf("%s: implausible figures %+v", s.Name, s)
		}
		// Script calls (about one per execution; a for_each's items
		// share them: 0.2–0.35), each with the commands it calls.
		if s.ScriptsPer <= 0 || s.CmdsPer < 2*s.ScriptsPer {
			t.Errorf("%s: %.2f commands, %.2f script calls per execution", s.Name, s.CmdsPer, s.ScriptsPer)
		}
	}
	// One reference right after each scenario, under its load.
	if len(rep.Baselines) != len(rep.Scenarios) {
		t.Fatalf("%d baselines for %d scenarios: %+v", len(rep.Baselines), len(rep.Scenarios), rep.Baselines)
	}
	for i, b := range rep.Baselines {
		// As many tokens in flight as the scenario had on average.
		if sc := rep.Scenarios[i]; b.For != sc.Name || b.Consumers != sc.Workers || b.InFlight != max(1, int(math.Round(sc.Tokens))) {
			t.Errorf("reference %+v after scenario %s (%.1f tokens in flight)", b, sc.Name, sc.Tokens)
		}
		// One read per batch and one pipelined write per hop.
		if b.Hops == 0 || b.HopsPerSec <= 0 || b.HopP50ms <= 0 || b.TripsPer < 1 || b.TripsPer > 2.5 {
			t.Errorf("%s: implausible figures %+v", b.Name, b)
		}
	}
	if len(rep.Ratios) != len(rep.Scenarios) {
		t.Errorf("%d ratios for %d scenarios", len(rep.Ratios), len(rep.Scenarios))
	}
	// A burst and a paced load of each load shape, then a backlog of
	// each, every run completed.
	if len(rep.Loads) != 3*len(LoadShapes) {
		t.Fatalf("loads: %+v", rep.Loads)
	}
	for i, l := range rep.Loads {
		if backlog := i >= 2*len(LoadShapes); backlog != (l.Kind == "backlog") || backlog && (l.Runs != 30 || !strings.HasSuffix(l.Name, "/1w/backlog30")) {
			t.Errorf("load %d: %s, %s", i, l.Name, l.Kind)
		}
		if l.Kind == "burst" && l.Runs != 40 || l.Kind == "paced" && (l.Share != 0.5 || l.Rate <= 0) {
			t.Errorf("%s: %+v", l.Name, l)
		}
		if l.RunsPerSec <= 0 || l.ExecPerSec < l.RunsPerSec || l.P50ms <= 0 || l.P95ms < l.P50ms || l.P99ms < l.P95ms || l.TripsPer <= 0 || l.RedisCPUus <= 0 {
			t.Errorf("%s: implausible figures %+v", l.Name, l)
		}
		// Queue wait plus run latency is the total, each run; so are the
		// medians, roughly: neither part exceeds the total's p99.
		if l.StartedP50ms <= 0 || l.StartedP95ms < l.StartedP50ms || l.StartedP99ms < l.StartedP95ms || l.WaitP99ms < l.WaitP50ms ||
			l.StartedP50ms > l.P99ms || l.WaitP50ms > l.P99ms {
			t.Errorf("%s: implausible wait and run latencies %+v", l.Name, l)
		}
	}
	if len(rep.Memory) != len(Shapes) {
		t.Fatalf("memory: %+v", rep.Memory)
	}
	for _, m := range rep.Memory {
		if m.InFlightBytes <= 0 || m.CompletedBytes <= 0 {
			t.Errorf("memory of %s: %+v", m.Shape, m)
		}
	}
	// The fan-out keeps 102 outputs and states, the chain 10.
	if rep.Memory[2].CompletedBytes <= rep.Memory[0].CompletedBytes {
		t.Errorf("a completed fan-out run (%d B) should take more than a chain (%d B)", rep.Memory[2].CompletedBytes, rep.Memory[0].CompletedBytes)
	}
}

// TestRunEmbedded runs a scenario and the reference on the embedded server.
func TestRunEmbedded(t *testing.T) {
	rep, err := Run(context.Background(), Options{
		Duration: 200 * time.Millisecond, Workers: []int{1}, InFlight: 2, Shapes: []string{"diamond"}, Baseline: true,
		Burst: 20, LoadShapes: []string{"foreach"}, Paced: []float64{0.5},
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Redis != "embedded" || len(rep.Notes) == 0 || len(rep.Memory) != 0 {
		t.Errorf("embedded report: %+v", rep)
	}
	if len(rep.Scenarios) != 1 || rep.Scenarios[0].Executions != 4*int64(rep.Scenarios[0].Runs) || len(rep.Ratios) != 1 {
		t.Errorf("embedded report: %+v", rep)
	}
	if len(rep.Loads) != 2 || rep.Loads[0].Runs != 20 || rep.Loads[0].ExecPerSec < 102*rep.Loads[0].RunsPerSec*0.99 {
		t.Errorf("embedded loads: %+v", rep.Loads)
	}
}

// The Go benchmarks: b.N runs of a shape (ns/op is per run), reporting node
// executions per second, hop latency and round trips per execution.
func BenchmarkRuntime(b *testing.B) {
	url := os.Getenv("WFC_BENCH_REDIS")
	if url == "" {
		url = server(b)
	}
	s := open(b, url, time.Second)
	for _, c := range []struct {
		shape             string
		workers, inflight int
	}{
		{"chain", 1, 1}, {"chain", 1, 32}, {"chain", 4, 32},
		{"diamond", 1, 32}, {"diamond", 4, 32},
		{"fanout", 1, 32}, {"fanout", 4, 32},
		{"cel-chain", 1, 1}, {"cel-chain", 1, 32}, {"cel-diamond", 1, 32}, {"cel-diamond", 4, 32},
		{"cel-fanout", 1, 32}, {"template", 1, 32}, {"foreach", 1, 32},
	} {
		b.Run(c.shape+"/"+itoa(c.workers)+"w/"+itoa(c.inflight), func(b *testing.B) {
			sc, err := s.Scenario(context.Background(), c.shape, c.workers, c.inflight, max(b.N, c.inflight))
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(sc.ExecPerSec, "exec/s")
			b.ReportMetric(sc.HopP50ms, "hop-p50-ms")
			b.ReportMetric(sc.HopP99ms, "hop-p99-ms")
			b.ReportMetric(sc.TripsPer, "trips/exec")
			b.ReportMetric(sc.CmdsPer, "redis-cmds/exec")
			b.ReportMetric(sc.RedisCPUus, "redis-µs/exec")
			b.ReportMetric(sc.GoCPUus, "go-µs/exec")
		})
	}
}

// BenchmarkBurst submits b.N runs of a load shape at once to one worker
// (ns/op is per run) and reports the run latency, submission to
// completion.
func BenchmarkBurst(b *testing.B) {
	url := os.Getenv("WFC_BENCH_REDIS")
	if url == "" {
		url = server(b)
	}
	s := open(b, url, time.Second)
	for _, shape := range LoadShapes {
		b.Run(shape, func(b *testing.B) {
			l, err := s.Burst(context.Background(), shape, 1, max(b.N, 10))
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(l.RunsPerSec, "runs/s")
			b.ReportMetric(l.P50ms, "run-p50-ms")
			b.ReportMetric(l.P99ms, "run-p99-ms")
			b.ReportMetric(l.TripsPer, "trips/exec")
		})
	}
}

// BenchmarkReference is the raw go-redis reference: b.N hops.
func BenchmarkReference(b *testing.B) {
	url := os.Getenv("WFC_BENCH_REDIS")
	if url == "" {
		url = server(b)
	}
	s := open(b, url, time.Second)
	for _, c := range []struct{ consumers, inflight int }{{1, 1}, {1, 32}, {4, 32}} {
		b.Run(itoa(c.consumers)+"c/"+itoa(c.inflight), func(b *testing.B) {
			bl, err := s.Baseline(context.Background(), c.consumers, c.inflight, int64(b.N))
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(bl.HopsPerSec, "hops/s")
			b.ReportMetric(bl.HopP50ms, "hop-p50-ms")
			b.ReportMetric(bl.HopP99ms, "hop-p99-ms")
			b.ReportMetric(bl.TripsPer, "trips/hop")
			b.ReportMetric(bl.RedisCPUus, "redis-µs/hop")
			b.ReportMetric(bl.GoCPUus, "go-µs/hop")
		})
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// The exported measurements refuse loads that cannot be measured instead of
// hanging or dividing by zero.
func TestBadLoads(t *testing.T) {
	s := open(t, "", 100*time.Millisecond)
	ctx := context.Background()
	if _, err := s.Scenario(ctx, "chain", 0, 1, 0); err == nil {
		t.Error("a scenario without workers ran")
	}
	if _, err := s.Scenario(ctx, "chain", 1, 0, 0); err == nil {
		t.Error("a scenario without runs in flight ran")
	}
	if _, err := s.Scenario(ctx, "triangle", 1, 1, 0); err == nil {
		t.Error("an unknown shape ran")
	}
	if _, err := s.Baseline(ctx, 0, 1, 0); err == nil {
		t.Error("a reference without consumers ran")
	}
	if _, err := s.Burst(ctx, "cel-diamond", 1, 0); err == nil {
		t.Error("a burst of no runs ran")
	}
	if _, err := s.Burst(ctx, "cel-diamond", 0, 1); err == nil {
		t.Error("a burst without workers ran")
	}
	if _, err := s.Backlog(ctx, "cel-diamond", 1, 0); err == nil {
		t.Error("a backlog of no runs ran")
	}
	if _, err := s.Paced(ctx, "cel-diamond", 1, 0, 0); err == nil {
		t.Error("paced arrivals at rate 0 ran")
	}
	if _, err := s.Memory(ctx, "chain", 0); err == nil {
		t.Error("memory of zero runs was measured")
	}
}

func TestMedians(t *testing.T) {
	rs := []Ratio{{Throughput: 0.4, P50: 2, P99: 9}, {Throughput: 0.6, P50: 4, P99: 1}, {Throughput: 0.5, P50: 3, P99: 2}}
	if m := medianRatio(rs); m.Throughput != 0.5 || m.P50 != 3 || m.P99 != 2 || !m.Met {
		t.Errorf("median of odd rounds: %+v", m)
	}
	if m := medianRatio(rs[:2]); m.Throughput != 0.5 || m.P50 != 3 || m.P99 != 5 || m.Met {
		t.Errorf("median of even rounds: %+v", m)
	}
	sc := medianScenario([]Scenario{{Runs: 2, Executions: 20, ExecPerSec: 5}, {Runs: 3, Executions: 30, ExecPerSec: 1}, {Runs: 1, Executions: 10, ExecPerSec: 9}})
	if sc.Runs != 6 || sc.Executions != 60 || sc.ExecPerSec != 5 {
		t.Errorf("scenario over rounds: %+v", sc)
	}
}

// The tokens in flight of a diamond, from its handlers' times: every
// execution counts from its node's becoming ready — the entry from its
// run's submission, a join from its last parent's end — to its own end.
func TestTokens(t *testing.T) {
	w, err := Workflow("diamond")
	if err != nil {
		t.Fatal(err)
	}
	entry, sink := w.Edges[0].From, w.Terminals[0]
	var mid []string
	for _, e := range w.Edges {
		if e.From == entry {
			mid = append(mid, e.To)
		}
	}
	if len(mid) != 2 {
		t.Fatalf("diamond edges %+v", w.Edges)
	}
	// Times in ms after t0.
	const ms, t0 = int64(time.Millisecond), int64(1_700_000_000_000_000_000)
	rec := newRecorder(sink, 0)
	times := func(run string, node string, start, end int64) {
		rt := rec.get(run)
		rt.set(rec.key(node), t0+start*ms, t0+end*ms)
	}
	// Run 1, submitted at 0: the entry waits 2 ms in its queue and runs
	// 1; the siblings are ready at 3 and end at 4 and 6; the join is
	// ready at 6 and ends at 8. Tokens: 3 + 1 + 3 + 2 = 9 ms.
	rec.markSubmitted("r1", t0)
	times("r1", entry, 2, 3)
	times("r1", mid[0], 3, 4)
	times("r1", mid[1], 5, 6)
	times("r1", sink, 7, 8)
	// Run 2, its submission not known: the entry counts from its start.
	// Tokens: 1 + 1 + 1 + 1 = 4 ms.
	times("r2", entry, 10, 11)
	times("r2", mid[0], 11, 12)
	times("r2", mid[1], 11, 12)
	times("r2", sink, 12, 13)
	if got, want := rec.tokens(w, 0.013), 13.0/13; math.Abs(got-want) > 1e-9 {
		t.Errorf("tokens %.4f, want %.4f", got, want)
	}
	if got := rec.tokens(w, 0); got != 0 {
		t.Errorf("tokens over no time: %v", got)
	}
}

// TestCommandCalls: the commands a server ran are summed from INFO
// commandstats' lines, the script calls among them counted apart, INFO
// itself and lines of other shapes left out.
func TestCommandCalls(t *testing.T) {
	stats := map[string]string{
		"cmdstat_evalsha":     "calls=52,usec=3614,usec_per_call=69.50,rejected_calls=0,failed_calls=0",
		"cmdstat_eval":        "calls=3,usec=30,usec_per_call=10.00,rejected_calls=0,failed_calls=0",
		"cmdstat_fcall":       "calls=2,usec=30,usec_per_call=15.00,rejected_calls=0,failed_calls=0",
		"cmdstat_xadd":        "calls=100,usec=470,usec_per_call=4.70,rejected_calls=0,failed_calls=0",
		"cmdstat_script|load": "calls=7,usec=520,usec_per_call=74.29,rejected_calls=0,failed_calls=0",
		"cmdstat_info":        "calls=9,usec=400,usec_per_call=44.44,rejected_calls=0,failed_calls=0",
		"cmdstat_bad":         "usec=1",
		"errorstat_ERR":       "count=4",
		"used_cpu_user":       "1.5",
	}
	all, scripts := commandCalls(stats)
	if all != 52+3+2+100+7 || scripts != 52+3+2 {
		t.Errorf("commandCalls = %v, %v; want %v, %v", all, scripts, 52+3+2+100+7, 52+3+2)
	}
	if all, scripts := commandCalls(nil); all != 0 || scripts != 0 {
		t.Errorf("no commandstats: %v, %v", all, scripts)
	}
}

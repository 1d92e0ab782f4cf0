package runtime

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/runtime/handlers"
)

// The scale benchmarks (docs/performance.md, "Longest scripts"): on the
// tests' real redis-server, how long Redis's longest command (a script,
// mostly) took while a big run ran — from SLOWLOG, every command over
// 1 ms — and how much a big for_each delays a small run of another engine
// (its own key prefix and workers) on the same Redis. Run them alone:
//
//	go test -run XXX -bench Scale -benchtime 1x ./runtime/
func BenchmarkScaleForEachNeighbour(b *testing.B) {
	for range b.N {
		scaleBench(b, "for_each 10,000", func(tb testing.TB) *ir.Workflow {
			return forEachWFOut(tb, []ir.Output{output("n", "size(each.output)")}, "noop", 0)
		}, map[string]any{"xs": ints(10_000)}, true)
	}
}

func BenchmarkScaleForEach100k(b *testing.B) {
	for range b.N {
		scaleBench(b, "for_each 100,000", func(tb testing.TB) *ir.Workflow {
			return forEachWFOut(tb, []ir.Output{output("n", "size(each.output)")}, "noop", 0)
		}, map[string]any{"xs": ints(100_000)}, false)
	}
}

func BenchmarkScaleFanOut10k(b *testing.B) {
	for range b.N {
		scaleBench(b, "fan-out 9,999", func(tb testing.TB) *ir.Workflow {
			nodes := []*nodeSpec{task("root", "noop")}
			for i := range 9_999 {
				nodes = append(nodes, task(fmt.Sprintf("leaf%d", i), "noop", after("root")))
			}
			return build(tb, wfSpec{name: "wide", set: ir.Settings{MaxFanout: 10_000}, nodes: nodes})
		}, nil, true)
	}
}

func BenchmarkScaleEntries10k(b *testing.B) {
	for range b.N {
		scaleBench(b, "10,000 entry nodes", func(tb testing.TB) *ir.Workflow {
			var nodes []*nodeSpec
			for i := range 10_000 {
				nodes = append(nodes, task(fmt.Sprintf("entry%d", i), "noop"))
			}
			return build(tb, wfSpec{name: "wide", nodes: nodes})
		}, nil, false)
	}
}

// scaleBench runs the big workflow once and reports its time, Redis's
// longest command meanwhile and, with neighbour, the latency of small
// runs (a chain of three noop nodes) of another engine before and during
// the big run.
func scaleBench(b *testing.B, name string, big func(testing.TB) *ir.Workflow, in map[string]any, neighbour bool) {
	b.StopTimer()
	ctx := context.Background()
	redisB := backends[1]
	reg := handlers.NewRegistry(handlers.Options{})
	bigE := openEngine(b, redisB, Options{})
	o := fastWorker(reg)
	o.Concurrency, o.MaxOutputBytes = 32, 8<<20
	bigE.StartWorkers(ctx, o.Concurrency, o)
	w := big(b)
	var smallE *Engine
	small := build(b, wfSpec{nodes: []*nodeSpec{task("a", "noop"), task("b", "noop", after("a")), task("c", "noop", after("b"))}})
	lat := func(stop func() bool) []time.Duration {
		var out []time.Duration
		for !stop() {
			t0 := time.Now()
			id, err := smallE.Submit(ctx, small, nil)
			if err != nil {
				b.Fatal(err)
			}
			if st, err := smallE.Wait(ctx, id); err != nil || st.State != RunCompleted {
				b.Fatalf("small run: %v %v", st, err)
			}
			out = append(out, time.Since(t0))
			time.Sleep(5 * time.Millisecond)
		}
		return out
	}
	var alone []time.Duration
	if neighbour {
		smallE = openEngine(b, redisB, Options{})
		so := fastWorker(reg)
		so.Concurrency = 4
		smallE.StartWorkers(ctx, 4, so)
		n := 0
		lat(func() bool { n++; return n > 20 }) // warm up
		n = 0
		alone = lat(func() bool { n++; return n > 200 })
	}
	rdb := bigE.st.rdb
	for _, c := range [][]any{{"config", "set", "slowlog-log-slower-than", "1000"}, {"config", "set", "slowlog-max-len", "100000"}, {"slowlog", "reset"}} {
		if err := rdb.Do(ctx, c...).Err(); err != nil {
			b.Fatal(err)
		}
	}
	b.StartTimer()
	t0 := time.Now()
	id, err := bigE.Submit(ctx, w, in)
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan *Status, 1)
	go func() {
		st, err := bigE.Wait(ctx, id)
		if err != nil {
			b.Error(err)
		}
		done <- st
	}()
	var during []time.Duration
	var st *Status
	if neighbour {
		during = lat(func() bool {
			select {
			case st = <-done:
				return true
			default:
				return false
			}
		})
	} else {
		st = <-done
	}
	took := time.Since(t0)
	b.StopTimer()
	if st == nil || st.State != RunCompleted {
		b.Fatalf("%s: %+v", name, st)
	}
	// The longest commands while it ran, the scripts by name.
	logs, err := rdb.SlowLogGet(ctx, -1).Result()
	if err != nil {
		b.Fatal(err)
	}
	rdb.Do(ctx, "config", "set", "slowlog-log-slower-than", "10000")
	names := scriptNames(ctx, rdb, bigE)
	var longest time.Duration
	what := "none over 1 ms"
	for _, l := range logs {
		if l.Duration > longest {
			longest = l.Duration
			what = l.Args[0]
			if strings.EqualFold(what, "evalsha") && len(l.Args) > 1 {
				what = names[l.Args[1]]
			}
		}
	}
	// By command (scripts by name): how many took over 1 ms, the longest.
	type agg struct {
		n, n5 int // over 1 ms, over 5 ms
		max   time.Duration
	}
	by := map[string]*agg{}
	for _, l := range logs {
		n := strings.ToLower(l.Args[0])
		if n == "evalsha" && len(l.Args) > 1 {
			n = names[l.Args[1]]
		}
		if by[n] == nil {
			by[n] = &agg{}
		}
		by[n].n++
		if l.Duration > 5*time.Millisecond {
			by[n].n5++
		}
		by[n].max = max(by[n].max, l.Duration)
	}
	var top []string
	for n, a := range by {
		top = append(top, fmt.Sprintf("%s %d (%d over 5 ms, max %s)", n, a.n, a.n5, a.max.Round(10*time.Microsecond)))
	}
	slices.Sort(top)
	b.Logf("over 1 ms: %s", strings.Join(top, ", "))
	b.ReportMetric(took.Seconds(), "s/run")
	b.ReportMetric(float64(longest.Microseconds())/1000, "ms-longest-cmd")
	b.ReportMetric(float64(len(logs)), "cmds-over-1ms")
	b.Logf("%s: %s; longest command %s (%s); %d commands over 1 ms", name, took.Round(time.Millisecond), longest, what, len(logs))
	if neighbour {
		pa, pd := pct(alone), pct(during)
		b.ReportMetric(ms(pa[1]), "ms-small-p99-alone")
		b.ReportMetric(ms(pd[1]), "ms-small-p99-during")
		b.Logf("small run (3 nodes) alone: p50 %s p99 %s max %s (%d runs); during: p50 %s p99 %s max %s (%d runs)",
			pa[0], pa[1], pa[2], len(alone), pd[0], pd[1], pd[2], len(during))
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// pct returns p50, p99 and the max.
func pct(ds []time.Duration) [3]time.Duration {
	if len(ds) == 0 {
		return [3]time.Duration{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(p float64) time.Duration {
		return s[min(len(s)-1, int(p*float64(len(s))))].Round(10 * time.Microsecond)
	}
	return [3]time.Duration{at(0.5), at(0.99), s[len(s)-1].Round(10 * time.Microsecond)}
}

// scriptNames maps the SHA of each run script to its name.
func scriptNames(ctx context.Context, rdb redis.UniversalClient, e *Engine) map[string]string {
	out := map[string]string{}
	for name, sc := range e.st.scripts {
		out[sc.Hash()] = name
	}
	return out
}

package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/wfc-lang/wfc/runtime/bench"
)

const benchDoc = `
Bench measures the runtime on a Redis: node executions per second and the
per-hop latency (a node's handler finished -> the next node's handler
started, p50 and p99) of no-op workflows — a chain of ten, a diamond and a
100-wide fan-out/fan-in — with one and several workers, the round trips to
Redis and the Redis CPU per node execution, and Redis memory per in-flight
and per completed run.

Each scenario and its reference are measured --rounds times in turn, each
round a share of --duration, and each figure and ratio printed is the
median over the rounds: on a shared machine a neighbour's burst of load
then skews one round, not the result.

With --baseline it also measures, right after each scenario and on the same
Redis, a raw go-redis reference under the same load: tokens passed along
chains of ten streams with one batched read and one pipelined write per hop,
by as many consumers with the same concurrency and as many tokens in
flight as the scenario had on average (the "tokens" column: a fan-out's
siblings queue behind each other). It then prints the ratios to that
reference and whether the targets hold (throughput at least 0.5 of the reference, hop p50 and p99
at most 3x, at most 2 round trips per node execution); with --check a
missed target makes the exit code 1. The benchmark's keys get their own
prefix and are deleted at the end.

The shapes: chain, diamond and fanout are of no-op tasks; cel-chain,
cel-diamond and cel-fanout are the same graphs of cel tasks that each read
their parents' outputs (the fan-out's join reads all hundred); template
renders a template of its parent's output; foreach runs 100 cel items.

After the closed-loop scenarios, open-loop loads drive each --load-shapes
shape as users do: a burst of --burst runs submitted at once, then paced
arrivals at the --paced shares of the throughput the burst measured (its
capacity), for --duration each. They report the run latency from a run's
submission to its completion (p50, p95, p99), which a fixed number of runs
in flight cannot show.

Without --redis it runs on the embedded server; its figures say little.`

func runBench(ctx context.Context, env *Env, args []string) int {
	fs := newFlags("bench", "wfc bench [--redis URL] [flags]", benchDoc)
	redisURL := fs.String("redis", env.Getenv("WFC_REDIS"), "Redis `URL` to measure (default $WFC_REDIS; none: embedded)")
	dur := fs.Duration("duration", 3*time.Second, "measured time of each scenario, over its rounds")
	rounds := fs.Int("rounds", 3, "times each scenario and its reference are measured in turn (the report gives medians)")
	workers := fs.String("workers", "1,4", "comma-separated worker `COUNTS` to measure with")
	conc := fs.Int("concurrency", 0, "handlers each worker runs at once (0: the workers' default, adaptive; the reference then uses its start)")
	inflight := fs.Int("inflight", 32, "runs (and reference chains) kept in flight")
	shapes := fs.String("shapes", strings.Join(bench.Shapes, ","), "comma-separated `SHAPES` to run")
	baseline := fs.Bool("baseline", true, "measure the raw go-redis reference and the ratios")
	burst := fs.Int("burst", 1000, "runs of each load shape submitted at once (0: no open-loop loads)")
	loadShapes := fs.String("load-shapes", strings.Join(bench.LoadShapes, ","), "comma-separated `SHAPES` the burst and paced loads drive")
	paced := fs.String("paced", "0.5,0.9", "paced arrival rates after each burst, as `SHARES` of its throughput")
	loadWorkers := fs.Int("load-workers", 1, "workers serving the open-loop loads")
	memRuns := fs.Int("memory-runs", 500, "runs measuring Redis memory per run (0: skip)")
	jsonOut := fs.Bool("json", false, "print the report as JSON")
	check := fs.Bool("check", false, "exit 1 when a target is missed")
	args, code, ok := fs.parse(env, args)
	if !ok {
		return code
	}
	env = withRedactedStderr(env, *redisURL)
	if len(args) > 0 {
		return fs.usageError(env, "bench takes no arguments")
	}
	opts := bench.Options{
		RedisURL: *redisURL, Duration: *dur, Rounds: *rounds, Concurrency: *conc, InFlight: *inflight,
		Baseline: *baseline, MemoryRuns: *memRuns, Burst: *burst, LoadWorkers: *loadWorkers,
	}
	if *burst <= 0 {
		opts.Burst = -1
	}
	if *loadWorkers < 1 {
		return fs.usageError(env, "--load-workers must be at least 1")
	}
	for _, s := range strings.Split(*loadShapes, ",") {
		s = strings.TrimSpace(s)
		if _, err := bench.Workflow(s); err != nil {
			return fs.usageError(env, "--load-shapes: %v", err)
		}
		opts.LoadShapes = append(opts.LoadShapes, s)
	}
	for _, s := range strings.Split(*paced, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || f <= 0 || f > 10 {
			return fs.usageError(env, "--paced: %q is not a share of the burst's throughput (e.g. 0.5)", s)
		}
		opts.Paced = append(opts.Paced, f)
	}
	if *memRuns <= 0 {
		opts.MemoryRuns = -1
	}
	if *rounds < 1 {
		return fs.usageError(env, "--rounds: %d is not a number of rounds", *rounds)
	}
	for _, s := range strings.Split(*workers, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return fs.usageError(env, "--workers: %q is not a worker count", s)
		}
		opts.Workers = append(opts.Workers, n)
	}
	for _, s := range strings.Split(*shapes, ",") {
		s = strings.TrimSpace(s)
		if _, err := bench.Workflow(s); err != nil {
			return fs.usageError(env, "--shapes: %v", err)
		}
		opts.Shapes = append(opts.Shapes, s)
	}
	if *dur < 100*time.Millisecond {
		return fs.usageError(env, "--duration must be at least 100ms")
	}
	if *conc < 0 || *inflight < 1 {
		return fs.usageError(env, "--concurrency must be 0 (adaptive) or more, --inflight at least 1")
	}
	if !*jsonOut {
		opts.Progress = func(s string) { fmt.Fprintf(env.Stderr, "wfc bench: %s\n", s) }
	}
	rep, err := bench.Run(ctx, opts)
	if err != nil {
		fmt.Fprintf(env.Stderr, "wfc bench: %v\n", err)
		return exitFailed
	}
	if *jsonOut {
		if code := writeJSON(env, "bench", "the report", rep); code != exitOK {
			return code
		}
	} else {
		writeBench(env.Stdout, rep)
	}
	for _, r := range rep.Ratios {
		if *check && !r.Met {
			return exitFailed
		}
	}
	return exitOK
}

func writeBench(out io.Writer, rep *bench.Report) {
	fmt.Fprintf(out, "Redis %s, GOMAXPROCS %d, %.1f s per scenario in %d rounds (each figure a median)\n\n", rep.Redis, rep.GoMaxProc, rep.Duration, rep.Rounds)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tin flight\ttokens\truns\texec/s\truns/s\thop p50 ms\thop p99 ms\ttrips/exec\tRedis µs/exec\tGo µs/exec\t")
	for _, s := range rep.Scenarios {
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%d\t%.0f\t%.0f\t%.3f\t%.3f\t%.2f\t%s\t%s\t\n", s.Name, s.InFlight, s.Tokens, s.Runs, s.ExecPerSec, s.RunsPerSec, s.HopP50ms, s.HopP99ms, s.TripsPer, cpuCell(s.RedisCPUus), cpuCell(s.GoCPUus))
	}
	tw.Flush()
	if len(rep.Baselines) > 0 {
		fmt.Fprintln(out)
		tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "reference, after\tconsumers\tin flight\thops/s\thop p50 ms\thop p99 ms\ttrips/hop\tRedis µs/hop\tGo µs/hop\t")
		for _, b := range rep.Baselines {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%.3f\t%.3f\t%.2f\t%s\t%s\t\n", b.For, b.Consumers, b.InFlight, b.HopsPerSec, b.HopP50ms, b.HopP99ms, b.TripsPer, cpuCell(b.RedisCPUus), cpuCell(b.GoCPUus))
		}
		tw.Flush()
		fmt.Fprintln(out)
		tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "ratio to the reference\tthroughput (≥0.5)\tp50 (≤3)\tp99 (≤3)\ttrips (≤2)\ttargets\t")
		for _, r := range rep.Ratios {
			met := "met"
			if !r.Met {
				met = "MISSED"
			}
			fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%.2f\t%.2f\t%s\t\n", r.Scenario, r.Throughput, r.P50, r.P99, r.Trips, met)
		}
		tw.Flush()
	}
	if len(rep.Loads) > 0 {
		fmt.Fprintln(out)
		tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "open-loop load\truns\tsubmit s\truns/s\texec/s\trun p50 ms\trun p95 ms\trun p99 ms\ttrips/exec\tRedis µs/exec\tGo µs/exec\t")
		for _, l := range rep.Loads {
			fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.0f\t%.0f\t%.1f\t%.1f\t%.1f\t%.2f\t%s\t%s\t\n", l.Name, l.Runs, l.SubmitSecs, l.RunsPerSec, l.ExecPerSec, l.P50ms, l.P95ms, l.P99ms, l.TripsPer, cpuCell(l.RedisCPUus), cpuCell(l.GoCPUus))
		}
		tw.Flush()
	}
	if len(rep.Memory) > 0 {
		fmt.Fprintln(out)
		tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "memory\truns\tbytes per in-flight run\tbytes per completed run\t")
		for _, m := range rep.Memory {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t\n", m.Shape, m.Runs, m.InFlightBytes, m.CompletedBytes)
		}
		tw.Flush()
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(out, "\nnote: %s\n", n)
	}
}

func cpuCell(us float64) string {
	if us == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", us)
}

package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
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
Redis, the commands Redis ran (cmds/exec: counted, so comparable on a
noisy machine) and the Redis and Go CPU per node execution, and Redis
memory per in-flight and per completed run.

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
capacity), for --duration each. They report, which a fixed number of runs
in flight cannot show, each run's queue wait (wait: from its submission
until its first node started, its admission), its run latency (run: from
that start until its completion) and their sum (total: submission to
completion), as p50, p95 or p99. --backlog N adds, for each shape, N runs
submitted while no worker runs (an outage: the workers of the warm-up
stopped, as workers that go away do), then served by --load-workers
started after; its run latency shows whether runs that piled up end in
the order they start.

On a Redis Cluster (--redis redis+cluster://host:port,...) the runs are
spread over the masters by --shards (default 12), the Redis CPU per
execution is the sum over the masters, and a table gives each master's
share and how many shards its slots hold. --cluster-masters 1,3 starts a
local cluster of each size itself (redis-server on free loopback ports, no
persistence, stopped at the end) and measures the same scenarios on each,
in turn within each round, with the same shard count (default four per
master of the largest). --paced-per-master 50,150 then replaces the burst
with paced loads of each --load-shapes shape at 50 and 150 runs/s per
master (150 and 450 runs/s on 3 masters): the clusters compared at the
same load per master, and at the same total load (50 per master on 3
against 150 on 1).

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
	backlog := fs.Int("backlog", 0, "runs of each load shape submitted while no worker runs, then served (0: none)")
	loadShapes := fs.String("load-shapes", strings.Join(bench.LoadShapes, ","), "comma-separated `SHAPES` the burst and paced loads drive")
	paced := fs.String("paced", "0.5,0.9", "paced arrival rates after each burst, as `SHARES` of its throughput")
	loadWorkers := fs.Int("load-workers", 1, "workers serving the open-loop loads")
	memRuns := fs.Int("memory-runs", 500, "runs measuring Redis memory per run (0: skip)")
	shards := fs.Int("shards", 0, "the runtime's shard `COUNT`; 0: 1 on a single server, 12 on a cluster, 4 per master of the largest --cluster-masters")
	clusters := fs.String("cluster-masters", "", "start a local Redis Cluster of each of these master `COUNTS` (e.g. 1,3) and measure on each; needs redis-server")
	perMaster := fs.String("paced-per-master", "", "on clusters: instead of the burst, paced loads at these `RATES` (runs/s) per master, rate × masters on each")
	jsonOut := fs.Bool("json", false, "print the report as JSON")
	check := fs.Bool("check", false, "exit 1 when a target is missed")
	verbose := fs.Bool("v", false, "log the workers' moves to standard error (each change of the concurrency limit, with what was saturated, and of the admission target)")
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
		Baseline: *baseline, MemoryRuns: *memRuns, Burst: *burst, LoadWorkers: *loadWorkers, Backlog: *backlog,
	}
	if *backlog < 0 {
		return fs.usageError(env, "--backlog must be 0 (none) or more")
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
	if *shards < 0 {
		return fs.usageError(env, "--shards: %d is not a shard count", *shards)
	}
	opts.Shards = *shards
	if *verbose {
		opts.Logger = slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if *clusters != "" {
		redisGiven := false
		fs.Visit(func(f *flag.Flag) { redisGiven = redisGiven || f.Name == "redis" })
		if redisGiven {
			return fs.usageError(env, "give --redis or --cluster-masters, not both")
		}
		// The clusters replace $WFC_REDIS.
		opts.RedisURL = ""
		for _, s := range strings.Split(*clusters, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || n < 1 || n > 64 || slices.Contains(opts.ClusterMasters, n) {
				return fs.usageError(env, "--cluster-masters: %q is not a new count of masters (1 to 64)", s)
			}
			opts.ClusterMasters = append(opts.ClusterMasters, n)
		}
	}
	for _, s := range strings.Split(*perMaster, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || f <= 0 || f > 1e6 {
			return fs.usageError(env, "--paced-per-master: %q is not a rate in runs per second", s)
		}
		opts.PacedPerMaster = append(opts.PacedPerMaster, f)
	}
	if len(opts.PacedPerMaster) > 0 && len(opts.ClusterMasters) == 0 && !strings.Contains(opts.RedisURL, "+cluster://") {
		return fs.usageError(env, "--paced-per-master needs a Redis Cluster (--cluster-masters, or --redis redis+cluster://…)")
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
	fmt.Fprintln(tw, "scenario\tin flight\ttokens\truns\texec/s\truns/s\thop p50 ms\thop p99 ms\ttrips/exec\tcmds/exec\tRedis µs/exec\tGo µs/exec\t")
	for _, s := range rep.Scenarios {
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%d\t%.0f\t%.0f\t%.3f\t%.3f\t%.2f\t%s\t%s\t%s\t\n", s.Name, s.InFlight, s.Tokens, s.Runs, s.ExecPerSec, s.RunsPerSec, s.HopP50ms, s.HopP99ms, s.TripsPer, countCell(s.CmdsPer), cpuCell(s.RedisCPUus), cpuCell(s.GoCPUus))
	}
	tw.Flush()
	writeClusters(out, rep)
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
		// wait: submission -> first node started (admission); run: first
		// node started -> completed; total: submission -> completed.
		fmt.Fprintln(tw, "open-loop load\truns\tsubmit s\truns/s\texec/s\twait p50 ms\twait p99 ms\trun p50 ms\trun p95 ms\trun p99 ms\ttotal p50 ms\ttotal p99 ms\ttrips/exec\tcmds/exec\tRedis µs/exec\tGo µs/exec\t")
		for _, l := range rep.Loads {
			fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.0f\t%.0f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.2f\t%s\t%s\t%s\t\n", l.Name, l.Runs, l.SubmitSecs, l.RunsPerSec, l.ExecPerSec,
				l.WaitP50ms, l.WaitP99ms, l.StartedP50ms, l.StartedP95ms, l.StartedP99ms, l.P50ms, l.P99ms, l.TripsPer, countCell(l.CmdsPer), cpuCell(l.RedisCPUus), cpuCell(l.GoCPUus))
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

// writeClusters prints, for the scenarios measured on a Redis Cluster, the
// Redis CPU per execution on each master: its sum is the "Redis µs/exec"
// above, and balance is the busiest master's over the mean.
func writeClusters(out io.Writer, rep *bench.Report) {
	if len(rep.Clusters) == 0 {
		return
	}
	byName := map[string]bench.Cluster{}
	for _, c := range rep.Clusters {
		byName[c.Name] = c
		shards := make([]string, len(c.Masters))
		for i, m := range c.Masters {
			shards[i] = fmt.Sprintf("%s %d slots %d shards", m.Addr, m.Slots, m.Shards)
		}
		fmt.Fprintf(out, "\ncluster %s (%d shards): %s\n", c.Name, c.Shards, strings.Join(shards, ", "))
	}
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "on the cluster\tmasters\texec/s\ttrips/exec\tRedis µs/exec (sum)\tI/O events/exec\tper master µs/exec\tbusiest/mean\tGo µs/exec\t")
	for _, s := range rep.Scenarios {
		if len(s.MasterCPUus) == 0 {
			continue
		}
		cells := make([]string, len(s.MasterCPUus))
		var sum, most float64
		for i, us := range s.MasterCPUus {
			cells[i] = fmt.Sprintf("%.1f", us)
			sum += us
			most = max(most, us)
		}
		balance := "-"
		if sum > 0 {
			balance = fmt.Sprintf("%.2f", most/(sum/float64(len(s.MasterCPUus))))
		}
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.2f\t%s\t%s\t%s\t%s\t%s\t\n", s.Name, len(byName[s.Cluster].Masters), s.ExecPerSec, s.TripsPer, cpuCell(s.RedisCPUus), fmt.Sprintf("%.2f", s.RedisIOPer), strings.Join(cells, " / "), balance, cpuCell(s.GoCPUus))
	}
	tw.Flush()
}

// cpuCell and countCell show a CPU time (µs) or a count per execution,
// or "-" when it was not measured (0: the embedded server gives no CPU
// and no INFO commandstats).
func cpuCell(us float64) string { return measuredCell(us, "%.1f") }

func countCell(n float64) string { return measuredCell(n, "%.2f") }

func measuredCell(v float64, format string) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf(format, v)
}

package bench

import (
	"cmp"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wfc-lang/wfc/ir"
	wfrt "github.com/wfc-lang/wfc/runtime"
	"github.com/wfc-lang/wfc/runtime/handlers"
	"github.com/wfc-lang/wfc/runtime/internal/trips"
)

//go:embed workflows/*.ir.json
var workflowFS embed.FS

// Shapes are the workflows the benchmark runs. Three are of no-op tasks: a
// chain of ten, a diamond (one task, two in parallel, a join) and a
// 100-wide fan-out/fan-in. The others do real work, as users' workflows
// do: the same three graphs of `cel` tasks that each read their parents'
// outputs (the fan-out's join reads all hundred), a task rendering a
// template of its parent's output, and a for_each of 100 cel items. Their
// sources are workflows/*.wf; the embedded IR is built from them by `go
// generate` and kept equal by a test in cmd/wfc.
var Shapes = []string{"chain", "diamond", "fanout", "cel-chain", "cel-diamond", "cel-fanout", "template", "foreach"}

// LoadShapes are the shapes the open-loop loads (a burst, paced arrivals)
// drive by default: the real-work diamond and chain.
var LoadShapes = []string{"cel-diamond", "cel-chain"}

//go:generate go run ../../cmd/wfc build -o workflows/chain.ir.json workflows/chain.wf
//go:generate go run ../../cmd/wfc build -o workflows/diamond.ir.json workflows/diamond.wf
//go:generate go run ../../cmd/wfc build -o workflows/fanout.ir.json workflows/fanout.wf
//go:generate go run ../../cmd/wfc build -o workflows/cel-chain.ir.json workflows/cel-chain.wf
//go:generate go run ../../cmd/wfc build -o workflows/cel-diamond.ir.json workflows/cel-diamond.wf
//go:generate go run ../../cmd/wfc build -o workflows/cel-fanout.ir.json workflows/cel-fanout.wf
//go:generate go run ../../cmd/wfc build -o workflows/template.ir.json workflows/template.wf
//go:generate go run ../../cmd/wfc build -o workflows/foreach.ir.json workflows/foreach.wf

// Workflow returns the IR of a benchmark shape.
func Workflow(shape string) (*ir.Workflow, error) {
	data, err := workflowFS.ReadFile("workflows/" + shape + ".ir.json")
	if err != nil {
		return nil, fmt.Errorf("bench: no shape %q (have %s)", shape, strings.Join(Shapes, ", "))
	}
	return ir.Decode(data)
}

// Options configure a benchmark.
type Options struct {
	// RedisURL is the Redis to measure; "" starts the embedded server
	// (its figures say little about a deployment).
	RedisURL string
	// Duration of each measured scenario (default 3 s): Run splits it over
	// the rounds; Scenario and Baseline measure for all of it.
	Duration time.Duration
	// Rounds: Run measures each scenario and its reference this many times
	// in turn, Duration/Rounds each, and reports the median of each figure
	// and of each ratio (default 3). A neighbour's burst of load on a
	// shared machine then skews one round, not the result.
	Rounds int
	// Workers lists the worker counts to measure each shape with
	// (default 1 and 4).
	Workers []int
	// Concurrency of each worker; 0 (the default) leaves the workers at
	// theirs, adaptive, and the reference's consumers then use the
	// adaptive start (runtime.AdaptiveStart).
	Concurrency int
	// InFlight is how many runs (and, for the reference, chains) are kept
	// in flight at once (default 32).
	InFlight int
	// Shapes to run (default all).
	Shapes []string
	// Baseline measures the raw go-redis reference after each scenario.
	Baseline bool
	// MemoryRuns is how many runs measure Redis memory per run: 0 means
	// 500, a negative number skips the measurement.
	MemoryRuns int
	// Burst is the number of runs of each load shape submitted at once
	// (default 1,000; negative: no open-loop loads). Paced loads follow
	// each burst at the Paced shares of its throughput.
	Burst int
	// Backlog, when positive, adds to each load shape's loads a backlog
	// of that many runs (Session.Backlog): submitted while no worker runs,
	// then served by LoadWorkers workers started after.
	Backlog int
	// LoadShapes are the shapes driven by the burst and the paced loads
	// (default LoadShapes).
	LoadShapes []string
	// Paced lists the arrival rates of the paced loads as shares of the
	// burst's throughput, the capacity it measured (default 0.5 and 0.9).
	Paced []float64
	// LoadWorkers is how many workers serve the loads (default 1: one
	// `wfc worker` at its defaults).
	LoadWorkers int
	// Shards is the runtime's shard count (Options.Shards): on a cluster
	// it spreads the runs over the masters. 0: one on a single server;
	// on a cluster, four per master of the largest cluster measured (the
	// same count on each, so that they are compared doing the same work).
	Shards int
	// ClusterMasters, when set, starts a local Redis Cluster of each of
	// these many masters (redis-server on free loopback ports; see
	// StartCluster) instead of using RedisURL, and measures the same
	// scenarios on each, in turn within each round, so that the clusters
	// are compared under the same machine load.
	ClusterMasters []int
	// PacedPerMaster, on clusters, replaces the burst and its paced
	// shares with paced loads at these arrival rates (runs per second)
	// per master: on each cluster, rate × its masters. A per-master rate
	// on several clusters compares them at the same load per master, and
	// two rates (say 50 and 150 on 1 and 3 masters) also at the same total
	// load; Redis CPU per execution depends on the first (a less busy
	// server shares each system call among fewer commands), and the
	// closed-loop scenarios, on a machine too small to load every master,
	// only show the second.
	PacedPerMaster []float64
	// Logger receives the engine's logs (default: warnings and errors
	// to nowhere).
	Logger *slog.Logger
	// Progress, when set, gets a line as each scenario starts.
	Progress func(string)
}

func (o *Options) defaults() {
	if o.Duration <= 0 {
		o.Duration = 3 * time.Second
	}
	if o.Rounds <= 0 {
		o.Rounds = 3
	}
	if len(o.Workers) == 0 {
		o.Workers = []int{1, 4}
	}
	if o.Concurrency < 0 {
		o.Concurrency = 0
	}
	if o.InFlight <= 0 {
		o.InFlight = 32
	}
	if len(o.Shapes) == 0 {
		o.Shapes = Shapes
	}
	if o.MemoryRuns == 0 {
		o.MemoryRuns = 500
	}
	if o.Burst == 0 {
		o.Burst = 1000
	}
	if len(o.LoadShapes) == 0 {
		o.LoadShapes = LoadShapes
	}
	if len(o.Paced) == 0 {
		o.Paced = []float64{0.5, 0.9}
	}
	if o.LoadWorkers <= 0 {
		o.LoadWorkers = 1
	}
	if o.Shards <= 0 {
		o.Shards = 1
		if isCluster(o.RedisURL) {
			o.Shards = 12 // a few shards per master of a 3-master cluster
		}
		if len(o.ClusterMasters) > 0 {
			o.Shards = 4 * slices.Max(o.ClusterMasters)
		}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Progress == nil {
		o.Progress = func(string) {}
	}
}

// A Report is what a benchmark measured.
type Report struct {
	Redis     string     `json:"redis"`             // server version, or "embedded"
	GoMaxProc int        `json:"gomaxprocs"`        // CPUs the Go side could use
	Duration  float64    `json:"duration_s"`        // per scenario
	Rounds    int        `json:"rounds"`            // per scenario; each figure is their median
	Scenarios []Scenario `json:"scenarios"`         // runtime measurements
	Baselines []Baseline `json:"baselines"`         // raw go-redis reference
	Ratios    []Ratio    `json:"ratios"`            // scenario vs reference, with targets
	Loads     []Load     `json:"loads"`             // open-loop bursts and paced arrivals
	Memory    []Memory   `json:"memory"`            // Redis memory per run
	Clusters  []Cluster  `json:"clusters,omitzero"` // the Redis Clusters measured, if any
	Notes     []string   `json:"notes,omitzero"`    // what the figures cannot show
}

// A Scenario is one shape run by some workers with runs kept in flight.
type Scenario struct {
	Name       string  `json:"name"` // shape/Nw[/latency]
	Shape      string  `json:"shape"`
	Workers    int     `json:"workers"`
	InFlight   int     `json:"in_flight"`
	Runs       int     `json:"runs"`
	Executions int64   `json:"executions"`     // handler calls
	Seconds    float64 `json:"seconds"`        // from the first submit until the last run completed
	ExecPerSec float64 `json:"exec_per_s"`     // node executions per second
	RunsPerSec float64 `json:"runs_per_s"`     // completed runs per second
	Hops       int     `json:"hops"`           // hops measured
	HopP50ms   float64 `json:"hop_p50_ms"`     // a node's handler finished -> the next one's started
	HopP99ms   float64 `json:"hop_p99_ms"`     //
	TripsPer   float64 `json:"trips_per_exec"` // worker round trips to Redis per node execution
	RedisCPUus float64 `json:"redis_cpu_us_per_exec,omitzero"`
	// GoCPUus is this process's CPU per execution over the same window:
	// the workers' and the submitter's (the scenario runs in process).
	GoCPUus float64 `json:"go_cpu_us_per_exec,omitzero"`
	// Cluster names the Redis Cluster measured (Report.Clusters), if any;
	// RedisCPUus is then the sum over its masters, and MasterCPUus each
	// master's share of it, in the order of the cluster's masters.
	// RedisIOPer is the read and write events Redis processed per
	// execution (INFO stats: total_reads_processed and
	// total_writes_processed, summed over the masters): each is a system
	// call and a turn of the event loop, which a busier server shares
	// among more commands, so it is what makes a less loaded server spend
	// more CPU per execution.
	RedisIOPer float64 `json:"redis_io_per_exec,omitzero"`
	// CmdsPer is the commands Redis ran per execution, those scripts
	// called included, and ScriptsPer the script calls among them (INFO
	// commandstats, summed over the masters; the benchmark's own INFO
	// left out). They count the work rather than time it, so a change to
	// it shows on a noisy machine too.
	CmdsPer     float64   `json:"redis_cmds_per_exec,omitzero"`
	ScriptsPer  float64   `json:"script_calls_per_exec,omitzero"`
	Cluster     string    `json:"cluster,omitzero"`
	MasterCPUus []float64 `json:"redis_cpu_us_per_exec_by_master,omitzero"`
	// Tokens is the mean number of tokens in flight (Little's law: the
	// sum over executions of the time from the node's becoming ready to
	// its handler's end, over the measured time). The reference after the
	// scenario keeps as many in flight: a fan-out's 100 siblings wait in
	// their queue behind each other, and a reference with one token per
	// run would not.
	Tokens float64 `json:"tokens_in_flight"`
}

// A Baseline is the raw go-redis reference: tokens passed along chains of
// ten streams, each hop one blocking batched read and one pipelined write
// (XACK + XADD), by the same number of consumers with the same concurrency.
type Baseline struct {
	Name       string  `json:"name"`
	For        string  `json:"for"` // the scenario measured just before, under the same load
	Consumers  int     `json:"consumers"`
	InFlight   int     `json:"in_flight"` // chains (tokens) in flight
	Hops       int64   `json:"hops"`
	Seconds    float64 `json:"seconds"`
	HopsPerSec float64 `json:"hops_per_s"`
	HopP50ms   float64 `json:"hop_p50_ms"`
	HopP99ms   float64 `json:"hop_p99_ms"`
	TripsPer   float64 `json:"trips_per_hop"`
	RedisCPUus float64 `json:"redis_cpu_us_per_hop,omitzero"`
	GoCPUus    float64 `json:"go_cpu_us_per_hop,omitzero"` // this process's CPU per hop
}

// A Ratio compares a scenario with the reference run under the same load
// and says whether the targets hold: throughput at least half the
// reference's, p50 and p99 at most three times, at most two round trips
// per node execution.
type Ratio struct {
	Scenario   string  `json:"scenario"`
	Baseline   string  `json:"baseline"`
	Throughput float64 `json:"throughput"` // exec/s ÷ reference hops/s (target ≥ 0.5)
	P50        float64 `json:"p50"`        // hop p50 ÷ reference p50 (target ≤ 3)
	P99        float64 `json:"p99"`        // hop p99 ÷ reference p99 (target ≤ 3)
	Trips      float64 `json:"trips"`      // round trips per node execution (target ≤ 2)
	Met        bool    `json:"met"`
}

// Memory is Redis memory per run of a shape: while queued (in flight) and
// once completed (kept until the retention period ends).
type Memory struct {
	Shape          string `json:"shape"`
	Runs           int    `json:"runs"`
	InFlightBytes  int64  `json:"in_flight_bytes_per_run"`
	CompletedBytes int64  `json:"completed_bytes_per_run"`
}

// A Session holds what the scenarios share: a submitting engine and a
// workers' engine on the same Redis (separate, as they would be in separate
// processes, so that round trips are counted for the workers alone) and a
// plain client for INFO and the reference. Its keys get their own prefix
// and Close deletes them.
type Session struct {
	opts   Options
	prefix string
	sub    *wfrt.Engine
	wk     *wfrt.Engine
	rdb    redis.UniversalClient // a *redis.Client, or a *redis.ClusterClient
	redis  string                // server version, or "embedded"
	// cluster describes the Redis Cluster the session runs on (nil: a
	// single server); its owner, when the session started it.
	cluster *Cluster
	local   *LocalCluster
}

// Open starts a session.
func Open(ctx context.Context, opts Options) (*Session, error) {
	opts.defaults()
	s := &Session{opts: opts, prefix: fmt.Sprintf("wfbench%06d", rand.IntN(1_000_000))}
	var err error
	s.sub, err = wfrt.Open(ctx, wfrt.Options{RedisURL: opts.RedisURL, Prefix: s.prefix, Shards: opts.Shards, Logger: opts.Logger})
	if err != nil {
		return nil, err
	}
	url := opts.RedisURL
	if url == "" {
		url = s.sub.EmbeddedURL()
	}
	s.wk, err = wfrt.Open(ctx, wfrt.Options{RedisURL: url, Prefix: s.prefix, Shards: opts.Shards, Logger: opts.Logger})
	if err != nil {
		s.sub.Close()
		return nil, err
	}
	if isCluster(url) {
		co, err := clusterOptions(url)
		if err != nil {
			s.Close()
			return nil, err
		}
		crdb := redis.NewClusterClient(co)
		s.rdb = crdb
		if s.cluster, err = describeCluster(ctx, crdb, s.prefix, opts.Shards); err != nil {
			s.Close()
			return nil, err
		}
	} else {
		ro, err := redis.ParseURL(url)
		if err != nil {
			s.Close()
			return nil, err
		}
		s.rdb = redis.NewClient(ro)
	}
	s.redis = redisInfo(ctx, s.rdb)["redis_version"]
	if opts.RedisURL == "" || s.redis == "" {
		s.redis = "embedded"
	}
	return s, nil
}

// Close deletes the session's keys and closes its connections.
func (s *Session) Close() {
	if s.rdb != nil {
		cleanup(context.Background(), s.rdb, s.prefix)
		s.rdb.Close()
	}
	s.wk.Close()
	s.sub.Close()
	if s.local != nil {
		s.local.Close()
	}
}

// Cluster describes the Redis Cluster the session runs on (nil: a single
// server).
func (s *Session) Cluster() *Cluster { return s.cluster }

// Run measures every scenario, the reference and memory, and computes the
// ratios. With ClusterMasters it measures them on each local cluster it
// starts, a scenario's rounds alternating between the clusters.
func Run(ctx context.Context, opts Options) (*Report, error) {
	opts.defaults()
	total := opts.Duration
	opts.Duration = max(total/time.Duration(opts.Rounds), 50*time.Millisecond)
	sessions, err := openSessions(ctx, opts)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, s := range sessions {
			s.Close()
		}
	}()
	s0 := sessions[0]
	if len(opts.PacedPerMaster) > 0 && s0.cluster == nil {
		return nil, errors.New("bench: paced loads per master need a Redis Cluster")
	}
	rep := &Report{Redis: s0.redis, GoMaxProc: runtime.GOMAXPROCS(0), Duration: total.Seconds(), Rounds: opts.Rounds}
	if s0.redis == "embedded" {
		rep.Notes = append(rep.Notes, "embedded Redis (miniredis): Redis CPU and memory are not reported, and the figures say little about a real deployment")
	}
	// suffix names a session's figures when a run measures several.
	suffix := func(s *Session) string {
		if len(sessions) > 1 {
			return "/" + s.cluster.Name
		}
		return ""
	}
	for _, s := range sessions {
		if s.cluster != nil {
			rep.Clusters = append(rep.Clusters, *s.cluster)
		}
	}
	if len(rep.Clusters) > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("Redis Cluster, %d shards: Redis µs/exec is the sum over the masters; a master's share of the work follows the shards whose hash tags fall in its slots", opts.Shards))
	}
	// Each scenario is followed at once by the reference under the same
	// load, so that a ratio divides figures taken moments apart: the
	// machine's load changes over a whole benchmark. Several sessions (the
	// clusters) take their turns within each round, for the same reason.
	measure := func(shape string, workers, inflight int, name string) error {
		scs := make([][]Scenario, len(sessions))
		bls := make([][]Baseline, len(sessions))
		rs := make([][]Ratio, len(sessions))
		for round := range opts.Rounds {
			for i, s := range sessions {
				on := ""
				if len(sessions) > 1 {
					on = ", on " + s.cluster.Name
				}
				opts.Progress(fmt.Sprintf("%s, %d worker(s), %d run(s) in flight%s, round %d of %d", shape, workers, inflight, on, round+1, opts.Rounds))
				sc, err := s.Scenario(ctx, shape, workers, inflight, 0)
				if err != nil {
					return err
				}
				sc.Name += name + suffix(s)
				scs[i] = append(scs[i], *sc)
				if !opts.Baseline {
					continue
				}
				chains := max(1, int(math.Round(sc.Tokens)))
				opts.Progress(fmt.Sprintf("reference: %d consumer(s), %d chain(s) in flight", workers, chains))
				bl, err := s.Baseline(ctx, workers, chains, 0)
				if err != nil {
					return err
				}
				bl.For = sc.Name
				bls[i] = append(bls[i], *bl)
				r := Ratio{Scenario: sc.Name, Baseline: bl.Name, Trips: sc.TripsPer}
				r.Throughput = div(sc.ExecPerSec, bl.HopsPerSec)
				r.P50 = div(sc.HopP50ms, bl.HopP50ms)
				r.P99 = div(sc.HopP99ms, bl.HopP99ms)
				rs[i] = append(rs[i], r)
			}
		}
		for i := range sessions {
			rep.Scenarios = append(rep.Scenarios, medianScenario(scs[i]))
			if opts.Baseline {
				rep.Baselines = append(rep.Baselines, medianBaseline(bls[i]))
				rep.Ratios = append(rep.Ratios, medianRatio(rs[i]))
			}
		}
		return nil
	}
	for _, shape := range opts.Shapes {
		if shape == "chain" {
			// The chain once more with a single run in flight: hop latency
			// without queueing.
			if err := measure(shape, 1, 1, "/latency"); err != nil {
				return nil, err
			}
		}
		for _, n := range opts.Workers {
			if err := measure(shape, n, opts.InFlight, ""); err != nil {
				return nil, err
			}
		}
	}
	if len(opts.PacedPerMaster) > 0 {
		for _, shape := range opts.LoadShapes {
			for _, rate := range opts.PacedPerMaster {
				for _, s := range sessions {
					rps := rate * float64(len(s.cluster.Masters))
					opts.Progress(fmt.Sprintf("%s: %.0f runs/s per master on %s (%.0f runs/s) for %s", shape, rate, s.cluster.Name, rps, total))
					p, err := s.Paced(ctx, shape, opts.LoadWorkers, rps, total)
					if err != nil {
						return nil, err
					}
					p.Name = fmt.Sprintf("%s/%dw/%.0f-per-master/%s", shape, opts.LoadWorkers, rate, s.cluster.Name)
					rep.Loads = append(rep.Loads, *p)
				}
			}
		}
	} else if opts.Burst > 0 {
		for _, shape := range opts.LoadShapes {
			for _, s := range sessions {
				opts.Progress(fmt.Sprintf("%s: a burst of %d runs, %d worker(s)", shape, opts.Burst, opts.LoadWorkers))
				l, err := s.Burst(ctx, shape, opts.LoadWorkers, opts.Burst)
				if err != nil {
					return nil, err
				}
				l.Name += suffix(s)
				rep.Loads = append(rep.Loads, *l)
				for _, share := range opts.Paced {
					rate := share * l.RunsPerSec
					opts.Progress(fmt.Sprintf("%s: %.0f runs/s (%.0f%% of the burst's throughput) for %s", shape, rate, share*100, total))
					p, err := s.Paced(ctx, shape, opts.LoadWorkers, rate, total)
					if err != nil {
						return nil, err
					}
					p.Share = share
					p.Name = fmt.Sprintf("%s/%dw/paced-%.0f%%", shape, opts.LoadWorkers, share*100) + suffix(s)
					rep.Loads = append(rep.Loads, *p)
				}
			}
		}
	}
	if opts.Backlog > 0 && len(opts.PacedPerMaster) == 0 {
		for _, shape := range opts.LoadShapes {
			for _, s := range sessions {
				opts.Progress(fmt.Sprintf("%s: a backlog of %d runs submitted with no worker running, then %d worker(s)", shape, opts.Backlog, opts.LoadWorkers))
				l, err := s.Backlog(ctx, shape, opts.LoadWorkers, opts.Backlog)
				if err != nil {
					return nil, err
				}
				l.Name += suffix(s)
				rep.Loads = append(rep.Loads, *l)
			}
		}
	}
	if opts.MemoryRuns > 0 && s0.redis != "embedded" {
		for _, shape := range opts.Shapes {
			for _, s := range sessions {
				opts.Progress(fmt.Sprintf("memory: %d runs of %s", opts.MemoryRuns, shape))
				m, err := s.Memory(ctx, shape, opts.MemoryRuns)
				if err != nil {
					return nil, err
				}
				m.Shape += suffix(s)
				rep.Memory = append(rep.Memory, *m)
			}
		}
	}
	return rep, nil
}

// openSessions opens the session on opts.RedisURL or, with ClusterMasters,
// starts a local cluster of each size and opens a session on each.
func openSessions(ctx context.Context, opts Options) ([]*Session, error) {
	if len(opts.ClusterMasters) == 0 {
		s, err := Open(ctx, opts)
		if err != nil {
			return nil, err
		}
		return []*Session{s}, nil
	}
	if opts.RedisURL != "" {
		return nil, errors.New("bench: give a Redis URL or cluster sizes to start, not both")
	}
	var out []*Session
	fail := func(err error) ([]*Session, error) {
		for _, s := range out {
			s.Close()
		}
		return nil, err
	}
	seen := map[int]bool{}
	for _, n := range opts.ClusterMasters {
		if n < 1 || seen[n] {
			return fail(fmt.Errorf("bench: cluster sizes %v: want distinct counts of at least one master", opts.ClusterMasters))
		}
		seen[n] = true
		opts.Progress(fmt.Sprintf("starting a local Redis Cluster of %d master(s)", n))
		c, err := StartCluster(ctx, n)
		if err != nil {
			return fail(err)
		}
		o := opts
		o.RedisURL = c.URL()
		s, err := Open(ctx, o)
		if err != nil {
			c.Close()
			return fail(err)
		}
		s.local = c
		out = append(out, s)
	}
	return out, nil
}

func div(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// A recorder collects, per run, when each node's handler started and
// finished, and counts handler calls. A run's times are a slice of
// integers indexed by execution key (keys), not maps: a scenario records
// tens of thousands of runs, and the garbage collector scans maps of
// strings but not slices of integers, so the bench's own bookkeeping does
// not add to the collections it measures as the runtime's cost.
type recorder struct {
	mu    sync.Mutex
	runs  map[string]*runTimes
	keys  map[string]int // execution key (node or node#item) -> index
	names []string       // index -> execution key
	execs atomic.Int64
	sink  string
	done  chan struct{} // a run's sink finished: submit the next
}

func newRecorder(sink string, done int) *recorder {
	return &recorder{runs: map[string]*runTimes{}, keys: map[string]int{}, sink: sink, done: make(chan struct{}, done)}
}

type runTimes struct {
	// t holds, for the execution key of index k, when its handler started
	// (t[2k]) and ended (t[2k+1]), unix ns; 0: not recorded.
	t []int64
	// submitted is when the run's submission began (unix ns; 0: not
	// known): its entry tokens are in flight from then on.
	submitted int64
}

// key returns the index of an execution key, made if new. The caller
// holds r.mu.
func (r *recorder) key(k string) int {
	i, ok := r.keys[k]
	if !ok {
		i = len(r.names)
		r.keys[k] = i
		r.names = append(r.names, k)
	}
	return i
}

// set records an execution key's start (if not 0) and end.
func (rt *runTimes) set(i int, start, end int64) {
	if n := 2*i + 2; len(rt.t) < n {
		rt.t = append(rt.t, make([]int64, n-len(rt.t))...)
	}
	if start != 0 {
		rt.t[2*i] = start
	}
	rt.t[2*i+1] = end
}

// start and end return an execution key's times (0: not recorded); i < 0
// is a key never recorded.
func (rt *runTimes) start(i int) int64 {
	if i < 0 || 2*i >= len(rt.t) {
		return 0
	}
	return rt.t[2*i]
}

func (rt *runTimes) end(i int) int64 {
	if i < 0 || 2*i+1 >= len(rt.t) {
		return 0
	}
	return rt.t[2*i+1]
}

// get returns the times of a run, made if new. The caller holds r.mu.
func (r *recorder) get(run string) *runTimes {
	rt := r.runs[run]
	if rt == nil {
		rt = &runTimes{}
		r.runs[run] = rt
	}
	return rt
}

// markSubmitted records that a run's submission began at t (unix ns).
func (r *recorder) markSubmitted(run string, t int64) {
	r.mu.Lock()
	r.get(run).submitted = t
	r.mu.Unlock()
}

// wrap replaces each named handler of reg with one that runs it and
// records when it started and finished: the benchmark times the built-in
// handlers themselves (noop, cel, echo), not stand-ins.
func (r *recorder) wrap(reg *handlers.Registry, names ...string) {
	for _, name := range names {
		h, ok := reg.Lookup(name)
		if !ok {
			continue
		}
		reg.RegisterFunc(name, func(ctx context.Context, req handlers.Request) (json.RawMessage, error) {
			t0 := time.Now().UnixNano()
			r.execs.Add(1)
			out, err := h.Run(ctx, req)
			t1 := time.Now().UnixNano()
			r.record(req, t0, t1)
			if err == nil && req.Node == r.sink {
				select {
				case r.done <- struct{}{}:
				default:
				}
			}
			return out, err
		})
	}
}

// record keeps an execution's times: a for_each item under node#item, and
// the node's end as its last item's, which is when its successors become
// ready.
func (r *recorder) record(req handlers.Request, t0, t1 int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rt := r.get(req.RunID)
	if req.Item >= 0 {
		n := r.key(req.Node)
		rt.set(n, 0, max(rt.end(n), t1))
		rt.set(r.key(req.Node+"#"+strconv.Itoa(req.Item)), t0, t1)
		return
	}
	rt.set(r.key(req.Node), t0, t1)
}

// index returns the index of an execution key, or -1 when none was
// recorded. The caller holds r.mu.
func (r *recorder) index(k string) int {
	if i, ok := r.keys[k]; ok {
		return i
	}
	return -1
}

// predIndexes returns, by key index, the indexes of the keys of its
// node's predecessors (an item's are its node's). The caller holds r.mu.
func (r *recorder) predIndexes(w *ir.Workflow) [][]int {
	preds := map[string][]string{}
	for _, e := range w.Edges {
		preds[e.To] = append(preds[e.To], e.From)
	}
	out := make([][]int, len(r.names))
	for i, k := range r.names {
		for _, p := range preds[node(k)] {
			out[i] = append(out[i], r.index(p))
		}
	}
	return out
}

// node is the node of an execution's key (node or node#item).
func node(key string) string {
	if i := strings.IndexByte(key, '#'); i >= 0 {
		return key[:i]
	}
	return key
}

// hops returns, for every node with predecessors, the time from the last
// predecessor's handler finishing to its own handler starting.
func (r *recorder) hops(w *ir.Workflow) []float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	preds := r.predIndexes(w)
	var out []float64
	for _, rt := range r.runs {
		for i := range len(rt.t) / 2 {
			start := rt.start(i)
			if start == 0 {
				continue
			}
			var last int64
			for _, p := range preds[i] {
				last = max(last, rt.end(p))
			}
			if last == 0 {
				continue
			}
			out = append(out, float64(start-last)/1e6)
		}
	}
	return out
}

// tokens returns the mean number of tokens in flight over secs: for every
// execution, the time from its node's becoming ready to its handler's end.
// A node is ready when its last predecessor's handler ended (its token is
// then being written: a completion's round trip is in flight), an entry
// node when its run's submission began (likewise: begin writes its token),
// or, when that is not known, at its own handler's start. Before a fix
// of 2026-11-24, an entry node counted from its handler's start, leaving
// out its wait in the queue: a lone chain run, always one token, measured
// 0.8, and the four-worker diamond, whose entry is one of four
// executions, about three quarters of its tokens.
func (r *recorder) tokens(w *ir.Workflow, secs float64) float64 {
	if secs <= 0 {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	preds := r.predIndexes(w)
	var sum float64
	for _, rt := range r.runs {
		for i := range len(rt.t) / 2 {
			start := rt.start(i)
			if start == 0 {
				continue
			}
			ready := start
			if ps := preds[i]; len(ps) > 0 {
				ready = 0
				for _, p := range ps {
					ready = max(ready, rt.end(p))
				}
			} else if rt.submitted > 0 && rt.submitted < start {
				ready = rt.submitted
			}
			if end := rt.end(i); ready > 0 && end >= ready {
				sum += float64(end-ready) / 1e9
			}
		}
	}
	return sum / secs
}

// timed are the handlers the benchmark's workflows run.
var timed = []string{"noop", "cel", "echo"}

func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p * float64(len(sorted)-1))
	return sorted[i]
}

// Scenario runs a shape with some workers, keeping inflight runs in flight
// for the session's duration or, when runs > 0, until that many runs were
// submitted, then waits for every submitted run to complete.
func (b *Session) Scenario(ctx context.Context, shape string, workers, inflight, runs int) (*Scenario, error) {
	if workers < 1 || inflight < 1 || runs < 0 {
		return nil, fmt.Errorf("bench: a scenario needs at least one worker and one run in flight (got %d and %d)", workers, inflight)
	}
	w, err := Workflow(shape)
	if err != nil {
		return nil, err
	}
	// Prepared once, as a program submitting one workflow many times
	// would: Submit would check, copy and hash it on every call.
	pw, err := b.sub.Prepare(w)
	if err != nil {
		return nil, err
	}
	want := runs
	rec := newRecorder(w.Terminals[0], 1<<16)
	reg := handlers.NewRegistry(handlers.Options{})
	rec.wrap(reg, timed...)
	defer b.startWorkers(ctx, reg, workers)()

	// Warm up: one round of runs, not measured.
	var warm []string
	for range inflight {
		id, err := b.sub.SubmitPrepared(ctx, pw, nil)
		if err != nil {
			return nil, err
		}
		warm = append(warm, id)
	}
	if _, err := b.waitAll(ctx, warm); err != nil {
		return nil, err
	}
	rec.mu.Lock()
	clear(rec.runs)
	rec.mu.Unlock()
	rec.execs.Store(0)
	for len(rec.done) > 0 {
		<-rec.done
	}

	info0, cpu0 := redisInfo(ctx, b.rdb), processCPU()
	trips0 := b.wk.RoundTrips()
	start := time.Now()
	deadline := start.Add(b.opts.Duration)
	if want > 0 {
		deadline = start.Add(24 * time.Hour)
	}
	// Submitting goroutines start a run each time one's last node ran, so
	// that submission (one script each) never holds the workers back.
	var (
		mu     sync.Mutex
		ids    []string
		subErr error
	)
	submit := func() bool {
		mu.Lock()
		if subErr != nil || want > 0 && len(ids) >= want || time.Now().After(deadline) {
			mu.Unlock()
			return false
		}
		ids = append(ids, "")
		i := len(ids) - 1
		mu.Unlock()
		t0 := time.Now().UnixNano()
		id, err := b.sub.SubmitPrepared(ctx, pw, nil)
		if err == nil {
			rec.markSubmitted(id, t0)
		}
		mu.Lock()
		defer mu.Unlock()
		ids[i] = id
		if err != nil && subErr == nil {
			subErr = err
		}
		return err == nil
	}
	for range inflight {
		if !submit() {
			break
		}
	}
	sctx, stopSubmit := context.WithCancel(ctx)
	var subs sync.WaitGroup
	for range min(inflight, 8) {
		subs.Add(1)
		go func() {
			defer subs.Done()
			for {
				select {
				case <-rec.done:
					if !submit() {
						stopSubmit()
						return
					}
				case <-sctx.Done():
					return
				}
			}
		}()
	}
	subs.Wait()
	stopSubmit()
	if subErr != nil {
		return nil, subErr
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	// Redis CPU and round trips per execution are measured over the
	// window in which runs were submitted, steady state, before the
	// waiting below reads every run's status (its reads are not the
	// workload's).
	info1, cpu1 := redisInfo(ctx, b.rdb), processCPU()
	nTrips := b.wk.RoundTrips() - trips0
	nExecs := rec.execs.Load()
	end, err := b.waitAll(ctx, ids)
	if err != nil {
		return nil, err
	}
	// Until the last run ended (millisecond resolution), not until the
	// waiting noticed.
	secs := end.Sub(start).Seconds()

	sc := &Scenario{
		Name: fmt.Sprintf("%s/%dw", shape, workers), Shape: shape, Workers: workers, InFlight: inflight,
		Runs: len(ids), Executions: rec.execs.Load(), Seconds: secs,
	}
	sc.ExecPerSec = float64(sc.Executions) / secs
	sc.RunsPerSec = float64(sc.Runs) / secs
	sc.Tokens = rec.tokens(w, secs)
	h := rec.hops(w)
	slices.Sort(h)
	sc.Hops, sc.HopP50ms, sc.HopP99ms = len(h), percentile(h, 0.50), percentile(h, 0.99)
	sc.TripsPer = div(float64(nTrips), float64(nExecs))
	sc.RedisCPUus = div(cpuSeconds(info1)-cpuSeconds(info0), float64(nExecs)) * 1e6
	sc.GoCPUus = div(cpu1-cpu0, float64(nExecs)) * 1e6
	sc.RedisIOPer = div(ioEvents(info1)-ioEvents(info0), float64(nExecs))
	sc.CmdsPer = div(num(info1[cmdCalls])-num(info0[cmdCalls]), float64(nExecs))
	sc.ScriptsPer = div(num(info1[scriptCalls])-num(info0[scriptCalls]), float64(nExecs))
	if b.cluster != nil {
		sc.Cluster = b.cluster.Name
		c0, c1 := b.cluster.masterCPU(info0), b.cluster.masterCPU(info1)
		sc.MasterCPUus = make([]float64, len(c0))
		for i := range c0 {
			sc.MasterCPUus[i] = div(c1[i]-c0[i], float64(nExecs)) * 1e6
		}
	}
	return sc, nil
}

// waitAll waits until every run completed and returns when the last one
// ended; a run that ended otherwise is an error (a no-op workflow must
// complete).
func (b *Session) waitAll(ctx context.Context, runs []string) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var last time.Time
	for _, id := range runs {
		st, err := b.sub.Wait(ctx, id)
		if err != nil {
			return last, fmt.Errorf("bench: waiting for run %s: %w", id, err)
		}
		if st.State != wfrt.RunCompleted {
			return last, fmt.Errorf("bench: run %s ended %s: %s", id, st.State, st.Error)
		}
		if st.Ended.After(last) {
			last = st.Ended
		}
	}
	return last, nil
}

// Baseline is the raw go-redis reference: it passes inflight tokens along
// chains of ten streams with consumers readers, each handling a message like
// a worker does (one goroutine per message, concurrency limited) with one
// pipelined write per hop: XACK the message and XADD the token to the next
// stream. It measures for the session's duration or, when hops > 0, until
// that many hops were made.
func (b *Session) Baseline(ctx context.Context, consumers, inflight int, hops int64) (*Baseline, error) {
	if consumers < 1 || inflight < 1 || hops < 0 {
		return nil, fmt.Errorf("bench: the reference needs at least one consumer and one chain in flight (got %d and %d)", consumers, inflight)
	}
	prefix := b.prefix
	const length = 10
	tag := fmt.Sprintf("%s:{ref}:%d:%d:", prefix, consumers, inflight)
	streams := make([]string, length)
	for i := range streams {
		streams[i] = tag + strconv.Itoa(i)
		if err := b.rdb.XGroupCreateMkStream(ctx, streams[i], "g", "$").Err(); err != nil {
			return nil, err
		}
	}
	// Own clients, sized like the engine's: one for blocking reads, one
	// for writes. On a cluster the ring's streams share the tag {ref}:
	// one slot, on one master, as one shard's queues are.
	var wr, blk redis.UniversalClient
	switch c := b.rdb.(type) {
	case *redis.ClusterClient:
		co := *c.Options()
		wr = redis.NewClusterClient(&co)
		bo := co
		bo.PoolSize = max(10, consumers+8)
		blk = redis.NewClusterClient(&bo)
	case *redis.Client:
		ro := *c.Options()
		wr = redis.NewClient(&ro)
		bo := ro
		bo.PoolSize = max(10, consumers+8)
		blk = redis.NewClient(&bo)
	}
	defer wr.Close()
	defer blk.Close()
	var count trips.Counter
	wr.AddHook(&count)
	blk.AddHook(&count)

	var (
		nhops   atomic.Int64
		mu      sync.Mutex
		lat     []float64
		measure atomic.Bool
	)
	args := make([]string, 0, 2*length)
	args = append(args, streams...)
	for range streams {
		args = append(args, ">")
	}
	rctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var handling sync.WaitGroup
	enough := make(chan struct{})
	for c := range consumers {
		conc := cmp.Or(b.opts.Concurrency, wfrt.AdaptiveStart())
		sem := make(chan struct{}, conc)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for rctx.Err() == nil {
				n := 0
				sem <- struct{}{}
				n++
				for n < conc {
					select {
					case sem <- struct{}{}:
						n++
						continue
					default:
					}
					break
				}
				res, err := blk.XReadGroup(rctx, &redis.XReadGroupArgs{Group: "g", Consumer: "c" + strconv.Itoa(c), Streams: args, Count: int64(n), Block: time.Second}).Result()
				if err != nil {
					for range n {
						<-sem
					}
					continue
				}
				used := 0
				for _, s := range res {
					idx, _ := strconv.Atoi(strings.TrimPrefix(s.Stream, tag))
					for _, m := range s.Messages {
						// COUNT bounds each stream, not the reply: take a
						// slot for every message beyond n.
						if used++; used > n {
							sem <- struct{}{}
						}
						handling.Add(1)
						go func() {
							defer handling.Done()
							defer func() { <-sem }()
							// The hop ends where a worker's ends: when the
							// message's handling starts, not when the read
							// returned (the goroutine may wait for a core).
							recv := time.Now().UnixNano()
							sent, _ := strconv.ParseInt(fmt.Sprint(m.Values["t"]), 10, 64)
							if measure.Load() {
								if nhops.Add(1) == hops {
									close(enough)
								}
								// Every hop counts, into the first stream
								// too: the chains are rings, and a queue
								// that builds up at any stream is waiting.
								mu.Lock()
								lat = append(lat, float64(recv-sent)/1e6)
								mu.Unlock()
							}
							next := streams[(idx+1)%length]
							pipe := wr.Pipeline()
							pipe.XAck(ctx, s.Stream, "g", m.ID)
							pipe.XAdd(ctx, &redis.XAddArgs{Stream: next, Values: []any{"t", time.Now().UnixNano()}})
							pipe.Exec(ctx)
						}()
					}
				}
				for range n - min(used, n) {
					<-sem
				}
			}
		}()
	}
	// The tokens start spread over the ring, as they stay: all in one
	// stream, they would move as a convoy with one long queue.
	for i := range inflight {
		if err := wr.XAdd(ctx, &redis.XAddArgs{Stream: streams[i%length], Values: []any{"t", time.Now().UnixNano()}}).Err(); err != nil {
			stop()
			return nil, err
		}
	}
	// Warm up for a fifth of the duration, then measure.
	sleep(ctx, b.opts.Duration/5)
	info0, cpu0 := redisInfo(ctx, b.rdb), processCPU()
	trips0 := count.Load()
	measure.Store(true)
	start := time.Now()
	if hops > 0 {
		select {
		case <-enough:
		case <-ctx.Done():
		}
	} else {
		sleep(ctx, b.opts.Duration)
	}
	measure.Store(false)
	secs := time.Since(start).Seconds()
	info1, cpu1 := redisInfo(ctx, b.rdb), processCPU()
	tripsN := count.Load() - trips0
	stop()
	wg.Wait()
	handling.Wait()
	n := nhops.Load()
	mu.Lock()
	slices.Sort(lat)
	bl := &Baseline{
		Name: fmt.Sprintf("reference/%dc/%d", consumers, inflight), Consumers: consumers, InFlight: inflight,
		Hops: n, Seconds: secs, HopsPerSec: float64(n) / secs,
		HopP50ms: percentile(lat, 0.5), HopP99ms: percentile(lat, 0.99),
		TripsPer: div(float64(tripsN), float64(n)),
	}
	mu.Unlock()
	bl.RedisCPUus = div(cpuSeconds(info1)-cpuSeconds(info0), float64(n)) * 1e6
	bl.GoCPUus = div(cpu1-cpu0, float64(n)) * 1e6
	b.rdb.Del(context.WithoutCancel(ctx), streams...)
	return bl, nil
}

// Memory measures Redis memory per run of a shape: runs runs are submitted
// with no worker (each holds its state and a queued token), then run to
// completion; a completed run's keys are measured with MEMORY USAGE.
func (b *Session) Memory(ctx context.Context, shape string, runs int) (*Memory, error) {
	if runs < 1 {
		return nil, fmt.Errorf("bench: measuring memory needs at least one run (got %d)", runs)
	}
	w, err := Workflow(shape)
	if err != nil {
		return nil, err
	}
	// Prepared once, as a program submitting one workflow many times
	// would: Submit would check, copy and hash it on every call.
	pw, err := b.sub.Prepare(w)
	if err != nil {
		return nil, err
	}
	// Submit one run first so that the shared IR, graph and streams exist
	// before the measurement.
	first, err := b.sub.SubmitPrepared(ctx, pw, nil)
	if err != nil {
		return nil, err
	}
	used0 := usedMemory(ctx, b.rdb)
	ids := []string{first}
	for range runs {
		id, err := b.sub.SubmitPrepared(ctx, pw, nil)
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	used1 := usedMemory(ctx, b.rdb)
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wk := b.wk.NewWorker(wfrt.WorkerOptions{Concurrency: b.opts.Concurrency, ShutdownGrace: -1})
	wg.Add(1)
	go func() { defer wg.Done(); wk.Run(wctx) }()
	_, err = b.waitAll(ctx, ids)
	stop()
	wg.Wait()
	if err != nil {
		return nil, err
	}
	var total int64
	for _, id := range ids[1:] {
		for _, k := range b.sub.RunKeys(id) {
			n, err := b.rdb.MemoryUsage(ctx, k, 0).Result()
			if err != nil && !errors.Is(err, redis.Nil) {
				return nil, err
			}
			total += n
		}
	}
	return &Memory{
		Shape: shape, Runs: runs,
		InFlightBytes:  (used1 - used0) / int64(runs),
		CompletedBytes: total / int64(runs),
	}, nil
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// redisInfo returns the fields of INFO (empty on servers without it). On a
// cluster, the CPU and memory fields are the sums over the masters (what
// the deployment spends), each master's CPU seconds are under
// "cpu@host:port", and the other fields are one master's.
func redisInfo(ctx context.Context, rdb redis.UniversalClient) map[string]string {
	if c, ok := rdb.(*redis.ClusterClient); ok {
		out := map[string]string{}
		var user, sys, mem, io, cmds, scripts float64
		for addr, info := range mastersInfo(ctx, c) {
			maps.Copy(out, info)
			user += num(info["used_cpu_user"])
			sys += num(info["used_cpu_sys"])
			mem += num(info["used_memory"])
			out["cpu@"+addr] = strconv.FormatFloat(cpuSeconds(info), 'f', -1, 64)
			io += ioEvents(info)
			cmds += num(info[cmdCalls])
			scripts += num(info[scriptCalls])
		}
		out[cmdCalls] = strconv.FormatFloat(cmds, 'f', 0, 64)
		out[scriptCalls] = strconv.FormatFloat(scripts, 'f', 0, 64)
		out["used_cpu_user"] = strconv.FormatFloat(user, 'f', -1, 64)
		out["used_cpu_sys"] = strconv.FormatFloat(sys, 'f', -1, 64)
		out["used_memory"] = strconv.FormatFloat(mem, 'f', 0, 64)
		out["total_reads_processed"] = strconv.FormatFloat(io, 'f', 0, 64)
		out["total_writes_processed"] = "0"
		return out
	}
	out := map[string]string{}
	sections, err := rdb.InfoMap(ctx, "server", "cpu", "memory", "stats", "commandstats").Result()
	if err != nil {
		return out
	}
	for _, fields := range sections {
		maps.Copy(out, fields)
	}
	cmds, scripts := commandCalls(sections["Commandstats"])
	out[cmdCalls] = strconv.FormatFloat(cmds, 'f', 0, 64)
	out[scriptCalls] = strconv.FormatFloat(scripts, 'f', 0, 64)
	return out
}

// The keys under which redisInfo gives the commands a server ran so far
// and the script calls among them (commandCalls).
const (
	cmdCalls    = "bench_cmd_calls"
	scriptCalls = "bench_script_calls"
)

// commandCalls sums the calls of INFO commandstats' lines
// ("cmdstat_hset" -> "calls=12,usec=...") and of the script calls among
// them, leaving INFO out: the benchmark's own reads.
func commandCalls(stats map[string]string) (all, scripts float64) {
	for name, v := range stats {
		cmd, ok := strings.CutPrefix(name, "cmdstat_")
		if !ok || cmd == "info" {
			continue
		}
		calls, _, _ := strings.Cut(v, ",")
		n, ok := strings.CutPrefix(calls, "calls=")
		if !ok {
			continue
		}
		c := num(n)
		all += c
		switch cmd {
		case "eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro":
			scripts += c
		}
	}
	return all, scripts
}

func cpuSeconds(info map[string]string) float64 {
	return num(info["used_cpu_user"]) + num(info["used_cpu_sys"])
}

// ioEvents is the read and write events a server processed so far.
func ioEvents(info map[string]string) float64 {
	return num(info["total_reads_processed"]) + num(info["total_writes_processed"])
}

func num(s string) float64 {
	f, _ := strconv.ParseFloat(s, 64)
	return f
}

func usedMemory(ctx context.Context, rdb redis.UniversalClient) int64 {
	n, _ := strconv.ParseInt(redisInfo(ctx, rdb)["used_memory"], 10, 64)
	return n
}

// cleanup deletes every key the benchmark wrote (on a cluster, on every
// master: SCAN is per node).
func cleanup(ctx context.Context, rdb redis.UniversalClient, prefix string) {
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
			cleanupNode(ctx, n, prefix, c)
			return nil
		})
	case *redis.Client:
		cleanupNode(ctx, c, prefix, c)
	}
}

// cleanupNode scans one node's keys and deletes them through del (on a
// cluster, a key at a time routed to its slot: UNLINK of several keys
// must stay within one slot).
func cleanupNode(ctx context.Context, node *redis.Client, prefix string, del redis.UniversalClient) {
	if _, ok := del.(*redis.ClusterClient); ok {
		iter := node.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		pipe := del.Pipeline()
		for iter.Next(ctx) {
			pipe.Unlink(ctx, iter.Val())
			if pipe.Len() == 500 {
				pipe.Exec(ctx)
			}
		}
		pipe.Exec(ctx)
		return
	}
	rdb := node
	iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	var batch []string
	for iter.Next(ctx) {
		batch = append(batch, iter.Val())
		if len(batch) == 500 {
			rdb.Unlink(ctx, batch...)
			batch = batch[:0]
		}
	}
	if len(batch) > 0 {
		rdb.Unlink(ctx, batch...)
	}
}

// median returns the median of the values f picks from xs (for an even
// count, the mean of the middle two).
func median[T any](xs []T, f func(T) float64) float64 {
	v := make([]float64, len(xs))
	for i, x := range xs {
		v[i] = f(x)
	}
	slices.Sort(v)
	n := len(v)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

// medianScenario sums the counts of a scenario's rounds and takes the
// median of its figures.
func medianScenario(xs []Scenario) Scenario {
	out := xs[0]
	if n := len(out.MasterCPUus); n > 0 {
		out.MasterCPUus = make([]float64, n)
		for i := range n {
			out.MasterCPUus[i] = median(xs, func(x Scenario) float64 {
				if i < len(x.MasterCPUus) {
					return x.MasterCPUus[i]
				}
				return 0
			})
		}
	}
	out.Runs, out.Executions, out.Seconds, out.Hops = 0, 0, 0, 0
	for _, x := range xs {
		out.Runs += x.Runs
		out.Executions += x.Executions
		out.Seconds += x.Seconds
		out.Hops += x.Hops
	}
	out.ExecPerSec = median(xs, func(x Scenario) float64 { return x.ExecPerSec })
	out.RunsPerSec = median(xs, func(x Scenario) float64 { return x.RunsPerSec })
	out.HopP50ms = median(xs, func(x Scenario) float64 { return x.HopP50ms })
	out.HopP99ms = median(xs, func(x Scenario) float64 { return x.HopP99ms })
	out.TripsPer = median(xs, func(x Scenario) float64 { return x.TripsPer })
	out.RedisCPUus = median(xs, func(x Scenario) float64 { return x.RedisCPUus })
	out.GoCPUus = median(xs, func(x Scenario) float64 { return x.GoCPUus })
	out.RedisIOPer = median(xs, func(x Scenario) float64 { return x.RedisIOPer })
	out.CmdsPer = median(xs, func(x Scenario) float64 { return x.CmdsPer })
	out.ScriptsPer = median(xs, func(x Scenario) float64 { return x.ScriptsPer })
	out.Tokens = median(xs, func(x Scenario) float64 { return x.Tokens })
	return out
}

// medianBaseline does the same for the references.
func medianBaseline(xs []Baseline) Baseline {
	out := xs[0]
	out.Hops, out.Seconds = 0, 0
	for _, x := range xs {
		out.Hops += x.Hops
		out.Seconds += x.Seconds
	}
	out.InFlight = int(math.Round(median(xs, func(x Baseline) float64 { return float64(x.InFlight) })))
	out.HopsPerSec = median(xs, func(x Baseline) float64 { return x.HopsPerSec })
	out.HopP50ms = median(xs, func(x Baseline) float64 { return x.HopP50ms })
	out.HopP99ms = median(xs, func(x Baseline) float64 { return x.HopP99ms })
	out.TripsPer = median(xs, func(x Baseline) float64 { return x.TripsPer })
	out.RedisCPUus = median(xs, func(x Baseline) float64 { return x.RedisCPUus })
	out.GoCPUus = median(xs, func(x Baseline) float64 { return x.GoCPUus })
	return out
}

// medianRatio takes the median of each ratio over the rounds, each round's
// ratio dividing figures taken moments apart.
func medianRatio(xs []Ratio) Ratio {
	out := xs[0]
	out.Throughput = median(xs, func(x Ratio) float64 { return x.Throughput })
	out.P50 = median(xs, func(x Ratio) float64 { return x.P50 })
	out.P99 = median(xs, func(x Ratio) float64 { return x.P99 })
	out.Trips = median(xs, func(x Ratio) float64 { return x.Trips })
	out.Met = out.Throughput >= 0.5 && out.P50 <= 3 && out.P99 <= 3 && out.Trips <= 2
	return out
}

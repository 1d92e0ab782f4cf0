package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	wfrt "github.com/wfc-lang/wfc/runtime"
	"github.com/wfc-lang/wfc/runtime/handlers"
)

// A Load is a shape driven open-loop, as users drive a deployment: a burst
// of runs submitted at once, or runs arriving at a paced rate, whatever
// the workers' progress. It reports, next to the throughput, three
// latencies of a run: its queue wait (submission until its first node's
// handler starts: its admission), its run latency (that start until its
// completion) and the sum of both (submission until completion). With a
// burst of runs at once and a finite throughput, submission to completion
// grows with the burst whatever the scheduling; how long a run takes once
// it started is what scheduling decides (docs/performance.md). The closed-loop
// scenarios keep a fixed number of runs in flight and cannot show a burst
// whose runs all finish at its end.
type Load struct {
	Name    string `json:"name"` // shape/Nw/burstN, shape/Nw/paced-NN% or shape/Nw/backlogN
	Shape   string `json:"shape"`
	Workers int    `json:"workers"`
	Kind    string `json:"kind"` // "burst", "paced" or "backlog"
	Runs    int    `json:"runs"`
	// Rate is the paced load's offered arrivals per second; Share the
	// share of the burst's throughput (the measured capacity) it is.
	Rate       float64 `json:"rate_per_s,omitzero"`
	Share      float64 `json:"share,omitzero"`
	Seconds    float64 `json:"seconds"`      // from the first submission until the last run completed
	SubmitSecs float64 `json:"submit_s"`     // from the first submission until the last
	RunsPerSec float64 `json:"runs_per_s"`   // completed runs per second
	ExecPerSec float64 `json:"exec_per_s"`   // node executions per second
	P50ms      float64 `json:"total_p50_ms"` // submitted -> completed
	P95ms      float64 `json:"total_p95_ms"`
	P99ms      float64 `json:"total_p99_ms"`
	// Queue wait: submitted -> the first node's handler started.
	WaitP50ms float64 `json:"wait_p50_ms"`
	WaitP99ms float64 `json:"wait_p99_ms"`
	// Run latency once started: the first node's handler started ->
	// completed.
	StartedP50ms float64 `json:"started_p50_ms"`
	StartedP95ms float64 `json:"started_p95_ms"`
	StartedP99ms float64 `json:"started_p99_ms"`
	TripsPer     float64 `json:"trips_per_exec"` // worker round trips to Redis per node execution
	RedisCPUus   float64 `json:"redis_cpu_us_per_exec,omitzero"`
	CmdsPer      float64 `json:"redis_cmds_per_exec,omitzero"`   // as Scenario's
	ScriptsPer   float64 `json:"script_calls_per_exec,omitzero"` //
	GoCPUus      float64 `json:"go_cpu_us_per_exec,omitzero"`
}

// Burst submits runs runs of a shape at once (from eight submitters, as
// fast as the submitting engine goes) to workers workers, and measures until
// the last completed.
func (b *Session) Burst(ctx context.Context, shape string, workers, runs int) (*Load, error) {
	if runs < 1 {
		return nil, fmt.Errorf("bench: a burst needs at least one run (got %d)", runs)
	}
	return b.load(ctx, shape, workers, runs, 0, false)
}

// Backlog submits runs runs of a shape while no worker runs — an outage,
// or a deployment whose workers were stopped — and then starts workers
// workers, and measures from their start until the last run completed.
// The workers of the warm-up stop first, as a worker that goes away does,
// leaving the credits they granted (take.lua): a start that spends one
// skips admission. So it shows whether the runs end in the order they
// start when work piled up, the run latency (Load.StartedP50ms, …) being
// the figure that counts; the queue wait includes the outage.
func (b *Session) Backlog(ctx context.Context, shape string, workers, runs int) (*Load, error) {
	if runs < 1 {
		return nil, fmt.Errorf("bench: a backlog needs at least one run (got %d)", runs)
	}
	return b.load(ctx, shape, workers, runs, 0, true)
}

// Paced submits runs of a shape at rate runs per second for dur (0: the
// session's duration; open loop: a run is submitted at its time whether or not the
// earlier ones finished) to workers workers, and measures until the last
// completed.
func (b *Session) Paced(ctx context.Context, shape string, workers int, rate float64, dur time.Duration) (*Load, error) {
	if rate <= 0 {
		return nil, fmt.Errorf("bench: paced arrivals need a positive rate (got %v)", rate)
	}
	if dur <= 0 {
		dur = b.opts.Duration
	}
	runs := max(1, int(rate*dur.Seconds()))
	return b.load(ctx, shape, workers, runs, time.Duration(float64(time.Second)/rate), false)
}

// load submits runs runs, the i-th at start + i*gap (a gap of 0: all at
// once), and waits for every one to complete. With backlog the workers
// are stopped while the runs are submitted and started after (gap 0).
func (b *Session) load(ctx context.Context, shape string, workers, runs int, gap time.Duration, backlog bool) (*Load, error) {
	if workers < 1 {
		return nil, fmt.Errorf("bench: a load needs at least one worker (got %d)", workers)
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
	rec := newRecorder(w.Terminals[0], runs+8)
	reg := handlers.NewRegistry(handlers.Options{})
	rec.wrap(reg, timed...)
	stop := b.startWorkers(ctx, reg, workers)
	defer func() { stop() }()

	// Warm up the workers and the graph cache with a few runs, not measured.
	var warm []string
	for range 4 {
		id, err := b.sub.SubmitPrepared(ctx, pw, nil)
		if err != nil {
			return nil, err
		}
		warm = append(warm, id)
	}
	if _, err := b.waitAll(ctx, warm); err != nil {
		return nil, err
	}
	rec.execs.Store(0)
	for len(rec.done) > 0 {
		<-rec.done
	}

	if backlog {
		stop()
		stop = func() {}
	}

	info0, cpu0 := redisInfo(ctx, b.rdb), processCPU()
	trips0 := b.wk.RoundTrips()
	ids := make([]string, runs)
	submitted := make([]time.Time, runs)
	start := time.Now()
	var (
		mu     sync.Mutex
		next   int
		subErr error
		subs   sync.WaitGroup
	)
	submitters := 8
	if gap > 0 {
		// Paced: one submitter per arrival slot would be a thundering herd;
		// a few keep to the schedule even when one submission is slow.
		submitters = 4
	}
	for range submitters {
		subs.Add(1)
		go func() {
			defer subs.Done()
			for {
				mu.Lock()
				i := next
				if i >= runs || subErr != nil {
					mu.Unlock()
					return
				}
				next++
				mu.Unlock()
				if gap > 0 {
					sleep(ctx, time.Until(start.Add(time.Duration(i)*gap)))
				}
				t0 := time.Now()
				id, err := b.sub.SubmitPrepared(ctx, pw, nil)
				mu.Lock()
				ids[i], submitted[i] = id, t0
				if err != nil && subErr == nil {
					subErr = err
				}
				mu.Unlock()
			}
		}()
	}
	subs.Wait()
	if subErr != nil {
		return nil, subErr
	}
	submitSecs := time.Since(start).Seconds()
	if backlog {
		// The backlog is measured from the workers' start.
		start = time.Now()
		stop = b.startWorkers(ctx, reg, workers)
	}
	// Redis CPU and round trips are taken when every run's last node ran,
	// before the reads of the runs' states below (not the workload's).
	wctx2, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	for range runs {
		select {
		case <-rec.done:
		case <-wctx2.Done():
			return nil, fmt.Errorf("bench: %d runs of %s did not finish in 5 minutes", runs, shape)
		}
	}
	info1, cpu1 := redisInfo(ctx, b.rdb), processCPU()
	nTrips := b.wk.RoundTrips() - trips0
	nExecs := rec.execs.Load()
	// Every run must complete; its latency is from its submission to the
	// completion the run's state records.
	lat := make([]float64, 0, runs)
	wait, ran := make([]float64, 0, runs), make([]float64, 0, runs)
	var last time.Time
	for i, id := range ids {
		st, err := b.sub.Wait(wctx2, id)
		if err != nil {
			return nil, fmt.Errorf("bench: waiting for run %s: %w", id, err)
		}
		if st.State != wfrt.RunCompleted {
			return nil, fmt.Errorf("bench: run %s ended %s: %s", id, st.State, st.Error)
		}
		if st.Ended.After(last) {
			last = st.Ended
		}
		lat = append(lat, max(0, float64(st.Ended.Sub(submitted[i]))/1e6))
		if first := rec.firstStart(id); first > 0 {
			began := time.Unix(0, first)
			wait = append(wait, max(0, float64(began.Sub(submitted[i]))/1e6))
			ran = append(ran, max(0, float64(st.Ended.Sub(began))/1e6))
		}
	}
	slices.Sort(lat)
	slices.Sort(wait)
	slices.Sort(ran)
	secs := last.Sub(start).Seconds()
	if secs <= 0 {
		secs = time.Since(start).Seconds()
	}
	l := &Load{
		Shape: shape, Workers: workers, Kind: "burst", Runs: runs, Seconds: secs, SubmitSecs: submitSecs,
		RunsPerSec: float64(runs) / secs, ExecPerSec: float64(nExecs) / secs,
		P50ms: percentile(lat, 0.50), P95ms: percentile(lat, 0.95), P99ms: percentile(lat, 0.99),
		WaitP50ms: percentile(wait, 0.50), WaitP99ms: percentile(wait, 0.99),
		StartedP50ms: percentile(ran, 0.50), StartedP95ms: percentile(ran, 0.95), StartedP99ms: percentile(ran, 0.99),
		TripsPer:   div(float64(nTrips), float64(nExecs)),
		RedisCPUus: div(cpuSeconds(info1)-cpuSeconds(info0), float64(nExecs)) * 1e6,
		CmdsPer:    div(num(info1[cmdCalls])-num(info0[cmdCalls]), float64(nExecs)),
		ScriptsPer: div(num(info1[scriptCalls])-num(info0[scriptCalls]), float64(nExecs)),
		GoCPUus:    div(cpu1-cpu0, float64(nExecs)) * 1e6,
	}
	l.Name = fmt.Sprintf("%s/%dw/burst%d", shape, workers, runs)
	if backlog {
		l.Kind, l.Name = "backlog", fmt.Sprintf("%s/%dw/backlog%d", shape, workers, runs)
	}
	if gap > 0 {
		l.Kind, l.Rate = "paced", float64(time.Second)/float64(gap)
		l.Name = fmt.Sprintf("%s/%dw/paced%.0f", shape, workers, l.Rate)
	}
	return l, nil
}

// startWorkers starts n workers running reg's handlers with the session's
// concurrency; the function returned stops them and waits for them.
func (b *Session) startWorkers(ctx context.Context, reg *handlers.Registry, n int) (stop func()) {
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for range n {
		wk := b.wk.NewWorker(wfrt.WorkerOptions{Handlers: reg, Concurrency: b.opts.Concurrency, ShutdownGrace: -1, Logger: b.opts.Logger})
		wg.Add(1)
		go func() { defer wg.Done(); wk.Run(wctx) }()
	}
	return func() { cancel(); wg.Wait() }
}

// firstStart returns when the first handler of a run started (unix ns), or
// 0 when none was recorded.
func (r *recorder) firstStart(run string) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var first int64
	if rt := r.runs[run]; rt != nil {
		for i := range len(rt.t) / 2 {
			if t := rt.start(i); t != 0 && (first == 0 || t < first) {
				first = t
			}
		}
	}
	return first
}

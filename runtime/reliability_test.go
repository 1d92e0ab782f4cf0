package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/runtime/handlers"
	"github.com/wfc-lang/wfc/runtime/internal/redistest"
)

// mixed is a workflow with a fan-out, a join, a branch, a for_each and a
// loop, used by the fault tests.
func mixed(t testing.TB) *ir.Workflow {
	return build(t, wfSpec{
		inputs:  []ir.Input{{Name: "xs", Type: ir.Type{Kind: ir.KindList, Elem: &ir.Type{Kind: ir.KindInt}}, Default: json.RawMessage(`[1, 2, 3]`)}},
		outputs: []ir.Output{output("total", "sum.output.total"), output("route", "has(big.output) ? 'big' : 'small'"), output("polls", "poll.output.n")},
		nodes: []*nodeSpec{
			task("start", "count", with("k", konst("2"))),
			task("left", "count", after("start"), with("v", cexpr("start.output.k * 10"))),
			task("right", "count", after("start"), forEach("x", "input.xs", 2), with("v", cexpr("x"))),
			task("sum", "count", after("left", "right"), with("total", cexpr("left.output.v + right.output[0].v + right.output[1].v + right.output[2].v")),
				branch([]string{"small"}, rule("output.total > 20", "big"))),
			task("big", "count"),
			task("small", "count"),
			task("poll", "poll", after("big", "small"), joinMode(ir.JoinSettled), loop("output.n < 3", 5, "")),
			task("end", "count", after("poll")),
		},
	})
}

const mixedResult = `{"total":26,"route":"big","polls":3}`

// T1: every token is added to its queue 10 times and every message is
// handled twice at once; state transitions still happen exactly once.
func TestDuplicateDeliveryStorm(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		registerPoll(v)
		wk := v.worker(func(o *WorkerOptions) { o.redeliver = 10; o.dup = 2; o.Concurrency = 16 })
		var runs []string
		for range 3 {
			runs = append(runs, v.submit(mixed(t), nil))
		}
		for _, r := range runs {
			st := v.wait(r)
			if st.State != RunCompleted || string(st.Result) != mixedResult {
				t.Fatalf("%s: %s %s %s", r, st.State, st.Result, st.Error)
			}
		}
		waitNoPending(t, v.e)
		for _, r := range runs {
			v.check(r)
		}
		if s := wk.Stats(); s.Dups == 0 || s.Applied == 0 {
			t.Errorf("stats %+v: duplicates were not seen", s)
		}
	})
}

// T4: a flaky network between the runtime and Redis. Connections are cut
// at random, wherever their commands are, and replies are lost after the
// server ran the commands (go-redis sends them again: a script runs twice,
// a read's messages are delivered to nobody). Every run still completes
// with its result, each transition applied once (check's invariants), and
// no message is left pending. WFC_SEED=n repeats a seed's faults (their
// timing differs).
func TestFlakyNetwork(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		p, pb := behindProxy(t, b.name+"-flaky", serverAddr(t, b))
		v := newEnv(t, pb)
		registerPoll(v)
		w1, w2 := v.worker(), v.worker()

		seed := seedFromEnv(t)
		r := rand.New(rand.NewPCG(seed, 0))
		stop, done := make(chan struct{}), make(chan struct{})
		var cuts int
		go func() {
			defer close(done)
			for {
				select {
				case <-stop:
					return
				case <-time.After(time.Duration(5+r.IntN(30)) * time.Millisecond):
				}
				// A connection cut anywhere, or the reply lost of a
				// script (a completion, a submit, a timer's), of a
				// read, or of any command.
				switch r.IntN(4) {
				case 0:
					if p.Cut(r) {
						cuts++
					}
				case 1:
					p.LoseReply("evalsha")
				case 2:
					p.LoseReply("xreadgroup")
				default:
					p.LoseReply("")
				}
			}
		}()
		// Submits under the same faults, each with an id of its own
		// and retried until one is accepted (a submit whose reply was
		// lost started the run once: WithRunID).
		w := mixed(t)
		var ids []string
		for i := range 12 {
			id := fmt.Sprintf("flaky-%d", i)
			for attempt := 1; ; attempt++ {
				_, err := v.e.Submit(v.ctx, w, nil, WithRunID(id))
				if err == nil {
					break
				}
				if attempt == 50 {
					t.Fatalf("submit %s: %v", id, err)
				}
				time.Sleep(20 * time.Millisecond)
			}
			ids = append(ids, id)
			time.Sleep(40 * time.Millisecond)
		}
		// Faults go on until replies were lost on the way (at least
		// a second more, at most ten).
		for start := time.Now(); time.Since(start) < 10*time.Second; time.Sleep(50 * time.Millisecond) {
			if p.Lost() >= 10 && time.Since(start) > time.Second {
				break
			}
		}
		close(stop)
		<-done
		if p.Lost() == 0 {
			t.Fatalf("seed %d: no reply was lost (%d cuts): nothing was tested", seed, cuts)
		}
		t.Logf("seed %d: %d connections cut, %d replies lost", seed, cuts, p.Lost())
		for _, id := range ids {
			st := v.wait(id)
			if st.State != RunCompleted || string(st.Result) != mixedResult {
				t.Fatalf("seed %d: %s: %s %s %s", seed, id, st.State, st.Result, st.Error)
			}
		}
		waitNoPending(t, v.e)
		s1, s2 := w1.Stats(), w2.Stats()
		t.Logf("workers: %+v; %+v", s1, s2)
	})
}

// T5: 50 parents complete at the same moment into one join, which fires
// exactly once.
func TestFanInRace(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		const n = 50
		v := newEnv(t, b)
		v.barrier = &barrier{n: n, open: make(chan struct{})}
		v.worker(func(o *WorkerOptions) { o.Concurrency = n })
		specs := []*nodeSpec{}
		var parents []string
		for i := range n {
			id := fmt.Sprintf("p%02d", i)
			parents = append(parents, id)
			specs = append(specs, task(id, "barrier", with("i", konst(fmt.Sprint(i)))))
		}
		specs = append(specs, task("join", "count", after(parents...)), task("end", "noop", after("join")))
		st := v.run(build(t, wfSpec{nodes: specs}), nil)
		if st.State != RunCompleted {
			t.Fatalf("%s %s", st.State, st.Error)
		}
		if c := v.callCount(st.RunID + "/join"); c != 1 {
			t.Errorf("join ran %d times", c)
		}
		evs, _ := v.e.Events(v.ctx, st.RunID)
		q := 0
		for _, ev := range evs {
			for _, x := range ev.Queued() {
				if x == "join" {
					q++
				}
			}
		}
		if q != 1 {
			t.Errorf("join queued %d times", q)
		}
	})
}

// T2 in-process: a worker dies in the middle of a node (its context is
// cancelled, nothing is acknowledged or released); another worker claims
// the message after the visibility timeout and the run completes, each
// transition applied once.
func TestWorkerCrashInProcess(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		kill := v.crashingWorker("doomed")
		run := v.submit(mixedBlock(t), nil)
		key := v.waitStarted()
		kill()
		if pending(t, v.e) == 0 {
			t.Fatal("the killed worker's message is not pending")
		}
		close(v.unblock)
		start := time.Now()
		v.worker(func(o *WorkerOptions) { o.Consumer = "rescuer" })
		st := v.wait(run)
		if st.State != RunCompleted {
			t.Fatalf("%s %s", st.State, st.Error)
		}
		if d := time.Since(start); d > 6*time.Second {
			t.Errorf("recovery took %s", d)
		}
		if c := v.callCount(key); c != 2 {
			t.Errorf("the blocked node ran %d times, want 2 (at-least-once)", c)
		}
		waitNoPending(t, v.e)
	})
}

func mixedBlock(t testing.TB) *ir.Workflow {
	return build(t, wfSpec{
		outputs: []ir.Output{output("v", "b.output.v")},
		nodes: []*nodeSpec{
			task("a", "block", with("v", konst("7"))),
			task("b", "count", after("a"), with("v", cexpr("a.output.v + 1"))),
		},
	})
}

var testworkerOnce struct {
	sync.Once
	path string
	err  error
}

func buildTestworker(t testing.TB) string {
	t.Helper()
	testworkerOnce.Do(func() {
		dir, err := os.MkdirTemp("", "wfc-testworker-")
		if err != nil {
			testworkerOnce.err = err
			return
		}
		testworkerOnce.path = filepath.Join(dir, "testworker")
		out, err := exec.Command("go", "build", "-o", testworkerOnce.path, "./internal/testworker").CombinedOutput()
		if err != nil {
			testworkerOnce.err = fmt.Errorf("building testworker: %v\n%s", err, out)
		}
	})
	if testworkerOnce.err != nil {
		t.Fatal(testworkerOnce.err)
	}
	return testworkerOnce.path
}

// T2 with a real process: a worker process is killed with SIGKILL while
// its handler runs; an in-process worker finishes the run.
func TestWorkerCrashSIGKILL(t *testing.T) {
	bin := buildTestworker(t)
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		marker := filepath.Join(t.TempDir(), "started")
		cmd := exec.Command(bin, "-redis", engineURL(v.e), "-prefix", v.e.opts.Prefix, "-marker", marker)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer cmd.Process.Kill()
		run := v.submit(mixedBlock(t), nil)
		deadline := time.Now().Add(20 * time.Second)
		for {
			if _, err := os.Stat(marker); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the worker process never started the handler")
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()
		close(v.unblock) // the in-process block handler returns at once
		v.worker()
		st := v.wait(run)
		if st.State != RunCompleted || string(st.Result) != `{"v":8}` {
			t.Fatalf("%s %s %s", st.State, st.Result, st.Error)
		}
		waitNoPending(t, v.e)
	})
}

// T4, latency: 20 ms each way between the runtime and Redis (a round trip
// of 40 ms or more, against heartbeats every 150 ms and a visibility
// timeout of 1.5 s). Runs complete, a handler longer than the visibility
// timeout keeps its claim, and no handler runs twice: latency alone causes
// no claim.
func TestSlowNetwork(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		p, pb := behindProxy(t, b.name+"-slow", serverAddr(t, b))
		p.SetLatency(20 * time.Millisecond)
		v := newEnv(t, pb)
		registerPoll(v)
		v.reg.RegisterFunc("long", func(ctx context.Context, req handlers.Request) (json.RawMessage, error) {
			v.note(req)
			select {
			case <-time.After(2 * time.Second): // the visibility timeout is 1.5 s
				return json.RawMessage(`{"v":1}`), nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		})
		w1, w2 := v.worker(), v.worker()
		long := v.submit(build(t, wfSpec{
			outputs: []ir.Output{output("v", "a.output.v")},
			nodes:   []*nodeSpec{task("a", "long")},
		}), nil)
		var runs []string
		for range 3 {
			runs = append(runs, v.submit(mixed(t), nil))
		}
		for _, r := range runs {
			if st := v.wait(r); st.State != RunCompleted || string(st.Result) != mixedResult {
				t.Fatalf("%s: %s %s %s", r, st.State, st.Result, st.Error)
			}
		}
		if st := v.wait(long); st.State != RunCompleted || string(st.Result) != `{"v":1}` {
			t.Fatalf("long: %s %s %s", st.State, st.Result, st.Error)
		}
		v.mu.Lock()
		for k, n := range v.calls {
			if n != 1 {
				t.Errorf("%s ran %d times", k, n)
			}
		}
		v.mu.Unlock()
		if s1, s2 := w1.Stats(), w2.Stats(); s1.Claimed+s2.Claimed+s1.Dups+s2.Dups != 0 {
			t.Errorf("claims or duplicates under latency alone: %+v, %+v", s1, s2)
		}
		waitNoPending(t, v.e)
	})
}

// T2, the zombie: a worker is cut off from Redis while its handler runs,
// past the visibility timeout; another worker claims the message and
// completes the node. When the network heals and the first handler
// returns, its completion changes nothing — while the run still runs (a
// duplicate) — and the run completes with the node completed once and its
// successor queued once, nothing pending.
func TestZombieWorker(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		// The zombie reaches v's server through p.
		p, pb := behindProxy(t, b.name+"-proxy", engineURL(v.e))
		// The handler's n-th call waits for hold[n-1]: the zombie's run of
		// a, the rescuer's run of a, then b.
		hold := []chan struct{}{make(chan struct{}), make(chan struct{}), make(chan struct{})}
		var calls atomic.Int32
		v.reg.RegisterFunc("hold", func(ctx context.Context, req handlers.Request) (json.RawMessage, error) {
			v.note(req)
			ch := hold[min(int(calls.Add(1)), len(hold))-1]
			v.started <- req.IdempotencyKey
			<-ch // not ctx: the zombie's handler must outlive its claim
			return req.Config, nil
		})
		zombie := openEngine(t, pb, Options{Prefix: v.e.opts.Prefix})
		zo := fastWorker(v.reg)
		zo.Consumer = "zombie"
		zw := zombie.StartWorkers(v.ctx, zo.Concurrency, zo)

		run := v.submit(build(t, wfSpec{
			outputs: []ir.Output{output("v", "b.output.v")},
			nodes: []*nodeSpec{
				task("a", "hold", with("v", konst("7"))),
				task("b", "hold", after("a"), with("v", cexpr("a.output.v + 1"))),
			},
		}), nil)
		v.waitStarted()
		p.Down() // the zombie is cut off, its handler still running
		rescuer := v.worker(func(o *WorkerOptions) { o.Consumer = "rescuer" })
		v.waitStarted() // a, claimed after the visibility timeout
		close(hold[1])
		v.waitStarted() // b: a completed, the run runs
		p.Up()
		close(hold[0])
		// The zombie's completion arrives, and is a duplicate.
		deadline := time.Now().Add(10 * time.Second)
		for zw.Stats().Dups == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("the zombie's completion was not seen as a duplicate: zombie %+v, rescuer %+v", zw.Stats(), rescuer.Stats())
			}
			time.Sleep(20 * time.Millisecond)
		}
		if s := zw.Stats(); s.Applied != 0 {
			t.Errorf("the zombie applied %d transitions: %+v", s.Applied, s)
		}
		close(hold[2])
		st := v.wait(run)
		if st.State != RunCompleted || string(st.Result) != `{"v":8}` || st.Nodes["a"].Attempt > 1 {
			t.Fatalf("%s", dump(st))
		}
		if c := v.callCount(run + "/a"); c != 2 {
			t.Errorf("a ran %d times, want 2 (the zombie's and the rescuer's)", c)
		}
		waitNoPending(t, v.e)
	})
}

// T3: Redis restarts in the middle of runs. Real Redis runs with
// appendonly yes (appendfsync always) and is killed with SIGKILL and
// restarted; the embedded server cannot restart without its process, so
// on miniredis every connection is cut for a while through a proxy.
func TestRedisRestartMidRun(t *testing.T) {
	for _, name := range []string{"miniredis", "redis"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var outage func()
			var b backend
			if name == "redis" {
				srv := redistest.Start(t, redistest.Options{AOF: true})
				b = backend{"redis-aof", func(testing.TB) string { return srv.URL() }}
				outage = func() {
					srv.Kill()
					time.Sleep(300 * time.Millisecond)
					if err := srv.Restart(); err != nil {
						t.Fatal(err)
					}
				}
			} else {
				var p *redistest.Proxy
				p, b = behindProxy(t, "miniredis-proxy", miniredis.RunT(t).Addr())
				outage = func() {
					p.Down()
					time.Sleep(300 * time.Millisecond)
					p.Up()
				}
			}
			v := newEnv(t, b)
			registerPoll(v)
			v.reg.RegisterFunc("nap", func(ctx context.Context, req handlers.Request) (json.RawMessage, error) {
				v.note(req)
				select {
				case <-time.After(150 * time.Millisecond):
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				return req.Config, nil
			})
			v.worker()
			w := build(t, wfSpec{
				outputs: []ir.Output{output("v", "c.output.v")},
				nodes: []*nodeSpec{
					task("a", "nap", with("v", konst("1"))),
					task("b", "nap", after("a"), with("v", cexpr("a.output.v + 1")), forEach("i", "[1, 2, 3]", 1)),
					task("c", "nap", after("b"), with("v", cexpr("size(b.output) + 1"))),
					task("d", "poll", after("c"), loop("output.n < 3", 5, "")),
				},
			})
			var runs []string
			for range 3 {
				runs = append(runs, v.submit(w, nil))
			}
			time.Sleep(250 * time.Millisecond)
			outage()
			for _, r := range runs {
				st := v.wait(r)
				if st.State != RunCompleted || string(st.Result) != `{"v":4}` {
					t.Fatalf("%s: %s %s %s", r, st.State, st.Result, st.Error)
				}
			}
			waitNoPending(t, v.e)
		})
	}
}

func TestBadInput(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		w := build(t, wfSpec{
			inputs: []ir.Input{
				input("id", ir.KindString),
				input("n", ir.KindInt),
				input("ratio", ir.KindNumber, "0.5"),
				{Name: "tags", Type: ir.Type{Kind: ir.KindList, Elem: &ir.Type{Kind: ir.KindString}}, Default: json.RawMessage(`[]`)},
				{Name: "opts", Type: ir.Type{Kind: ir.KindObject, Fields: []ir.Field{{Name: "dry", Type: ir.Type{Kind: ir.KindBool}}}}, Default: json.RawMessage(`{"dry":false}`)},
				input("wait", ir.KindDuration, `"1s"`),
			},
			nodes: []*nodeSpec{task("a", "noop")},
		})
		for _, c := range []struct {
			in   map[string]any
			want string
		}{
			{map[string]any{"n": 1}, `missing required input "id" (string)`},
			{map[string]any{"id": "x", "n": "1"}, "input n: got string, want int"},
			{map[string]any{"id": "x", "n": 1.5}, "input n: got number, want int"},
			{map[string]any{"id": "x", "n": 1, "tags": []any{"a", 2}}, "input tags[1]: got int, want string"},
			{map[string]any{"id": "x", "n": 1, "opts": map[string]any{}}, "input opts: missing field dry"},
			{map[string]any{"id": "x", "n": 1, "wait": "soon"}, `input wait: "soon" is not a duration`},
			{map[string]any{"id": "x", "n": 1, "wait": 5}, "input wait: got int, want duration"},
			{map[string]any{"id": "x", "n": 1, "extra": true}, `unknown input "extra"`},
		} {
			_, err := v.e.Submit(v.ctx, w, c.in)
			var ie *InputError
			if !errors.As(err, &ie) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%v: got %v, want %q", c.in, err, c.want)
			}
		}
		// Nothing was written by the refused submits.
		keys, err := v.e.st.rdb.Keys(v.ctx, v.e.opts.Prefix+":*").Result()
		if err != nil || len(keys) != 0 {
			t.Errorf("refused submits wrote %v (%v)", keys, err)
		}
		// Integral floats are ints (JSON decoders produce float64).
		if _, err := v.e.Submit(v.ctx, w, map[string]any{"id": "x", "n": float64(3)}); err != nil {
			t.Errorf("n=3.0: %v", err)
		}
		for _, id := range []string{"nope", "bad id!", ""} {
			if _, err := v.e.Status(v.ctx, id); !errors.Is(err, ErrUnknownRun) {
				t.Errorf("Status(%q): %v", id, err)
			}
			if _, err := v.e.Events(v.ctx, id); !errors.Is(err, ErrUnknownRun) {
				t.Errorf("Events(%q): %v", id, err)
			}
			if err := v.e.Cancel(v.ctx, id); !errors.Is(err, ErrUnknownRun) {
				t.Errorf("Cancel(%q): %v", id, err)
			}
			if err := v.e.Retry(v.ctx, id); !errors.Is(err, ErrUnknownRun) {
				t.Errorf("Retry(%q): %v", id, err)
			}
			if _, err := v.e.Wait(v.ctx, id); !errors.Is(err, ErrUnknownRun) {
				t.Errorf("Wait(%q): %v", id, err)
			}
		}
		// Idempotent submit with a run id.
		id1, err := v.e.Submit(v.ctx, w, map[string]any{"id": "x", "n": 1}, WithRunID("order-42"))
		if err != nil || id1 != "order-42" {
			t.Fatalf("%q %v", id1, err)
		}
		if id2, err := v.e.Submit(v.ctx, w, map[string]any{"id": "x", "n": 1}, WithRunID("order-42")); err != nil || id2 != id1 {
			t.Errorf("resubmit: %q %v", id2, err)
		}
		other := build(t, wfSpec{name: "other", nodes: []*nodeSpec{task("z", "noop")}})
		if _, err := v.e.Submit(v.ctx, other, nil, WithRunID("order-42")); !errors.Is(err, ErrRunExists) {
			t.Errorf("resubmit of another workflow: %v", err)
		}
	})
}

func TestRedisDown(t *testing.T) {
	redistest.Require(t)
	srv := redistest.Start(t, redistest.Options{})
	url := srv.URL()
	srv.Kill()
	start := time.Now()
	_, err := Open(context.Background(), Options{RedisURL: url, ConnectTimeout: 700 * time.Millisecond, Logger: testLogger(t)})
	if err == nil || !strings.Contains(err.Error(), "cannot reach Redis at "+srv.Addr()) {
		t.Fatalf("Open: %v", err)
	}
	if d := time.Since(start); d < 600*time.Millisecond || d > 5*time.Second {
		t.Errorf("Open gave up after %s, want about 0.7s of retries", d)
	}
	// An engine whose server goes away reports errors, then works again.
	srv2 := redistest.Start(t, redistest.Options{})
	v := newEnv(t, backend{"redis", func(testing.TB) string { return srv2.URL() }})
	w := build(t, wfSpec{nodes: []*nodeSpec{task("a", "noop")}})
	srv2.Kill()
	ctx, cancel := context.WithTimeout(v.ctx, 3*time.Second)
	defer cancel()
	if _, err := v.e.Submit(ctx, w, nil); err == nil {
		t.Fatal("submit with Redis down succeeded")
	}
	if err := srv2.Restart(); err != nil {
		t.Fatal(err)
	}
	v.worker()
	st := v.run(w, nil)
	if st.State != RunCompleted {
		t.Fatalf("after restart: %s", st.State)
	}
}

func TestUnsupportedNodes(t *testing.T) {
	data, err := os.ReadFile("../testdata/golden/compiler/lead_qualification.ir.json")
	if err != nil {
		t.Skip(err)
	}
	w, err := ir.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	// Agent nodes run (agentnode.go); one with a handler's options does not.
	if err := CheckSupported(w); err != nil {
		t.Fatalf("CheckSupported: %v", err)
	}
	for i := range w.Nodes {
		if w.Nodes[i].Agent != nil {
			w.Nodes[i].Loop = &ir.Loop{Max: 2}
		}
	}
	if err := CheckSupported(w); err == nil || !strings.Contains(err.Error(), `agent node "qualify"`) {
		t.Fatalf("CheckSupported of an agent with a loop: %v", err)
	}
	e := openEngine(t, backends[0], Options{})
	if _, err := e.Submit(context.Background(), w, map[string]any{"lead_id": "L1"}); err == nil || !strings.Contains(err.Error(), "does not support") {
		t.Errorf("Submit: %v", err)
	}
}

func TestMissingHandlers(t *testing.T) {
	w := build(t, wfSpec{nodes: []*nodeSpec{
		task("a", "noop", compensate("undo.x")),
		task("b", "crm.lookup", after("a")),
		task("c", "http", after("b")),
	}})
	got := MissingHandlers(w, handlers.NewRegistry(handlers.Options{}))
	if strings.Join(got, ",") != "crm.lookup,undo.x" {
		t.Errorf("missing %v", got)
	}
}

// A message whose workers keep dying is failed after MaxDeliveries
// deliveries instead of being claimed forever.
func TestPoisonMessage(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		opts := func(crash bool) WorkerOptions {
			o := fastWorker(v.reg)
			o.crash = crash
			o.MaxDeliveries = 2
			o.VisibilityTimeout = 300 * time.Millisecond
			o.ClaimInterval = 100 * time.Millisecond
			return o
		}
		run := v.submit(mixedBlock(t), nil)
		// Two workers die in turn while running the node: deliveries 1 and 2.
		for range 2 {
			w := v.e.NewWorker(opts(true))
			ctx, kill := context.WithCancel(v.ctx)
			done := make(chan struct{})
			go func() { defer close(done); w.Run(ctx) }()
			v.waitStarted()
			kill()
			<-done
		}
		// The third delivery exceeds MaxDeliveries: the node fails unrun.
		v.e.StartWorkers(v.ctx, 2, opts(false))
		st := v.wait(run)
		if st.State != RunFailed || !strings.Contains(st.Error, "gave up after 3 deliveries") {
			t.Fatalf("%s %q", st.State, st.Error)
		}
		if c := v.callCount(run + "/a"); c != 2 {
			t.Errorf("the poison node ran %d times, want 2", c)
		}
		waitNoPending(t, v.e)
	})
}

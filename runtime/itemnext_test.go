package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/runtime/handlers"
)

// countItemNext makes the engine's itemnext script count its 'ok' replies
// in a key of its own (beside the run's keys, which the comparisons read),
// so that a test knows the fast path ran; it returns the key's reader.
func countItemNext(t *testing.T, v *env) func(run string) int {
	t.Helper()
	src, err := ScriptSource("itemnext")
	if err != nil {
		t.Fatal(err)
	}
	const end = "\nreturn 'ok'\n"
	if !strings.HasSuffix(src, end) {
		t.Fatal("itemnext.lua does not end with return 'ok'")
	}
	v.e.st.scripts["itemnext"] = redis.NewScript(strings.TrimSuffix(src, end) + "\nredis.call('INCR', STATE .. ':itemnext')" + end)
	return func(run string) int {
		n, _ := v.e.st.rdb.Get(v.ctx, v.e.st.ks.state(run)+":itemnext").Int()
		return n
	}
}

// runWrites is what a run wrote: its event log (without times), its
// state and items hashes, its applied keys and which of its keys expire.
func runWrites(t *testing.T, v *env, run string) (log, state string) {
	t.Helper()
	evs, err := v.e.Events(v.ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, ev := range evs {
		var fs []string
		for k, val := range ev.Fields {
			if k != "ts" && k != "due" { // times
				fs = append(fs, k+"="+val)
			}
		}
		slices.Sort(fs)
		lines = append(lines, ev.Type+" "+strings.Join(fs, " "))
	}
	ks := v.e.st.ks
	var hs []string
	for _, k := range []string{ks.state(run), ks.items(run)} {
		h, err := v.e.st.rdb.HGetAll(v.ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		var kv []string
		for f, val := range h {
			if f != runField("created") && f != runField("ended") { // times
				kv = append(kv, f+"="+val)
			}
		}
		slices.Sort(kv)
		hs = append(hs, strings.Join(kv, " "))
	}
	ops, err := v.e.st.rdb.SMembers(v.ctx, ks.runKey(run, "applied")).Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(ops)
	hs = append(hs, "applied: "+strings.Join(ops, " "))
	for _, k := range v.e.RunKeys(run) {
		d, _ := v.e.st.rdb.PTTL(v.ctx, k).Result()
		hs = append(hs, fmt.Sprintf("%s expires: %v", k[strings.LastIndex(k, ":")+1:], d > 0))
	}
	return strings.Join(lines, "\n"), strings.Join(hs, "\n")
}

// itemnext.lua must write exactly what itemdone.lua writes for the items
// it records. Each workflow runs twice with one worker handling one
// message at a time (so that the order of events is the same), once with
// the fast path and once without; the event logs, the state and items
// hashes, the applied keys and the keys' expiry must be equal, and the
// fast path must have recorded items.
func TestItemNextWritesWhatItemdoneWrites(t *testing.T) {
	list := func(n int) string {
		s := make([]string, n)
		for i := range s {
			s[i] = fmt.Sprint(i + 1)
		}
		return "[" + strings.Join(s, ", ") + "]"
	}
	type tc struct {
		w *ir.Workflow
		// retry: after the run failed, make the handlers succeed and
		// retry it (a partial retry: the next generation).
		retry bool
		state string // the run's end
	}
	cases := map[string]tc{
		// A window of two over five items, then a node: every completion
		// but the last queues the next item; the last queues the collect.
		"a window": {w: build(t, wfSpec{
			outputs: []ir.Output{output("n", "b.output.n")},
			nodes: []*nodeSpec{
				task("each", "count", forEach("u", list(5), 2), with("v", cexpr("u * 2"))),
				task("b", "cel", after("each"), with("n", cexpr("size(each.output)"))),
			},
		}), state: RunCompleted},
		// All items queued at once (parallel 0): none queues another.
		"all at once": {w: build(t, wfSpec{
			nodes: []*nodeSpec{task("each", "count", forEach("u", list(4), 0), with("v", cexpr("u")))},
		}), state: RunCompleted},
		// The items read the list's node (and are bound to it); the list
		// comes from a node.
		"items of a node's output": {w: build(t, wfSpec{
			outputs: []ir.Output{output("s", "each.output.map(o, o.v)")},
			nodes: []*nodeSpec{
				task("a", "cel", with("items", cexpr(list(3))), with("k", cexpr("10"))),
				task("each", "count", after("a"), forEach("x", "a.output.items", 2), with("v", cexpr("x * a.output.k"))),
			},
		}), state: RunCompleted},
		// Items whose first attempt fails: the retry's token finds the
		// item retrying.
		"retried items": {w: build(t, wfSpec{
			nodes: []*nodeSpec{task("each", "flaky", forEach("u", list(3), 1), with("fails", konst("1")), retry(2, ir.BackoffFixed, 1))},
		}), state: RunCompleted},
		// Even items fail under a tolerance of two: their error results
		// go through itemdone, the others through the fast path.
		"failures under a tolerance": {w: build(t, wfSpec{
			outputs: []ir.Output{output("res", "each.output")},
			nodes: []*nodeSpec{task("each", "evenfails", forEach("x", list(5), 2), with("v", cexpr("x")),
				func(s *nodeSpec) { s.n.ForEach.Tolerate = &ir.Tolerance{Count: 2} })},
		}), state: RunCompleted},
		// One failure too many: the node fails with the third even item.
		"failures over a tolerance": {w: build(t, wfSpec{
			nodes: []*nodeSpec{task("each", "evenfails", forEach("x", list(7), 1), with("v", cexpr("x")),
				func(s *nodeSpec) { s.n.ForEach.Tolerate = &ir.Tolerance{Percent: 30} })},
		}), state: RunFailed},
		// The third item's output does not fit max_state_bytes: the
		// fast path declines, itemdone replies state and the node fails.
		// Items "xxxxxxxxxx" (12 bytes each as JSON, 36 in all), results
		// {"v":"xxxxxxxxxx"} of 18 bytes: the third is over 36 + 2×18 + 17.
		"an output over max_state_bytes": {w: build(t, wfSpec{
			set:   ir.Settings{MaxStateBytes: 36 + 2*18 + 17},
			nodes: []*nodeSpec{task("each", "count", forEach("x", `["xxxxxxxxxx", "xxxxxxxxxx", "xxxxxxxxxx"]`, 1), with("v", cexpr("x")))},
		}), state: RunFailed},
		// The for_each in a loop body: its exec key has an iteration.
		"in a loop body": {w: build(t, wfSpec{
			nodes: []*nodeSpec{
				task("head", "noop"),
				task("each", "count", after("head"), forEach("x", list(3), 2), with("v", cexpr("x"))),
				task("tail", "poll", after("each"), loop("output.n < 2", 5, "head")),
			},
		}), state: RunCompleted},
		// An item fails the run; its retry runs the items again in the
		// next generation (those done before with the same value are
		// kept).
		"a partial retry": {w: build(t, wfSpec{
			nodes: []*nodeSpec{task("each", "evenfails", forEach("x", list(4), 1), with("v", cexpr("x")))},
		}), retry: true, state: RunCompleted},
	}
	forBackends(t, func(t *testing.T, b backend) {
		for name, c := range cases {
			var logs, states [2]string
			var ends [2]*Status
			for i, general := range []bool{false, true} {
				v := newEnv(t, b, Options{generalOnly: general})
				registerPoll(v)
				var mu sync.Mutex
				broken := true
				v.reg.RegisterFunc("evenfails", func(ctx context.Context, req handlers.Request) (json.RawMessage, error) {
					var cfg struct{ V int }
					json.Unmarshal(req.Config, &cfg)
					mu.Lock()
					defer mu.Unlock()
					if broken && cfg.V%2 == 0 {
						return nil, handlers.Errorf("Even", false, "%d is even", cfg.V)
					}
					return req.Config, nil
				})
				fastDone := countItemNext(t, v)
				v.worker(func(o *WorkerOptions) { o.Concurrency, o.generalOnly = 1, general })
				st := v.run(c.w, nil)
				if c.retry {
					if st.State != RunFailed {
						t.Fatalf("%s: %s, want failed before the retry", name, st.State)
					}
					mu.Lock()
					broken = false
					mu.Unlock()
					if err := v.e.Retry(v.ctx, st.RunID); err != nil {
						t.Fatal(err)
					}
					st = v.wait(st.RunID)
				}
				if st.State != c.state {
					t.Fatalf("%s: %s %s, want %s", name, st.State, st.Error, c.state)
				}
				if n := fastDone(st.RunID); general != (n == 0) {
					t.Errorf("%s: the fast path recorded %d items (general only: %v)", name, n, general)
				}
				logs[i], states[i] = runWrites(t, v, st.RunID)
				logs[i] = strings.ReplaceAll(logs[i], st.RunID, "RUN")
				ends[i] = st
			}
			if logs[0] != logs[1] {
				t.Errorf("%s: event logs differ\nwith the fast path:\n%s\nwithout:\n%s", name, logs[0], logs[1])
			}
			if states[0] != states[1] {
				t.Errorf("%s: state differs\nwith the fast path:\n%s\nwithout:\n%s", name, states[0], states[1])
			}
			if string(ends[0].Result) != string(ends[1].Result) || ends[0].Error != ends[1].Error {
				t.Errorf("%s: ends differ: %s %q, without: %s %q", name, ends[0].Result, ends[0].Error, ends[1].Result, ends[1].Error)
			}
		}
	})
}

// TestItemNextCalls: itemnext, which other languages' workers may call
// too, checks every argument it uses before its first write (a malformed
// call is an error and changes nothing), declines ('slow', nothing
// written) what itemdone must decide, and replies as itemdone does to a
// repeated, stale or late call, acknowledging the message and changing
// nothing else.
func TestItemNextCalls(t *testing.T) {
	src, err := ScriptSource("itemnext")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(src, "local function tokenjson(") || strings.Contains(src, "local function header()") {
		t.Error("itemnext is not step.lua and its body alone")
	}
	w := build(t, wfSpec{
		outputs: []ir.Output{output("vs", "each.output.map(o, o.v)")},
		nodes:   []*nodeSpec{task("each", "block", forEach("x", "[1, 2, 3]", 1), with("v", cexpr("x")))},
	})
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker(func(o *WorkerOptions) { o.Concurrency = 1 })
		run := v.submit(w, nil)
		v.waitStarted() // item 0's handler: its message stays pending
		m, err := v.e.st.meta(v.ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		ref := m.ref()
		ks := v.e.st.ks
		queues, err := v.e.st.nodeQueues(v.ctx, run, m.Graph)
		if err != nil {
			t.Fatal(err)
		}
		stream := ks.stream(ks.shard(run), queues["each"])
		pend, err := v.e.st.rdb.XPendingExt(v.ctx, &redis.XPendingExtArgs{Stream: stream, Group: Group, Start: "-", End: "+", Count: 10}).Result()
		if err != nil || len(pend) != 1 {
			t.Fatalf("pending: %v %v", pend, err)
		}
		snapshot := func() string {
			s := runSnapshot(t, v, run)
			items, _ := v.e.st.rdb.HGetAll(v.ctx, ks.items(run)).Result()
			ops, _ := v.e.st.rdb.SMembers(v.ctx, ks.runKey(run, "applied")).Result()
			slices.Sort(ops)
			n, _ := v.e.st.rdb.XLen(v.ctx, stream).Result()
			return fmt.Sprint(s, items, ops, n)
		}
		q := ref.queueIndex(queues["each"])
		keys := ks.appendStreams([]string{ks.state(run), ks.events(run), ks.items(run), ks.runKey(run, "applied")}, ks.shard(run), ref.queues)
		good := []any{"each", "", "0", `{"v":1}`, "0", nowMS(), q, pend[0].ID, run, q, 0, m.Graph}
		with := func(i int, val any) []any {
			a := slices.Clone(good)
			a[i] = val
			return a
		}
		call := func(args []any) (string, error) {
			return v.e.st.scripts["itemnext"].Run(v.ctx, v.e.st.rdb, keys, args...).Text()
		}
		before := snapshot()
		for name, args := range map[string][]any{
			"argument count":        good[:len(good)-1],
			"item with a zero":      with(2, "00"),
			"negative item":         with(2, "-1"),
			"fractional item":       with(2, "0.5"),
			"item not a number":     with(2, "x"),
			"gen not a number":      with(4, "x"),
			"message queue index":   with(6, 99),
			"message queue zero":    with(6, 0),
			"fractional queue":      with(6, "1.5"),
			"node queue index":      with(9, 99),
			"node queue text":       with(9, "x"),
			"state limit":           with(10, "x"),
			"no applied key (keys)": nil,
		} {
			k := keys
			if args == nil {
				args, k = good, keys[:3]
			}
			err := v.e.st.scripts["itemnext"].Run(v.ctx, v.e.st.rdb, k, args...).Err()
			if err == nil || !strings.Contains(err.Error(), "bad itemnext call") {
				t.Errorf("%s: %v, want a bad call error", name, err)
			}
			if after := snapshot(); after != before {
				t.Errorf("%s: wrote\n%s\nbefore:\n%s", name, after, before)
			}
		}
		for name, args := range map[string][]any{
			"another graph":           with(11, m.Graph+"x"),
			"over max_state_bytes":    with(10, 1),
			"an unknown run (its id)": nil,
		} {
			k := keys
			if args == nil {
				other := "r" + run[1:]
				args, k = good, append([]string{ks.state(other), ks.events(other), ks.items(other), ks.runKey(other, "applied")}, keys[4:]...)
			}
			if res, err := v.e.st.scripts["itemnext"].Run(v.ctx, v.e.st.rdb, k, args...).Text(); err != nil || res != "slow" {
				t.Errorf("%s: %q %v, want slow", name, res, err)
			}
			if after := snapshot(); after != before {
				t.Errorf("%s: wrote\n%s\nbefore:\n%s", name, after, before)
			}
		}
		// Item 0 recorded (as its worker would), then the same call again,
		// and one of an older generation: acknowledged, nothing written.
		if res, err := call(good); err != nil || res != "ok" {
			t.Fatalf("the call: %q %v", res, err)
		}
		done := snapshot()
		if done == before || !strings.Contains(done, "each|s|0:done") {
			t.Errorf("the call wrote\n%s", done)
		}
		for name, c := range map[string]struct {
			args []any
			want string
		}{
			"again":              {good, "dup"},
			"an older gen":       {with(4, "-1"), "stale"},
			"another item again": {with(2, "2"), "dup"}, // item 2 is waiting
		} {
			if res, err := call(c.args); err != nil || res != c.want {
				t.Errorf("%s: %q %v, want %s", name, res, err, c.want)
			}
			if after := snapshot(); after != done {
				t.Errorf("%s: wrote\n%s\nbefore:\n%s", name, after, done)
			}
		}
		if n, _ := v.e.st.rdb.XPending(v.ctx, stream, Group).Result(); n.Count != 0 {
			t.Errorf("%d messages pending, want the item's acknowledged", n.Count)
		}
		close(v.unblock)
		st := v.wait(run)
		if st.State != RunCompleted || string(st.Result) != `{"vs":[1,2,3]}` {
			t.Fatalf("%s %s %s", st.State, st.Result, st.Error)
		}
		end := snapshot()
		if res, err := call(good); err != nil || res != "inactive" {
			t.Errorf("after the run: %q %v, want inactive", res, err)
		}
		if after := snapshot(); after != end {
			t.Errorf("after the run: wrote\n%s\nbefore:\n%s", after, end)
		}
	})
}

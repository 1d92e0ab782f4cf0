package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/runtime/handlers"
)

// countItemNext makes the engine's itemnext script count the items it
// records in a key of its own (beside the run's keys, which the
// comparisons read), so that a test knows the fast path ran; it returns
// the key's reader.
func countItemNext(t *testing.T, v *env) func(run string) int {
	t.Helper()
	src, err := ScriptSource("itemnext")
	if err != nil {
		t.Fatal(err)
	}
	const end = "\nreturn reply\n"
	if !strings.HasSuffix(src, end) {
		t.Fatal("itemnext.lua does not end with return reply")
	}
	count := "\nlocal nok = 0\nfor i = 1, k do if reply[i] == 'ok' then nok = nok + 1 end end\nredis.call('INCRBY', STATE .. ':itemnext', nok)"
	v.e.st.scripts["itemnext"] = redis.NewScript(strings.TrimSuffix(src, end) + count + end)
	return func(run string) int {
		n, _ := v.e.st.rdb.Get(v.ctx, v.e.st.ks.state(run)+":itemnext").Int()
		return n
	}
}

// runWrites is what a run wrote: its event log (without times), its
// state and items hashes, its applied keys and which of its keys expire.
func runWrites(t *testing.T, v *env, run string) (log, state string) {
	t.Helper()
	hs := hashLines(t, v, run)
	ops, err := v.e.st.rdb.SMembers(v.ctx, v.e.st.ks.runKey(run, "applied")).Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(ops)
	hs = append(hs, "applied: "+strings.Join(ops, " "))
	hs = append(hs, expiryLines(v, run)...)
	return eventLines(t, v, run), strings.Join(hs, "\n")
}

// itemnext.lua must write exactly what itemdone.lua writes for the items
// it records. Each workflow runs twice with one worker handling one
// message at a time (so that the order of events is the same), once with
// the fast path and once without; the event logs, the state and items
// hashes, the applied keys and the keys' expiry must be equal, and the
// fast path must have recorded items.
func TestItemNextWritesWhatItemdoneWrites(t *testing.T) {
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
				task("each", "count", forEach("u", numList(5), 2), with("v", cexpr("u * 2"))),
				task("b", "cel", after("each"), with("n", cexpr("size(each.output)"))),
			},
		}), state: RunCompleted},
		// All items queued at once (parallel 0): none queues another.
		"all at once": {w: build(t, wfSpec{
			nodes: []*nodeSpec{task("each", "count", forEach("u", numList(4), 0), with("v", cexpr("u")))},
		}), state: RunCompleted},
		// The items read the list's node (and are bound to it); the list
		// comes from a node.
		"items of a node's output": {w: build(t, wfSpec{
			outputs: []ir.Output{output("s", "each.output.map(o, o.v)")},
			nodes: []*nodeSpec{
				task("a", "cel", with("items", cexpr(numList(3))), with("k", cexpr("10"))),
				task("each", "count", after("a"), forEach("x", "a.output.items", 2), with("v", cexpr("x * a.output.k"))),
			},
		}), state: RunCompleted},
		// Items whose first attempt fails: the retry's token finds the
		// item retrying.
		"retried items": {w: build(t, wfSpec{
			nodes: []*nodeSpec{task("each", "flaky", forEach("u", numList(3), 1), with("fails", konst("1")), retry(2, ir.BackoffFixed, 1))},
		}), state: RunCompleted},
		// Even items fail under a tolerance of two: their error results
		// go through itemdone, the others through the fast path.
		"failures under a tolerance": {w: build(t, wfSpec{
			outputs: []ir.Output{output("res", "each.output")},
			nodes: []*nodeSpec{task("each", "evenfails", forEach("x", numList(5), 2), with("v", cexpr("x")),
				func(s *nodeSpec) { s.n.ForEach.Tolerate = &ir.Tolerance{Count: 2} })},
		}), state: RunCompleted},
		// One failure too many: the node fails with the third even item.
		"failures over a tolerance": {w: build(t, wfSpec{
			nodes: []*nodeSpec{task("each", "evenfails", forEach("x", numList(7), 1), with("v", cexpr("x")),
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
				task("each", "count", after("head"), forEach("x", numList(3), 2), with("v", cexpr("x"))),
				task("tail", "poll", after("each"), loop("output.n < 2", 5, "head")),
			},
		}), state: RunCompleted},
		// An item fails the run; its retry runs the items again in the
		// next generation (those done before with the same value are
		// kept).
		"a partial retry": {w: build(t, wfSpec{
			nodes: []*nodeSpec{task("each", "evenfails", forEach("x", numList(4), 1), with("v", cexpr("x")))},
		}), retry: true, state: RunCompleted},
	}
	forBackends(t, func(t *testing.T, b backend) {
		for name, c := range cases {
			var logs, states [2]string
			var ends [2]*Status
			for i, general := range []bool{false, true} {
				v := newEnv(t, b, Options{generalOnly: general})
				registerPoll(v)
				mend := evenFails(v)
				fastDone := countItemNext(t, v)
				v.worker(func(o *WorkerOptions) { o.Concurrency, o.generalOnly = 1, general })
				st := runRetried(t, v, c.w, c.retry, mend, c.state, name)
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

// numList is a CEL list literal of the numbers 1 to n.
func numList(n int) string {
	s := make([]string, n)
	for i := range s {
		s[i] = fmt.Sprint(i + 1)
	}
	return "[" + strings.Join(s, ", ") + "]"
}

// evenFails registers handler evenfails on v: it echoes its config, but
// fails (code Even, not retryable) for an even config v until mend is
// called.
func evenFails(v *env) (mend func()) {
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
	return func() {
		mu.Lock()
		broken = false
		mu.Unlock()
	}
}

// runRetried runs w and, with retry, checks that it failed, mends its
// handlers and retries it (a partial retry: the next generation); the run
// must end in state want.
func runRetried(t *testing.T, v *env, w *ir.Workflow, retry bool, mend func(), want, name string) *Status {
	t.Helper()
	st := v.run(w, nil)
	if retry {
		if st.State != RunFailed {
			t.Fatalf("%s: %s, want failed before the retry", name, st.State)
		}
		mend()
		if err := v.e.Retry(v.ctx, st.RunID); err != nil {
			t.Fatal(err)
		}
		st = v.wait(st.RunID)
	}
	if st.State != want {
		t.Fatalf("%s: %s %s, want %s", name, st.State, st.Error, want)
	}
	return st
}

// itemsArg is itemnext's items argument (itemGroup.MarshalBinary).
func itemsArg(calls ...itemCall) string {
	g := &itemGroup{items: calls}
	b, _ := g.MarshalBinary()
	return string(b)
}

// blockedItems starts a run of w (whose items block) and waits until
// n of its items' messages are pending (their handlers run); it returns their pending messages by item,
// the message queue's index and the arguments itemnext takes but the
// items.
func blockedItems(t *testing.T, v *env, w *ir.Workflow, n int) (run string, msgs map[int]string, q int, keys []string, args []any) {
	t.Helper()
	run = v.submit(w, nil)
	for range n {
		v.waitStarted()
	}
	m, err := v.e.st.meta(v.ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	ks := v.e.st.ks
	queues, err := v.e.st.nodeQueues(v.ctx, run, m.Graph)
	if err != nil {
		t.Fatal(err)
	}
	stream := ks.stream(ks.shard(run), queues["each"])
	msgs = map[int]string{}
	for deadline := time.Now().Add(10 * time.Second); len(msgs) < n; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the items' pending messages: %v", msgs)
		}
		pend, err := v.e.st.rdb.XPendingExt(v.ctx, &redis.XPendingExtArgs{Stream: stream, Group: Group, Start: "-", End: "+", Count: 100}).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pend {
			xs, err := v.e.st.rdb.XRange(v.ctx, stream, p.ID, p.ID).Result()
			if err != nil || len(xs) != 1 {
				t.Fatalf("message %s: %v %v", p.ID, xs, err)
			}
			tok := Token{Item: -1}
			if err := json.Unmarshal([]byte(xs[0].Values["t"].(string)), &tok); err != nil {
				t.Fatal(err)
			}
			if tok.Run == run && tok.Kind == "item" {
				msgs[tok.Item] = p.ID
			}
		}
	}
	q = m.ref().queueIndex(queues["each"])
	keys = ks.appendStreams([]string{ks.state(run), ks.events(run), ks.items(run), ks.runKey(run, "applied")}, ks.shard(run), m.ref().queues)
	return run, msgs, q, keys, []any{"each", "", nowMS(), run, q, 0, m.Graph}
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
		run, msgs, q, keys, base := blockedItems(t, v, w, 1) // item 0's handler: its message stays pending
		ks := v.e.st.ks
		snapshot := func() string {
			s := runSnapshot(t, v, run)
			items, _ := v.e.st.rdb.HGetAll(v.ctx, ks.items(run)).Result()
			ops, _ := v.e.st.rdb.SMembers(v.ctx, ks.runKey(run, "applied")).Result()
			slices.Sort(ops)
			n, _ := v.e.st.rdb.XLen(v.ctx, keys[4]).Result()
			return fmt.Sprint(s, items, ops, n)
		}
		item0 := itemCall{item: 0, gen: 0, mq: q, id: msgs[0], out: `{"v":1}`}
		good := append(slices.Clone(base), itemsArg(item0))
		with := func(i int, val any) []any {
			a := slices.Clone(good)
			a[i] = val
			return a
		}
		items := func(raw string) []any { return with(7, raw) }
		call := func(args []any) ([]string, error) {
			return v.e.st.scripts["itemnext"].Run(v.ctx, v.e.st.rdb, keys, args...).StringSlice()
		}
		before := snapshot()
		for name, args := range map[string][]any{
			"argument count":         good[:len(good)-1],
			"node queue index":       with(4, 99),
			"node queue text":        with(4, "x"),
			"state limit":            with(5, "x"),
			"no items":               items(""),
			"item with a zero":       items("00 0 1 " + msgs[0] + " 7\n{\"v\":1}"),
			"negative item":          items("-1 0 1 " + msgs[0] + " 7\n{\"v\":1}"),
			"fractional item":        items("0.5 0 1 " + msgs[0] + " 7\n{\"v\":1}"),
			"item not a number":      items("x 0 1 " + msgs[0] + " 7\n{\"v\":1}"),
			"a huge item":            items("1234567890123456 0 1 " + msgs[0] + " 7\n{\"v\":1}"),
			"gen not a number":       items("0 x 1 " + msgs[0] + " 7\n{\"v\":1}"),
			"message queue index":    items(itemsArg(itemCall{0, 0, 99, msgs[0], `{"v":1}`})),
			"message queue zero":     items(itemsArg(itemCall{0, 0, 0, msgs[0], `{"v":1}`})),
			"output length":          items("0 0 1 " + msgs[0] + " 8\n{\"v\":1}"),
			"a bad second item":      items(itemsArg(item0) + "1 0"),
			"no applied key (keys)":  nil,
			"message queue sentinel": items(itemsArg(itemCall{0, 0, len(keys) - 3, msgs[0], `{"v":1}`})),
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
		other := "r" + run[1:]
		for name, c := range map[string]struct {
			args []any
			keys []string
			want []string
		}{
			"another graph":        {with(6, "G"), keys, []string{"slow"}},
			"over max_state_bytes": {with(5, 1), keys, []string{"slow"}},
			"an unknown run": {good, append([]string{ks.state(other), ks.events(other), ks.items(other), ks.runKey(other, "applied")}, keys[4:]...),
				[]string{"slow"}},
			"two items, another graph": {append(with(6, "G")[:7], itemsArg(item0, itemCall{1, 0, q, "1-1", "{}"})), keys, []string{"slow", "slow"}},
		} {
			res, err := v.e.st.scripts["itemnext"].Run(v.ctx, v.e.st.rdb, c.keys, c.args...).StringSlice()
			if err != nil || !slices.Equal(res, c.want) {
				t.Errorf("%s: %q %v, want %q", name, res, err, c.want)
			}
			if after := snapshot(); after != before {
				t.Errorf("%s: wrote\n%s\nbefore:\n%s", name, after, before)
			}
		}
		// Item 0 recorded (as its worker would), then the same call again,
		// one of an older generation and one of an item not queued:
		// acknowledged, nothing written.
		if res, err := call(good); err != nil || !slices.Equal(res, []string{"ok"}) {
			t.Fatalf("the call: %q %v", res, err)
		}
		done := snapshot()
		if done == before || !strings.Contains(done, "each|s|0:done") {
			t.Errorf("the call wrote\n%s", done)
		}
		for name, c := range map[string]struct {
			items []itemCall
			want  []string
		}{
			"again":           {[]itemCall{item0}, []string{"dup"}},
			"an older gen":    {[]itemCall{{0, -1, q, msgs[0], "{}"}}, []string{"stale"}},
			"an item waiting": {[]itemCall{{2, 0, q, msgs[0], "{}"}}, []string{"dup"}},
			"all three":       {[]itemCall{item0, {0, -1, q, msgs[0], "{}"}, {2, 0, q, msgs[0], "{}"}}, []string{"dup", "stale", "dup"}},
		} {
			if res, err := call(items(itemsArg(c.items...))); err != nil || !slices.Equal(res, c.want) {
				t.Errorf("%s: %q %v, want %q", name, res, err, c.want)
			}
			if after := snapshot(); after != done {
				t.Errorf("%s: wrote\n%s\nbefore:\n%s", name, after, done)
			}
		}
		if n, _ := v.e.st.rdb.XPending(v.ctx, keys[4], Group).Result(); n.Count != 0 {
			t.Errorf("%d messages pending, want the item's acknowledged", n.Count)
		}
		close(v.unblock)
		st := v.wait(run)
		if st.State != RunCompleted || string(st.Result) != `{"vs":[1,2,3]}` {
			t.Fatalf("%s %s %s", st.State, st.Result, st.Error)
		}
		end := snapshot()
		if res, err := call(good); err != nil || !slices.Equal(res, []string{"inactive"}) {
			t.Errorf("after the run: %q %v, want inactive", res, err)
		}
		if after := snapshot(); after != end {
			t.Errorf("after the run: wrote\n%s\nbefore:\n%s", after, end)
		}
	})
}

// TestItemNextGroup: one itemnext call of several items writes and
// replies what one call for each item, in that order, writes and replies
// — a duplicate and a stale item among them, the next items queued as the
// window moves, the collect token after the last — on two runs of the
// same workflow whose items block, compared before and after they end.
func TestItemNextGroup(t *testing.T) {
	w := build(t, wfSpec{
		outputs: []ir.Output{output("vs", "each.output.map(o, o.v)")},
		nodes:   []*nodeSpec{task("each", "block", forEach("x", "[1, 2, 3, 4, 5]", 3), with("v", cexpr("x")))},
	})
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		// Each run's five items block: slots for all.
		v.worker(func(o *WorkerOptions) { o.Concurrency = 12 })
		var logs, states [2]string
		var replies [2][]string
		var runs [2]string
		for i := range 2 {
			run, msgs, q, keys, base := blockedItems(t, v, w, 3)
			runs[i] = run
			calls := []itemCall{
				{1, 0, q, msgs[1], `{"v":2}`}, {0, 0, q, msgs[0], `{"v":1}`}, {1, 0, q, msgs[1], `{"v":2}`},
				{2, -1, q, msgs[2], `{"v":3}`}, {2, 0, q, msgs[2], `{"v":3}`},
			}
			groups := [][]itemCall{calls}
			if i == 1 {
				groups = nil
				for _, c := range calls {
					groups = append(groups, []itemCall{c})
				}
			}
			for _, g := range groups {
				res, err := v.e.st.scripts["itemnext"].Run(v.ctx, v.e.st.rdb, keys, append(slices.Clone(base), itemsArg(g...))...).StringSlice()
				if err != nil {
					t.Fatal(err)
				}
				replies[i] = append(replies[i], res...)
			}
			logs[i], states[i] = runWrites(t, v, run)
		}
		if want := []string{"ok", "ok", "dup", "stale", "ok"}; !slices.Equal(replies[0], want) || !slices.Equal(replies[1], want) {
			t.Errorf("replies: one call %q, a call each %q, want %q", replies[0], replies[1], want)
		}
		same := func(when string) {
			t.Helper()
			if logs[0] != logs[1] {
				t.Errorf("%s: event logs differ\none call:\n%s\na call each:\n%s", when, logs[0], logs[1])
			}
			if states[0] != states[1] {
				t.Errorf("%s: state differs\none call:\n%s\na call each:\n%s", when, states[0], states[1])
			}
		}
		same("recorded")
		close(v.unblock)
		for i, run := range runs {
			st := v.wait(run)
			if st.State != RunCompleted || string(st.Result) != `{"vs":[1,2,3,4,5]}` {
				t.Fatalf("%s %s %s", st.State, st.Result, st.Error)
			}
			// Items 3 and 4 ran together: their events in either order.
			log, state := runWrites(t, v, run)
			lines := strings.Split(log, "\n")
			slices.Sort(lines)
			logs[i], states[i] = strings.Join(lines, "\n"), state
		}
		same("ended")
	})
}

// TestItemNextConcurrent: with items completing together (a worker of
// many slots, so that itemnext calls take several items), a run writes
// what it writes without the fast path: the same events, in another order
// (the items complete in any order), and the same state, items and
// applied keys.
func TestItemNextConcurrent(t *testing.T) {
	list := make([]string, 60)
	for i := range list {
		list[i] = fmt.Sprint(i)
	}
	w := build(t, wfSpec{
		outputs: []ir.Output{output("n", "size(each.output)")},
		nodes: []*nodeSpec{
			task("each", "count", forEach("u", "["+strings.Join(list, ", ")+"]", 20), with("v", cexpr("u * 2"))),
			task("b", "noop", after("each")),
		},
	})
	forBackends(t, func(t *testing.T, b backend) {
		var logs, states [2]string
		for i, general := range []bool{false, true} {
			v := newEnv(t, b, Options{generalOnly: general})
			fastDone := countItemNext(t, v)
			v.worker(func(o *WorkerOptions) { o.Concurrency, o.generalOnly = 16, general })
			st := v.run(w, nil)
			if st.State != RunCompleted || string(st.Result) != `{"n":60}` {
				t.Fatalf("general only %v: %s %s %s", general, st.State, st.Result, st.Error)
			}
			if n := fastDone(st.RunID); general != (n == 0) {
				t.Errorf("the fast path recorded %d items (general only: %v)", n, general)
			}
			log, state := runWrites(t, v, st.RunID)
			lines := strings.Split(log, "\n")
			slices.Sort(lines)
			logs[i], states[i] = strings.Join(lines, "\n"), state
		}
		if logs[0] != logs[1] {
			t.Errorf("event logs differ\nwith the fast path:\n%s\nwithout:\n%s", logs[0], logs[1])
		}
		if states[0] != states[1] {
			t.Errorf("state differs\nwith the fast path:\n%s\nwithout:\n%s", states[0], states[1])
		}
	})
}

// An item token's pre-read reads what the item's expressions read, not
// the for_each list's source (its exec token evaluated the list once).
func TestItemFields(t *testing.T) {
	w := build(t, wfSpec{nodes: []*nodeSpec{
		task("a", "count", with("items", konst("[1, 2, 3]")), with("k", konst("10"))),
		task("plain", "count", after("a"), forEach("x", "a.output.items", 2), with("v", cexpr("x * 2"))),
		task("reads", "count", after("a"), forEach("x", "a.output.items", 2), with("v", cexpr("x * a.output.k"))),
	}})
	p, err := newPlan(w, func(string) string { return "q" }, "q")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		node       string
		item, exec string
	}{
		{"plain", "[]", "[out|a]"},
		{"reads", "[out|a]", "[out|a]"},
		{"a", "[]", "[]"},
	} {
		if got := fmt.Sprint(p.itemFields(c.node)); got != c.item {
			t.Errorf("%s: item fields %s, want %s", c.node, got, c.item)
		}
		if got := fmt.Sprint(p.nodeFields(c.node)); got != c.exec {
			t.Errorf("%s: exec fields %s, want %s", c.node, got, c.exec)
		}
	}
}

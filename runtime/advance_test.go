package runtime

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/wfc-lang/wfc/ir"
)

// advance.lua must write exactly what complete.lua writes for the
// completions it takes, and begin.lua what start.lua writes for the runs it
// starts. Each workflow runs twice with one worker handling
// one message at a time (so the order of events is the same), once with the
// fast paths and once without; the event logs and the state hash (the
// run's meta, states, outputs and join bookkeeping) must be equal.
func TestAdvanceWritesWhatCompleteWrites(t *testing.T) {
	flows := map[string]*ir.Workflow{
		"fan-out and join all": build(t, wfSpec{
			outputs: []ir.Output{output("sum", "e.output.sum")},
			nodes: []*nodeSpec{
				task("a", "cel", with("x", cexpr("1"))),
				task("b", "cel", after("a"), with("x", cexpr("a.output.x + 1"))),
				task("c", "cel", after("a"), with("x", cexpr("a.output.x + 2"))),
				task("d", "noop", after("a")),
				task("e", "cel", after("b", "c", "d"), with("sum", cexpr("b.output.x + c.output.x"))),
				task("f", "noop", after("e")),
			},
		}),
		"join any and two ends": build(t, wfSpec{
			set: ir.Settings{DeadlineMS: 60_000}, // its timer goes when the run ends
			nodes: []*nodeSpec{
				task("a", "noop"), task("b", "noop", after("a")), task("c", "noop", after("a")),
				task("d", "noop", after("b", "c"), joinAny()),
				task("e", "noop", after("d")), task("f", "noop", after("a")),
			},
		}),
		"a branch into a join": build(t, wfSpec{
			inputs: []ir.Input{input("n", ir.KindInt)},
			nodes: []*nodeSpec{
				task("start", "cel", with("n", cexpr("input.n"))),
				task("route", "cel", after("start"), with("n", cexpr("start.output.n")),
					branch([]string{"low"}, rule("output.n > 5", "high"))),
				task("high", "noop"), task("low", "noop"),
				task("side", "noop", after("start")),
				task("join", "noop", after("high", "low", "side")),
				task("last", "noop", after("join")),
			},
		}),
		// The run's applied key exists (the retry's operation key), so the
		// end of the run sets its expiry too.
		"a retry before a plain end": build(t, wfSpec{
			nodes: []*nodeSpec{
				task("a", "flaky", with("fails", konst("1")), retry(2, "fixed", 1)),
				task("b", "noop", after("a")),
			},
		}),
		// The run has an items key (and an applied one), then a
		// compensation list: advance, which is not given those keys, leaves
		// the end of the run to complete, which sets their expiry.
		"a for_each before a plain end": build(t, wfSpec{
			nodes: []*nodeSpec{
				task("each", "count", forEach("u", "['a', 'b', 'c']", 2), with("id", cexpr("u"))),
				task("b", "noop", after("each")),
			},
		}),
		"a compensable node before a plain end": build(t, wfSpec{
			nodes: []*nodeSpec{
				task("reserve", "record", with("step", konst(`"reserve"`)),
					compensate("record", ir.Param{Name: "undo", Value: cexpr("output.step")})),
				task("b", "noop", after("reserve")),
			},
		}),
		"a predicate skips": build(t, wfSpec{
			nodes: []*nodeSpec{
				task("a", "noop"), task("b", "noop", after("a"), when("false")),
				task("c", "noop", after("b")), task("d", "noop", after("a", "c")),
			},
		}),
	}
	forBackends(t, func(t *testing.T, b backend) {
		// "start": what starting a run writes, before any worker runs.
		for _, mode := range []string{"run", "start"} {
			for name, w := range flows {
				var logs, states [2]string
				for i, general := range []bool{false, true} {
					v := newEnv(t, b, Options{generalOnly: general})
					var in map[string]any
					if len(w.Inputs) > 0 {
						in = map[string]any{"n": 7}
					}
					st := &Status{}
					if mode == "run" {
						v.worker(func(o *WorkerOptions) { o.Concurrency, o.generalOnly = 1, general })
						st = v.run(w, in)
						if st.State != RunCompleted {
							t.Fatalf("%s: %s %s", name, st.State, st.Error)
						}
					} else {
						st.RunID = v.submit(w, in)
					}
					logs[i] = eventLines(t, v, st.RunID, "result")
					hs := hashLines(t, v, st.RunID)
					// The deadline timers left in the control queue's timers.
					timers, _ := v.e.st.rdb.ZRange(v.ctx, v.e.st.ks.timers(v.e.st.ks.shard(st.RunID), ControlQueue), 0, -1).Result()
					hs = append(hs, strings.ReplaceAll(fmt.Sprintf("timers: %q", timers), st.RunID, "RUN"))
					// The tokens queued (all of them, when no worker ran).
					if mode == "start" {
						msgs, _ := v.e.st.rdb.XRange(v.ctx, v.e.st.ks.stream(v.e.st.ks.shard(st.RunID), ControlQueue), "-", "+").Result()
						for _, m := range msgs {
							hs = append(hs, strings.ReplaceAll(fmt.Sprint(m.Values), st.RunID, "RUN"))
						}
					}
					// Which keys of the ended run expire (retention).
					hs = append(hs, expiryLines(v, st.RunID)...)
					states[i] = strings.Join(hs, "\n")
				}
				if logs[0] != logs[1] {
					t.Errorf("%s (%s): event logs differ\nwith the fast paths:\n%s\nwithout:\n%s", name, mode, logs[0], logs[1])
				}
				if states[0] != states[1] {
					t.Errorf("%s (%s): state differs\nwith the fast paths:\n%s\nwithout:\n%s", name, mode, states[0], states[1])
				}
			}
		}
	})
}

// eventLines is a run's event log, one event a line, fields sorted,
// without times (ts, due) and the fields named in skip.
func eventLines(t *testing.T, v *env, run string, skip ...string) string {
	t.Helper()
	evs, err := v.e.Events(v.ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, ev := range evs {
		var fs []string
		for k, val := range ev.Fields {
			if k != "ts" && k != "due" && !slices.Contains(skip, k) { // times
				fs = append(fs, k+"="+val)
			}
		}
		slices.Sort(fs)
		lines = append(lines, ev.Type+" "+strings.Join(fs, " "))
	}
	return strings.Join(lines, "\n")
}

// hashLines are a run's state and items hashes, a line each, fields
// sorted, without its times (run|created, run|ended).
func hashLines(t *testing.T, v *env, run string) []string {
	t.Helper()
	var hs []string
	for _, k := range []string{v.e.st.ks.state(run), v.e.st.ks.items(run)} {
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
	return hs
}

// expiryLines say which of a run's keys expire (its retention).
func expiryLines(v *env, run string) []string {
	var out []string
	for _, k := range v.e.RunKeys(run) {
		d, _ := v.e.st.rdb.PTTL(v.ctx, k).Result()
		out = append(out, fmt.Sprintf("%s expires: %v", k[strings.LastIndex(k, ":")+1:], d > 0))
	}
	return out
}

// TestStateIsHashtable: a run's state hash is a hashtable from the start,
// whether begin or start created it (step.lua, run|graph): in a listpack a
// wide run's every field lookup is a linear scan. Real Redis only: the
// embedded server has no encodings.
func TestStateIsHashtable(t *testing.T) {
	w := build(t, wfSpec{nodes: []*nodeSpec{task("a", "noop"), task("b", "noop", after("a"))}})
	for _, general := range []bool{false, true} {
		v := newEnv(t, backends[1], Options{generalOnly: general})
		run := v.submit(w, nil)
		enc, err := v.e.st.rdb.ObjectEncoding(v.ctx, v.e.st.ks.state(run)).Result()
		if err != nil {
			t.Fatal(err)
		}
		if enc != "hashtable" {
			t.Errorf("general paths only %v: the state hash of a new run is a %s", general, enc)
		}
	}
}

// TestFastPathsRefuseBadCalls: advance and begin, which other languages'
// workers may call too, check every argument they use before their first
// write; a malformed call is an error and changes nothing.
func TestFastPathsRefuseBadCalls(t *testing.T) {
	w := build(t, wfSpec{nodes: []*nodeSpec{
		task("a", "noop"), task("b", "noop", after("a")), task("c", "noop", after("a")),
		task("d", "noop", after("b", "c")),
	}})
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b) // no worker: a's token stays queued
		run := v.submit(w, nil)
		m, err := v.e.st.meta(v.ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		ref := m.ref()
		stream := v.e.st.ks.stream(v.e.st.ks.shard(run), ControlQueue)
		msgs := admitEntries(t, v.e, v.e.st.ks.shard(run), ControlQueue)
		if len(msgs) != 1 {
			t.Fatalf("the entry token: %v", msgs)
		}
		snapshot := func() string {
			h, _ := v.e.st.rdb.HGetAll(v.ctx, v.e.st.ks.state(run)).Result()
			n, _ := v.e.st.rdb.XLen(v.ctx, v.e.st.ks.events(run)).Result()
			q, _ := v.e.st.rdb.XLen(v.ctx, stream).Result()
			return fmt.Sprint(h, n, q)
		}
		before := snapshot()
		mq, ctl := ref.queueIndex(ControlQueue), ref.queueIndex(ControlQueue)
		akeys := v.e.st.ks.advanceKeys(run, ref.queues)
		good := []any{"a", "{}", 2, 0, nowMS(), mq, msgs[0].ID, run, ctl, "0", 1 << 20, "b", mq, 0, "", "c", mq, 0, ""}
		// set returns a copy of args with args[i] = val.
		set := func(args []any, i int, val any) []any {
			a := slices.Clone(args)
			a[i] = val
			return a
		}
		with := func(i int, val any) []any { return set(good, i, val) }
		for name, args := range map[string][]any{
			"argument count":       good[:len(good)-1],
			"hop not a number":     with(2, "x"),
			"gen not a number":     with(3, "x"),
			"message queue index":  with(5, 99),
			"message queue zero":   with(5, 0),
			"control queue index":  with(8, 99),
			"state limit":          with(10, "x"),
			"successor queue":      with(12, 99),
			"successor queue text": with(16, "x"),
			"successor queue zero": with(16, 0),
			"fractional queue":     with(5, "1.5"),
			"fractional successor": with(12, "1.5"),
			"join size":            append(slices.Clone(good[:11]), "d", mq, "x", ""),
			"fractional join size": append(slices.Clone(good[:11]), "d", mq, "1.5", ""),
		} {
			err := v.e.st.scripts["advance"].Run(v.ctx, v.e.st.rdb, akeys, args...).Err()
			if err == nil || !strings.Contains(err.Error(), "bad advance call") {
				t.Errorf("advance, %s: %v, want a bad call error", name, err)
			}
			if after := snapshot(); after != before {
				t.Errorf("advance, %s: wrote\n%s\nbefore:\n%s", name, after, before)
			}
		}
		// begin: a new run id, each call malformed.
		fresh := "bad-begin-run"
		bkeys := v.e.st.ks.beginKeys(fresh, ref.graph, ref.queues)
		bgood := []any{fresh, nowMS(), m.IR, m.Graph, strings.Join(m.Queues, ","), "w", "{}", 0, 0, 100, 100, 0, "a", mq}
		bwith := func(i int, val any) []any { return set(bgood, i, val) }
		for name, args := range map[string][]any{
			"no entries":               bgood[:12],
			"max_hops not a number":    bwith(9, "x"),
			"deadline not a number":    bwith(7, "x"),
			"deadline_at not a number": func() []any { a := bwith(8, "x"); a[7] = 1000; return a }(),
			"no queues":                bwith(4, ""),
			"entry queue index":        bwith(13, 99),
			"entry queue zero":         bwith(13, 0),
			"fractional entry queue":   bwith(13, "1.5"),
			"an entry twice":           append(slices.Clone(bgood), "a", mq),
			"no control timers key":    nil, // the keys, below
		} {
			keys := bkeys
			if args == nil {
				args, keys = bgood, bkeys[:3]
			}
			err := v.e.st.scripts["begin"].Run(v.ctx, v.e.st.rdb, keys, args...).Err()
			if err == nil || !strings.Contains(err.Error(), "bad begin call") {
				t.Errorf("begin, %s: %v, want a bad call error", name, err)
			}
			if n, _ := v.e.st.rdb.Exists(v.ctx, bkeys[0], bkeys[1]).Result(); n != 0 {
				t.Errorf("begin, %s: wrote the run's keys", name)
			}
		}
	})
}

// TestScriptsGroup: the fast paths acknowledge messages in step.lua's GROUP,
// which must be the group the workers read with (Group).
func TestScriptsGroup(t *testing.T) {
	src, err := ScriptSource("advance")
	if err != nil {
		t.Fatal(err)
	}
	if want := "local GROUP = '" + Group + "'\n"; !strings.Contains(src, want) {
		t.Errorf("step.lua does not define %q", want)
	}
}

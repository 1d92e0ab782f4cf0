package runtime

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wfc-lang/wfc/runtime/internal/redistest"
)

// TestAdmitReadsAsTake: admit.lua followed by a plain XREADGROUP reads,
// admits, holds back, leaves waiting and grants credits exactly as
// take.lua does, over continuations that fill the read or not, new runs
// waiting or not, admit bounds and an idle reader or not (72 cases), and
// the same with entry tokens that waited AdmitAge: those move alike, but
// take moves them after its read (for the next one) and admit before the
// read, which takes them when it has room. On a real Redis (7.0 or later:
// the group's lag); the embedded server reports no version, and its
// workers use take.lua.
func TestAdmitReadsAsTake(t *testing.T) {
	ctx := context.Background()
	e := openEngine(t, backends[1], Options{Queues: sameQueue})
	if !serverCountsLag(ctx, e.st.rdb) {
		t.Fatal("the test's redis-server does not count lag: it is older than 7.0")
	}
	wf := build(t, wfSpec{nodes: []*nodeSpec{task("x", "ord")}})
	keys := e.st.ks.takeKeys(0, []string{"work"})
	w := &Worker{st: e.st, ks: e.st.ks, opts: WorkerOptions{AdmitAge: time.Hour, Queues: []string{"work"}}}
	streams := []string{keys[1], ">"}
	const n = 8
	type result struct {
		read, cont int
		later      int // messages left in the stream for the next read
		held       bool
		remain     int64
		credits    int
	}
	later := func() int {
		res, _ := e.st.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: Group, Consumer: "later", Streams: streams, Count: 100, Block: -1}).Result()
		n := 0
		for _, s := range res {
			n += len(s.Messages)
		}
		return n
	}
	// setup empties the keys and queues cont continuations (messages of
	// runs in flight, undelivered) and waiting new runs.
	setup := func(cont, waiting int) {
		t.Helper()
		for _, k := range keys {
			if err := e.st.rdb.Del(ctx, k).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if err := e.st.ensureGroup(ctx, keys[1]); err != nil {
			t.Fatal(err)
		}
		for i := range cont {
			if err := e.st.rdb.XAdd(ctx, &redis.XAddArgs{Stream: keys[1], Values: []any{"t", fmt.Sprintf("cont%d", i)}}).Err(); err != nil {
				t.Fatal(err)
			}
		}
		for range waiting {
			if _, err := e.Submit(ctx, wf, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	count := func(res []redis.XStream) (read, cont int) {
		for _, s := range res {
			for _, m := range s.Messages {
				read++
				if v, _ := m.Values["t"].(string); len(v) > 4 && v[:4] == "cont" {
					cont++
				}
			}
		}
		return read, cont
	}
	credits := func() int {
		c, _ := e.st.rdb.HGet(ctx, keys[0], "work").Int()
		return c
	}
	for _, age := range []time.Duration{time.Hour, 0} {
		w.opts.AdmitAge = age
		for _, cont := range []int{0, 3, 8, 10} {
			for _, waiting := range []int{0, 2, 10} {
				for _, admit := range []int{0, 3, 8} {
					for _, idle := range []bool{false, true} {
						name := fmt.Sprintf("%d continuations, %d new runs, admit %d, idle %v, age %s", cont, waiting, admit, idle, age)
						setup(cont, waiting)
						res, held, err := w.take(ctx, e.st.rdb, 0, keys, []string{"work"}, "test", n, admit, idle)
						if err != nil {
							t.Fatal(err)
						}
						var want result
						want.read, want.cont = count(res)
						want.held, want.remain, want.credits = held, waitingEntries(t, e), credits()
						want.later = later()

						setup(cont, waiting)
						pipe := e.st.rdb.Pipeline()
						adm := e.st.scripts["admit"].EvalSha(ctx, pipe, keys, w.admitArgs(n, admit, idle)...)
						xr := pipe.XReadGroup(ctx, &redis.XReadGroupArgs{Group: Group, Consumer: "test", Streams: streams, Count: n, Block: -1})
						if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
							// NOSCRIPT the first time: load it and run again.
							if err := e.st.scripts["admit"].Load(ctx, e.st.rdb).Err(); err != nil {
								t.Fatal(err)
							}
							setup(cont, waiting)
							pipe = e.st.rdb.Pipeline()
							adm = e.st.scripts["admit"].EvalSha(ctx, pipe, keys, w.admitArgs(n, admit, idle)...)
							xr = pipe.XReadGroup(ctx, &redis.XReadGroupArgs{Group: Group, Consumer: "test", Streams: streams, Count: n, Block: -1})
							if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
								t.Fatal(err)
							}
						}
						reply, err := adm.Slice()
						if err != nil || len(reply) != 2 {
							t.Fatalf("%s: admit replied %v, %v", name, reply, err)
						}
						r, _ := xr.Result()
						var got result
						got.read, got.cont = count(r)
						got.held, got.remain, got.credits = reply[1] == int64(1), waitingEntries(t, e), credits()
						got.later = later()
						moved := int(reply[0].(int64))
						if age == 0 {
							// An aged token: take moves it after its read, for
							// the next one; admit before the read, which takes
							// it when it has room. The same tokens move.
							if got.read+got.later != want.read+want.later {
								t.Errorf("%s: admit then a read made %d+%d messages readable, take %d+%d", name, got.read, got.later, want.read, want.later)
							}
							got.read, got.later, want.read, want.later = 0, 0, 0, 0
						} else if moved != got.read-got.cont {
							t.Errorf("%s: admit says it moved %d, the read found %d new runs", name, moved, got.read-got.cont)
						}
						if got != want {
							t.Errorf("%s: admit then a read %+v, take %+v", name, got, want)
						}
					}
				}
			}
		}
	}
}

// TestAdmitWithoutLag: a group whose lag the server cannot tell (its last
// delivered id set by hand, then an entry after it deleted) makes admit
// write nothing and reply {-1, 0}, which sends a worker back to take.lua;
// a missing group or stream replies {0, 0} and does not; the embedded
// server reports no version, so its workers never use admit.
func TestAdmitWithoutLag(t *testing.T) {
	ctx := context.Background()
	e := openEngine(t, backends[1], Options{Queues: sameQueue})
	wf := build(t, wfSpec{nodes: []*nodeSpec{task("x", "ord")}})
	keys := e.st.ks.takeKeys(0, []string{"work"})
	if err := e.st.ensureGroup(ctx, keys[1]); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range 3 {
		id, err := e.st.rdb.XAdd(ctx, &redis.XAddArgs{Stream: keys[1], Values: []any{"t", fmt.Sprint(i)}}).Result()
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := e.st.rdb.XGroupSetID(ctx, keys[1], Group, ids[0]).Err(); err != nil {
		t.Fatal(err)
	}
	if err := e.st.rdb.XDel(ctx, keys[1], ids[1]).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Submit(ctx, wf, nil); err != nil {
		t.Fatal(err)
	}
	w := &Worker{st: e.st, ks: e.st.ks, log: e.log, opts: WorkerOptions{AdmitAge: time.Hour, Queues: []string{"work"}}}
	w.lagAdmit.Store(true)
	cmd := e.st.scripts["admit"].Run(ctx, e.st.rdb, keys, w.admitArgs(8, 8, false)...)
	reply, err := cmd.Slice()
	if err != nil || len(reply) != 2 || reply[0] != int64(-1) {
		t.Fatalf("admit on a group without its lag replied %v, %v; want [-1 0]", reply, err)
	}
	if n := waitingEntries(t, e); n != 1 {
		t.Errorf("%d new runs wait after admit, want 1 (nothing moved)", n)
	}
	w.admitReply(ctx, cmd)
	if w.lagAdmit.Load() {
		t.Error("the worker still admits with admit.lua")
	}

	// A stream or group that is not there is no reason to go back to take:
	// nothing is admitted, and the read that follows says NOGROUP.
	w.lagAdmit.Store(true)
	for _, del := range []func() error{
		func() error { return e.st.rdb.XGroupDestroy(ctx, keys[1], Group).Err() },
		func() error { return e.st.rdb.Del(ctx, keys[1]).Err() },
	} {
		if err := del(); err != nil {
			t.Fatal(err)
		}
		cmd := e.st.scripts["admit"].Run(ctx, e.st.rdb, keys, w.admitArgs(8, 8, true)...)
		if reply, err := cmd.Slice(); err != nil || len(reply) != 2 || reply[0] != int64(0) {
			t.Errorf("admit without its group or stream replied %v, %v; want [0 0]", reply, err)
		}
		w.admitReply(ctx, cmd)
		if !w.lagAdmit.Load() {
			t.Error("a missing group sent the worker back to take.lua")
		}
		if n := waitingEntries(t, e); n != 1 {
			t.Errorf("%d new runs wait, want 1 (nothing moved)", n)
		}
	}

	m := openEngine(t, backends[0], Options{Queues: sameQueue})
	if serverCountsLag(ctx, m.st.rdb) {
		t.Error("the embedded server counts as one that reports a group's lag")
	}
}

// TestReadAdmitReloads: a server that lost admit.lua (a restart, SCRIPT
// FLUSH) still gives the read loop its messages, admitting none, and the
// worker loads the script again for the next read, which admits. Its own
// redis-server: the flush would reach other tests' scripts.
func TestReadAdmitReloads(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{})
	e := openEngine(t, backend{"own", func(testing.TB) string { return srv.URL() }}, Options{Queues: sameQueue})
	wf := build(t, wfSpec{nodes: []*nodeSpec{task("x", "ord")}})
	w := e.NewWorker(WorkerOptions{Queues: []string{"work"}, Consumer: "test", AdmitAge: time.Hour})
	keys := e.st.ks.takeKeys(0, []string{"work"})
	if err := e.st.ensureGroup(ctx, keys[1]); err != nil {
		t.Fatal(err)
	}
	if err := e.st.rdb.XAdd(ctx, &redis.XAddArgs{Stream: keys[1], Values: []any{"t", "cont"}}).Err(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := e.Submit(ctx, wf, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.st.rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	read := func() int {
		res, _, err := w.readAdmit(ctx, 0, 4, 4, false)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, s := range res {
			n += len(s.Messages)
		}
		return n
	}
	if n := read(); n != 1 {
		t.Errorf("the read after a lost admit.lua got %d messages, want the 1 continuation", n)
	}
	if n := waitingEntries(t, e); n != 2 {
		t.Errorf("%d new runs wait, want 2 (none admitted without the script)", n)
	}
	if ok, err := e.st.rdb.ScriptExists(ctx, e.st.scripts["admit"].Hash()).Result(); err != nil || !ok[0] {
		t.Fatalf("admit.lua not loaded again (%v, %v)", ok, err)
	}
	if n := read(); n != 2 {
		t.Errorf("the next read got %d messages, want the 2 new runs admitted", n)
	}
}

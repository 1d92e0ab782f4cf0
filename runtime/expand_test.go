package runtime

import (
	"os"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/wfc-lang/wfc/ir"
)

// perCommandExpand makes the engine run the expand.lua of before its
// writes were batched (testdata/expand_percommand.lua), with the same
// preludes.
func perCommandExpand(t *testing.T, v *env) {
	t.Helper()
	src, err := ScriptSource("expand")
	if err != nil {
		t.Fatal(err)
	}
	body, err := scriptFS.ReadFile("scripts/expand.lua")
	if err != nil {
		t.Fatal(err)
	}
	old, err := os.ReadFile("testdata/expand_percommand.lua")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(src, string(body)) {
		t.Fatal("expand's source does not end with expand.lua")
	}
	v.e.st.scripts["expand"] = redis.NewScript(strings.TrimSuffix(src, string(body)) + string(old))
}

// expand.lua writes a chunk's items with one HSET and queues them
// without reading them back; it must write exactly what the script of a
// command per item and field wrote. Each workflow runs twice with one
// worker handling one message at a time (so that the order of events is
// the same), once with each script; the event logs, the state and items
// hashes, the applied keys and the keys' expiry must be equal.
func TestExpandWritesWhatItWrote(t *testing.T) {
	type tc struct {
		w     *ir.Workflow
		chunk int  // items per expand call (0: the default)
		retry bool // after the run failed, make the handlers succeed and retry it
		state string
	}
	cases := map[string]tc{
		"a window": {w: build(t, wfSpec{
			outputs: []ir.Output{output("n", "b.output.n")},
			nodes: []*nodeSpec{
				task("each", "count", forEach("u", numList(5), 2), with("v", cexpr("u * 2"))),
				task("b", "cel", after("each"), with("n", cexpr("size(each.output)"))),
			},
		}), state: RunCompleted},
		"all at once": {w: build(t, wfSpec{
			nodes: []*nodeSpec{task("each", "count", forEach("u", numList(40), 0), with("v", cexpr("u")))},
		}), state: RunCompleted},
		// Chunks of three: the first opens the window, the later ones
		// fill what it leaves (the window's next items are in the
		// chunks before).
		"chunks and a window": {w: build(t, wfSpec{
			nodes: []*nodeSpec{task("each", "count", forEach("u", numList(10), 4), with("v", cexpr("u")))},
		}), chunk: 3, state: RunCompleted},
		"chunks all at once": {w: build(t, wfSpec{
			nodes: []*nodeSpec{task("each", "count", forEach("u", numList(8), 0), with("v", cexpr("u")))},
		}), chunk: 3, state: RunCompleted},
		// The second generation keeps the items done with the same
		// value, in chunks.
		"a partial retry in chunks": {w: build(t, wfSpec{
			nodes: []*nodeSpec{task("each", "evenfails", forEach("x", numList(7), 3), with("v", cexpr("x")))},
		}), chunk: 3, retry: true, state: RunCompleted},
		"a partial retry": {w: build(t, wfSpec{
			nodes: []*nodeSpec{task("each", "evenfails", forEach("x", numList(4), 1), with("v", cexpr("x")))},
		}), retry: true, state: RunCompleted},
		// Its exec key has an iteration; every iteration loads again.
		"in a loop body": {w: build(t, wfSpec{
			nodes: []*nodeSpec{
				task("head", "noop"),
				task("each", "count", after("head"), forEach("x", numList(3), 2), with("v", cexpr("x"))),
				task("tail", "poll", after("each"), loop("output.n < 2", 5, "head")),
			},
		}), state: RunCompleted},
		// Every item is done when the load ends: the collect token
		// comes with the last chunk.
		"a one-item list": {w: build(t, wfSpec{
			nodes: []*nodeSpec{task("each", "count", forEach("x", "[7]", 0), with("v", cexpr("x")))},
		}), state: RunCompleted},
	}
	forBackends(t, func(t *testing.T, b backend) {
		for name, c := range cases {
			var logs, states [2]string
			for i, old := range []bool{false, true} {
				v := newEnv(t, b)
				registerPoll(v)
				mend := evenFails(v)
				if old {
					perCommandExpand(t, v)
				}
				v.worker(func(o *WorkerOptions) { o.Concurrency, o.expandChunk = 1, c.chunk })
				st := runRetried(t, v, c.w, c.retry, mend, c.state, name)
				logs[i], states[i] = runWrites(t, v, st.RunID)
				logs[i] = strings.ReplaceAll(logs[i], st.RunID, "RUN")
			}
			if logs[0] != logs[1] {
				t.Errorf("%s: event logs differ\nbatched:\n%s\na command each:\n%s", name, logs[0], logs[1])
			}
			if states[0] != states[1] {
				t.Errorf("%s: state differs\nbatched:\n%s\na command each:\n%s", name, states[0], states[1])
			}
		}
	})
}

// TestItemsIsHashtable: a run's items hash is a hashtable from the
// for_each's expand on (expand.lua), whatever its size: in a listpack
// every item's field is a linear scan. Real Redis only: the embedded
// server has no encodings.
func TestItemsIsHashtable(t *testing.T) {
	w := build(t, wfSpec{nodes: []*nodeSpec{task("each", "block", forEach("x", "[1, 2, 3]", 0), with("v", cexpr("x")))}})
	v := newEnv(t, backends[1])
	v.worker()
	run := v.submit(w, nil)
	// The items are queued, blocked in their handlers: expand is done.
	for range 3 {
		v.waitStarted()
	}
	enc, err := v.e.st.rdb.ObjectEncoding(v.ctx, v.e.st.ks.items(run)).Result()
	if err != nil {
		t.Fatal(err)
	}
	if enc != "hashtable" {
		t.Errorf("the items hash of a for_each of 3 items is a %s", enc)
	}
	close(v.unblock)
	if st := v.wait(run); st.State != RunCompleted {
		t.Fatalf("%s %s", st.State, st.Error)
	}
}

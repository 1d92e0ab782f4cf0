package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wfc-lang/wfc/ir"
)

// A message skips its pre-read only when it is a fresh exec token of a run
// whose meta the worker keeps, with the token's generation; the others of
// its batch are pre-read.
func TestFreshness(t *testing.T) {
	var f freshness
	f.known.Store(true)
	f.offset.Store(-2000) // the server's clock is 2 s behind the worker's
	f.remember("r1", &runMeta{ID: "r1", Status: RunRunning, Gen: 0, IR: "x"})
	f.remember("r2", &runMeta{ID: "r2", Status: RunRunning, Gen: 1})
	server := time.Now().UnixMilli() - 2000
	msg := func(ageMS int64, tok string) redis.XMessage {
		return redis.XMessage{ID: fmt.Sprintf("%d-0", server-ageMS), Values: map[string]any{"t": tok}}
	}
	exec := func(run string, gen int) string {
		return fmt.Sprintf(`{"kind":"exec","run":%q,"node":"a","iter":"","hop":2,"attempt":1,"item":-1,"gen":%d}`, run, gen)
	}
	for _, c := range []struct {
		name string
		msgs []redis.XMessage
		skip []bool
	}{
		{"fresh", []redis.XMessage{msg(1, exec("r1", 0)), msg(0, exec("r2", 1))}, []bool{true, true}},
		{"one too old", []redis.XMessage{msg(1, exec("r1", 0)), msg(50, exec("r2", 1))}, []bool{true, false}},
		{"from the future", []redis.XMessage{msg(-50, exec("r1", 0))}, []bool{false}},
		{"a run not kept", []redis.XMessage{msg(1, exec("r3", 0)), msg(1, exec("r1", 0))}, []bool{false, true}},
		{"another generation", []redis.XMessage{msg(1, exec("r2", 0))}, []bool{false}},
		{"not an exec token", []redis.XMessage{msg(1, `{"kind":"finish","run":"r1","item":-1,"gen":0}`)}, []bool{false}},
		{"not a token", []redis.XMessage{msg(1, `{`)}, []bool{false}},
	} {
		// Distinct ids within a batch, as a stream has.
		for i := range c.msgs {
			c.msgs[i].ID = strings.Replace(c.msgs[i].ID, "-0", fmt.Sprintf("-%d", i), 1)
		}
		got := f.prefetched([]redis.XStream{{Stream: "s", Messages: c.msgs}}, nil)
		for i, m := range c.msgs {
			p := got[msgKey("s", m.ID)]
			if (p != nil) != c.skip[i] {
				t.Errorf("%s, message %d: skipped %v, want %v", c.name, i, p != nil, c.skip[i])
				continue
			}
			if p != nil && (*p.state != NodeQueued || p.m == nil || p.m.Status != RunRunning || p.m.ID != p.tok.Run || p.told) {
				t.Errorf("%s: %+v", c.name, p)
			}
		}
	}
	// A run not kept whose token tells its meta: fresh, it is skipped;
	// old, or when the token tells nothing, it is not.
	told := func(tok *Token) *runMeta {
		if tok.Graph == "" {
			return nil
		}
		return &runMeta{ID: tok.Run, Status: RunRunning, Gen: tok.Gen, Graph: tok.Graph}
	}
	withGraph := `{"kind":"exec","run":"r9","node":"a","iter":"","hop":2,"attempt":1,"item":-1,"gen":3,"g":"sha256:x.d","mh":10}`
	msgs := []redis.XMessage{msg(1, withGraph), msg(60, withGraph), msg(1, exec("r8", 0))}
	for i := range msgs {
		msgs[i].ID = strings.Replace(msgs[i].ID, "-0", fmt.Sprintf("-%d", i), 1)
	}
	got := f.prefetched([]redis.XStream{{Stream: "s", Messages: msgs}}, told)
	if p := got[msgKey("s", msgs[0].ID)]; p == nil || p.m.Graph != "sha256:x.d" || p.tok.MaxHops != 10 || !p.told {
		t.Errorf("a fresh token telling its run's meta: %+v", p)
	}
	if got[msgKey("s", msgs[1].ID)] != nil || got[msgKey("s", msgs[2].ID)] != nil {
		t.Errorf("an old token, or one telling nothing, skipped its pre-read: %+v", got)
	}
	// An old token of a run that a transition script of the worker just
	// found running, in the token's generation, is as good as fresh.
	old := []redis.XMessage{msg(60, exec("r1", 0))}
	if got := f.prefetched([]redis.XStream{{Stream: "s", Messages: old}}, nil); len(got) != 0 {
		t.Error("an old token skipped its pre-read")
	}
	f.confirm("r1", 1)
	if got := f.prefetched([]redis.XStream{{Stream: "s", Messages: old}}, nil); len(got) != 0 {
		t.Error("an old token skipped its pre-read after its run was confirmed in another generation")
	}
	f.confirm("r1", 0)
	if got := f.prefetched([]redis.XStream{{Stream: "s", Messages: old}}, nil); len(got) != 1 {
		t.Error("an old token of a run just confirmed running was pre-read")
	}
	f.live["r1"] = liveRun{time.Now().UnixMilli() - 50, 0}
	if got := f.prefetched([]redis.XStream{{Stream: "s", Messages: old}}, nil); len(got) != 0 {
		t.Error("an old token of a run confirmed 50 ms ago skipped its pre-read")
	}
	// Without a measured offset nothing is skipped.
	f.known.Store(false)
	if got := f.prefetched([]redis.XStream{{Stream: "s", Messages: []redis.XMessage{msg(1, exec("r1", 0))}}}, nil); len(got) != 0 {
		t.Error("skipped without a known clock offset")
	}
}

// The clock offset comes from TIME: on the same machine it is small.
func TestFreshnessMeasure(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		e := openEngine(t, b, Options{})
		var f freshness
		f.measure(context.Background(), e.st.rdb)
		if !f.known.Load() {
			t.Fatal("offset not measured")
		}
		if off := f.offset.Load(); off < -1000 || off > 1000 {
			t.Errorf("offset %d ms to a server on this machine", off)
		}
	})
}

// The read loop leaves reading to completions only while one handler,
// started less than deferWindow ago, runs.
func TestDeferral(t *testing.T) {
	var a activity
	a.idle = make(chan struct{}, 1)
	if d := a.deferral(); d != 0 {
		t.Errorf("no handler: %v", d)
	}
	a.start()
	if d := a.deferral(); d <= 0 || d > deferWindow {
		t.Errorf("a lone handler just started: %v", d)
	}
	a.start()
	if d := a.deferral(); d != 0 {
		t.Errorf("two handlers: %v", d)
	}
	a.end()
	a.lastStart.Store(time.Now().Add(-time.Second).UnixNano())
	if d := a.deferral(); d > 0 {
		t.Errorf("a lone handler started a second ago: %v", d)
	}
	a.end()
	select {
	case <-a.idle:
	default:
		t.Error("the last handler's end did not signal idle")
	}
}

// What an exec token tells of its run (graph, hop limit) with the plan and
// graph a worker keeps is the run's meta, as far as running a node without
// expressions needs it: the same graph, queues (their order names the
// scripts' keys), IR, workflow and hop limit. start.lua and begin.lua
// write such tokens alike; a node whose expressions read input needs the
// pre-read (one reading only outputs its token carries does not: carry.go).
func TestTokenMeta(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		for _, general := range []bool{false, true} {
			v := newEnv(t, b, Options{Queues: map[string]string{"special": "gpu", "other": "aaa"}, MaxHops: 77, generalOnly: general})
			w := v.e.NewWorker(WorkerOptions{Handlers: v.reg})
			flow := build(t, wfSpec{inputs: []ir.Input{input("n", ir.KindInt, "1")}, nodes: []*nodeSpec{
				task("a", "noop"), task("x", "cel", with("v", cexpr("input.n"))),
				task("b", "special", after("a")), task("c", "other", after("b")),
			}})
			run := v.submit(flow, nil)
			vals, err := v.e.st.ks.readMeta(v.ctx, v.e.st.rdb, run).Result()
			if err != nil {
				t.Fatal(err)
			}
			meta := metaMap(vals)
			msgs, err := v.e.st.rdb.XRange(v.ctx, v.e.st.ks.entries(0, ControlQueue), "-", "+").Result() // no worker: they wait
			if err != nil || len(msgs) != 2 {
				t.Fatalf("entry tokens %v, %v", msgs, err)
			}
			toks := map[string]*Token{}
			for _, m := range msgs {
				tok := &Token{}
				if err := json.Unmarshal([]byte(m.Values["t"].(string)), tok); err != nil {
					t.Fatal(err)
				}
				toks[tok.Node] = tok
			}
			a := toks["a"]
			if a.Graph != meta["graph"] || fmt.Sprint(a.MaxHops) != meta["max_hops"] || a.MaxHops != 77 {
				t.Errorf("general %v: token %+v of a run with meta %v", general, a, meta)
			}
			// Nothing kept yet: the meta must be read.
			if m := w.tokenMeta(a); m != nil {
				t.Errorf("told %v without the plan and the graph", m)
			}
			if _, err := w.st.planFor(v.ctx, meta["ir"]); err != nil {
				t.Fatal(err)
			}
			if _, err := w.st.nodeQueues(v.ctx, run, meta["graph"]); err != nil {
				t.Fatal(err)
			}
			told := w.tokenMeta(a)
			if told == nil {
				t.Fatal("nothing told with the plan and the graph kept")
			}
			want, err := parseMeta(run, meta)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct{ what, told, meta any }{
				{"status", told.Status, want.Status}, {"gen", told.Gen, want.Gen}, {"ir", told.IR, want.IR},
				{"graph", told.Graph, want.Graph}, {"queues", strings.Join(told.Queues, ","), strings.Join(want.Queues, ",")},
				{"workflow", told.Workflow, want.Workflow}, {"max_hops", told.MaxHops, want.MaxHops}, {"id", told.ID, want.ID},
			} {
				if c.told != c.meta {
					t.Errorf("general %v: told %s=%v, the meta has %v", general, c.what, c.told, c.meta)
				}
			}
			if meta["queues"] != "default,aaa,gpu" {
				t.Errorf("queues %q", meta["queues"])
			}
			if m := w.tokenMeta(toks["x"]); m != nil {
				t.Errorf("a node whose expressions read input told %v", m)
			}
		}
	})
}

// Only the transition scripts that apply to a running run alone confirm
// it running when they reply ok.
func TestConfirmingScripts(t *testing.T) {
	w := &Worker{log: slog.New(slog.DiscardHandler)}
	for _, c := range []struct {
		script, reply string
		live          bool
	}{
		{"advance", "ok", true}, {"complete", "ok", true}, {"retry", "ok", true},
		{"expand", "ok", true}, {"itemdone", "ok", true},
		{"complete", "failed", false}, {"advance", "inactive", false}, {"complete", "dup", false},
		{"finish", "ok", false}, {"abort", "ok", false}, {"compdone", "ok", false}, {"compretry", "ok", false}, {"cancel", "ok", false},
	} {
		w.fresh.live = nil
		j := &job{w: w, tok: Token{Run: "r", Gen: 2}}
		j.counted(c.script, c.reply)
		if l, ok := w.fresh.live["r"]; ok != c.live || ok && l.gen != 2 {
			t.Errorf("%s replying %s: confirmed %v (%+v), want %v", c.script, c.reply, ok, l, c.live)
		}
	}
}

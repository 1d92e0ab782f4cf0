package runtime

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A message skips its pre-read only when it is a fresh exec token of a run
// whose meta the worker keeps, with the token's generation; the others of
// its batch are pre-read.
func TestFreshness(t *testing.T) {
	var f freshness
	f.known.Store(true)
	f.offset.Store(-2000) // the server's clock is 2 s behind the worker's
	f.remember("r1", map[string]string{"status": "running", "gen": "0", "ir": "x"})
	f.remember("r2", map[string]string{"status": "running", "gen": "1"})
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
		got := f.prefetched([]redis.XStream{{Stream: "s", Messages: c.msgs}})
		for i, m := range c.msgs {
			p := got[msgKey("s", m.ID)]
			if (p != nil) != c.skip[i] {
				t.Errorf("%s, message %d: skipped %v, want %v", c.name, i, p != nil, c.skip[i])
				continue
			}
			if p != nil && (*p.state != NodeQueued || p.meta["status"] != "running" || p.tok.Run == "") {
				t.Errorf("%s: %+v", c.name, p)
			}
		}
	}
	// Without a measured offset nothing is skipped.
	f.known.Store(false)
	if got := f.prefetched([]redis.XStream{{Stream: "s", Messages: []redis.XMessage{msg(1, exec("r1", 0))}}}); len(got) != 0 {
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

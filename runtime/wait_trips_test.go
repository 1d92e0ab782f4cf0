package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/wfc-lang/wfc/runtime/handlers"
)

// Wait reads the run again only after an event that may end it: each of
// its nodes' events costs one read (a blocking XREAD), not three. A run of
// ten nodes, each taking a few milliseconds so that every event wakes the
// waiter on its own, is waited for by an engine of its own, whose round
// trips are Wait's alone.
func TestWaitReadsOncePerEvent(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.reg.RegisterFunc("nap", func(ctx context.Context, req handlers.Request) (json.RawMessage, error) {
			time.Sleep(5 * time.Millisecond)
			return json.RawMessage(`{}`), nil
		})
		v.worker()
		var nodes []*nodeSpec
		for i := range 10 {
			var opts []nodeOpt
			if i > 0 {
				opts = append(opts, after(fmt.Sprintf("n%d", i-1)))
			}
			nodes = append(nodes, task(fmt.Sprintf("n%d", i), "nap", opts...))
		}
		w := build(t, wfSpec{nodes: nodes})
		waiter, err := Open(v.ctx, Options{RedisURL: engineURL(v.e), Prefix: v.e.st.ks.prefix, Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		defer waiter.Close()
		run := v.submit(w, nil)
		start := time.Now()
		trips0 := waiter.RoundTrips()
		st, err := waiter.Wait(v.ctx, run)
		if err != nil || st.State != RunCompleted {
			t.Fatalf("%v %v", st, err)
		}
		trips := waiter.RoundTrips() - trips0
		evs, err := v.e.Events(v.ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		// One read per event at most, the first check and the last (two
		// each: the run's fields, then its status), and a check after
		// each second without events.
		bound := int64(len(evs)) + 4 + 2*int64(math.Ceil(time.Since(start).Seconds()))
		if trips > bound {
			t.Errorf("Wait made %d round trips for %d events, want at most %d", trips, len(evs), bound)
		}
	})
}

func TestMayEnd(t *testing.T) {
	for _, c := range []struct {
		types []string
		want  bool
	}{
		{[]string{"node.completed"}, false},
		{[]string{"node.queued", "item.completed", "approval.created", "signal.received", "join.cancelled"}, false},
		{[]string{"node.completed", "run.completed"}, true},
		{[]string{"run.finishing"}, true},
		{[]string{"comp.done"}, true},
		{[]string{"finally.failed"}, true},
		{[]string{"patch.applied"}, true}, // unknown to it: checked
		{[]string{""}, true},
	} {
		var msgs []redis.XMessage
		for i, typ := range c.types {
			msgs = append(msgs, redis.XMessage{ID: fmt.Sprintf("1-%d", i), Values: map[string]any{"type": typ}})
		}
		last := "0"
		if got := mayEnd([]redis.XStream{{Messages: msgs}}, &last); got != c.want || last != msgs[len(msgs)-1].ID {
			t.Errorf("%v: %v (last %s), want %v", c.types, got, last, c.want)
		}
	}
}

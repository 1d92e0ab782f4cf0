package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"
)

// The batcher returns each call its own reply and error, also when calls
// share a pipeline, and reruns a call whose script the server lost
// (NOSCRIPT) on its own.
func TestBatcher(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		e := openEngine(t, b, Options{})
		ctx := context.Background()
		rdb := e.st.rdb
		echo := redis.NewScript(`if ARGV[1] == 'bad' then return redis.error_reply('ERR bad call') end
return redis.call('INCR', KEYS[1]) .. ':' .. ARGV[1]`)
		bt := newBatcher(rdb, 4, nil)
		key := e.st.ks.tag(0) + ":batchtest"
		for round := range 3 {
			if round == 1 {
				// The server forgets its scripts (a restart, SCRIPT FLUSH).
				if err := rdb.ScriptFlush(ctx).Err(); err != nil {
					t.Fatal(err)
				}
			}
			// Hold the batcher as if a pipeline were in flight, so that
			// every call queues; then hand the lead on as a leader does:
			// the calls go in pipelines of 4.
			bt.mu.Lock()
			bt.busy = true
			bt.mu.Unlock()
			var wg sync.WaitGroup
			const n = 40
			got := make([]string, n)
			errs := make([]error, n)
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					arg := fmt.Sprint(i)
					if i%10 == 3 {
						arg = "bad"
					}
					res, _, err := bt.run(ctx, echo, []string{key}, false, 0, arg)
					got[i], _ = res.(string)
					errs[i] = err
				}()
			}
			for {
				bt.mu.Lock()
				k := len(bt.pending)
				if k == n {
					next := bt.pending[0]
					bt.pending = bt.pending[1:]
					next.lead = true
					close(next.wake)
				}
				bt.mu.Unlock()
				if k == n {
					break
				}
				time.Sleep(time.Millisecond)
			}
			wg.Wait()
			if got := bt.pipelined.Load(); got != int64(n*(round+1)) {
				t.Errorf("round %d: %d calls went in pipelines, want all %d", round, got, n*(round+1))
			}
			seen := map[string]bool{}
			for i := range n {
				if i%10 == 3 {
					if errs[i] == nil || errs[i].Error() != "ERR bad call" {
						t.Errorf("round %d call %d: error %v, want ERR bad call", round, i, errs[i])
					}
					continue
				}
				var count int
				var arg string
				if _, err := fmt.Sscanf(got[i], "%d:%s", &count, &arg); err != nil || errs[i] != nil || arg != fmt.Sprint(i) {
					t.Errorf("round %d call %d: %q, %v", round, i, got[i], errs[i])
				}
				if seen[fmt.Sprint(count)] {
					t.Errorf("round %d: counter %d returned twice", round, count)
				}
				seen[fmt.Sprint(count)] = true
			}
			if bt.busy || len(bt.pending) != 0 {
				t.Errorf("round %d: batcher left busy=%v with %d pending", round, bt.busy, len(bt.pending))
			}
		}
		// Every successful call ran exactly once.
		if v, err := rdb.Get(ctx, key).Int(); err != nil || v != 3*36 {
			t.Errorf("counter %d (%v), want %d", v, err, 3*36)
		}
	})
}

// take.lua reads, with its batch, what prefetch reads for each message
// (run meta, execution state), and for a message it cannot read for
// (no token, not JSON, a bad run id) nothing, as prefetch does.
func TestTakeReadsWhatPrefetchReads(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		flow := build(t, wfSpec{nodes: []*nodeSpec{task("a", "noop"), task("b", "noop", after("a"))}})
		var runs []string
		for range 3 {
			runs = append(runs, v.submit(flow, nil))
		}
		stream := v.e.st.ks.stream(0, ControlQueue)
		tok := func(kind, run, node, iter string) string {
			b, _ := json.Marshal(Token{Kind: kind, Run: run, Node: node, Iter: iter, Hop: 1, Attempt: 1, Item: -1})
			return string(b)
		}
		for _, vals := range [][]any{
			{"other", "x"},     // no token
			{"t", "{not json"}, // not JSON
			{"t", tok("exec", "no such run", "a", "")},                                    // a bad run id
			{"t", tok("exec", "01unknownrun", "a", "")},                                   // an unknown run
			{"t", tok("finish", runs[0], "", "")},                                         // not an exec token
			{"t", tok("exec", runs[1], "b", "")},                                          // an execution without state
			{"t", tok("exec", runs[2], "a", "2")},                                         // an iteration
			{"t", `{"gen":0,"run":"` + runs[2] + `","kind":"exec","node":"a","item":-1}`}, // fields in another order
		} {
			if err := v.e.st.rdb.XAdd(v.ctx, &redis.XAddArgs{Stream: stream, Values: vals}).Err(); err != nil {
				t.Fatal(err)
			}
		}
		msgs, err := v.e.st.rdb.XRange(v.ctx, stream, "-", "+").Result()
		if err != nil {
			t.Fatal(err)
		}
		want := v.e.NewWorker(WorkerOptions{Handlers: v.reg}).prefetch(v.ctx, []redis.XStream{{Stream: stream, Messages: msgs}})
		w := v.e.NewWorker(WorkerOptions{Handlers: v.reg})
		res, got, err := w.take(v.ctx, 0, []string{stream}, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != 1 || len(res[0].Messages) != len(msgs) {
			t.Fatalf("take read %+v, want the %d messages of %s", res, len(msgs), stream)
		}
		for i, m := range res[0].Messages {
			if m.ID != msgs[i].ID || m.Values["t"] != msgs[i].Values["t"] {
				t.Errorf("message %d: %+v, want %+v", i, m, msgs[i])
			}
			k := msgKey(stream, m.ID)
			if diff := cmp.Diff(want[k], got[k], cmp.AllowUnexported(prefetched{})); diff != "" {
				t.Errorf("message %d (%v): prefetch and take differ (-prefetch +take):\n%s", i, m.Values, diff)
			}
		}
		if len(got) != 8 { // the 3 entry tokens, and the 5 added tokens with a good run id
			t.Errorf("take read for %d messages, want 8", len(got))
		}
		// Nothing is waiting now: an empty reply, not an error.
		if res, _, err := w.take(v.ctx, 0, []string{stream}, 100); err != nil || len(res) != 0 {
			t.Errorf("take on an empty queue: %v, %v", res, err)
		}
	})
}

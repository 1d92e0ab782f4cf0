package runtime

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

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
		bt := newBatcher(rdb, 4)
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
					res, err := bt.run(ctx, echo, []string{key}, arg)
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

package runtime

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
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
		bt := newBatcher(rdb, 4, 1, nil)
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
			bt.sending = 1
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
			if bt.sending != 0 || len(bt.pending) != 0 {
				t.Errorf("round %d: batcher left %d sending with %d pending", round, bt.sending, len(bt.pending))
			}
		}
		// Every successful call ran exactly once.
		if v, err := rdb.Get(ctx, key).Int(); err != nil || v != 3*36 {
			t.Errorf("counter %d (%v), want %d", v, err, 3*36)
		}
	})
}

// A batcher with two lanes sends a call at once while one pipeline is in
// flight; with one lane the call waits for it.
func TestBatcherLanes(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		e := openEngine(t, b, Options{})
		ctx := context.Background()
		for _, lanes := range []int{1, 2} {
			// The hook holds the first call in flight until a second one
			// is sent too, or 300 ms passed, and records how many were
			// in flight at once.
			ro, err := redis.ParseURL(engineURL(e))
			if err != nil {
				t.Fatal(err)
			}
			rdb := redis.NewClient(ro)
			sc := redis.NewScript(`return redis.call('INCR', KEYS[1])`)
			if err := sc.Load(ctx, rdb).Err(); err != nil {
				t.Fatal(err)
			}
			h := &inflightHook{second: make(chan struct{})}
			rdb.AddHook(h)
			bt := newBatcher(rdb, 4, lanes, nil)
			key := e.st.ks.tag(0) + ":lanetest"
			var wg sync.WaitGroup
			for range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if _, _, err := bt.run(ctx, sc, []string{key}, false, 0); err != nil {
						t.Error(err)
					}
				}()
				time.Sleep(20 * time.Millisecond)
			}
			wg.Wait()
			rdb.Close()
			if got := int(h.max.Load()); got != lanes {
				t.Errorf("%d lanes: %d calls in flight at once, want %d", lanes, got, lanes)
			}
		}
	})
}

type inflightHook struct {
	now, max atomic.Int64
	second   chan struct{}
	once     sync.Once
}

func (h *inflightHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *inflightHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() != "evalsha" {
			return next(ctx, cmd)
		}
		n := h.now.Add(1)
		defer h.now.Add(-1)
		for m := h.max.Load(); n > m && !h.max.CompareAndSwap(m, n); m = h.max.Load() {
		}
		if n == 1 {
			select {
			case <-h.second:
			case <-time.After(300 * time.Millisecond):
			}
		} else {
			h.once.Do(func() { close(h.second) })
		}
		return next(ctx, cmd)
	}
}
func (h *inflightHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

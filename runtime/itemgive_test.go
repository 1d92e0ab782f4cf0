package runtime

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// fakeTake is a piggyback that reads nothing: it records the slots a
// batch offers and says that the first used of them went.
type fakeTake struct {
	used   int
	offers []int
}

func (f *fakeTake) queueTake(ctx context.Context, pipe redis.Pipeliner, shard, k int) *pendingTake {
	f.offers = append(f.offers, k)
	return &pendingTake{k: k}
}

func (f *fakeTake) takeDone(ctx context.Context, t *pendingTake, shard int) int {
	return min(f.used, t.k)
}

// A call that carries a group of items offers the slots of its items
// that may give theirs (not those without a give, nor those whose slot
// went already), beside the other calls' slots, and the slots that went
// are marked in order, the calls' first.
func TestItemGroupOffersSlots(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		e := openEngine(t, b, Options{})
		ctx := context.Background()
		sc := redis.NewScript(`return ARGV[1]`)
		pb := &fakeTake{}
		bt := newBatcher(e.st.rdb, 4, 1, pb)
		yes := true
		group := func() (*itemGroup, []*bool) {
			gives := []*bool{new(bool), nil, new(bool), &yes, new(bool)}
			key := itemGroupKey{b: bt, run: fmt.Sprint(time.Now().UnixNano()), x: "each"}
			var g *itemGroup
			for i, give := range gives {
				g, _ = joinItemGroup(key, itemCall{item: i, mq: 1, id: "1-1", out: "{}"}, give)
			}
			return g, gives
		}

		// Alone: a pipeline with the read, offering the three slots;
		// two went, the group's first two that could go.
		pb.used = 2
		g, gives := group()
		res, err := bt.runOffer(ctx, sc, []string{e.st.ks.tag(0) + ":x"}, g, 0, g)
		packed, _ := g.MarshalBinary()
		if err != nil || res != string(packed) || !strings.HasPrefix(res.(string), "0 0 1 1-1 2\n{}1 0 1 1-1 2\n{}") {
			t.Fatalf("reply %q, %v; packed %q", res, err, packed)
		}
		if fmt.Sprint(pb.offers) != "[3]" {
			t.Errorf("offered %v, want [3]", pb.offers)
		}
		if !*gives[0] || !*gives[2] || *gives[4] || gives[1] != nil {
			t.Errorf("gone: %v %v %v, want the first two", *gives[0], *gives[2], *gives[4])
		}
		if n := bt.offered.Load(); n != 1 {
			t.Errorf("%d slots beyond one a call went, want 1", n)
		}
		// A group joins no more items once its slots are offered.
		if g2, idx := joinItemGroup(g.key, itemCall{item: 9, mq: 1, id: "1-2", out: "{}"}, new(bool)); g2 == g || idx != 0 {
			t.Error("an item joined a sealed group")
		}

		// In a batch after a call that gives its own slot: four slots
		// offered, all go.
		pb.used, pb.offers = 10, nil
		bt.mu.Lock()
		bt.sending = 1
		bt.mu.Unlock()
		var gave bool
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, gave, _ = bt.run(ctx, sc, []string{e.st.ks.tag(0) + ":x"}, true, 0, "one")
		}()
		waitPending := func(n int) {
			for {
				bt.mu.Lock()
				k := len(bt.pending)
				bt.mu.Unlock()
				if k == n {
					return
				}
				time.Sleep(time.Millisecond)
			}
		}
		waitPending(1)
		g, gives = group()
		go func() {
			defer wg.Done()
			bt.runOffer(ctx, sc, []string{e.st.ks.tag(0) + ":x"}, g, 0, g)
		}()
		waitPending(2)
		bt.mu.Lock()
		next := bt.pending[0]
		bt.pending = bt.pending[1:]
		next.lead = true
		close(next.wake)
		bt.mu.Unlock()
		wg.Wait()
		if fmt.Sprint(pb.offers) != "[4]" || !gave || !*gives[0] || !*gives[2] || !*gives[4] {
			t.Errorf("offered %v; the call's slot went: %v; the group's: %v %v %v", pb.offers, gave, *gives[0], *gives[2], *gives[4])
		}
	})
}

// Items that complete together hand their slots to the messages their
// call's batch reads, and the worker still never runs more handlers than
// its concurrency.
func TestItemGroupsKeepConcurrency(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		var g gauge // (adapt_test.go)
		v.reg.RegisterFunc("slow", g.handler(time.Millisecond))
		w := build(t, wfSpec{nodes: []*nodeSpec{
			task("each", "slow", forEach("x", numList(50), 0), with("v", cexpr("x"))),
			task("b", "slow", after("each")),
		}})
		var runs []string
		for range 12 {
			runs = append(runs, v.submit(w, nil))
		}
		wk := v.worker(func(o *WorkerOptions) { o.Concurrency = 8 })
		for _, run := range runs {
			if st := v.wait(run); st.State != RunCompleted {
				t.Fatalf("run %s: %s %s", run, st.State, st.Error)
			}
			v.check(run)
		}
		if most := g.peak(); most > 8 {
			t.Errorf("%d handlers ran at once, concurrency 8", most)
		}
		if wk.batch.offered.Load() == 0 {
			t.Error("no group of items handed more than one slot on")
		}
	})
}

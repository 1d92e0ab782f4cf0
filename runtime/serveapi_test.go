package runtime

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/wfc-lang/wfc/ir"
)

// TestListRuns: the run index lists runs newest first, filters by state,
// workflow and time, pages with a cursor, and skips an entry whose run
// never started.
func TestListRuns(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		e := openEngine(t, b, Options{})
		wa := build(t, wfSpec{name: "a", nodes: []*nodeSpec{task("x", "noop")}})
		wb := build(t, wfSpec{name: "b", nodes: []*nodeSpec{task("x", "noop")}})
		var ids []string
		for i := 0; i < 5; i++ {
			w := wa
			if i%2 == 1 {
				w = wb
			}
			id := NewRunID()
			if err := e.IndexRun(ctx, id); err != nil {
				t.Fatal(err)
			}
			if _, err := e.Submit(ctx, w, nil, WithRunID(id)); err != nil {
				t.Fatal(err)
			}
			ids = append([]string{id}, ids...) // newest first
			time.Sleep(2 * time.Millisecond)
		}
		if err := e.IndexRun(ctx, NewRunID()); err != nil { // never submitted
			t.Fatal(err)
		}
		if err := e.Cancel(ctx, ids[0]); err != nil {
			t.Fatal(err)
		}
		list := func(q RunQuery) []string {
			t.Helper()
			var out []string
			for i := 0; i < 20; i++ {
				p, err := e.ListRuns(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range p.Runs {
					out = append(out, r.RunID)
				}
				if p.Next == "" {
					return out
				}
				q.Cursor = p.Next
			}
			t.Fatal("no end of pages")
			return nil
		}
		eq := func(got, want []string) {
			t.Helper()
			if len(got) != len(want) {
				t.Fatalf("got %v, want %v", got, want)
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("got %v, want %v", got, want)
				}
			}
		}
		eq(list(RunQuery{}), ids)
		eq(list(RunQuery{Limit: 2}), ids)
		eq(list(RunQuery{Workflow: "b"}), []string{ids[1], ids[3]})
		eq(list(RunQuery{State: RunCancelled}), ids[:1])
		eq(list(RunQuery{State: RunRunning, Limit: 1}), ids[1:])
		eq(list(RunQuery{From: time.Now().Add(time.Hour)}), nil)
		eq(list(RunQuery{To: time.Now().Add(-time.Hour)}), nil)
		if _, err := e.ListRuns(ctx, RunQuery{Cursor: "x"}); !errors.Is(err, ErrBadCursor) {
			t.Fatalf("bad cursor: %v", err)
		}
	})
}

func TestStoreIRAndClaims(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		e := openEngine(t, b, Options{})
		w := build(t, wfSpec{name: "a", nodes: []*nodeSpec{task("x", "noop")}})
		// A tagless deployment (wfc serve's) stores the IR under its hash
		// only: StoredIR has it, no tag names it.
		h, err := e.StoreIR(ctx, w)
		if err != nil || !IsIRHash(h) {
			t.Fatalf("store: %q %v", h, err)
		}
		if got, err := e.StoredIR(ctx, h); err != nil || got.Name != "a" {
			t.Fatalf("stored IR: %v %v", got, err)
		}
		if again, err := e.StoreIR(ctx, w); err != nil || again != h {
			t.Fatalf("stored again: %s %v", again, err)
		}
		if tags, err := e.Tags(ctx); err != nil || len(tags) != 0 {
			t.Fatalf("tags: %v %v", tags, err)
		}
		if _, err := e.StoreIR(ctx, &ir.Workflow{}); err == nil {
			t.Fatal("an invalid IR was stored")
		}
		run, err := e.Submit(ctx, w, nil)
		if err != nil {
			t.Fatal(err)
		}
		first, err := e.ClaimOnce(ctx, run, "t")
		second, err2 := e.ClaimOnce(ctx, run, "t")
		if err != nil || err2 != nil || !first || second {
			t.Fatalf("claims: %v %v %v %v", first, second, err, err2)
		}
		if err := e.ReleaseOnce(ctx, run, "t"); err != nil {
			t.Fatal(err)
		}
		if again, _ := e.ClaimOnce(ctx, run, "t"); !again {
			t.Fatal("a released claim cannot be claimed again")
		}
		evs, err := e.EventsAfter(ctx, run, "", 10, 0)
		if err != nil || len(evs) == 0 {
			t.Fatalf("events: %v %v", evs, err)
		}
		rest, err := e.EventsAfter(ctx, run, evs[0].ID, 10, 0)
		if err != nil || len(rest) != len(evs)-1 {
			t.Fatalf("events after %s: %d of %d, %v", evs[0].ID, len(rest), len(evs), err)
		}
		if err := e.Ready(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

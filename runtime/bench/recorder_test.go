package bench

import (
	"slices"
	"testing"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/runtime/handlers"
)

// TestRecorderItems: the recorder keeps a for_each node's items under
// node#item and the node's end as its last item's, so that an item's hop
// counts from its node's predecessor and the successor's from the last
// item; a run's first start is its earliest handler's.
func TestRecorderItems(t *testing.T) {
	w := &ir.Workflow{Edges: []ir.Edge{{From: "a", To: "f"}, {From: "f", To: "z"}}}
	rec := newRecorder("z", 1)
	const ms = int64(1_000_000)
	t0 := int64(1_700_000_000_000_000_000)
	at := func(v int64) int64 { return t0 + v*ms }
	rec.record(handlers.Request{RunID: "r", Node: "a", Item: -1}, at(1), at(2))
	rec.record(handlers.Request{RunID: "r", Node: "f", Item: 1}, at(3), at(7))
	rec.record(handlers.Request{RunID: "r", Node: "f", Item: 0}, at(4), at(5))
	rec.record(handlers.Request{RunID: "r", Node: "z", Item: -1}, at(9), at(10))
	// f#1 and f#0 after a (ended at 2): 1 and 2 ms; z after f's last item
	// (ended at 7): 2 ms. f itself ran no handler: no hop of its own.
	got := rec.hops(w)
	slices.Sort(got)
	if want := []float64{1, 2, 2}; !slices.Equal(got, want) {
		t.Errorf("hops %v, want %v", got, want)
	}
	if got := rec.firstStart("r"); got != at(1) {
		t.Errorf("first start %d ms, want 1", (got-t0)/ms)
	}
	if got := rec.firstStart("other"); got != 0 {
		t.Errorf("a run never recorded starts at %d", got)
	}
	// Tokens: a from its start (1 ms: its submission is not known),
	// f#1 2..7 and f#0 2..5, z 7..10: 1 + 5 + 3 + 3 = 12 ms over 12 ms.
	if got := rec.tokens(w, 0.012); got < 0.999 || got > 1.001 {
		t.Errorf("tokens %.4f, want 1", got)
	}
}

package ir

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// largeWorkflow is a chain of n nodes with a side node every third node
// and a loop every tenth.
func largeWorkflow(n int) *Workflow {
	w := wf("large", nil, nil)
	for i := range n {
		id := fmt.Sprintf("n%d", i)
		node := task(id)
		if i > 0 {
			w.Edges = append(w.Edges, after(fmt.Sprintf("n%d", i-1), id))
		}
		if i%3 == 2 {
			w.Edges = append(w.Edges, after(fmt.Sprintf("n%d", i-2), id))
		}
		if i%10 == 9 {
			back := fmt.Sprintf("n%d", i-5)
			node.Loop = &Loop{While: cel("output.again"), Max: 2, BackTo: back}
			w.Edges = append(w.Edges, edge(id, back, EdgeLoop))
		}
		w.Nodes = append(w.Nodes, node)
	}
	return w
}

// A loop at the end of a long chain back to its start: loop bodies are
// quadratic in size here, but Validate stays fast.
func TestLargeLoops(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("large")
	}
	w := wf("loops", nil, nil)
	const n = MaxNodes
	for i := range n {
		id := fmt.Sprintf("n%d", i)
		node := task(id)
		if i > 0 {
			node.Loop = &Loop{While: cel("false"), Max: 2, BackTo: "n0"}
			w.Edges = append(w.Edges, after(fmt.Sprintf("n%d", i-1), id), edge(id, "n0", EdgeLoop))
		}
		w.Nodes = append(w.Nodes, node)
	}
	// Bounded by the CPU time it uses (about 0.7 s), not the wall-clock
	// time: on a loaded machine the wall-clock bound failed.
	var ps []Problem
	cpu, ok := threadCPU(func() { ps = Validate(w) })
	if len(ps) > 0 {
		t.Fatal(Problems(ps))
	}
	if ok && cpu > 10*time.Second {
		t.Errorf("Validate took %v of CPU time", cpu)
	}
	t.Logf("Validate: %v of CPU time", cpu)
}

func TestLarge(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("large")
	}
	w := largeWorkflow(MaxNodes)
	step := func(name string, f func() error) {
		t.Helper()
		start := time.Now()
		if err := f(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		t.Logf("%s: %v", name, time.Since(start))
	}
	step("Analyze", func() error { return Analyze(w) })
	step("Validate", func() error {
		if ps := Validate(w); len(ps) > 0 {
			return Problems(ps)
		}
		return nil
	})
	var b, y []byte
	step("Marshal", func() (err error) { b, err = Marshal(w); return err })
	t.Logf("%d bytes", len(b))
	step("Decode", func() error { _, err := Decode(b); return err })
	step("MarshalYAML", func() (err error) { y, err = MarshalYAML(w); return err })
	step("DecodeYAML", func() error { _, err := DecodeYAML(y); return err })
	step("Hash", func() error { _, err := Hash(w); return err })
	if got, want := w.Nodes[19].LoopBody, ids("n14 n15 n16 n17 n18 n19"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("loop body of n19 = %v, want %v", got, want)
	}
}

// TestLargeChildren: a root of 9,000 flow nodes, each running its own
// embedded child (about as many as fit in MaxSize), decodes, analyzes and validates in bounded time: every
// child is checked once, and the nesting walk passes over the flow nodes
// at most MaxFlowDepth+1 times.
func TestLargeChildren(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("large")
	}
	w := wf("root", nil, nil)
	w.Handlers = []Handler{}
	for i := range 9000 {
		c := wf(fmt.Sprintf("c%d", i), []Node{task("a")}, nil)
		h := mustHash(c)
		w.Children = append(w.Children, Child{Hash: h, Workflow: *c})
		w.Nodes = append(w.Nodes, Node{ID: fmt.Sprintf("f%d", i), Type: NodeFlow, Join: JoinAll, Flow: &Flow{Uses: "c.wf", Hash: h}})
	}
	slices.SortFunc(w.Children, func(a, b Child) int { return strings.Compare(a.Hash, b.Hash) })
	b, err := Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d bytes", len(b))
	start := time.Now()
	d, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Decode: %v", time.Since(start))
	start = time.Now()
	if ps := Validate(d); len(ps) > 0 {
		t.Fatal(Problems(ps[:min(len(ps), 5)]))
	}
	t.Logf("Validate: %v", time.Since(start))
	if d := time.Since(start); d > 30*time.Second { // a hang guard, not a benchmark
		t.Errorf("Validate took %v", d)
	}
}

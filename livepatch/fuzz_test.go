package livepatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wfc-lang/wfc/compiler"
	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/lang/diag"
	"github.com/wfc-lang/wfc/runtime"
	"github.com/wfc-lang/wfc/runtime/handlers"
)

// gate is a handler that blocks until the test opens it, so that a run is
// mid-flight — some nodes done, some running, some not started — and
// quiet (nothing changes its state) while patches are tried on it.
type gate struct {
	mu   sync.Mutex
	open chan struct{}
}

func (g *gate) reset() {
	g.mu.Lock()
	g.open = make(chan struct{})
	g.mu.Unlock()
}

func (g *gate) release() {
	g.mu.Lock()
	close(g.open)
	g.mu.Unlock()
}

func (g *gate) handle(ctx context.Context, req handlers.Request) (json.RawMessage, error) {
	g.mu.Lock()
	open := g.open
	g.mu.Unlock()
	select {
	case <-open:
		return json.RawMessage(`{"v":1}`), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// fuzzer runs random patches against random runs on one engine.
type fuzzer struct {
	t    *testing.T
	ctx  context.Context
	eng  *runtime.Engine
	gate *gate
}

func newFuzzer(t *testing.T, url string) *fuzzer {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	t.Cleanup(cancel)
	eng, err := runtime.Open(ctx, runtime.Options{RedisURL: url})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	g := &gate{}
	g.reset()
	reg := handlers.NewRegistry(handlers.Options{})
	reg.RegisterFunc("gate", g.handle)
	// Enough slots for every gate node a run and its patches may hold.
	eng.StartWorkers(ctx, 64, runtime.WorkerOptions{Handlers: reg, Block: 50 * time.Millisecond})
	return &fuzzer{t: t, ctx: ctx, eng: eng, gate: g}
}

// randomSource is a small random DAG: n0 .. nk, each after a random
// subset of the earlier ones, running echo (at once) or gate (blocks).
func randomSource(r *rand.Rand) string {
	var b strings.Builder
	b.WriteString("workflow fz {\n  handler \"gate\" {\n    config { }\n    output { v: int }\n  }\n")
	n := 2 + r.IntN(4)
	for i := range n {
		var after []string
		for j := range i {
			if r.IntN(3) == 0 {
				after = append(after, fmt.Sprintf("n%d", j))
			}
		}
		fmt.Fprintf(&b, "  task n%d", i)
		if len(after) > 0 {
			b.WriteString(" after " + strings.Join(after, ", "))
		}
		if r.IntN(3) == 0 {
			b.WriteString(" {\n    run \"gate\"\n  }\n")
		} else {
			fmt.Fprintf(&b, " {\n    run \"echo\"\n    with { v = %d }\n  }\n", r.IntN(100))
		}
	}
	// hold keeps the run running while patches are tried.
	b.WriteString("  task hold {\n    run \"gate\"\n  }\n}\n")
	return b.String()
}

// randomPatch is an RFC 6902 document for w: structurally plausible
// operations (add a node behind another, add or remove an edge, remove a
// node, replace a field, test operations that hold or do not) mixed with
// random operations on random paths.
// seq numbers the nodes it adds.
func randomPatch(r *rand.Rand, w *ir.Workflow, seq int) []byte {
	var ops []map[string]any
	nodeID := func() string {
		if len(w.Nodes) == 0 || r.IntN(8) == 0 {
			return "ghost"
		}
		return w.Nodes[r.IntN(len(w.Nodes))].ID
	}
	idx := func(n int) string {
		switch r.IntN(10) {
		case 0:
			return "-"
		case 1:
			return "-1"
		case 2:
			return fmt.Sprint(n + r.IntN(3))
		}
		if n == 0 {
			return "0"
		}
		return fmt.Sprint(r.IntN(n))
	}
	values := []any{nil, 1, -3, "x", "echo", "gate", true, map[string]any{}, []any{},
		map[string]any{"cel": "1 + 1"}, map[string]any{"cel": "true"}, map[string]any{"const": 7}}
	// Half the patches are only plausible operations, so that some apply.
	clean := r.IntN(2) == 0
	for range 1 + r.IntN(4) {
		c := r.IntN(9)
		if clean {
			c = []int{0, 0, 0, 2, 3, 4}[r.IntN(6)]
		}
		switch c {
		case 0, 1: // a new node behind an existing one (or a new entry)
			id := fmt.Sprintf("a%d", seq)
			seq++
			h := []string{"echo", "gate", "noop", "nosuch"}[r.IntN(4)]
			if clean {
				h = "gate"
			}
			node := map[string]any{"id": id, "type": "task", "handler": h, "join": "all"}
			if !clean && r.IntN(2) == 0 {
				node["with"] = []any{map[string]any{"name": "v", "value": map[string]any{"const": r.IntN(9)}}}
			}
			ops = append(ops, map[string]any{"op": "add", "path": "/nodes/-", "value": node})
			if r.IntN(4) != 0 {
				kind := []string{"after", "after", "error", "bogus"}[r.IntN(4)]
				if clean {
					kind = "after"
				}
				ops = append(ops, map[string]any{"op": "add", "path": "/edges/-", "value": map[string]any{"from": nodeID(), "to": id, "kind": kind}})
			}
		case 2: // an edge between existing nodes (may make a cycle)
			ops = append(ops, map[string]any{"op": "add", "path": "/edges/-", "value": map[string]any{"from": nodeID(), "to": nodeID(), "kind": "after"}})
		case 3: // remove an edge, guarded by a test of it
			if len(w.Edges) > 0 {
				i := r.IntN(len(w.Edges))
				p := fmt.Sprintf("/edges/%d", i)
				ops = append(ops, map[string]any{"op": "test", "path": p, "value": w.Edges[i]}, map[string]any{"op": "remove", "path": p})
			}
		case 4: // remove a node with its edges (descending edge indices)
			if len(w.Nodes) > 0 {
				i := r.IntN(len(w.Nodes))
				id := w.Nodes[i].ID
				for k := len(w.Edges) - 1; k >= 0; k-- {
					if w.Edges[k].From == id || w.Edges[k].To == id {
						ops = append(ops, map[string]any{"op": "remove", "path": fmt.Sprintf("/edges/%d", k)})
					}
				}
				p := fmt.Sprintf("/nodes/%d", i)
				ops = append(ops, map[string]any{"op": "test", "path": p + "/id", "value": id}, map[string]any{"op": "remove", "path": p})
			}
		case 5: // replace a field of a node
			if len(w.Nodes) > 0 {
				p := fmt.Sprintf("/nodes/%d/%s", r.IntN(len(w.Nodes)), []string{"handler", "with", "when", "id", "join", "queue"}[r.IntN(6)])
				ops = append(ops, map[string]any{"op": []string{"replace", "add"}[r.IntN(2)], "path": p, "value": values[r.IntN(len(values))]})
			}
		case 6: // a test that may or may not hold
			if len(w.Nodes) > 0 {
				ops = append(ops, map[string]any{"op": "test", "path": fmt.Sprintf("/nodes/%d/id", r.IntN(len(w.Nodes))), "value": nodeID()})
			}
		default: // anything on any path
			op := []string{"add", "remove", "replace", "move", "copy", "test", "frob"}[r.IntN(7)]
			path := []string{"/nodes/" + idx(len(w.Nodes)), "/edges/" + idx(len(w.Edges)), "/handlers/" + idx(len(w.Handlers)),
				"/name", "/inputs", "/settings", "/outputs/-", "/bogus", "", "/nodes/" + idx(len(w.Nodes)) + "/with/0/value",
				"/edges/" + idx(len(w.Edges)) + "/to"}[r.IntN(11)]
			o := map[string]any{"op": op, "path": path}
			switch op {
			case "move", "copy":
				o["from"] = "/nodes/" + idx(len(w.Nodes))
			case "remove":
			default:
				o["value"] = values[r.IntN(len(values))]
			}
			ops = append(ops, o)
		}
	}
	data, err := json.Marshal(ops)
	if err != nil {
		panic(err)
	}
	return data
}

// quiet waits until the run is at rest: no node queued, and its state the
// same twice in a row (gate nodes block, everything else has run).
func (f *fuzzer) quiet(run string) string {
	f.t.Helper()
	prev := ""
	for i := 0; i < 400; i++ {
		st, err := f.eng.Status(f.ctx, run)
		if err != nil {
			f.t.Fatal(err)
		}
		busy := false
		for _, ns := range st.Nodes {
			if ns.State == runtime.NodeQueued {
				busy = true
			}
		}
		s := f.stateSnapshot(run)
		if !busy && s == prev {
			return s
		}
		prev = s
		time.Sleep(25 * time.Millisecond)
	}
	f.t.Fatalf("run %s never came to rest: %s", run, prev)
	return ""
}

// stateSnapshot is the run's state hash fields and event count, as the
// runtime's own patch tests compare them (read through the public API:
// Status and Events), plus its workflow's hash and version.
func (f *fuzzer) stateSnapshot(run string) string {
	f.t.Helper()
	st, err := f.eng.Status(f.ctx, run)
	if err != nil {
		f.t.Fatal(err)
	}
	evs, err := f.eng.Events(f.ctx, run)
	if err != nil {
		f.t.Fatal(err)
	}
	rw, err := f.eng.RunWorkflow(f.ctx, run)
	if err != nil {
		f.t.Fatal(err)
	}
	st.Expires = time.Time{} // computed from the keys' TTL when read
	data, _ := json.Marshal(st)
	return fmt.Sprintf("%s v%d events=%d %s", rw.Hash, rw.Version, len(evs), data)
}

// one builds a workflow from seed, runs it to rest, applies patches
// random patches and checks each outcome; then lets the run finish.
func (f *fuzzer) one(seed uint64, patches int) (accepted, refused int) {
	t := f.t
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	src := randomSource(r)
	res := compiler.Compile("fz.wf", []byte(src), compiler.Config{})
	if res.Diags.HasErrors() {
		t.Fatalf("seed %d: compile %s: %v", seed, src, res.Diags)
	}
	f.gate.reset()
	run, err := f.eng.Submit(f.ctx, res.IR, nil)
	if err != nil {
		t.Fatal(err)
	}
	released := false
	defer func() {
		if !released {
			f.gate.release()
		}
	}()
	for i := range patches {
		f.quiet(run)
		before := f.stateSnapshot(run)
		cur, err := f.eng.RunWorkflow(f.ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		patch := randomPatch(r, cur.Workflow, i*10)
		out, err := func() (out *Result, err error) {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("seed %d: patch %s panicked: %v", seed, patch, p)
				}
			}()
			return Apply(f.ctx, f.eng, Request{Run: run, Patch: patch, By: "fuzz"})
		}()
		if err != nil {
			var pe *ir.PatchError
			var ce *CheckError
			var re *runtime.PatchRefusedError
			if !errors.As(err, &pe) && !errors.As(err, &ce) && !errors.As(err, &re) {
				t.Fatalf("seed %d: patch %s: unexpected error %T: %v", seed, patch, err, err)
			}
			if after := f.stateSnapshot(run); after != before {
				t.Fatalf("seed %d: refused patch %s (%v) changed the run:\n%s\n%s", seed, patch, err, before, after)
			}
			refused++
			continue
		}
		accepted++
		if out.Unchanged {
			continue
		}
		now, err := f.eng.RunWorkflow(f.ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		if now.Hash != out.NewHash || now.Version != cur.Version+1 {
			t.Fatalf("seed %d: patch %s: run at %s v%d, result %s v%d", seed, patch, now.Hash, now.Version, out.NewHash, out.Version)
		}
		if err := ir.Validate(now.Workflow); err != nil {
			t.Fatalf("seed %d: accepted patch %s left an invalid IR: %v", seed, patch, err)
		}
		for _, d := range compiler.CheckIR(now.Workflow) {
			if d.Severity == diag.Error {
				t.Fatalf("seed %d: accepted patch %s left an IR the compiler refuses: %s", seed, patch, d.Message)
			}
		}
	}
	f.gate.release()
	released = true
	ctx, cancel := context.WithTimeout(f.ctx, 20*time.Second)
	defer cancel()
	st, err := f.eng.Wait(ctx, run)
	if err != nil {
		cur, _ := f.eng.Status(f.ctx, run)
		t.Fatalf("seed %d: the run never finished: %v\n%+v\nsource:\n%s", seed, err, cur, src)
	}
	if st.State != runtime.RunCompleted && st.State != runtime.RunFailed {
		t.Fatalf("seed %d: run ended %s", seed, st.State)
	}
	evs, err := f.eng.Events(f.ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := runtime.Replay(run, evs)
	if err != nil {
		t.Fatal(err)
	}
	if d := runtime.Compare(st, rep); len(d) > 0 {
		t.Fatalf("seed %d: replay differs from the live state:\n\t%s", seed, strings.Join(d, "\n\t"))
	}
	if st.State == runtime.RunCompleted {
		for x, ns := range st.Nodes {
			switch ns.State {
			case runtime.NodeCompleted, runtime.NodeSkipped:
			default:
				t.Fatalf("seed %d: completed run has node %s %s", seed, x, ns.State)
			}
		}
	}
	return accepted, refused
}

// TestApplyRandom: random patches against random mid-flight runs, a fixed
// set of seeds on both backends (a few seconds each).
func TestApplyRandom(t *testing.T) {
	forBackends(t, func(t *testing.T, url string) {
		f := newFuzzer(t, url)
		acc, ref := 0, 0
		for seed := range uint64(12) {
			a, r := f.one(seed, 8)
			acc, ref = acc+a, ref+r
		}
		t.Logf("%d patches accepted, %d refused", acc, ref)
		if acc == 0 || ref == 0 {
			t.Errorf("the random patches should be both accepted and refused: %d, %d", acc, ref)
		}
	})
}

// FuzzApply: go test ./livepatch -fuzz FuzzApply -run '^$' (on the
// embedded server). Each input is a seed for the workflow and patches.
func FuzzApply(f *testing.F) {
	for _, s := range []uint64{1, 7, 42} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, seed uint64) {
		newFuzzer(t, "").one(seed, 4)
	})
}

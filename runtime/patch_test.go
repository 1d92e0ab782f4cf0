package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wfc-lang/wfc/ir"
)

// patchRun applies an RFC 6902 patch to the run's current workflow, as
// the CLI does (without the compiler's expression typing, which runtime
// may not import).
func patchRun(v *env, run, patch string, dry bool) (*PatchResult, error) {
	rw, err := v.e.RunWorkflow(v.ctx, run)
	if err != nil {
		return nil, err
	}
	nw, err := ir.ApplyPatch(rw.Workflow, []byte(patch))
	if err != nil {
		return nil, err
	}
	return v.e.Patch(v.ctx, PatchRequest{Run: run, Base: rw.Hash, New: nw, Patch: []byte(patch), By: "test", DryRun: dry})
}

func addNode(id, handler string, after ...string) string {
	ops := []string{fmt.Sprintf(`{"op":"add","path":"/nodes/-","value":{"id":%q,"type":"task","handler":%q,"join":"all"}}`, id, handler)}
	for _, a := range after {
		ops = append(ops, fmt.Sprintf(`{"op":"add","path":"/edges/-","value":{"from":%q,"to":%q,"kind":"after"}}`, a, id))
	}
	return "[" + strings.Join(ops, ",") + "]"
}

// stateOf is everything the run's keys hold but its event log's entries,
// plus the log's length: a refused patch must leave it equal.
func runSnapshot(t *testing.T, v *env, run string) string {
	t.Helper()
	ks := v.e.st.ks
	h, err := v.e.st.rdb.HGetAll(v.ctx, ks.state(run)).Result()
	if err != nil {
		t.Fatal(err)
	}
	n, err := v.e.st.rdb.XLen(v.ctx, ks.events(run)).Result()
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, h[k])
	}
	fmt.Fprintf(&b, "events=%d\n", n)
	return b.String()
}

func waitNode(t *testing.T, v *env, run, x, state string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		st, err := v.e.Status(v.ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		if nodeState(st, x) == state {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("node %s of run %s never %s", x, run, state)
}

// TestPatchAddNode: the seed's example. A node added behind a completed
// node runs at once; one added behind a running node runs when it
// completes; both are in the replayed log.
func TestPatchAddNode(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		w := build(t, wfSpec{nodes: []*nodeSpec{task("process_data", "count"), task("slow", "block", after("process_data"))}})
		v.worker()
		run := v.submit(w, nil)
		v.waitStarted()
		res, err := patchRun(v, run, addNode("send_email", "count", "process_data"), false)
		if err != nil {
			t.Fatal(err)
		}
		if res.Version != 2 || !slices.Equal(res.Added, []string{"send_email"}) || !slices.Equal(res.Delivered, []string{"send_email"}) {
			t.Errorf("result = %+v", res)
		}
		waitNode(t, v, run, "send_email", NodeCompleted)
		res, err = patchRun(v, run, addNode("after_slow", "count", "slow"), false)
		if err != nil {
			t.Fatal(err)
		}
		if res.Version != 3 || len(res.Delivered) != 0 || !slices.Contains(res.Pending, "after_slow") || !slices.Contains(res.Pending, "slow") {
			t.Errorf("result = %+v", res)
		}
		close(v.unblock)
		st := v.wait(run)
		if st.State != RunCompleted || nodeState(st, "send_email") != NodeCompleted || nodeState(st, "after_slow") != NodeCompleted {
			t.Fatalf("status: %s", dump(st))
		}
		if st.IR != res.NewHash {
			t.Errorf("status IR %s, want %s", st.IR, res.NewHash)
		}
		evs, _ := v.e.Events(v.ctx, run)
		var vers []string
		for _, ev := range evs {
			if ev.Type == "patch.applied" {
				vers = append(vers, ev.Fields["version"]+" by "+ev.Fields["by"])
			}
		}
		if !slices.Equal(vers, []string{"2 by test", "3 by test"}) {
			t.Errorf("patch events %v", vers)
		}
	})
}

// TestPatchJoinWaits: an edge added in front of a join that has not fired
// makes it wait for the new source too.
func TestPatchJoinWaits(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		w := build(t, wfSpec{nodes: []*nodeSpec{task("a", "count"), task("b", "block", after("a")), task("j", "count", after("b"))}})
		v.worker()
		run := v.submit(w, nil)
		v.waitStarted()
		// n runs behind a (completed) and blocks too; j now joins b and n.
		patch := `[{"op":"add","path":"/nodes/-","value":{"id":"n","type":"task","handler":"block","join":"all"}},
			{"op":"add","path":"/edges/-","value":{"from":"a","to":"n","kind":"after"}},
			{"op":"add","path":"/edges/-","value":{"from":"n","to":"j","kind":"after"}}]`
		res, err := patchRun(v, run, patch, false)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(res.NewJoins, "j") {
			t.Errorf("new joins %v, want j", res.NewJoins)
		}
		v.waitStarted()
		close(v.unblock)
		st := v.wait(run)
		if st.State != RunCompleted || nodeState(st, "j") != NodeCompleted {
			t.Fatalf("status: %s", dump(st))
		}
		// j was queued after both b and n completed.
		evs, _ := v.e.Events(v.ctx, run)
		pos := map[string]int{}
		for i, ev := range evs {
			if ev.Type == "node.completed" {
				pos["done:"+ev.Fields["x"]] = i
			}
			for _, q := range ev.Queued() {
				pos["queued:"+q] = i
			}
		}
		if pos["queued:j"] < pos["done:b"] || pos["queued:j"] < pos["done:n"] {
			t.Errorf("j queued at event %d, b done at %d, n done at %d", pos["queued:j"], pos["done:b"], pos["done:n"])
		}
	})
}

// TestPatchRefused: every unsafe patch is refused with the reason, and the
// run's state and log are untouched.
func TestPatchRefused(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		w := build(t, wfSpec{nodes: []*nodeSpec{
			task("a", "count"), task("x", "count"), task("z", "count"),
			task("j", "block", after("a", "x")),
			task("later", "count", after("j")),
		}})
		v.worker()
		run := v.submit(w, nil)
		v.waitStarted()
		waitNode(t, v, run, "z", NodeCompleted)
		// j's handler blocks; once it is marked running (RunningAfter) the
		// run stays still until the test unblocks it.
		waitNode(t, v, run, "j", NodeRunning)
		cases := []struct{ name, patch, want string }{
			{"remove completed node", `[{"op":"test","path":"/nodes/2/id","value":"z"},{"op":"remove","path":"/nodes/2"}]`, "node z cannot be removed: it has started"},
			{"edge from finished node into fired join", `[{"op":"add","path":"/edges/-","value":{"from":"z","to":"j","kind":"after"}}]`, "node j cannot be re-wired in front"},
			{"change running node", `[{"op":"test","path":"/nodes/3/id","value":"j"},{"op":"add","path":"/nodes/3/timeout_ms","value":5000}]`, "node j cannot be changed: it has started"},
			{"remove sent edge", `[{"op":"test","path":"/edges/0","value":{"from":"a","to":"j","kind":"after"}},{"op":"remove","path":"/edges/0"}]`, "edge a -> j (after) cannot be removed"},
			{"inputs", `[{"op":"add","path":"/inputs/-","value":{"name":"extra","type":{"kind":"string"},"required":true}}]`, "cannot change a running run's inputs"},
		}
		for _, c := range cases {
			before := runSnapshot(t, v, run)
			_, err := patchRun(v, run, c.patch, false)
			var pr *PatchRefusedError
			if !errors.As(err, &pr) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: err = %v, want refusal %q", c.name, err, c.want)
			}
			if after := runSnapshot(t, v, run); after != before {
				t.Errorf("%s: refused patch changed the run:\n%s\nthen\n%s", c.name, before, after)
			}
		}
		// A dry run changes nothing either, and says what would happen.
		before := runSnapshot(t, v, run)
		res, err := patchRun(v, run, addNode("more", "count", "later"), true)
		if err != nil {
			t.Fatal(err)
		}
		if !res.DryRun || res.Version != 1 || !slices.Contains(res.Pending, "more") || !slices.Contains(res.NewTerminals, "more") {
			t.Errorf("dry run: %+v", res)
		}
		if after := runSnapshot(t, v, run); after != before {
			t.Errorf("dry run changed the run")
		}
		close(v.unblock)
		st := v.wait(run)
		if st.State != RunCompleted {
			t.Fatalf("status: %s", dump(st))
		}
		// An ended run takes no patch.
		if _, err := patchRun(v, run, addNode("more", "count", "later"), false); err == nil || !strings.Contains(err.Error(), "only a running run can be patched") {
			t.Errorf("patch of a completed run: %v", err)
		}
	})
}

// TestPatchConcurrent: 50 patches at once on one run serialise: every one
// applies exactly once (retrying on a conflict), versions 2..51 in log
// order, each patch's base the previous one's result.
func TestPatchConcurrent(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		w := build(t, wfSpec{nodes: []*nodeSpec{task("a", "count"), task("b", "block", after("a"))}})
		v.worker()
		run := v.submit(w, nil)
		v.waitStarted()
		const n = 50
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					_, err := patchRun(v, run, addNode(fmt.Sprintf("p%d", i), "count", "b"), false)
					if errors.Is(err, ErrPatchConflict) {
						continue
					}
					errs <- err
					return
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		evs, _ := v.e.Events(v.ctx, run)
		prev := ""
		ver := 1
		for _, ev := range evs {
			if ev.Type == "run.started" {
				prev = ev.Fields["ir"]
			}
			if ev.Type != "patch.applied" {
				continue
			}
			ver++
			if ev.Fields["version"] != fmt.Sprint(ver) || ev.Fields["old"] != prev {
				t.Fatalf("patch event %v after version %d from %s", ev.Fields["version"], ver-1, prev)
			}
			prev = ev.Fields["new"]
		}
		if ver != n+1 {
			t.Fatalf("%d patches applied, want %d", ver-1, n)
		}
		rw, err := v.e.RunWorkflow(v.ctx, run)
		if err != nil || rw.Version != n+1 || rw.Hash != prev || len(rw.Workflow.Nodes) != n+2 {
			t.Fatalf("run workflow: %v %+v", err, rw)
		}
		close(v.unblock)
		st := v.wait(run)
		for i := range n {
			if s := nodeState(st, fmt.Sprintf("p%d", i)); s != NodeCompleted {
				t.Errorf("p%d is %s", i, s)
			}
		}
	})
}

// TestPatchRacesCompletions: a patch adding a node behind the last node
// of a chain, racing the chain's completions on live workers, in a loop.
// Either it applies and the node runs, or the run ended first and it is
// refused; the replayed log always equals the live state.
func TestPatchRacesCompletions(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		w := build(t, wfSpec{nodes: []*nodeSpec{task("a", "count"), task("b", "count", after("a")), task("c", "count", after("b"))}})
		v.worker()
		applied, refused := 0, 0
		// At least 30 races, and more until one patch applied (on a busy
		// machine every run of 30 could end before its patch: 1 to 14
		// applied of 30 is the usual spread).
		for i := 0; i < 30 || applied == 0 && i < 300; i++ {
			run := v.submit(w, nil)
			if i%3 == 1 {
				time.Sleep(time.Duration(i%7) * time.Millisecond)
			}
			res, err := patchRun(v, run, addNode("d", "count", "c"), false)
			var pr *PatchRefusedError
			switch {
			case err == nil:
				applied++
			case errors.As(err, &pr):
				refused++
			default:
				t.Fatal(err)
			}
			st := v.wait(run)
			if st.State != RunCompleted {
				t.Fatalf("run %d: %s", i, dump(st))
			}
			if ran := nodeState(st, "d") == NodeCompleted; ran != (err == nil) {
				t.Fatalf("run %d: patch err %v (%+v) but d is %q", i, err, res, nodeState(st, "d"))
			}
		}
		t.Logf("%d applied, %d refused", applied, refused)
		if applied == 0 {
			t.Errorf("no patch applied")
		}
	})
}

// TestPatchGraphGuard: a script called with the graph a run had before a
// patch is refused before any write (lib.lua's header), so a worker that
// read the run earlier cannot route on the old graph.
func TestPatchGraphGuard(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		w := build(t, wfSpec{nodes: []*nodeSpec{task("a", "count"), task("b", "block", after("a"))}})
		v.worker()
		run := v.submit(w, nil)
		v.waitStarted()
		waitNode(t, v, run, "b", NodeRunning)
		m, err := v.e.st.meta(v.ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := patchRun(v, run, addNode("c", "count", "b"), false); err != nil {
			t.Fatal(err)
		}
		before := runSnapshot(t, v, run)
		_, err = v.e.st.call(context.Background(), "cancel", m.ref(), struct {
			base
			Reason string `json:"reason"`
		}{v.e.st.base(m.ref(), nil), "test"})
		if !errors.Is(err, errGraphChanged) {
			t.Fatalf("stale call: err = %v, want errGraphChanged", err)
		}
		if after := runSnapshot(t, v, run); after != before {
			t.Fatal("a refused stale call changed the run")
		}
		close(v.unblock)
		st := v.wait(run)
		if nodeState(st, "c") != NodeCompleted {
			t.Fatalf("status: %s", dump(st))
		}
	})
}

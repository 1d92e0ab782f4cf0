package runtime

import (
	"errors"
	"testing"
)

// TestVersions: a tag moves, a hash never changes, a run keeps the
// version it started with.
func TestVersions(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		w1 := build(t, wfSpec{name: "greet", nodes: []*nodeSpec{task("a", "count"), task("b", "block", after("a"))}})
		w2 := build(t, wfSpec{name: "greet", nodes: []*nodeSpec{task("a", "count"), task("b", "block", after("a")), task("c", "count", after("b"))}})
		if _, err := v.e.Versions(v.ctx, "greet"); !errors.Is(err, ErrUnknownTag) {
			t.Fatalf("unknown tag: %v", err)
		}
		v1, err := v.e.Deploy(v.ctx, w1, "greet", "ann")
		if err != nil || v1.Version != 1 || v1.By != "ann" {
			t.Fatalf("deploy 1: %+v %v", v1, err)
		}
		again, err := v.e.Deploy(v.ctx, w1, "greet", "bob")
		if err != nil || again.Version != 1 || again.Hash != v1.Hash {
			t.Fatalf("deploying the same IR again: %+v %v", again, err)
		}
		v.worker()
		run, rv, err := v.e.SubmitTag(v.ctx, "greet", nil)
		if err != nil || rv.Version != 1 {
			t.Fatalf("submit: %v %+v", err, rv)
		}
		v.waitStarted()
		v2, err := v.e.Deploy(v.ctx, w2, "greet", "bob")
		if err != nil || v2.Version != 2 || v2.Hash == v1.Hash {
			t.Fatalf("deploy 2: %+v %v", v2, err)
		}
		vs, err := v.e.Versions(v.ctx, "greet")
		if err != nil || len(vs) != 2 || vs[0].Hash != v1.Hash || vs[1].Hash != v2.Hash {
			t.Fatalf("versions: %+v %v", vs, err)
		}
		old, err := v.e.StoredIR(v.ctx, v1.Hash)
		if err != nil || len(old.Nodes) != 2 {
			t.Fatalf("stored IR of v1: %v", err)
		}
		runs, err := v.e.TagRuns(v.ctx, "greet")
		if err != nil || len(runs) != 1 || runs[0].RunID != run {
			t.Fatalf("tag runs: %v %v", runs, err)
		}
		close(v.unblock)
		st := v.wait(run)
		if st.IR != v1.Hash || nodeState(st, "c") != "absent" {
			t.Fatalf("the run moved with its tag (v1 %s, v2 %s): %s", v1.Hash, v2.Hash, dump(st))
		}
		if _, err := v.e.Deploy(v.ctx, w1, "bad tag", ""); err == nil {
			t.Error("bad tag accepted")
		}
	})
}

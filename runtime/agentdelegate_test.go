package runtime

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/wfc-lang/wfc/runtime/agent/tools"
)

// A run an agent delegates is recorded pending before its submit, as a
// flow node's child is (agenttools.go): a worker that dies between the
// record and the submit leaves no child the run names (status hides the
// pending record), the run's end closes the record, and a submit that
// comes late — the run ended first — starts nothing. The delegation that
// goes through starts a child the run lists and whose end follows the
// run's. Each case fails without the pending record (the late submit
// starts a child of an ended run; status names a run that does not
// exist).
func TestAgentDelegateRecordedNotSubmitted(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) { testDelegateRecorded(t, b, Options{Shards: 4}) })
}

// On a Redis Cluster (6 shards over 3 masters): the record, the start and
// the close of a delegated run touch the parent's and the child's keys in
// one slot.
func TestAgentDelegateRecordedCluster(t *testing.T) {
	t.Parallel()
	testDelegateRecorded(t, clusterBackend, Options{Shards: 6})
}

func testDelegateRecorded(t *testing.T, b backend, o Options) {
	v := newEnv(t, b, o)
	ctx := context.Background()
	helper := build(t, wfSpec{name: "helper", nodes: []*nodeSpec{task("h", "block")}})
	if _, err := v.e.Deploy(ctx, helper, "helper", "test"); err != nil {
		t.Fatal(err)
	}
	wk := v.worker()
	parent := build(t, wfSpec{name: "parent", nodes: []*nodeSpec{task("p", "block")}})
	state := func(run string) map[string]string {
		h, err := v.e.st.rdb.HGetAll(ctx, v.e.st.ks.state(run)).Result()
		if err != nil {
			t.Fatal(err)
		}
		return h
	}

	// The worker "dies" after the record: only the script runs.
	run := v.submit(parent, nil)
	v.waitStarted()
	kid := runIDInShard(v.e.st.ks, v.e.st.ks.shard(run))
	if n, err := agentDelegateScript.Run(ctx, v.e.st.rdb, []string{v.e.st.ks.state(run)}, kid, "p").Int(); err != nil || n != 1 {
		t.Fatalf("record: %d %v", n, err)
	}
	if h := state(run); h["ch|"+kid] != "p" || h["cp|"+kid] == "" {
		t.Fatalf("record of %s: %v", kid, h)
	}
	st, err := v.e.Status(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	if _, listed := st.Children[kid]; listed {
		t.Errorf("status names the pending child %s: %v", kid, st.Children)
	}
	noDanglingChild(t, v.e, st)
	if err := v.e.Cancel(ctx, run); err != nil {
		t.Fatal(err)
	}
	if st := v.wait(run); st.State != RunCancelled {
		t.Fatalf("parent %s", st.State)
	}
	waitFor(t, "the record to close", func() bool { _, ok := state(run)["ch|"+kid]; return !ok })
	// The late submit of the dead worker's successor starts nothing.
	if _, _, err := v.e.SubmitTag(ctx, "helper", nil, WithRunID(kid), recordedBy(run)); !errors.Is(err, errChildUnrecorded) {
		t.Errorf("late submit: %v, want %v", err, errChildUnrecorded)
	}
	if _, err := v.e.Status(ctx, kid); !errors.Is(err, ErrUnknownRun) {
		t.Errorf("child %s exists after its parent ended: %v", kid, err)
	}
	// Delegating from an ended run is refused before anything is recorded.
	d := delegator{w: wk, run: run, node: "p", x: "p"}
	if _, err := d.Delegate(ctx, tools.DelegateRequest{Kind: "workflow", Target: "helper"}); err == nil || !strings.Contains(err.Error(), "no longer running") {
		t.Errorf("delegate from an ended run: %v", err)
	}

	// The delegation that goes through.
	run = v.submit(parent, nil)
	v.waitStarted()
	d = delegator{w: wk, run: run, node: "p", x: "p"}
	res, err := d.Delegate(ctx, tools.DelegateRequest{Kind: "workflow", Target: "helper"})
	if err != nil || res.Status != "started" {
		t.Fatalf("delegate: %+v %v", res, err)
	}
	if v.e.st.ks.shard(res.ID) != v.e.st.ks.shard(run) {
		t.Errorf("child %s is not in its parent's shard", res.ID)
	}
	v.waitStarted() // the child's h
	if h := state(run); h["ch|"+res.ID] != "p" || h["cp|"+res.ID] != "" {
		t.Errorf("record of the started child %s: %v", res.ID, h)
	}
	st, err = v.e.Status(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	if st.Children[res.ID] != "p" {
		t.Errorf("children %v: no %s", st.Children, res.ID)
	}
	if err := v.e.Cancel(ctx, run); err != nil {
		t.Fatal(err)
	}
	v.wait(run)
	if ks := v.wait(res.ID); ks.State != RunCancelled || !strings.Contains(ks.Error, "parent run "+run) {
		t.Errorf("delegated run %s (%s), want cancelled with its parent", ks.State, ks.Error)
	}
	waitNoPending(t, v.e)
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10 s for %s", what)
		}
	}
}

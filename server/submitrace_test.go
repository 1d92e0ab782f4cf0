package server

import (
	"context"
	"sync"
	"testing"

	"github.com/wfc-lang/wfc/compiler"
	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/runtime"
)

// retagAfterGet is the engine's store, except that the first Get of a tag
// deploys another version of it right after reading it: a re-tag racing
// a submit, landing between the read and the start of the run.
type retagAfterGet struct {
	EngineWorkflows
	next  *ir.Workflow
	once  sync.Once
	moved chan runtime.Version
}

func (s *retagAfterGet) Get(ctx context.Context, ref string) (*ir.Workflow, runtime.Version, error) {
	w, v, err := s.EngineWorkflows.Get(ctx, ref)
	if err == nil && v.Tag != "" {
		s.once.Do(func() {
			nv, derr := s.EngineWorkflows.Deploy(ctx, s.next, v.Tag, "racer")
			if derr != nil {
				panic(derr)
			}
			s.moved <- nv
		})
	}
	return w, v, err
}

func compileSource(t *testing.T, src string) *ir.Workflow {
	t.Helper()
	res := compiler.Compile("w.wf", []byte(src), compiler.Config{})
	if res.IR == nil {
		t.Fatalf("compile: %v", res.Diags)
	}
	return res.IR
}

// TestSubmitByTagRacingRetag: the tag moves (to a version whose input has
// another type) between the server reading it and starting the run; the
// run is of the version read, whose types the inputs were validated
// against, and is recorded under the tag.
func TestSubmitByTagRacingRetag(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v1 := compileSource(t, `workflow race {
  input { n: int }
  task a {
    run "cel"
    with { doubled = input.n * 2 }
  }
  output { doubled = a.output.doubled }
}
`)
		v2 := compileSource(t, `workflow race {
  input { n: string }
  task a {
    run "cel"
    with { doubled = input.n + input.n }
  }
  output { doubled = a.output.doubled }
}
`)
		store := &retagAfterGet{next: v2, moved: make(chan runtime.Version, 1)}
		e, url, prefix := openEngine(t, b, "", "")
		store.E = e
		ts := startServerOn(t, e, url, prefix, func(c *Config) { c.Workflows = store })
		c := ts.client(t, "")
		first, err := e.Deploy(context.Background(), v1, "race", "tester")
		if err != nil {
			t.Fatal(err)
		}
		r := c.do("POST", "/v1/runs", map[string]any{"workflow": "race", "inputs": map[string]any{"n": 21}}, nil)
		if r.status != 201 {
			t.Fatalf("submit: %d %s", r.status, r.body)
		}
		moved := <-store.moved
		if moved.Version != 2 || moved.Hash == first.Hash {
			t.Fatalf("the tag did not move: %+v", moved)
		}
		var sub submitResponse
		r.decode(t, &sub)
		if sub.IR != first.Hash {
			t.Fatalf("the response names IR %s, want the version read, %s", sub.IR, first.Hash)
		}
		st := c.waitRun(sub.RunID)
		if st.State != runtime.RunCompleted || st.IR != first.Hash || string(st.Result) != `{"doubled":42}` {
			t.Fatalf("run: %s IR %s result %s error %s (want completed, IR %s, {\"doubled\":42})", st.State, st.IR, st.Result, st.Error, first.Hash)
		}
		runs, err := e.TagRuns(context.Background(), "race")
		if err != nil || len(runs) != 1 || runs[0].RunID != sub.RunID {
			t.Fatalf("tag runs: %v %+v", err, runs)
		}
		// The next submit by tag reads the moved tag: version 2's types.
		c.do("POST", "/v1/runs", map[string]any{"workflow": "race", "inputs": map[string]any{"n": 21}}, nil).problem(t, 422)
	})
}

package server

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/wfc-lang/wfc/runtime"
)

// patchBase runs process_data, then publish sleeps: a run stays running
// long enough to be patched. patchNext adds send_email behind
// process_data.
const patchBase = `workflow pipeline {
  task process_data { run "echo"  with { rows = 3 } }
  task publish after process_data { run "sleep"  with { duration = "3s" } }
}
`

const patchNext = `workflow pipeline {
  task process_data { run "echo"  with { rows = 3 } }
  task publish after process_data { run "sleep"  with { duration = "3s" } }
  task send_email after process_data { run "echo"  with { rows = process_data.output.rows } }
}
`

type patchResult struct {
	runtime.PatchResult
	Patch     json.RawMessage `json:"patch"`
	Unchanged bool            `json:"unchanged"`
}

// The patch endpoints over real HTTP on both backends, every request and
// response checked against openapi.json: admin only, dry runs change
// nothing, a patch that does not apply names the JSON pointer at fault, a
// refused one lists the reasons, and patch-running reaches the runs
// submitted by tag.
func TestPatchEndpoints(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		tokens, err := LoadTokens("", "admin-token-0123456789 ops@example.com admin;submit-token-012345678 ci submit,read", nil)
		if err != nil {
			t.Fatal(err)
		}
		ts := startServer(t, b, func(c *Config) { c.Tokens = tokens })
		admin := ts.client(t, "admin-token-0123456789")
		sub := ts.client(t, "submit-token-012345678")
		if r := sub.do("POST", "/v1/workflows", map[string]any{"source": patchBase, "tag": "pipeline"}, nil); r.status != 201 {
			t.Fatalf("deploy: %d %s", r.status, r.body)
		}
		submit := func() string {
			r := sub.do("POST", "/v1/runs", map[string]any{"workflow": "pipeline"}, nil)
			var s submitResponse
			r.decode(t, &s)
			if r.status != 201 {
				t.Fatalf("submit: %d %s", r.status, r.body)
			}
			return s.RunID
		}
		runA, runB := submit(), submit()
		admin.waitNode(runA, "publish", "running")
		admin.waitNode(runB, "publish", "running")
		path := "/v1/runs/" + runA + "/patch"

		if p := sub.do("POST", path, map[string]any{"from_source": patchNext}, nil).problem(t, 403); p.Code != "forbidden" {
			t.Fatalf("submit scope patched: %+v", p)
		}
		admin.doRaw("POST", path, map[string]any{}, nil, false).problem(t, 400)
		admin.doRaw("POST", path, map[string]any{"patch": []any{}, "from_source": patchNext}, nil, false).problem(t, 400)
		// The pointer at fault.
		p := admin.do("POST", path, map[string]any{"patch": []any{map[string]any{"op": "remove", "path": "/nodes/99"}}}, nil).problem(t, 422)
		if p.Code != "patch-invalid" || p.Pointer != "/nodes/99" || p.Operation == nil || *p.Operation != 0 {
			t.Fatalf("bad patch: %+v", p)
		}
		// A source with errors: the compiler's diagnostics.
		p = admin.do("POST", path, map[string]any{"from_source": "workflow pipeline { task a { run \"echo\" with { x = nosuch.output } } }"}, nil).problem(t, 422)
		if !strings.Contains(string(mustJSON(p.Diagnostics)), `"code":"WF`) {
			t.Fatalf("no diagnostics: %+v", p)
		}
		admin.do("POST", "/v1/runs/nosuch/patch", map[string]any{"from_source": patchNext}, nil).problem(t, 404)

		before := admin.do("GET", "/v1/runs/"+runA, nil, nil)
		var st0 runtime.Status
		before.decode(t, &st0)
		// A dry run says what would change and changes nothing.
		r := admin.do("POST", path, map[string]any{"from_source": patchNext, "dry_run": true}, nil)
		var dry patchResult
		r.decode(t, &dry)
		if r.status != 200 || !dry.DryRun || !slices.Equal(dry.Added, []string{"send_email"}) || dry.OldHash != st0.IR {
			t.Fatalf("dry run: %d %s", r.status, r.body)
		}
		var st1 runtime.Status
		admin.do("GET", "/v1/runs/"+runA, nil, nil).decode(t, &st1)
		if st1.IR != st0.IR {
			t.Fatal("a dry run patched the run")
		}
		r = admin.do("POST", path, map[string]any{"from_source": patchNext}, nil)
		var done patchResult
		r.decode(t, &done)
		if r.status != 200 || done.DryRun || done.NewHash == st0.IR || !slices.Equal(done.Added, []string{"send_email"}) || len(done.Patch) == 0 {
			t.Fatalf("patch: %d %s", r.status, r.body)
		}

		// patch-running: the tag's new version reaches run B; run A runs
		// it already.
		if r := admin.do("POST", "/v1/workflows", map[string]any{"source": patchNext, "tag": "pipeline"}, nil); r.status != 201 {
			t.Fatalf("deploy v2: %d %s", r.status, r.body)
		}
		if p := sub.do("POST", "/v1/workflows/pipeline/patch-running", map[string]any{}, nil).problem(t, 403); p.Code != "forbidden" {
			t.Fatalf("%+v", p)
		}
		admin.do("POST", "/v1/workflows/nosuch/patch-running", map[string]any{}, nil).problem(t, 404)
		type outcomes struct {
			Outcomes []struct {
				Run     string
				Result  *patchResult
				Problem *Problem
			}
			DryRun bool `json:"dry_run"`
		}
		byRun := func(o outcomes) map[string]*patchResult {
			m := map[string]*patchResult{}
			for _, x := range o.Outcomes {
				if x.Problem != nil {
					t.Fatalf("outcome of %s: %+v", x.Run, x.Problem)
				}
				m[x.Run] = x.Result
			}
			return m
		}
		var o outcomes
		admin.do("POST", "/v1/workflows/pipeline/patch-running", map[string]any{"dry_run": true}, nil).decode(t, &o)
		m := byRun(o)
		if !o.DryRun || len(m) != 2 || !m[runA].Unchanged || m[runB] == nil || !m[runB].DryRun {
			t.Fatalf("dry patch-running: %+v", o)
		}
		var o2 outcomes
		admin.do("POST", "/v1/workflows/pipeline/patch-running", map[string]any{}, nil).decode(t, &o2)
		m = byRun(o2)
		if len(m) != 2 || m[runB] == nil || m[runB].DryRun || !slices.Equal(m[runB].Added, []string{"send_email"}) {
			t.Fatalf("patch-running: %+v", o2)
		}
		for _, run := range []string{runA, runB} {
			st := admin.waitRun(run)
			if st.State != runtime.RunCompleted || st.Nodes["send_email"] == nil || st.Nodes["send_email"].State != "completed" {
				t.Fatalf("run %s after the patch: %s %+v", run, st.State, st.Nodes)
			}
		}
		// An ended run refuses a patch: 409 with the reasons.
		p = admin.do("POST", path, map[string]any{"from_source": patchBase}, nil).problem(t, 409)
		if p.Code != "patch-refused" || len(p.Errors) == 0 {
			t.Fatalf("ended run: %+v", p)
		}
	})
}

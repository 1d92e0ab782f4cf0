package server

import (
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wfc-lang/wfc/runtime"
	"github.com/wfc-lang/wfc/server/tasksapi"
)

// The task queue's OpenAPI fragment is merged into openapi.json: its
// paths, parameters and schemas are there unchanged, and both problem
// writers have the fields of the one Problem schema.
func TestTasksOpenAPIMerged(t *testing.T) {
	type doc struct {
		Paths map[string]json.RawMessage `json:"paths"`
		Comps struct {
			Parameters map[string]json.RawMessage `json:"parameters"`
			Schemas    map[string]json.RawMessage `json:"schemas"`
		} `json:"components"`
	}
	var frag, full doc
	if err := json.Unmarshal(tasksapi.OpenAPI, &frag); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(openAPIDoc, &full); err != nil {
		t.Fatal(err)
	}
	same := func(a, b json.RawMessage) bool {
		var x, y any
		json.Unmarshal(a, &x)
		json.Unmarshal(b, &y)
		return reflect.DeepEqual(x, y)
	}
	if len(frag.Paths) == 0 {
		t.Fatal("the fragment has no paths")
	}
	for p, v := range frag.Paths {
		if !same(v, full.Paths[p]) {
			t.Errorf("path %s differs from the fragment's (merge server/tasksapi/openapi.json again)", p)
		}
	}
	for n, v := range frag.Comps.Parameters {
		if !same(v, full.Comps.Parameters[n]) {
			t.Errorf("parameter %s differs from the fragment's", n)
		}
	}
	for n, v := range frag.Comps.Schemas {
		if n != "Problem" && !same(v, full.Comps.Schemas[n]) {
			t.Errorf("schema %s differs from the fragment's", n)
		}
	}
	var problem struct {
		Properties map[string]any `json:"properties"`
		Required   []string       `json:"required"`
	}
	json.Unmarshal(full.Comps.Schemas["Problem"], &problem)
	fields := func(v any) []string {
		var out []string
		rt := reflect.TypeOf(v)
		for i := range rt.NumField() {
			tag, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
			out = append(out, tag)
		}
		return out
	}
	for _, f := range append(fields(Problem{}), fields(tasksapi.Problem{})...) {
		if problem.Properties[f] == nil {
			t.Errorf("the Problem schema lacks %q", f)
		}
	}
	for _, r := range problem.Required {
		if !slices.Contains(fields(tasksapi.Problem{}), r) {
			t.Errorf("the Problem schema requires %q, which the task queue's problems lack", r)
		}
	}
	if tasksapi.ProblemBase != problemBase {
		t.Errorf("problem namespaces differ: %s, %s", tasksapi.ProblemBase, problemBase)
	}
}

// taskServer starts a server with the task queue mounted (leases of
// lease) and returns it with a client of scope work (the worker) and one
// of scopes submit and read.
func taskServer(t *testing.T, b backend, lease time.Duration) (ts *testServer, worker, sub *client) {
	t.Helper()
	tokens, err := LoadTokens("", "worker-token-0123456789 py-worker work;submit-token-0123456789 ci submit,read", nil)
	if err != nil {
		t.Fatal(err)
	}
	ts = startServer(t, b, func(c *Config) {
		r, err := c.Engine.NewRemote(runtime.RemoteOptions{Lease: lease, MaxWait: 3 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		c.Tokens = tokens
		c.TasksHandler = tasksapi.New(tasksapi.Config{Remote: r, Authorize: Authorized})
	})
	return ts, ts.client(t, "worker-token-0123456789"), ts.client(t, "submit-token-0123456789")
}

// The task queue mounted in the server, over real HTTP, every request
// and response checked against openapi.json: a token with scope work
// polls, beats and completes; other tokens are refused with the server's
// problems.
func TestTaskQueue(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		ts, worker, sub := taskServer(t, b, 2*time.Second)
		poll := map[string]any{"worker": "w1", "handlers": []string{"crm.lookup"}, "wait_ms": 3000}

		if p := ts.client(t, "").do("POST", "/v1/tasks/poll", poll, nil).problem(t, 401); p.Code != "unauthorized" {
			t.Fatalf("no token: %+v", p)
		}
		if p := sub.do("POST", "/v1/tasks/poll", poll, nil).problem(t, 403); p.Code != "forbidden" {
			t.Fatalf("submit token polls: %+v", p)
		}
		r := sub.do("POST", "/v1/runs", map[string]any{"source": oneTaskSource, "inputs": map[string]any{"who": "ada"}}, nil)
		if r.status != http.StatusCreated {
			t.Fatalf("submit: %d %s", r.status, r.body)
		}
		var run submitResponse
		r.decode(t, &run)

		r = worker.do("POST", "/v1/tasks/poll", poll, nil)
		var task runtime.RemoteTask
		r.decode(t, &task)
		if r.status != 200 || task.RunID != run.RunID || task.Handler != "crm.lookup" {
			t.Fatalf("poll: %d %s", r.status, r.body)
		}
		base := "/v1/tasks/" + task.ID
		if r := worker.do("POST", base+"/heartbeat", map[string]any{"lease": task.Lease}, nil); r.status != 200 {
			t.Fatalf("heartbeat: %d %s", r.status, r.body)
		}
		if p := worker.doRaw("POST", base+"/complete", map[string]any{"lease": task.Lease}, nil, false).problem(t, 400); p.Code != "bad-request" {
			t.Fatalf("completion without output: %+v", p)
		}
		if r := worker.do("POST", base+"/complete", map[string]any{"lease": task.Lease, "output": map[string]any{"name": "Ada"}}, nil); r.status != 204 {
			t.Fatalf("complete: %d %s", r.status, r.body)
		}
		if st := sub.waitRun(run.RunID); st.State != runtime.RunCompleted || string(st.Result) != `{"name":"Ada"}` {
			t.Fatalf("run: %s %s %s", st.State, st.Result, st.Error)
		}
		if p := worker.do("POST", base+"/complete", map[string]any{"lease": task.Lease, "output": map[string]any{"name": "late"}}, nil).problem(t, 409); p.Code != "lease-lost" {
			t.Fatalf("duplicate completion: %+v", p)
		}
		if p := worker.do("POST", "/v1/tasks/bm9wZQ/complete", map[string]any{"lease": "x", "output": 1}, nil).problem(t, 404); p.Code != "unknown-task" {
			t.Fatalf("unknown task: %+v", p)
		}
	})
}

const oneTaskSource = `workflow one {
  input { who: string }
  handler "crm.lookup" { config { who: string }  output { name: string } }
  task a { run "crm.lookup"  with { who = input.who } }
  output { name = a.output.name }
}`

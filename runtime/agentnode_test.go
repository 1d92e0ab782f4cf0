package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/runtime/agent"
	"github.com/wfc-lang/wfc/runtime/agent/tools"
	"github.com/wfc-lang/wfc/runtime/handlers"
)

// agentNode is an agent node for build.
func agentNode(id string, a ir.Agent, opts ...nodeOpt) *nodeSpec {
	if a.Model == "" {
		a.Model = "test-model"
	}
	s := &nodeSpec{n: ir.Node{ID: id, Type: ir.NodeAgent, Join: ir.JoinAll, Agent: &a}}
	for _, o := range opts {
		o(s)
	}
	return s
}

// fakeModel serves f and returns a client for it (no client retries
// unless retries > 0).
func fakeModel(t *testing.T, f *agent.Fake, retries int) *agent.Client {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	if retries == 0 {
		retries = -1
	}
	c, err := agent.New(agent.Config{BaseURL: srv.URL + "/v1", Retries: retries, MaxBackoff: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// routing is lead -> qualify (agent: routes a, b, c) -> a|b|c, with an
// optional default d, and a node after all of them.
func routing(t testing.TB, a ir.Agent, opts ...nodeOpt) *ir.Workflow {
	if a.Prompt.Template == nil && a.Prompt.Const == nil {
		a.Prompt = tmpl("Qualify lead ", &ir.Expr{CEL: "lead.output.name"}, " (", &ir.Expr{CEL: "input.size"}, " people)")
	}
	if a.Routes == nil {
		a.Routes = []string{"a", "b", "c"}
	}
	nodes := []*nodeSpec{
		task("lead", "count", with("name", konst(`"Acme"`))),
		agentNode("qualify", a, append([]nodeOpt{after("lead"), with("region", konst(`"EU"`))}, opts...)...),
		task("a", "count"), task("b", "count"), task("c", "count"),
	}
	if len(a.Default) > 0 {
		nodes = append(nodes, task("d", "count"))
	}
	nodes = append(nodes, task("end", "count", after(append(append([]string{}, a.Routes...), a.Default...)...), joinMode(ir.JoinSettled)))
	return build(t, wfSpec{
		inputs:  []ir.Input{input("size", ir.KindInt, "500")},
		outputs: []ir.Output{output("route", "qualify.output.route"), output("routes", "qualify.output.routes")},
		nodes:   nodes,
	})
}

func states(st *Status, ids ...string) string {
	var out []string
	for _, id := range ids {
		out = append(out, id+"="+nodeState(st, id))
	}
	return strings.Join(out, " ")
}

// decisionOf reads the agent's output from the status.
func decisionOf(t *testing.T, st *Status, x string) agent.Decision {
	t.Helper()
	var d agent.Decision
	ns, ok := st.Nodes[x]
	if !ok {
		t.Fatalf("no node %s in the status", x)
	}
	if err := json.Unmarshal(ns.Output, &d); err != nil {
		t.Fatalf("output of %s: %v (%s)", x, err, ns.Output)
	}
	return d
}

func TestAgentScenarios(t *testing.T) {
	type scenario struct {
		name    string
		agent   ir.Agent
		opts    []nodeOpt
		answers []agent.FakeAnswer
		retries int
		tools   bool
		// want
		state   string // run state
		nodes   string // states of a b c (d)
		routes  []string
		code    string // qualify's error code when it failed
		defl    bool
		calls   int // model requests
		minWait time.Duration
	}
	echo := []agent.FakeToolCall{{Name: "echo", Arguments: json.RawMessage(`{"q":"acme"}`)}}
	for _, sc := range []scenario{
		{name: "one route", answers: []agent.FakeAnswer{{Routes: []string{"b"}, Reasoning: "mid-size"}},
			state: RunCompleted, nodes: "a=skipped b=completed c=skipped", routes: []string{"b"}, calls: 1},
		{name: "several routes", agent: ir.Agent{MaxRoutes: 2}, answers: []agent.FakeAnswer{{Routes: []string{"a", "c"}}},
			state: RunCompleted, nodes: "a=completed b=skipped c=completed", routes: []string{"a", "c"}, calls: 1},
		{name: "route in other case", answers: []agent.FakeAnswer{{Text: "Here: {\"routes\": [\" C \"]}"}},
			state: RunCompleted, nodes: "a=skipped b=skipped c=completed", routes: []string{"c"}, calls: 1},
		{name: "forbidden route takes default", agent: ir.Agent{Default: []string{"d"}}, answers: []agent.FakeAnswer{{Routes: []string{"drop_db"}}},
			state: RunCompleted, nodes: "a=skipped b=skipped c=skipped d=completed", routes: []string{}, defl: true, calls: 1},
		{name: "too many routes takes default", agent: ir.Agent{Default: []string{"d"}}, answers: []agent.FakeAnswer{{Routes: []string{"a", "b"}}},
			state: RunCompleted, nodes: "a=skipped b=skipped c=skipped d=completed", routes: []string{}, defl: true, calls: 1},
		{name: "forbidden route fails", answers: []agent.FakeAnswer{{Routes: []string{"drop_db"}}},
			state: RunFailed, code: agent.CodeAnswer, calls: 1},
		{name: "garbage then retry", opts: []nodeOpt{retry(2, "fixed", 10)},
			answers: []agent.FakeAnswer{{Text: "{{{ garbage", Times: 1}, {Routes: []string{"a"}}},
			state:   RunCompleted, nodes: "a=completed b=skipped c=skipped", routes: []string{"a"}, calls: 2},
		{name: "timeout", opts: []nodeOpt{timeout(300)}, answers: []agent.FakeAnswer{{DelayMS: 3000, Routes: []string{"a"}}},
			state: RunFailed, code: handlers.CodeTimeout, calls: 1},
		{name: "429 with Retry-After", retries: 2, answers: []agent.FakeAnswer{{Status: 429, RetryAfter: "1", Times: 1}, {Routes: []string{"b"}}},
			state: RunCompleted, nodes: "a=skipped b=completed c=skipped", routes: []string{"b"}, calls: 2, minWait: time.Second},
		{name: "500", retries: 1, answers: []agent.FakeAnswer{{Status: 500}},
			state: RunFailed, code: agent.CodeModel, calls: 2},
		{name: "tool loop", agent: ir.Agent{Tools: []string{"echo"}}, tools: true,
			answers: []agent.FakeAnswer{{Turn: 1, ToolCalls: echo}, {Turn: 2, Routes: []string{"c"}}},
			state:   RunCompleted, nodes: "a=skipped b=skipped c=completed", routes: []string{"c"}, calls: 2},
		{name: "tool loop past the limit", agent: ir.Agent{Tools: []string{"echo"}, MaxToolCalls: 2}, tools: true,
			answers: []agent.FakeAnswer{{ToolCalls: echo}},
			state:   RunFailed, code: agent.CodeLimit, calls: 3},
		{name: "tool the worker lacks", agent: ir.Agent{Tools: []string{"echo"}},
			state: RunFailed, code: agent.CodeTool, calls: 0},
	} {
		t.Run(sc.name, func(t *testing.T) {
			forBackends(t, func(t *testing.T, b backend) {
				v := newEnv(t, b)
				f := &agent.Fake{Answers: sc.answers}
				client := fakeModel(t, f, sc.retries)
				tool := &echoTool{}
				v.worker(func(o *WorkerOptions) {
					o.Model = client
					if sc.tools {
						o.AgentTools = []agent.Tool{tool}
					}
				})
				start := time.Now()
				st := v.run(routing(t, sc.agent, sc.opts...), nil)
				if st.State != sc.state {
					t.Fatalf("run %s (%s), want %s", st.State, st.Error, sc.state)
				}
				if got := len(f.Requests()); got != sc.calls {
					t.Errorf("%d model requests, want %d", got, sc.calls)
				}
				if d := time.Since(start); d < sc.minWait {
					t.Errorf("run took %s: Retry-After %s not honoured", d, sc.minWait)
				}
				if sc.state == RunFailed {
					if ns := st.Nodes["qualify"]; ns.State != NodeFailed || ns.Code != sc.code {
						t.Fatalf("qualify: %s", dump(ns))
					}
					return
				}
				ids := []string{"a", "b", "c"}
				if len(sc.agent.Default) > 0 {
					ids = append(ids, "d")
				}
				if got := states(st, ids...); got != sc.nodes {
					t.Errorf("nodes %s, want %s", got, sc.nodes)
				}
				d := decisionOf(t, st, "qualify")
				if !reflect.DeepEqual(d.Routes, sc.routes) || d.Defaulted != sc.defl || d.Model != "test-model" || d.Usage.TotalTokens == 0 {
					t.Errorf("decision %+v", d)
				}
				if sc.tools && (d.ToolCalls != 1 || tool.calls.Load() != 1) {
					t.Errorf("tool calls %d (echo ran %d times)", d.ToolCalls, tool.calls.Load())
				}
				// What the model was told: the prompt, its values, the with
				// context, and nothing else of the run.
				req := f.Requests()[0]
				user := req.Messages[1].Content
				if !strings.HasPrefix(user, "Qualify lead Acme (500 people)") || !strings.Contains(user, `"region":"EU"`) {
					t.Errorf("prompt %q", user)
				}
				if d.PromptHash != agent.PromptHash(user) {
					t.Errorf("prompt hash %s, want the hash of %q", d.PromptHash, user)
				}
				// The decision is in the event log (node.completed's output).
				evs, err := v.e.Events(context.Background(), st.RunID)
				if err != nil {
					t.Fatal(err)
				}
				found := false
				for _, ev := range evs {
					if ev.Type == "node.completed" && ev.Fields["x"] == "qualify" && strings.Contains(ev.Fields["output"], d.PromptHash) {
						found = true
					}
				}
				if !found {
					t.Errorf("no node.completed event of qualify carries the decision")
				}
			})
		})
	}
}

// echoTool is a test tool: it returns its arguments under "echo".
type echoTool struct{ calls atomic.Int32 }

func (*echoTool) Name() string                { return "echo" }
func (*echoTool) Description() string         { return "returns its arguments" }
func (*echoTool) Parameters() json.RawMessage { return json.RawMessage(`{"type":"object"}`) }
func (e *echoTool) Call(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
	e.calls.Add(1)
	return json.Marshal(map[string]json.RawMessage{"echo": args})
}

func TestAgentNoModel(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		st := v.run(routing(t, ir.Agent{}), nil)
		if ns := st.Nodes["qualify"]; st.State != RunFailed || ns.Code != agent.CodeNoModel {
			t.Fatalf("%s: %s", st.State, dump(ns))
		}
	})
}

// A secret input rendered into the prompt is masked before the model, the
// event log, the status or Redis see it.
func TestAgentSecrets(t *testing.T) {
	const secret = "sk-live-9f8e7d6c5b4a"
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		f := &agent.Fake{Answers: []agent.FakeAnswer{{Routes: []string{"a"}, Reasoning: "the key is " + secret}}}
		client := fakeModel(t, f, 0)
		sec, err := NewSecrets(map[string]string{"crm_key": secret})
		if err != nil {
			t.Fatal(err)
		}
		v.worker(func(o *WorkerOptions) { o.Model = client; o.Secrets = sec })
		w := build(t, wfSpec{
			inputs: []ir.Input{{Name: "key", Type: ir.Type{Kind: ir.KindSecret}, Required: true}},
			nodes: []*nodeSpec{
				agentNode("qualify", ir.Agent{Prompt: tmpl("key ", &ir.Expr{CEL: "input.key"}), Routes: []string{"a"}}),
				task("a", "count"),
			},
		})
		st := v.run(w, map[string]any{"key": "crm_key"})
		if st.State != RunCompleted {
			t.Fatalf("%s %s", st.State, st.Error)
		}
		if p := f.Requests()[0].Messages[1].Content; strings.Contains(p, secret) {
			t.Errorf("the model saw the secret: %q", p)
		}
		if strings.Contains(dump(st), secret) {
			t.Errorf("the status holds the secret")
		}
		evs, _ := v.e.Events(context.Background(), st.RunID)
		if strings.Contains(dump(evs), secret) {
			t.Errorf("the event log holds the secret")
		}
		h, _ := v.e.st.rdb.HGetAll(v.ctx, v.e.st.ks.state(st.RunID)).Result()
		if strings.Contains(dump(h), secret) {
			t.Errorf("the state hash holds the secret")
		}
	})
}

// Every message delivered 10 times and handled twice at once, with a model
// that answers differently each time: each run routes exactly one way, the
// way its recorded decision says.
func TestAgentDuplicateDeliveryStorm(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		f := &agent.Fake{}
		srv := httptest.NewServer(f)
		defer srv.Close()
		// The answers alternate between a and b; the fake's default would
		// always say a, so script many single-use answers.
		for i := range 200 {
			f.Answers = append(f.Answers, agent.FakeAnswer{Routes: []string{[]string{"a", "b"}[i%2]}, Times: 1})
		}
		client, err := agent.New(agent.Config{BaseURL: srv.URL + "/v1", Retries: -1})
		if err != nil {
			t.Fatal(err)
		}
		wk := v.worker(func(o *WorkerOptions) { o.Model = client; o.redeliver = 10; o.dup = 2; o.Concurrency = 16 })
		var runs []string
		for range 4 {
			runs = append(runs, v.submit(routing(t, ir.Agent{}), nil))
		}
		for _, r := range runs {
			st := v.wait(r)
			if st.State != RunCompleted {
				t.Fatalf("%s: %s %s", r, st.State, st.Error)
			}
			d := decisionOf(t, st, "qualify")
			for _, id := range []string{"a", "b", "c"} {
				want := NodeSkipped
				if id == d.Route {
					want = NodeCompleted
				}
				if got := nodeState(st, id); got != want {
					t.Errorf("%s: decision %q but %s is %s", r, d.Route, id, got)
				}
			}
			if string(st.Result) != `{"route":"`+d.Route+`","routes":["`+d.Route+`"]}` {
				t.Errorf("%s: result %s, decision %s", r, st.Result, d.Route)
			}
		}
		waitNoPending(t, v.e)
		if s := wk.Stats(); s.Dups == 0 {
			t.Errorf("stats %+v: duplicates were not seen", s)
		}
	})
}

// A worker killed after the model answered and the decision was recorded:
// the worker that claims the execution routes on the recorded decision
// without asking the model again (which would now say otherwise).
func TestAgentWorkerKilledAfterDecision(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { agentKilled(t, b) })
	}
}

func agentKilled(t *testing.T, b backend) {
	{
		v := newEnv(t, b)
		f := &agent.Fake{Answers: []agent.FakeAnswer{{Routes: []string{"a"}, Times: 1}, {Routes: []string{"b"}}}}
		client := fakeModel(t, f, 0)
		recorded := make(chan struct{})
		var once sync.Once
		agentRecorded = func(ctx context.Context, run, x string) error {
			first := false
			once.Do(func() { first = true })
			if !first {
				return nil
			}
			close(recorded)
			<-ctx.Done() // killed here
			return ctx.Err()
		}
		t.Cleanup(func() { agentRecorded = nil })
		o := fastWorker(v.reg)
		o.crash, o.Consumer, o.Model = true, "doomed", client
		w1 := v.e.NewWorker(o)
		ctx1, kill := context.WithCancel(v.ctx)
		done1 := make(chan struct{})
		go func() { defer close(done1); w1.Run(ctx1) }()
		run := v.submit(routing(t, ir.Agent{}), nil)
		select {
		case <-recorded:
		case <-time.After(20 * time.Second):
			cur, _ := v.e.Status(context.Background(), run)
			t.Fatalf("the agent never recorded a decision: %s", dump(cur))
		}
		kill()
		<-done1
		v.worker(func(o *WorkerOptions) { o.Consumer = "rescuer"; o.Model = client })
		st := v.wait(run)
		if st.State != RunCompleted || states(st, "a", "b", "c") != "a=completed b=skipped c=skipped" {
			t.Fatalf("%s %s: %s", st.State, st.Error, states(st, "a", "b", "c"))
		}
		if got := len(f.Requests()); got != 1 {
			t.Errorf("the model was asked %d times, want once", got)
		}
		waitNoPending(t, v.e)
	}
}

// TestAgentWorkerTools: an agent calls each tool of the worker's real tool
// set (tools.Worker): a pipeline over data, a search of the deployment's
// catalog (its handlers and a deployed tag), patch_workflow without a
// patcher, delegation to the deployed tag, and an operation of an
// allow-listed OpenAPI document; the model's next turn carries each
// result.
func TestAgentWorkerTools(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		ctx := context.Background()
		// A tag the catalog lists and delegate_to_agent starts.
		sub := build(t, wfSpec{name: "helper", nodes: []*nodeSpec{task("h", "count")}})
		if _, err := v.e.Deploy(ctx, sub, "helper", "test"); err != nil {
			t.Fatal(err)
		}
		calls := []agent.FakeToolCall{
			{Name: "execute_pipeline", Arguments: json.RawMessage(`{"input":[{"id":1,"price":120},{"id":2,"price":80}],"steps":[{"step":"table_sort","field":"price"},{"step":"top_k","k":1}]}`)},
			{Name: "search_tools", Arguments: json.RawMessage(`{"query":"helper"}`)},
			{Name: "search_tools", Arguments: json.RawMessage(`{"query":"count"}`)},
			{Name: "patch_workflow", Arguments: json.RawMessage(`{"operations":[{"op":"add","path":"/nodes/-","value":{"id":"z","type":"task","handler":"noop"}}]}`)},
			{Name: "delegate_to_agent", Arguments: json.RawMessage(`{"kind":"workflow","target":"helper","wait":true}`)},
			{Name: "openapi_action", Arguments: json.RawMessage(`{"operation_id":"getPet","params":{"petId":7}}`)},
		}
		// An allow-listed API for openapi_action (the tools' test document).
		api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"id": %q, "name": "rex"}`, strings.TrimPrefix(r.URL.Path, "/v1/pets/"))
		}))
		defer api.Close()
		src, err := os.ReadFile("agent/tools/testdata/petstore.yaml")
		if err != nil {
			t.Fatal(err)
		}
		doc := filepath.Join(t.TempDir(), "petstore.yaml")
		if err := os.WriteFile(doc, bytes.ReplaceAll(src, []byte("SERVER_URL"), []byte(api.URL)), 0o600); err != nil {
			t.Fatal(err)
		}
		f := &agent.Fake{Answers: []agent.FakeAnswer{{Turn: 1, ToolCalls: calls}, {Turn: 2, Routes: []string{"a"}}}}
		client := fakeModel(t, f, 0)
		ts, err := tools.NewWorker(tools.Config{HTTPAllow: []string{strings.TrimPrefix(api.URL, "http://")}, OpenAPI: []string{doc}})
		if err != nil {
			t.Fatal(err)
		}
		v.worker(func(o *WorkerOptions) { o.Model, o.Tools = client, ts })
		st := v.run(routing(t, ir.Agent{Tools: []string{"execute_pipeline", "search_tools", "patch_workflow", "delegate_to_agent", "openapi_action"}}), nil)
		if st.State != RunCompleted {
			t.Fatalf("run %s (%s)", st.State, st.Error)
		}
		reqs := f.Requests()
		if len(reqs) != 2 {
			t.Fatalf("%d model requests, want 2", len(reqs))
		}
		results := map[string]string{}
		for _, m := range reqs[1].Messages {
			if m.Role == "tool" {
				results[m.ToolCallID] = m.Content
			}
		}
		if len(results) != 6 {
			t.Fatalf("tool results %v", results)
		}
		all := ""
		for _, r := range results {
			all += r + "\n"
		}
		for _, want := range []string{
			`"price":80`,           // the pipeline sorted and kept the cheapest
			`"name":"count"`,       // the catalog: a handler the worker runs
			`"name":"helper"`,      // and the deployed tag
			`not available`,        // no live-patch applier given
			`"status":"completed"`, // the delegated run ran to its end
			`"name":"rex"`,         // the API's answer to getPet
		} {
			if !strings.Contains(all, want) {
				t.Errorf("no tool result has %s:\n%s", want, all)
			}
		}
		if strings.Contains(all, `"price":120`) {
			t.Errorf("top_k kept the dearer row:\n%s", all)
		}
	})
}

// TestAgentDelegatedRunEndsWithParent: a run an agent delegated with
// delegate_to_agent (wait false) is a child of the delegating run, as a
// flow node's child is: cancelling the parent cancels it, and so does the
// parent's end while it still runs — failed, or completed. The parent's
// status lists it among its children.
func TestAgentDelegatedRunEndsWithParent(t *testing.T) {
	for _, c := range []struct {
		name, then string // then: the handler of the node after the agent
		want       string
	}{
		{"cancel", "block", RunCancelled},
		{"fail", "perm", RunFailed},
		{"complete", "count", RunCompleted},
	} {
		t.Run(c.name, func(t *testing.T) {
			forBackends(t, func(t *testing.T, b backend) {
				v := newEnv(t, b)
				ctx := context.Background()
				// The delegated workflow blocks until cancelled.
				sub := build(t, wfSpec{name: "helper", nodes: []*nodeSpec{task("h", "block")}})
				if _, err := v.e.Deploy(ctx, sub, "helper", "test"); err != nil {
					t.Fatal(err)
				}
				f := &agent.Fake{Answers: []agent.FakeAnswer{
					{Turn: 1, ToolCalls: []agent.FakeToolCall{{Name: "delegate_to_agent", Arguments: json.RawMessage(`{"kind":"workflow","target":"helper","wait":false}`)}}},
					{Turn: 2, Routes: []string{"a"}},
				}}
				client := fakeModel(t, f, 0)
				ts, err := tools.NewWorker(tools.Config{})
				if err != nil {
					t.Fatal(err)
				}
				v.worker(func(o *WorkerOptions) { o.Model, o.Tools = client, ts })
				w := build(t, wfSpec{nodes: []*nodeSpec{
					agentNode("qualify", ir.Agent{Prompt: tmpl("go"), Routes: []string{"a"}, Tools: []string{"delegate_to_agent"}}),
					task("a", c.then),
				}})
				run := v.submit(w, nil)
				var st *Status
				if c.name == "cancel" {
					v.waitStarted() // the delegated run's h and the parent's a
					v.waitStarted()
					if err := v.e.Cancel(ctx, run); err != nil {
						t.Fatal(err)
					}
				}
				st = v.wait(run)
				if st.State != c.want {
					t.Fatalf("parent %s (%s), want %s", st.State, st.Error, c.want)
				}
				runs, err := v.e.TagRuns(ctx, "helper")
				if err != nil || len(runs) != 1 {
					t.Fatalf("delegated runs %v %v, want one", dump(runs), err)
				}
				kid := runs[0].RunID
				if x, ok := st.Children[kid]; !ok || x != "qualify" {
					t.Errorf("parent's children %v: no %s of qualify", st.Children, kid)
				}
				if ks := v.wait(kid); ks.State != RunCancelled || !strings.Contains(ks.Error, "parent run "+run) {
					t.Errorf("delegated run %s (%s), want cancelled with its parent", ks.State, ks.Error)
				}
				waitNoPending(t, v.e)
			})
		})
	}
}

// TestAgentRecordCountsInStateBytes: an agent's recorded decision (ag|x)
// is a value the run stores, counted in run|bytes and bounded by
// max_state_bytes like the outputs: a run whose budget fits everything
// but one byte fails with code state, and a decision that does not fit is
// not recorded at all.
func TestAgentRecordCountsInStateBytes(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker(func(o *WorkerOptions) { o.Model = fakeModel(t, &agent.Fake{}, 0) })
		wf := func(limit int) *ir.Workflow {
			return build(t, wfSpec{set: ir.Settings{MaxStateBytes: limit}, nodes: []*nodeSpec{
				agentNode("qualify", ir.Agent{Prompt: tmpl("go"), Routes: []string{"a"}}),
				task("a", "count", with("n", konst(`1`)), after("qualify")),
			}})
		}
		state := func(run string) map[string]string {
			h, err := v.e.st.rdb.HGetAll(v.ctx, v.e.st.ks.state(run)).Result()
			if err != nil {
				t.Fatal(err)
			}
			return h
		}
		// Unbounded: run|bytes is exactly the stored values, record included.
		st := v.run(wf(0), nil)
		if st.State != RunCompleted {
			t.Fatalf("%s %s", st.State, st.Error)
		}
		h := state(st.RunID)
		stored := len(h["run|result"])
		for k, val := range h {
			if strings.HasPrefix(k, "out|") || strings.HasPrefix(k, "ag|") {
				stored += len(val)
			}
		}
		total, _ := runBytes(t, v, st.RunID)
		dec := len(h["ag|qualify"])
		if dec == 0 || total != int64(stored) {
			t.Fatalf("run|bytes %d, the stored values (decision of %d bytes included) %d: %v", total, dec, stored, h)
		}
		// A budget of exactly that fits; one byte less does not.
		if st := v.run(wf(int(total)), nil); st.State != RunCompleted {
			t.Errorf("max_state_bytes %d: %s %s", total, st.State, st.Error)
		}
		// (The last value written, a's output, is the one that no longer fits.)
		st = v.run(wf(int(total)-1), nil)
		if n := st.Nodes["a"]; st.State != RunFailed || n == nil || n.Code != CodeState || !strings.Contains(st.Error, "(max_state_bytes)") {
			t.Errorf("max_state_bytes %d: %s %q %+v, want code state", total-1, st.State, st.Error, n)
		}
		// A decision larger than the budget is refused before it is written.
		st = v.run(wf(dec-1), nil)
		if n := st.Nodes["qualify"]; st.State != RunFailed || n == nil || n.Code != CodeState || !strings.Contains(st.Error, "the decision of agent qualify") {
			t.Errorf("max_state_bytes %d: %s %q %+v, want the decision refused", dec-1, st.State, st.Error, n)
		}
		h = state(st.RunID)
		if rec, ok := h["ag|qualify"]; ok {
			t.Errorf("a decision of %d bytes was recorded over max_state_bytes %d: %s", len(rec), dec-1, rec)
		}
		if used, _ := runBytes(t, v, st.RunID); used > int64(dec-1) {
			t.Errorf("run|bytes %d over max_state_bytes %d", used, dec-1)
		}
	})
}

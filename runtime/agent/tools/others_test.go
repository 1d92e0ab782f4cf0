package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

type fakeCatalog []CatalogEntry

func (c fakeCatalog) Entries(context.Context) ([]CatalogEntry, error) { return c, nil }

type fakeDelegator struct {
	got   []DelegateRequest
	block bool
	panic bool
}

func (d *fakeDelegator) Delegate(ctx context.Context, r DelegateRequest) (DelegateResult, error) {
	if d.panic {
		panic("delegator bug")
	}
	if d.block {
		<-ctx.Done()
		return DelegateResult{}, ctx.Err()
	}
	d.got = append(d.got, r)
	return DelegateResult{ID: "child-1", Status: "started"}, nil
}

type fakePatcher struct {
	ops  []PatchOp
	node string
	err  error
}

func (p *fakePatcher) Patch(_ context.Context, node string, ops []PatchOp, _ string) (json.RawMessage, error) {
	p.node, p.ops = node, ops
	if p.err != nil {
		return nil, p.err
	}
	return json.RawMessage(`{"version": 2}`), nil
}

func TestSearchTools(t *testing.T) {
	cat := fakeCatalog{
		{Kind: "handler", Name: "http", Description: "Send an HTTP request"},
		{Kind: "handler", Name: "send_email", Description: "Email a customer"},
		{Kind: "workflow", Name: "flightPrices", Description: "Compare flight prices between airports"},
		{Kind: "workflow", Name: "refund", Description: "Refund an order and email the customer"},
	}
	st := toolset(t, Config{}, Env{Catalog: cat})[SearchTools]
	cases := []struct {
		args string
		want []string
	}{
		{`{"query":"flight price"}`, []string{"flightPrices"}},
		{`{"query":"email"}`, []string{"send_email", "refund"}},
		{`{"query":"email","kind":"workflow"}`, []string{"refund"}},
		{`{"query":"email","limit":1}`, []string{"send_email"}},
		{`{"query":"zebra"}`, nil},
	}
	for _, c := range cases {
		out, err := st.Call(context.Background(), json.RawMessage(c.args))
		if err != nil {
			t.Fatalf("%s: %v", c.args, err)
		}
		var r struct{ Matches []CatalogEntry }
		json.Unmarshal(out, &r)
		var names []string
		for _, m := range r.Matches {
			names = append(names, m.Name)
		}
		if fmt.Sprint(names) != fmt.Sprint(c.want) {
			t.Errorf("%s: got %v, want %v", c.args, names, c.want)
		}
	}
	_, err := st.Call(context.Background(), json.RawMessage(`{"query":"x","limit":500}`))
	wantErr(t, err, CodeBadArgs, "/limit")
	_, err = toolset(t, Config{}, Env{})[SearchTools].Call(context.Background(), json.RawMessage(`{"query":"x"}`))
	wantErr(t, err, CodeUnavailable, "not available")
}

func TestDelegateToAgent(t *testing.T) {
	d := &fakeDelegator{}
	dt := toolset(t, Config{DelegateAllow: []string{"workflow:refund", "agent:triage"}}, Env{Delegator: d})[DelegateToAgent]
	out, err := dt.Call(context.Background(), json.RawMessage(`{"kind":"workflow","target":"refund","inputs":{"order":7}}`))
	if err != nil || !jsonEq(t, out, `{"id":"child-1","status":"started"}`) {
		t.Fatalf("got %s, %v", out, err)
	}
	if len(d.got) != 1 || string(d.got[0].Inputs) != `{"order":7}` || d.got[0].Kind != "workflow" {
		t.Errorf("delegator got %+v", d.got)
	}
	_, err = dt.Call(context.Background(), json.RawMessage(`{"kind":"workflow","target":"wipe_db"}`))
	wantErr(t, err, CodeDenied, "not among the targets")
	_, err = dt.Call(context.Background(), json.RawMessage(`{"kind":"k8s","target":"refund"}`))
	wantErr(t, err, CodeBadArgs, "/kind")
	if _, err := NewWorker(Config{DelegateAllow: []string{"refund"}}); err == nil {
		t.Error("a delegate entry without kind was accepted")
	}

	// A child that does not finish in time is a timeout the model can read.
	slow := toolset(t, Config{Limits: Limits{CallTimeout: 50 * time.Millisecond}}, Env{Delegator: &fakeDelegator{block: true}})[DelegateToAgent]
	_, err = slow.Call(context.Background(), json.RawMessage(`{"kind":"agent","target":"triage","wait":true}`))
	wantErr(t, err, CodeTimeout, "wait: false")

	// A cancelled execution is not a tool error for the model.
	cctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	_, err = toolset(t, Config{}, Env{Delegator: &fakeDelegator{block: true}})[DelegateToAgent].Call(cctx, json.RawMessage(`{"kind":"agent","target":"triage","wait":true}`))
	if !errors.Is(err, context.Canceled) || isToolError(err) {
		t.Errorf("cancelled: %v", err)
	}

	// A panicking Delegator is an error, not a crash.
	bad := toolset(t, Config{}, Env{Delegator: &fakeDelegator{panic: true}})[DelegateToAgent]
	_, err = bad.Call(context.Background(), json.RawMessage(`{"kind":"agent","target":"triage"}`))
	wantErr(t, err, CodeInternal, "delegator bug")

	_, err = toolset(t, Config{}, Env{})[DelegateToAgent].Call(context.Background(), json.RawMessage(`{"kind":"agent","target":"x"}`))
	wantErr(t, err, CodeUnavailable, "not available")
}

// TestPatchWorkflowUnavailable: until live patching lands the runtime
// passes no Patcher, and the tool says so (to the model, as its result).
func TestPatchWorkflowUnavailable(t *testing.T) {
	pt := toolset(t, Config{}, Env{Node: "agent"})[PatchWorkflow]
	_, err := pt.Call(context.Background(), json.RawMessage(`{"operations":[{"op":"add","path":"/nodes/-","value":{"id":"n"}}]}`))
	wantErr(t, err, CodeUnavailable, "patch_workflow is not available in this deployment")
	res := ErrorResult(err)
	if !jsonEq(t, res, `{"error":{"code":"unavailable","message":"`+asToolError(err).Message+`"}}`) {
		t.Errorf("ErrorResult = %s", res)
	}
}

func TestPatchWorkflow(t *testing.T) {
	node := func(id string) string {
		return `{"op":"add","path":"/nodes/-","value":{"id":"` + id + `","type":"task"}}`
	}
	edge := func(from, to string) string {
		return `{"op":"add","path":"/edges/-","value":{"from":"` + from + `","to":"` + to + `"}}`
	}
	ops := func(o ...string) string { return `{"operations":[` + strings.Join(o, ",") + `]}` }
	cases := []struct {
		name, args, code, sub string
	}{
		{"chain", ops(node("a"), node("b"), edge("agent", "a"), edge("a", "b")), "", ""},
		{"edge before node", ops(edge("agent", "a"), node("a")), "", ""},
		{"remove", `{"operations":[{"op":"remove","path":"/nodes/0","value":{}}]}`, CodeBadArgs, "/operations/0/op"},
		{"replace path", `{"operations":[{"op":"add","path":"/nodes/0","value":{"id":"a"}}]}`, CodeBadArgs, "/operations/0/path"},
		{"edge from upstream", ops(node("a"), edge("start", "a")), CodeDenied, `starts at "start"`},
		{"edge to existing", ops(node("a"), edge("agent", "a"), edge("a", "end")), CodeDenied, `ends at "end"`},
		{"disconnected", ops(node("a"), node("b"), edge("agent", "a")), CodeDenied, `node "b" is not connected`},
		{"cycle only among added", ops(node("a"), node("b"), edge("a", "b"), edge("b", "a")), CodeDenied, "not connected"},
		{"duplicate", ops(node("a"), node("a"), edge("agent", "a")), CodeBadArgs, "added twice"},
		{"agent id", ops(node("agent")), CodeBadArgs, "the agent itself"},
		{"bad id", ops(node("a b"), edge("agent", "a b")), CodeBadArgs, "needs an id"},
		{"bad edge", ops(node("a"), `{"op":"add","path":"/edges/-","value":{"to":"a"}}`), CodeBadArgs, "an edge is"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := &fakePatcher{}
			pt := toolset(t, Config{}, Env{Node: "agent", Patcher: p})[PatchWorkflow]
			out, err := pt.Call(context.Background(), json.RawMessage(c.args))
			if c.code == "" {
				if err != nil {
					t.Fatal(err)
				}
				if !jsonEq(t, out, `{"version":2}`) || p.node != "agent" || len(p.ops) == 0 {
					t.Errorf("out %s, patcher got %q %v", out, p.node, p.ops)
				}
				return
			}
			wantErr(t, err, c.code, c.sub)
			if p.ops != nil {
				t.Error("a refused patch reached the Patcher")
			}
		})
	}
	p := &fakePatcher{err: errors.New(`node "a": unknown handler "nope"`)}
	pt := toolset(t, Config{}, Env{Node: "agent", Patcher: p})[PatchWorkflow]
	_, err := pt.Call(context.Background(), json.RawMessage(ops(node("a"), edge("agent", "a"))))
	wantErr(t, err, CodeFailed, `the patch was refused: node "a": unknown handler "nope"`)
}

func TestFor(t *testing.T) {
	w, err := NewWorker(Config{})
	if err != nil {
		t.Fatal(err)
	}
	ts, err := w.For([]string{PatchWorkflow, ExecutePipeline}, Env{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 2 || ts[0].Name() != ExecutePipeline || ts[1].Name() != PatchWorkflow {
		t.Errorf("For gave %v", ts)
	}
	if _, err := w.For([]string{"shell"}, Env{}); err == nil || !strings.Contains(err.Error(), `unknown tool "shell"`) {
		t.Errorf("unknown tool: %v", err)
	}
	if ts, _ := w.For(nil, Env{}); len(ts) != 0 {
		t.Errorf("no declared tools gave %d", len(ts))
	}
	// Every parameter schema is a JSON object schema the model can use.
	all, _ := w.For(Names, Env{})
	for _, x := range all {
		var s map[string]any
		if err := json.Unmarshal(x.Parameters(), &s); err != nil || s["type"] != "object" || x.Description() == "" {
			t.Errorf("%s: parameters %s, %v", x.Name(), x.Parameters(), err)
		}
	}
}

// TestResultBound: a tool result over MaxResultBytes goes to the
// BlobStore (any tool, not only pipelines).
func TestResultBound(t *testing.T) {
	var cat fakeCatalog
	for i := range 50 {
		cat = append(cat, CatalogEntry{Kind: "handler", Name: fmt.Sprintf("tool_%d", i), Description: strings.Repeat("tool words ", 20)})
	}
	blobs := &memBlobs{}
	st := toolset(t, Config{Limits: Limits{MaxResultBytes: 1024}}, Env{Catalog: cat, Blobs: blobs})[SearchTools]
	out, err := st.Call(context.Background(), json.RawMessage(`{"query":"tool","limit":50}`))
	if err != nil {
		t.Fatal(err)
	}
	var ref blobRef
	if err := json.Unmarshal(out, &ref); err != nil || !validRef(ref.Ref) || blobs.puts != 1 {
		t.Fatalf("got %s", out)
	}
	stored, _ := blobs.Get(context.Background(), ref.Ref)
	if len(stored) != ref.Bytes || !strings.Contains(string(stored), "tool_49") {
		t.Errorf("stored %d bytes, ref says %d", len(stored), ref.Bytes)
	}
}

package livepatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/wfc-lang/wfc/runtime/agent"
	"github.com/wfc-lang/wfc/runtime/agent/tools"
	"net"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/wfc-lang/wfc/compiler"
	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/runtime"
	"github.com/wfc-lang/wfc/runtime/handlers"
)

const base = `workflow pipeline {
  task process_data {
    run "echo"
    with { rows = 3 }
  }
  task publish after process_data {
    run "sleep"
    with { duration = "1500ms" }
  }
}
`

// next adds the seed's send_email behind process_data.
const next = `workflow pipeline {
  task process_data {
    run "echo"
    with { rows = 3 }
  }
  task publish after process_data {
    run "sleep"
    with { duration = "1500ms" }
  }
  task send_email after process_data {
    run "echo"
    with { to = "ops@example.com"  rows = process_data.output.rows }
  }
}
`

func compile(t *testing.T, src string) *ir.Workflow {
	t.Helper()
	res := compiler.Compile("w.wf", []byte(src), compiler.Config{})
	if res.Diags.HasErrors() {
		t.Fatalf("compile: %v", res.Diags)
	}
	return res.IR
}

// backends: the embedded server, and a redis-server of the test's own
// when one is installed.
func forBackends(t *testing.T, f func(t *testing.T, url string)) {
	t.Run("embedded", func(t *testing.T) { f(t, "") })
	t.Run("redis", func(t *testing.T) {
		if _, err := exec.LookPath("redis-server"); err != nil {
			t.Skip("no redis-server")
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		cmd := exec.Command("redis-server", "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		for i := 0; ; i++ {
			c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
			if err == nil {
				c.Close()
				break
			}
			if i > 100 {
				t.Fatal("redis-server did not start")
			}
			time.Sleep(20 * time.Millisecond)
		}
		f(t, fmt.Sprintf("redis://127.0.0.1:%d/0", port))
	})
}

func engine(t *testing.T, url string) (*runtime.Engine, context.Context) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	eng, err := runtime.Open(ctx, runtime.Options{RedisURL: url})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	eng.StartWorkers(ctx, 4, runtime.WorkerOptions{Handlers: handlers.NewRegistry(handlers.Options{}), Block: 100 * time.Millisecond})
	return eng, ctx
}

func waitState(t *testing.T, ctx context.Context, eng *runtime.Engine, run, node, state string) {
	t.Helper()
	for ctx.Err() == nil {
		st, err := eng.Status(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		if ns := st.Nodes[node]; ns != nil && ns.State == state {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s never %s", node, state)
}

// snapshot is what a refused patch must leave as it was.
func snapshot(t *testing.T, ctx context.Context, eng *runtime.Engine, run string) string {
	st, err := eng.Status(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := eng.Events(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%s %s %d %d", st.State, st.IR, len(evs), len(st.Nodes))
}

func TestApplyFrom(t *testing.T) {
	forBackends(t, func(t *testing.T, url string) {
		eng, ctx := engine(t, url)
		old, nw := compile(t, base), compile(t, next)
		if _, err := eng.Deploy(ctx, old, "pipeline", "test"); err != nil {
			t.Fatal(err)
		}
		run, _, err := eng.SubmitTag(ctx, "pipeline", nil)
		if err != nil {
			t.Fatal(err)
		}
		waitState(t, ctx, eng, run, "process_data", runtime.NodeCompleted)

		// A type break is refused by the compiler's checks; nothing changes.
		before := snapshot(t, ctx, eng, run)
		bad := `[{"op":"test","path":"/nodes/1/id","value":"publish"},{"op":"add","path":"/nodes/1/when","value":{"cel":"process_data.output.rows + 1"}}]`
		_, err = Apply(ctx, eng, Request{Run: run, Patch: []byte(bad), By: "test"})
		var ce *CheckError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), "/nodes/1/when") {
			t.Fatalf("type break: %v", err)
		}
		// An unknown path and a negative index name the pointer.
		for _, p := range []string{`[{"op":"remove","path":"/nodes/7"}]`, `[{"op":"remove","path":"/edges/-1"}]`} {
			_, err = Apply(ctx, eng, Request{Run: run, Patch: []byte(p)})
			var pe *ir.PatchError
			if !errors.As(err, &pe) || pe.Path == "" {
				t.Errorf("%s: %v", p, err)
			}
		}
		if after := snapshot(t, ctx, eng, run); after != before {
			t.Fatalf("refused patches changed the run: %s -> %s", before, after)
		}

		// The agent lane refuses anything but additions behind its node.
		for _, p := range []string{
			`[{"op":"remove","path":"/nodes/0"}]`,
			`[{"op":"add","path":"/edges/-","value":{"from":"process_data","to":"publish","kind":"after"}}]`,
		} {
			if _, err := Downstream(ctx, eng, run, "process_data", []byte(p), "agent"); err == nil {
				t.Errorf("agent lane accepted %s", p)
			}
		}

		// What-if, then the real thing, from the new source.
		res, err := Apply(ctx, eng, Request{Run: run, From: nw, By: "test", DryRun: true})
		if err != nil {
			t.Fatal(err)
		}
		if !res.DryRun || res.Version != 1 || len(res.Added) != 1 || res.Added[0] != "send_email" {
			t.Fatalf("dry run: %+v", res.PatchResult)
		}
		res, err = Apply(ctx, eng, Request{Run: run, From: nw, By: "test"})
		if err != nil {
			t.Fatal(err)
		}
		if res.Version != 2 || len(res.Delivered) != 1 {
			t.Fatalf("patch: %+v", res.PatchResult)
		}
		again, err := Apply(ctx, eng, Request{Run: run, From: nw, By: "test"})
		if err != nil || !again.Unchanged {
			t.Fatalf("patching to the same workflow again: %+v %v", again, err)
		}
		st, err := eng.Wait(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		if st.State != runtime.RunCompleted || st.Nodes["send_email"] == nil || string(st.Nodes["send_email"].Output) != `{"to":"ops@example.com","rows":3}` {
			t.Fatalf("status: %+v %s", st, st.Nodes["send_email"].Output)
		}
	})
}

func TestAllRunningAndAgentLane(t *testing.T) {
	forBackends(t, func(t *testing.T, url string) {
		eng, ctx := engine(t, url)
		old, nw := compile(t, base), compile(t, next)
		if _, err := eng.Deploy(ctx, old, "pipeline", "test"); err != nil {
			t.Fatal(err)
		}
		var runs []string
		for range 2 {
			run, _, err := eng.SubmitTag(ctx, "pipeline", nil)
			if err != nil {
				t.Fatal(err)
			}
			runs = append(runs, run)
		}
		out, err := AllRunning(ctx, eng, "pipeline", nw, "test", false)
		if err != nil || len(out) != 2 {
			t.Fatalf("all running: %v %v", out, err)
		}
		for _, o := range out {
			if o.Err != nil {
				t.Errorf("run %s: %v", o.Run, o.Err)
			}
		}
		// The agent adds a node behind process_data on the first run.
		agent := `[{"op":"add","path":"/nodes/-","value":{"id":"audit","type":"task","handler":"echo","join":"all","with":[{"name":"n","value":{"expr":{"cel":"process_data.output.rows"}}}]}},
			{"op":"add","path":"/edges/-","value":{"from":"process_data","to":"audit","kind":"after"}}]`
		if _, err := Downstream(ctx, eng, runs[0], "process_data", []byte(agent), "agent"); err != nil {
			t.Fatal(err)
		}
		for i, run := range runs {
			st, err := eng.Wait(ctx, run)
			if err != nil {
				t.Fatal(err)
			}
			if st.State != runtime.RunCompleted || st.Nodes["send_email"] == nil || st.Nodes["send_email"].State != runtime.NodeCompleted {
				t.Errorf("run %d: %+v", i, st)
			}
			if (st.Nodes["audit"] != nil) != (i == 0) {
				t.Errorf("run %d: audit %+v", i, st.Nodes["audit"])
			}
		}
	})
}

// TestAgentPatchLane: an agent's patch_workflow tool call, through the
// worker's tools and this applier (as wfc worker wires them), adds a node
// behind the agent to its running run, and the node runs.
func TestAgentPatchLane(t *testing.T) {
	forBackends(t, func(t *testing.T, url string) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		eng, err := runtime.Open(ctx, runtime.Options{RedisURL: url})
		if err != nil {
			t.Fatal(err)
		}
		defer eng.Close()
		add := `{"operations":[{"op":"add","path":"/nodes/-","value":{"id":"followup","type":"task","handler":"echo","join":"all","with":[{"name":"m","value":{"const":"hi"}}]}},` +
			`{"op":"add","path":"/edges/-","value":{"from":"think","to":"followup","kind":"after"}}],"description":"one more step"}`
		f := &agent.Fake{Answers: []agent.FakeAnswer{
			{Turn: 1, ToolCalls: []agent.FakeToolCall{{Name: "patch_workflow", Arguments: json.RawMessage(add)}}},
			{Turn: 2, Text: "done"},
		}}
		srv := httptest.NewServer(f)
		defer srv.Close()
		client, err := agent.New(agent.Config{BaseURL: srv.URL + "/v1", Retries: -1})
		if err != nil {
			t.Fatal(err)
		}
		ts, err := tools.NewWorker(tools.Config{})
		if err != nil {
			t.Fatal(err)
		}
		patch := func(ctx context.Context, run, node string, p []byte, by string) (json.RawMessage, error) {
			res, err := Downstream(ctx, eng, run, node, p, by)
			if err != nil {
				return nil, err
			}
			return json.Marshal(res)
		}
		eng.StartWorkers(ctx, 2, runtime.WorkerOptions{Handlers: handlers.NewRegistry(handlers.Options{}), Model: client, Tools: ts, AgentPatch: patch, Block: 100 * time.Millisecond})
		w := compile(t, `workflow w {
  task start { run "noop" }
  agent think after start {
    model "m"
    prompt "plan"
    tools [patch_workflow]
  }
}
`)
		run, err := eng.Submit(ctx, w, nil)
		if err != nil {
			t.Fatal(err)
		}
		st, err := eng.Wait(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		if st.State != runtime.RunCompleted || st.Nodes["followup"] == nil || st.Nodes["followup"].State != runtime.NodeCompleted {
			var said []string
			for _, r := range f.Requests() {
				for _, m := range r.Messages {
					if m.Role == "tool" {
						said = append(said, m.Content)
					}
				}
			}
			t.Fatalf("run %s (%s): followup %+v; tool results %q", st.State, st.Error, st.Nodes["followup"], said)
		}
		evs, err := eng.Events(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, ev := range evs {
			if ev.Type == "patch.applied" && strings.Contains(ev.Fields["by"], "agent think") {
				found = true
			}
		}
		if !found {
			t.Errorf("no patch.applied event by the agent: %+v", evs)
		}
	})
}

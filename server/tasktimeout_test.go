package server

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/wfc-lang/wfc/runtime"
)

const timeoutTaskSource = `workflow slow {
  input { who: string }
  handler "crm.lookup" { config { who: string }  output { name: string } }
  task a {
    run "crm.lookup"
    with { who = input.who }
    timeout 300ms
  }
  output { name = a.output.name }
}`

// A remote task over HTTP whose node has a timeout: the worker's
// heartbeats past it are answered 409 timed-out, the run fails with the
// typed timeout error, and the worker's late completion is a duplicate
// (409 lease-lost) that changes nothing.
func TestTaskQueueTimeout(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		_, worker, sub := taskServer(t, b, 5*time.Second)
		r := sub.do("POST", "/v1/runs", map[string]any{"source": timeoutTaskSource, "inputs": map[string]any{"who": "ada"}}, nil)
		if r.status != http.StatusCreated {
			t.Fatalf("submit: %d %s", r.status, r.body)
		}
		var run submitResponse
		r.decode(t, &run)
		r = worker.do("POST", "/v1/tasks/poll", map[string]any{"worker": "w1", "handlers": []string{"crm.lookup"}, "wait_ms": 3000}, nil)
		var task runtime.RemoteTask
		r.decode(t, &task)
		if r.status != 200 || task.RunID != run.RunID {
			t.Fatalf("poll: %d %s", r.status, r.body)
		}
		if task.TimeoutMS != 300 {
			t.Fatalf("the task tells timeout_ms %d, want the node's 300: %s", task.TimeoutMS, r.body)
		}
		base := "/v1/tasks/" + task.ID
		var last *resp
		for range 300 {
			if last = worker.do("POST", base+"/heartbeat", map[string]any{"lease": task.Lease}, nil); last.status != 200 {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if p := last.problem(t, 409); p.Code != "timed-out" {
			t.Fatalf("heartbeat past the timeout: %+v", p)
		}
		st := sub.waitRun(run.RunID)
		if ns := st.Nodes["a"]; st.State != runtime.RunFailed || ns == nil || ns.Code != "timeout" || !strings.Contains(ns.Error, "timed out after 300ms") {
			t.Fatalf("run %s %s", st.State, mustJSON(st))
		}
		if p := worker.do("POST", base+"/complete", map[string]any{"lease": task.Lease, "output": map[string]any{"name": "late"}}, nil).problem(t, 409); p.Code != "lease-lost" {
			t.Fatalf("late completion: %+v", p)
		}
		if st2 := sub.waitRun(run.RunID); st2.State != runtime.RunFailed || st2.Result != nil {
			t.Fatalf("the late completion changed the run: %s", mustJSON(st2))
		}
	})
}

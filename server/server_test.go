package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wfc-lang/wfc/compiler"
	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/runtime"
)

func readExample(t testing.TB, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "examples", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

const badSource = `workflow broken {
  task a {
    run "cel"
    with { x = nosuch.output.y }
  }
}
`

func TestWorkflowsAndRuns(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		ts := startServer(t, b)
		c := ts.client(t, "")
		greet := readExample(t, "greet.wf")

		// Deploy a source with a tag; a broken one is refused with the
		// compiler's diagnostics and positions.
		r := c.do("POST", "/v1/workflows", map[string]any{"source": greet, "file": "greet.wf", "tag": "greet-v1"}, nil)
		if r.status != 201 {
			t.Fatalf("deploy: %d %s", r.status, r.body)
		}
		var dep workflowResponse
		r.decode(t, &dep)
		if dep.Name != "greet" || !runtime.IsIRHash(dep.Hash) {
			t.Fatalf("deploy: %+v", dep)
		}
		p := c.do("POST", "/v1/workflows", map[string]any{"source": badSource, "file": "broken.wf"}, nil).problem(t, 422)
		diags, _ := json.Marshal(p.Diagnostics)
		if !strings.Contains(string(diags), `"code":"WF`) || !strings.Contains(string(diags), `"file":"broken.wf"`) || !strings.Contains(string(diags), `"offset":`) {
			t.Fatalf("diagnostics without codes or positions: %s", diags)
		}
		// An import would read the server's disk: refused.
		p = c.do("POST", "/v1/workflows", map[string]any{"source": "import \"/etc/passwd\"\n" + greet}, nil).problem(t, 422)
		if !strings.Contains(string(mustJSON(p.Diagnostics)), "cannot read") {
			t.Fatalf("import not refused: %+v", p)
		}
		// Deploy an IR document.
		res := compiler.Compile("greet.wf", []byte(greet), compiler.Config{})
		irDoc, _ := ir.Marshal(res.IR)
		r = c.do("POST", "/v1/workflows", map[string]any{"ir": json.RawMessage(irDoc), "tag": "greet-ir"}, nil)
		var dep2 workflowResponse
		r.decode(t, &dep2)
		if r.status != 201 || dep2.Hash != dep.Hash {
			t.Fatalf("deploy IR: %d %s (want hash %s)", r.status, r.body, dep.Hash)
		}
		if dep.Tag != "greet-v1" || dep.Version != 1 || dep2.Version != 1 {
			t.Fatalf("versions: %+v %+v", dep, dep2)
		}
		// The same IR again: the tag's current version; another IR: the
		// next version.
		r = c.do("POST", "/v1/workflows", map[string]any{"source": greet, "tag": "greet-ir"}, nil)
		var dep3 workflowResponse
		r.decode(t, &dep3)
		if r.status != 201 || dep3.Version != 1 {
			t.Fatalf("redeploy: %d %s", r.status, r.body)
		}
		other := strings.Replace(greet, "workflow greet", "workflow greet2", 1)
		r = c.do("POST", "/v1/workflows", map[string]any{"source": other, "tag": "greet-ir"}, nil)
		r.decode(t, &dep3)
		if r.status != 201 || dep3.Version != 2 || dep3.Hash == dep.Hash || dep3.Name != "greet2" {
			t.Fatalf("second version: %d %s", r.status, r.body)
		}
		var list struct{ Tags []runtime.Version }
		c.do("GET", "/v1/workflows", nil, nil).decode(t, &list)
		if len(list.Tags) != 2 || list.Tags[0].Tag != "greet-ir" || list.Tags[0].Version != 2 || list.Tags[1].Tag != "greet-v1" || list.Tags[1].Hash != dep.Hash {
			t.Fatalf("list: %+v", list)
		}
		var versions struct{ Versions []runtime.Version }
		c.do("GET", "/v1/workflows/greet-ir/versions", nil, nil).decode(t, &versions)
		if len(versions.Versions) != 2 || versions.Versions[0].Hash != dep.Hash || versions.Versions[1].Hash != dep3.Hash || versions.Versions[1].Version != 2 {
			t.Fatalf("versions: %+v", versions)
		}
		c.do("GET", "/v1/workflows/nosuch/versions", nil, nil).problem(t, 404)
		for ref, want := range map[string]string{"greet-v1": dep.Hash, dep.Hash: dep.Hash, "greet-ir": dep3.Hash} {
			r = c.do("GET", "/v1/workflows/"+ref, nil, nil)
			var got workflowResponse
			r.decode(t, &got)
			if r.status != 200 || got.Hash != want || len(got.IR) == 0 {
				t.Fatalf("get %s: %d %s", ref, r.status, r.body)
			}
		}
		c.do("GET", "/v1/workflows/nosuch", nil, nil).problem(t, 404)
		c.do("GET", "/v1/workflows/sha256:"+strings.Repeat("0", 64), nil, nil).problem(t, 404)

		// Submit by tag, by hash and inline; wrong inputs write nothing.
		r = c.do("POST", "/v1/runs", map[string]any{"workflow": "greet-v1", "inputs": map[string]any{"name": "Ada"}}, nil)
		if r.status != 201 || r.header.Get("Location") == "" {
			t.Fatalf("submit: %d %s", r.status, r.body)
		}
		var sub submitResponse
		r.decode(t, &sub)
		// A run submitted by tag is the tag's (TagRuns, wfc patch --all-running).
		if runs, err := ts.eng.TagRuns(context.Background(), "greet-v1"); err != nil || len(runs) != 1 || runs[0].RunID != sub.RunID {
			t.Fatalf("tag runs: %v %v", runs, err)
		}
		st := c.waitRun(sub.RunID)
		if st.State != "completed" || string(st.Result) != `{"result":"HELLO, ADA!"}` {
			t.Fatalf("run: %s %s", st.State, st.Result)
		}
		r = c.do("POST", "/v1/runs", map[string]any{"source": greet, "inputs": map[string]any{"name": "Bo"}}, nil)
		var sub2 submitResponse
		r.decode(t, &sub2)
		if r.status != 201 || sub2.IR != dep.Hash {
			t.Fatalf("inline submit: %d %s", r.status, r.body)
		}
		c.waitRun(sub2.RunID)
		before := listRuns(t, c, "")
		p = c.doRaw("POST", "/v1/runs", map[string]any{"workflow": dep.Hash, "inputs": map[string]any{"name": 3}}, nil, false).problem(t, 422)
		if len(p.Errors) == 0 || !strings.Contains(p.Errors[0], "name") {
			t.Fatalf("input problem: %+v", p)
		}
		c.do("POST", "/v1/runs", map[string]any{"workflow": dep.Hash, "inputs": map[string]any{}}, nil).problem(t, 422)
		c.do("POST", "/v1/runs", map[string]any{"workflow": "nosuch"}, nil).problem(t, 404)
		if after := listRuns(t, c, ""); len(after) != len(before) {
			t.Fatalf("a refused submit wrote a run: %d runs, then %d", len(before), len(after))
		}

		// Idempotency: a retried submit starts one run; the key for
		// another workflow is refused.
		hdr := map[string]string{"Idempotency-Key": "order-17"}
		r1 := c.do("POST", "/v1/runs", map[string]any{"workflow": "greet-v1", "inputs": map[string]any{"name": "Cy"}}, hdr)
		r2 := c.do("POST", "/v1/runs", map[string]any{"workflow": "greet-v1", "inputs": map[string]any{"name": "Cy"}}, hdr)
		var s1, s2 submitResponse
		r1.decode(t, &s1)
		r2.decode(t, &s2)
		if r1.status != 201 || r2.status != 200 || s1.RunID != s2.RunID || r2.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("idempotent submit: %d %s / %d %s", r1.status, r1.body, r2.status, r2.body)
		}
		c.do("POST", "/v1/runs", map[string]any{"source": readExample(t, "wait.wf")}, hdr).problem(t, 422)
		c.waitRun(s1.RunID)

		// List and filter, with paging.
		all := listRuns(t, c, "")
		if len(all) != 3 {
			t.Fatalf("want 3 runs, got %+v", all)
		}
		if got := listRuns(t, c, "?state=completed&workflow=greet"); len(got) != 3 {
			t.Fatalf("filter: %+v", got)
		}
		if got := listRuns(t, c, "?state=running"); len(got) != 0 {
			t.Fatalf("filter running: %+v", got)
		}
		if got := listRuns(t, c, "?workflow=other"); len(got) != 0 {
			t.Fatalf("filter workflow: %+v", got)
		}
		future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		if got := listRuns(t, c, "?from="+future); len(got) != 0 {
			t.Fatalf("filter from: %+v", got)
		}
		if got := listRuns(t, c, "?to="+future); len(got) != 3 {
			t.Fatalf("filter to: %+v", got)
		}
		var paged []string
		cursor := ""
		for i := 0; i < 10; i++ {
			var page runtime.RunPage
			c.do("GET", "/v1/runs?limit=1"+cursor, nil, nil).decode(t, &page)
			for _, r := range page.Runs {
				paged = append(paged, r.RunID)
			}
			if page.Next == "" {
				break
			}
			cursor = "&cursor=" + page.Next
		}
		if strings.Join(paged, ",") != strings.Join(ids(all), ",") {
			t.Fatalf("paged %v, listed %v", paged, ids(all))
		}
		c.doRaw("GET", "/v1/runs?state=bogus", nil, nil, false).problem(t, 400)
		c.do("GET", "/v1/runs?cursor=bogus", nil, nil).problem(t, 400)

		// Cancel and retry of an ended run: 409, nothing changes.
		c.do("POST", "/v1/runs/"+sub.RunID+"/cancel", nil, nil).problem(t, 409)
		c.do("POST", "/v1/runs/"+sub.RunID+"/retry", nil, nil).problem(t, 409)
		if st := c.waitRun(sub.RunID); st.State != "completed" {
			t.Fatalf("state changed: %s", st.State)
		}
		c.do("GET", "/v1/runs/nosuch", nil, nil).problem(t, 404)
		c.do("POST", "/v1/runs/nosuch/cancel", nil, nil).problem(t, 404)
	})
}

func mustJSON(v any) []byte { b, _ := json.Marshal(v); return b }

func listRuns(t testing.TB, c *client, query string) []runtime.RunSummary {
	t.Helper()
	r := c.do("GET", "/v1/runs"+query, nil, nil)
	if r.status != 200 {
		t.Fatalf("list: %d %s", r.status, r.body)
	}
	var page runtime.RunPage
	r.decode(t, &page)
	return page.Runs
}

func ids(l []runtime.RunSummary) []string {
	var out []string
	for _, r := range l {
		out = append(out, r.RunID)
	}
	return out
}

func TestCancelRetry(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		ts := startServer(t, b)
		c := ts.client(t, "")
		r := c.do("POST", "/v1/runs", map[string]any{"source": readExample(t, "approval.wf"), "inputs": map[string]any{"customer": "acme", "percent": 15}}, nil)
		var sub submitResponse
		r.decode(t, &sub)
		c.waitNode(sub.RunID, "approve", "waiting")
		r = c.do("POST", "/v1/runs/"+sub.RunID+"/cancel", nil, nil)
		var st runtime.Status
		r.decode(t, &st)
		if r.status != 200 || st.State != "cancelled" {
			t.Fatalf("cancel: %d %s", r.status, r.body)
		}
		c.do("POST", "/v1/runs/"+sub.RunID+"/cancel", nil, nil).problem(t, 409)
		r = c.do("POST", "/v1/runs/"+sub.RunID+"/retry", nil, nil)
		r.decode(t, &st)
		if r.status != 200 || st.State != "running" || st.Gen != 1 {
			t.Fatalf("retry: %d %s", r.status, r.body)
		}
	})
}

func TestApprovals(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		dir := t.TempDir()
		tokens, err := LoadTokens(writeTokens(t, dir, `
cfo-token-0123456789 cfo@example.com read,submit,decide
eve-token-0123456789 eve@example.com decide,read
`), "", nil)
		if err != nil {
			t.Fatal(err)
		}
		ts := startServer(t, b, func(c *Config) { c.Tokens = tokens })
		cfo, eve := ts.client(t, "cfo-token-0123456789"), ts.client(t, "eve-token-0123456789")
		r := cfo.do("POST", "/v1/runs", map[string]any{"source": readExample(t, "approval.wf"), "inputs": map[string]any{"customer": "acme", "percent": 15}}, nil)
		var sub submitResponse
		r.decode(t, &sub)
		cfo.waitNode(sub.RunID, "approve", "waiting")
		var aps struct{ Approvals []runtime.Approval }
		cfo.do("GET", "/v1/approvals", nil, nil).decode(t, &aps)
		if len(aps.Approvals) != 1 || aps.Approvals[0].Run != sub.RunID || aps.Approvals[0].State != "open" {
			t.Fatalf("approvals: %+v", aps)
		}
		cfo.do("GET", "/v1/approvals?run="+sub.RunID, nil, nil).decode(t, &aps)
		if len(aps.Approvals) != 1 {
			t.Fatalf("approvals of the run: %+v", aps)
		}
		path := "/v1/runs/" + sub.RunID + "/approvals/approve/decision"
		// The token's subject decides: eve is no approver.
		p := eve.do("POST", path, map[string]any{"approve": true}, nil).problem(t, 403)
		if !strings.Contains(p.Detail, `"eve@example.com" is not an approver`) {
			t.Fatalf("problem: %+v", p)
		}
		cfo.doRaw("POST", path, map[string]any{"approve": true, "fields": map[string]any{"final": "lots"}}, nil, true).problem(t, 422)
		cfo.doRaw("POST", path, map[string]any{}, nil, false).problem(t, 400)
		cfo.do("POST", "/v1/runs/"+sub.RunID+"/approvals/draft/decision", map[string]any{"approve": true}, nil).problem(t, 422)
		cfo.do("POST", "/v1/runs/"+sub.RunID+"/approvals/nosuch/decision", map[string]any{"approve": true}, nil).problem(t, 404)
		cfo.do("GET", "/v1/runs/"+sub.RunID, nil, nil)
		r = cfo.do("POST", path, map[string]any{"approve": true, "comment": "ok", "fields": map[string]any{"final": 12}}, nil)
		var ap runtime.Approval
		r.decode(t, &ap)
		if r.status != 200 || ap.State != "approved" || ap.By != "cfo@example.com" {
			t.Fatalf("decide: %d %s", r.status, r.body)
		}
		st := cfo.waitRun(sub.RunID)
		if st.State != "completed" || string(st.Result) != `{"approved":true,"discount":12}` {
			t.Fatalf("run: %s %s", st.State, st.Result)
		}
		// A decision on a finished run: 409, nothing changes.
		cfo.do("POST", path, map[string]any{"approve": false}, nil).problem(t, 409)
		if st2 := cfo.waitRun(sub.RunID); st2.State != "completed" || string(st2.Result) != string(st.Result) {
			t.Fatalf("state changed: %+v", st2)
		}
	})
}

func TestSignalsAndCompletions(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		ts := startServer(t, b)
		c := ts.client(t, "")
		src := readExample(t, "signal.wf")
		start := func(order string) string {
			var sub submitResponse
			c.do("POST", "/v1/runs", map[string]any{"source": src, "inputs": map[string]any{"order_id": order, "customer": "acme"}}, nil).decode(t, &sub)
			c.waitNode(sub.RunID, "reply", "waiting")
			return sub.RunID
		}
		// A signal.
		run := start("o-1")
		c.do("POST", "/v1/runs/"+run+"/signals", map[string]any{"name": "nosuch"}, nil).problem(t, 422)
		c.do("POST", "/v1/runs/"+run+"/signals", map[string]any{"name": "customer_reply", "correlation": "o-1", "payload": map[string]any{"text": 3}}, nil).problem(t, 422)
		r := c.do("POST", "/v1/runs/"+run+"/signals", map[string]any{"name": "customer_reply", "correlation": "o-1", "payload": map[string]any{"text": "yes"}}, nil)
		var sr signalResponse
		r.decode(t, &sr)
		if r.status != 200 || sr.Taken != "reply" {
			t.Fatalf("signal: %d %s", r.status, r.body)
		}
		if st := c.waitRun(run); st.State != "completed" {
			t.Fatalf("run: %+v", st)
		}
		c.do("POST", "/v1/runs/"+run+"/signals", map[string]any{"name": "customer_reply", "correlation": "o-1"}, nil).problem(t, 409)

		// A completion token: single use, one step.
		run = start("o-2")
		c.do("POST", "/v1/runs/"+run+"/completion-tokens", map[string]any{"x": "send"}, nil).problem(t, 409)
		c.do("POST", "/v1/runs/"+run+"/completion-tokens", map[string]any{"x": "nosuch"}, nil).problem(t, 404)
		r = c.do("POST", "/v1/runs/"+run+"/completion-tokens", map[string]any{"x": "reply"}, nil)
		var tok completionTokenResponse
		r.decode(t, &tok)
		if r.status != 201 || tok.Token == "" {
			t.Fatalf("token: %d %s", r.status, r.body)
		}
		// A forged or altered token is refused.
		c.do("POST", "/v1/completions/"+tok.Token[:len(tok.Token)-2]+"AA", map[string]any{}, nil).problem(t, 401)
		// A payload of the wrong type: refused, and the token stays usable.
		c.do("POST", tok.URL, map[string]any{"payload": map[string]any{"text": 3}}, nil).problem(t, 422)
		r = c.do("POST", tok.URL, map[string]any{"payload": map[string]any{"text": "done"}}, nil)
		r.decode(t, &sr)
		if r.status != 200 || sr.Taken != "reply" {
			t.Fatalf("complete: %d %s", r.status, r.body)
		}
		st := c.waitRun(run)
		if st.State != "completed" || !strings.Contains(string(st.Result), `we got \"done\"`) {
			t.Fatalf("run: %s %s", st.State, st.Result)
		}
		// Replayed: refused, nothing changes.
		c.do("POST", tok.URL, map[string]any{"payload": map[string]any{"text": "again"}}, nil).problem(t, 409)
		if st2 := c.waitRun(run); string(st2.Result) != string(st.Result) {
			t.Fatalf("result changed: %s", st2.Result)
		}
	})
}

// TestCompletionReplayWhileWaiting: two concurrent uses of one token
// while the step waits: exactly one applies (ClaimOnce).
func TestCompletionReplayWhileWaiting(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		ts := startServer(t, b)
		c := ts.client(t, "")
		var sub submitResponse
		c.do("POST", "/v1/runs", map[string]any{"source": readExample(t, "signal.wf"), "inputs": map[string]any{"order_id": "o-3", "customer": "acme"}}, nil).decode(t, &sub)
		c.waitNode(sub.RunID, "reply", "waiting")
		var tok completionTokenResponse
		c.do("POST", "/v1/runs/"+sub.RunID+"/completion-tokens", map[string]any{"x": "reply"}, nil).decode(t, &tok)
		const n = 6
		codes := make(chan int, n)
		for i := 0; i < n; i++ {
			go func(i int) {
				cl := &client{t: t, base: c.base}
				req, _ := http.NewRequest("POST", cl.base+tok.URL, strings.NewReader(fmt.Sprintf(`{"payload":{"text":"t%d"}}`, i)))
				req.Header.Set("Content-Type", "application/json")
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					codes <- 0
					return
				}
				res.Body.Close()
				codes <- res.StatusCode
			}(i)
		}
		ok := 0
		for i := 0; i < n; i++ {
			code := <-codes
			switch code {
			case 200:
				ok++
			case 409:
			default:
				t.Errorf("status %d", code)
			}
		}
		if ok != 1 {
			t.Fatalf("%d completions applied, want 1", ok)
		}
		if st := c.waitRun(sub.RunID); st.State != "completed" {
			t.Fatalf("run: %s", st.State)
		}
	})
}

func TestHealthAndDocument(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		ts := startServer(t, b)
		c := ts.client(t, "")
		if r := c.do("GET", "/healthz", nil, nil); r.status != 200 {
			t.Fatalf("healthz: %d", r.status)
		}
		if r := c.do("GET", "/readyz", nil, nil); r.status != 200 {
			t.Fatalf("readyz: %d %s", r.status, r.body)
		}
		r := c.do("GET", "/openapi.json", nil, nil)
		if r.status != 200 || string(r.body) != string(openAPIDoc) {
			t.Fatalf("openapi.json: %d", r.status)
		}
		// After shutdown the server is not ready (a load balancer drains it).
		ts.Shutdown(context.Background())
		c.do("GET", "/readyz", nil, nil).problem(t, 503)
	})
}

func TestBadRequests(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		ts := startServer(t, b, func(c *Config) { c.MaxBodyBytes = 64 << 10 })
		c := ts.client(t, "")
		c.doRaw("POST", "/v1/runs", `{"workflow": `, nil, false).problem(t, 400)
		c.doRaw("POST", "/v1/runs", `{"workflow": "x"} {}`, nil, false).problem(t, 400)
		c.doRaw("POST", "/v1/runs", `{"nosuchfield": 1}`, nil, false).problem(t, 400)
		c.doRaw("POST", "/v1/runs", `[1,2]`, nil, false).problem(t, 400)
		c.doRaw("POST", "/v1/workflows", map[string]any{"source": strings.Repeat("x", 100<<10)}, nil, false).problem(t, 413)
		c.doRaw("POST", "/v1/runs", `{}`, map[string]string{"Content-Type": "text/plain"}, false).problem(t, 415)
		c.doRaw("POST", "/v1/runs", `{"source":"workflow w { task a { run \"noop\" } }"}`, map[string]string{"Idempotency-Key": strings.Repeat("k", 300)}, false).problem(t, 400)
		c.doRaw("POST", "/v1/workflows", map[string]any{"source": "x", "ir": map[string]any{}}, nil, false).problem(t, 400)
		c.doRaw("POST", "/v1/workflows", map[string]any{"ir": map[string]any{"name": 3}}, nil, true).problem(t, 422)
		c.doRaw("POST", "/v1/workflows", map[string]any{"source": readExample(t, "greet.wf"), "tag": "sha256:x"}, nil, false).problem(t, 400)
		c.doMode("GET", "/v1/nosuch", nil, nil, checkNothing).problem(t, 404)
		c.doMode("DELETE", "/v1/runs", nil, nil, checkNothing).problem(t, 405)
		c.doRaw("GET", "/v1/runs/x/events?after=bogus", nil, nil, true).problem(t, 400)
		if got := listRuns(t, c, ""); len(got) != 0 {
			t.Fatalf("bad requests wrote runs: %+v", got)
		}
		var list struct{ Tags []runtime.Version }
		c.do("GET", "/v1/workflows", nil, nil).decode(t, &list)
		if len(list.Tags) != 0 {
			t.Fatalf("bad requests deployed: %+v", list)
		}
	})
}

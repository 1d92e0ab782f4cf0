package server

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/wfc-lang/wfc/runtime"
)

func TestAuth(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		dir := t.TempDir()
		path := writeTokens(t, dir, `# tokens
reader-token-0123456789 reader read
submitter-token-0123456 ci submit,read
`)
		tokens, err := LoadTokens(path, "env-admin-token-012345 ops admin", nil)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		tokens.now = func() time.Time { return now }
		ts := startServer(t, b, func(c *Config) { c.Tokens = tokens })
		body := map[string]any{"source": readExample(t, "greet.wf"), "inputs": map[string]any{"name": "x"}}

		// Missing, wrong, wrong scope.
		ts.client(t, "").do("GET", "/v1/runs", nil, nil).problem(t, 401)
		ts.client(t, "nope-nope-nope-nope-nope").do("GET", "/v1/runs", nil, nil).problem(t, 401)
		r := ts.client(t, "").doRaw("GET", "/v1/runs", nil, map[string]string{"Authorization": "Basic cmVhZGVy"}, false)
		r.problem(t, 401)
		if r.header.Get("WWW-Authenticate") == "" {
			t.Fatal("401 without WWW-Authenticate")
		}
		reader := ts.client(t, "reader-token-0123456789")
		reader.do("POST", "/v1/runs", body, nil).problem(t, 403)
		reader.do("POST", "/v1/runs/x/cancel", nil, nil).problem(t, 403)
		if r := reader.do("GET", "/v1/runs", nil, nil); r.status != 200 {
			t.Fatalf("reader list: %d", r.status)
		}
		// The environment's token: admin.
		if r := ts.client(t, "env-admin-token-012345").do("POST", "/v1/runs", body, nil); r.status != 201 {
			t.Fatalf("env admin submit: %d %s", r.status, r.body)
		}
		// Health and the document need no token.
		if r := ts.client(t, "").do("GET", "/healthz", nil, nil); r.status != 200 {
			t.Fatal("healthz needs a token")
		}
		sub := ts.client(t, "submitter-token-0123456")
		if r := sub.do("POST", "/v1/runs", body, nil); r.status != 201 {
			t.Fatalf("submit: %d %s", r.status, r.body)
		}

		// The file changes: the submitter's token goes (expires at once),
		// the reader's gets an expiry; they apply within a second.
		exp := now.Add(time.Hour).UTC().Format(time.RFC3339)
		if err := os.WriteFile(path, []byte("reader-token-0123456789 reader read expires="+exp+"\nnew-token-0123456789 ci2 submit\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		now = now.Add(2 * time.Second)
		sub.do("POST", "/v1/runs", body, nil).problem(t, 401)
		if r := ts.client(t, "new-token-0123456789").do("POST", "/v1/runs", body, nil); r.status != 201 {
			t.Fatalf("new token: %d %s", r.status, r.body)
		}
		if r := reader.do("GET", "/v1/runs", nil, nil); r.status != 200 {
			t.Fatalf("reader before expiry: %d", r.status)
		}
		now = now.Add(2 * time.Hour)
		p := reader.do("GET", "/v1/runs", nil, nil).problem(t, 401)
		if !strings.Contains(p.Detail, "expired") {
			t.Fatalf("expired token: %+v", p)
		}
		// A broken file keeps the previous table.
		if err := os.WriteFile(path, []byte("short x read\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		now = now.Add(2 * time.Second)
		if r := ts.client(t, "new-token-0123456789").do("POST", "/v1/runs", body, nil); r.status != 201 {
			t.Fatalf("after a broken reload: %d %s", r.status, r.body)
		}
	})
}

func TestTokenFileErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ text, want string }{
		{"short sub read", "at least 16 bytes"},
		{"0123456789abcdef sub nosuch", `unknown scope "nosuch"`},
		{"0123456789abcdef sub", "want TOKEN SUBJECT SCOPES"},
		{"0123456789abcdef sub read expires=soon", "expires=RFC3339"},
	} {
		_, err := LoadTokens(writeTokens(t, dir, tc.text), "", nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.text, err, tc.want)
		}
		// The message names the line, never the secret.
		if err != nil && strings.Contains(err.Error(), "0123456789abcdef") {
			t.Errorf("the error shows the token: %v", err)
		}
	}
	if !IsLoopback("127.0.0.1:80") || !IsLoopback("[::1]:80") || !IsLoopback("localhost:1") || IsLoopback("0.0.0.0:80") || IsLoopback(":80") {
		t.Error("IsLoopback")
	}
}

// An sseEvent is one event of a stream.
type sseEvent struct{ id, typ, data string }

// openStream opens a run's event stream.
func openStream(t testing.TB, ctx context.Context, base, run, lastID string) (*http.Response, <-chan sseEvent) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/v1/runs/"+run+"/events", nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+cfoToken)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	v, _ := apiValidator()
	if ok, errs := v.ValidateHttpRequest(req); !ok {
		t.Fatalf("stream request: %s", verrs(errs))
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan sseEvent, 100)
	if res.StatusCode != 200 {
		close(ch)
		return res, ch
	}
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(res.Body)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.typ != "" {
					ch <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, ": heartbeat"):
				ch <- sseEvent{typ: "heartbeat"}
			case strings.HasPrefix(line, "id: "):
				ev.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				ev.typ = line[7:]
			case strings.HasPrefix(line, "data: "):
				ev.data += line[6:]
			}
		}
	}()
	return res, ch
}

func next(t testing.TB, ch <-chan sseEvent, skipBeats bool) sseEvent {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatal("stream closed")
			}
			if skipBeats && ev.typ == "heartbeat" {
				continue
			}
			return ev
		case <-deadline:
			t.Fatal("no event in 10 s")
		}
	}
}

func TestEventStream(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		ts := startServer(t, b, func(c *Config) { c.MaxStreams = 2; c.Tokens = cfoTokens(t) })
		c := ts.client(t, cfoToken)
		var sub submitResponse
		c.do("POST", "/v1/runs", map[string]any{"source": readExample(t, "approval.wf"), "inputs": map[string]any{"customer": "acme", "percent": 15}}, nil).decode(t, &sub)
		c.waitNode(sub.RunID, "approve", "waiting")
		var all struct{ Events []runtime.Event }
		c.do("GET", "/v1/runs/"+sub.RunID+"/events", nil, nil).decode(t, &all)
		if len(all.Events) < 3 {
			t.Fatalf("events: %+v", all)
		}

		// A client reads two events and disconnects.
		ctx, cancel := context.WithCancel(context.Background())
		res, ch := openStream(t, ctx, ts.http.URL, sub.RunID, "")
		if res.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("content type %q", res.Header.Get("Content-Type"))
		}
		e1, e2 := next(t, ch, true), next(t, ch, true)
		if e1.id != all.Events[0].ID || e2.id != all.Events[1].ID {
			t.Fatalf("stream %v %v, log %v", e1, e2, all.Events[:2])
		}
		var ev runtime.Event
		if err := json.Unmarshal([]byte(e2.data), &ev); err != nil || ev.Type != e2.typ {
			t.Fatalf("data %q: %v", e2.data, err)
		}
		// Idle: heartbeats.
		for i := 0; i < len(all.Events)-2; i++ {
			next(t, ch, true)
		}
		if hb := next(t, ch, false); hb.typ != "heartbeat" {
			t.Fatalf("want a heartbeat, got %+v", hb)
		}
		cancel()
		res.Body.Close()
		// The server sees the disconnect and frees the stream's slot (on
		// a loaded machine this took longer than opening the next two).
		for deadline := time.Now().Add(5 * time.Second); len(ts.streams) > 0; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d streams still open after the client left", len(ts.streams))
			}
		}

		// Bounded: with two open streams a third is refused.
		ctx2, cancel2 := context.WithCancel(context.Background())
		defer cancel2()
		_, chA := openStream(t, ctx2, ts.http.URL, sub.RunID, all.Events[len(all.Events)-1].ID)
		_, chB := openStream(t, ctx2, ts.http.URL, sub.RunID, all.Events[len(all.Events)-1].ID)
		next(t, chA, false) // heartbeats: both are open
		next(t, chB, false)
		c.do("GET", "/v1/runs/"+sub.RunID+"/events", nil, map[string]string{"Accept": "text/event-stream"}).problem(t, 503)
		cancel2()
		time.Sleep(100 * time.Millisecond) // the server sees the disconnects

		// It resumes after the second event: the rest, then the new events
		// of the decision, then the end.
		ctx3, cancel3 := context.WithCancel(context.Background())
		defer cancel3()
		_, ch = openStream(t, ctx3, ts.http.URL, sub.RunID, e2.id)
		for _, want := range all.Events[2:] {
			if got := next(t, ch, true); got.id != want.ID {
				t.Fatalf("resumed at %s, want %s", got.id, want.ID)
			}
		}
		c.do("POST", "/v1/runs/"+sub.RunID+"/approvals/approve/decision", map[string]any{"approve": true}, nil)
		var types []string
		for {
			e := next(t, ch, true)
			if e.typ == "end" {
				if !strings.Contains(e.data, `"completed"`) {
					t.Fatalf("end: %s", e.data)
				}
				break
			}
			types = append(types, e.typ)
		}
		if !strings.Contains(strings.Join(types, " "), "run.completed") {
			t.Fatalf("events after the decision: %v", types)
		}
		c.do("GET", "/v1/runs/nosuch/events", nil, map[string]string{"Accept": "text/event-stream"}).problem(t, 404)
	})
}

// TestStreamShutdown: Shutdown ends open streams with a shutdown event.
func TestStreamShutdown(t *testing.T) {
	ts := startServer(t, backends[0])
	c := ts.client(t, "")
	var sub submitResponse
	c.do("POST", "/v1/runs", map[string]any{"source": readExample(t, "approval.wf"), "inputs": map[string]any{"customer": "acme", "percent": 15}}, nil).decode(t, &sub)
	_, ch := openStream(t, context.Background(), ts.http.URL, sub.RunID, "")
	next(t, ch, true)
	done := make(chan error)
	go func() { done <- ts.Shutdown(context.Background()) }()
	for {
		e := next(t, ch, true)
		if e.typ == "shutdown" {
			break
		}
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Shutdown did not return")
	}
	if _, ok := <-ch; ok {
		t.Fatal("the stream is still open")
	}
}

// TestTwoServers: two servers on one Redis act as one service.
func TestTwoServers(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		e1, url, prefix := openEngine(t, b, "", "")
		e2, _, _ := openEngine(t, b, url, prefix)
		s1 := startServerOn(t, e1, url, prefix, func(c *Config) { c.Tokens = cfoTokens(t) })
		s2 := startServerOn(t, e2, url, prefix, func(c *Config) { c.Tokens = cfoTokens(t) })
		c1, c2 := s1.client(t, cfoToken), s2.client(t, cfoToken)
		var dep workflowResponse
		c1.do("POST", "/v1/workflows", map[string]any{"source": readExample(t, "approval.wf"), "tag": "disc"}, nil).decode(t, &dep)
		hdr := map[string]string{"Idempotency-Key": "k1"}
		body := map[string]any{"workflow": "disc", "inputs": map[string]any{"customer": "acme", "percent": 15}}
		var a, bb submitResponse
		c1.do("POST", "/v1/runs", body, hdr).decode(t, &a)
		r := c2.do("POST", "/v1/runs", body, hdr)
		r.decode(t, &bb)
		if a.RunID != bb.RunID || r.status != 200 {
			t.Fatalf("two servers started %s and %s (%d)", a.RunID, bb.RunID, r.status)
		}
		c2.waitNode(a.RunID, "approve", "waiting")
		// A completion token from one server works on the other (same key).
		var aps struct{ Approvals []runtime.Approval }
		c2.do("GET", "/v1/approvals", nil, nil).decode(t, &aps)
		if len(aps.Approvals) != 1 {
			t.Fatalf("approvals via server 2: %+v", aps)
		}
		_, ch := openStream(t, context.Background(), s1.http.URL, a.RunID, "")
		c2.do("POST", "/v1/runs/"+a.RunID+"/approvals/approve/decision", map[string]any{"approve": true}, nil)
		for {
			if e := next(t, ch, true); e.typ == "end" {
				break
			}
		}
		if got := listRuns(t, c1, ""); len(got) != 1 || got[0].State != "completed" {
			t.Fatalf("list via server 1: %+v", got)
		}
	})
}

const cfoToken = "cfo-token-abcdefghijklmnop"

// cfoTokens is a token table whose one token (cfoToken, admin) has an
// approver of examples/approval.wf as its subject.
func cfoTokens(t testing.TB) *Tokens {
	t.Helper()
	tk, err := LoadTokens("", cfoToken+" cfo@example.com admin", nil)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

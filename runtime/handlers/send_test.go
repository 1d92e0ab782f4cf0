package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestRetrySend: the loop the http and service handlers share sends again
// only what is retryable, at most tries times, and stops when its
// context ends even during a long Retry-After wait.
func TestRetrySend(t *testing.T) {
	ctx := context.Background()
	retryable := Errorf("http.503", true, "busy")
	cases := []struct {
		name  string
		errs  []error // the errors of successive sends; then success
		tries int
		want  int // sends
	}{
		{"first try", nil, 3, 1},
		{"retried then ok", []error{retryable, retryable}, 3, 3},
		{"exhausted", []error{retryable, retryable, retryable}, 3, 3},
		{"permanent stops", []error{Permanentf("bad")}, 3, 1},
		{"non-retryable code stops", []error{Errorf("http.404", false, "gone")}, 3, 1},
		{"one try", []error{retryable}, 1, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := 0
			out, err := retrySend(ctx, c.tries, time.Millisecond, func() (json.RawMessage, time.Duration, error) {
				n++
				if n <= len(c.errs) {
					return nil, 0, c.errs[n-1]
				}
				return json.RawMessage(`{}`), 0, nil
			})
			if n != c.want {
				t.Errorf("%d sends, want %d", n, c.want)
			}
			if c.want > len(c.errs) {
				if err != nil || string(out) != `{}` {
					t.Errorf("%s %v", out, err)
				}
			} else if err != c.errs[c.want-1] {
				t.Errorf("err = %v, want the last send's %v", err, c.errs[c.want-1])
			}
		})
	}

	// A context ended during a send stops the loop with the send's error.
	cctx, cancel := context.WithCancel(ctx)
	n := 0
	_, err := retrySend(cctx, 3, time.Hour, func() (json.RawMessage, time.Duration, error) {
		n++
		cancel()
		return nil, time.Hour, retryable
	})
	if n != 1 || err != retryable {
		t.Errorf("cancelled during the send: %d sends, %v", n, err)
	}
	// A server asking for an hour: the caller's context ends the wait
	// (or, on a slow machine, the send, as above).
	cctx, cancel = context.WithCancel(ctx)
	n = 0
	time.AfterFunc(20*time.Millisecond, cancel)
	_, err = retrySend(cctx, 3, time.Hour, func() (json.RawMessage, time.Duration, error) {
		n++
		return nil, time.Hour, retryable
	})
	if n != 1 || !errors.Is(err, context.Canceled) && err != retryable {
		t.Errorf("cancelled during the wait: %d sends, %v", n, err)
	}
}

// TestOutboundSend: the request the http and service handlers send, and
// the errors of the response's reading.
func TestOutboundSend(t *testing.T) {
	var got http.Header
	var gotBody string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		b, _ := io.ReadAll(r.Body)
		gotBody = string(b)
		switch r.URL.Path {
		case "/cut": // promises more than it sends
			w.Header().Set("Content-Length", "100")
			io.WriteString(w, "short")
		case "/big":
			io.WriteString(w, strings.Repeat("x", maxBody+1))
		case "/teapot":
			w.Header().Set("Retry-After", "7")
			http.Error(w, "  I'm a teapot  ", http.StatusTeapot)
		case "/busy":
			w.Header().Set("Retry-After", "7")
			http.Error(w, "<html>proxy page</html>", http.StatusServiceUnavailable)
		default:
			io.WriteString(w, `{"ok":true}`)
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	o := func(path string) *outbound {
		return &outbound{client: srv.Client(), what: "svc", method: "PUT", url: srv.URL + path, shown: "the-url",
			body: []byte(`{"a":1}`), idempotencyKey: "run/n", headers: map[string]string{"Accept": "text/plain", "X-Extra": "1"}}
	}

	resp, data, err := o("/").send(ctx)
	if err != nil || resp.StatusCode != 200 || string(data) != `{"ok":true}` {
		t.Fatalf("%v %s %v", resp, data, err)
	}
	if got.Get("Content-Type") != "application/json" || got.Get("Idempotency-Key") != "run/n" ||
		got.Get("Accept") != "text/plain" || got.Get("X-Extra") != "1" || gotBody != `{"a":1}` {
		t.Errorf("request headers %v, body %q", got, gotBody)
	}
	bodiless := o("/")
	bodiless.body, bodiless.idempotencyKey, bodiless.headers = nil, "", nil
	if _, _, err := bodiless.send(ctx); err != nil || got.Get("Content-Type") != "" || got.Get("Idempotency-Key") != "" || got.Get("Accept") != "application/json" || gotBody != "" {
		t.Errorf("no body: %v %v %q", err, got, gotBody)
	}

	_, _, err = o("/cut").send(ctx)
	if CodeOf(err) != "http.network" || IsPermanent(err) || !strings.HasPrefix(err.Error(), "svc: reading the response: ") {
		t.Errorf("cut body: %v (code %s)", err, CodeOf(err))
	}
	_, _, err = o("/big").send(ctx)
	if !IsPermanent(err) || !strings.Contains(err.Error(), "svc: response body over") {
		t.Errorf("big body: %v", err)
	}
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	no := o("")
	no.url = closed.URL
	if _, _, err = no.send(ctx); CodeOf(err) != "http.network" || IsPermanent(err) || !strings.HasPrefix(err.Error(), "svc: PUT the-url: ") {
		t.Errorf("no server: %v (code %s)", err, CodeOf(err))
	}
	bad := o("")
	bad.url = "http://[::1"
	if _, _, err = bad.send(ctx); !IsPermanent(err) || !strings.HasPrefix(err.Error(), "svc: bad request for the-url") {
		t.Errorf("bad url: %v", err)
	}
	dctx, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer cancel()
	if _, _, err = o("/").send(dctx); CodeOf(err) != CodeTimeout || IsPermanent(err) {
		t.Errorf("deadline: %v (code %s)", err, CodeOf(err))
	}

	// Status errors: a 4xx shows the start of its body and is permanent
	// (Retry-After ignored); a 5xx hides the body and is retryable.
	ob := o("/teapot")
	resp, data, _ = ob.send(ctx)
	e := ob.statusError(resp, data)
	if e.Code != "http.418" || e.Retryable || e.Message != "svc: PUT the-url: 418 I'm a teapot: I'm a teapot" || retryWait(resp, e) != 0 {
		t.Errorf("418: %+v, wait %s", e, retryWait(resp, e))
	}
	ob = o("/busy")
	resp, data, _ = ob.send(ctx)
	e = ob.statusError(resp, data)
	if e.Code != "http.503" || !e.Retryable || e.Message != "svc: PUT the-url: 503 Service Unavailable" || retryWait(resp, e) != 7*time.Second {
		t.Errorf("503: %+v, wait %s", e, retryWait(resp, e))
	}
}

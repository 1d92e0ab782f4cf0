package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

func TestService(t *testing.T) {
	cases := []struct {
		name      string
		status    int
		ctype     string
		body      string
		out       string // the output, or "" for an error
		code      string
		retryable bool
		tries     int32
	}{
		{"json", 200, "application/json", `{"name":"Ada"}`, `{"name":"Ada"}`, "", false, 1},
		{"empty", 204, "", ``, `{}`, "", false, 1},
		{"not json", 200, "text/plain", `hello`, "", "output", false, 1},
		{"not found", 404, "text/plain", `no such thing`, "", "http.404", false, 1},
		{"server error", 500, "", `oops`, "", "http.500", true, 3},
		{"too many", 429, "", ``, "", "http.429", true, 3},
		{"problem", 409, "application/problem+json", `{"title":"Conflict","detail":"busy now","code":"crm.busy","retryable":true}`, "", "crm.busy", true, 3},
		{"problem permanent 503", 503, "application/problem+json", `{"title":"x","code":"crm.down","retryable":false}`, "", "crm.down", false, 1},
		{"problem bad code", 400, "application/problem+json", `{"title":"x","code":"no spaces allowed"}`, "", "http.400", false, 1},
		{"redirect", 302, "", ``, "", "http.302", false, 1},
		{"huge", 200, "application/json", `"` + strings.Repeat("x", maxBody) + `"`, "", "error", false, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var tries atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				tries.Add(1)
				var got Request
				b, _ := io.ReadAll(r.Body)
				if r.Method != "POST" || r.Header.Get("Idempotency-Key") != "run/a" || r.Header.Get("Content-Type") != "application/json" ||
					json.Unmarshal(b, &got) != nil || got.IdempotencyKey != "run/a" || string(got.Config) != `{"x":1}` || got.Handler != "svc" {
					t.Errorf("request %s %v %s", r.Method, r.Header, b)
				}
				if c.status == 302 {
					w.Header().Set("Location", "http://example.invalid/")
				}
				if c.ctype != "" {
					w.Header().Set("Content-Type", c.ctype)
				}
				if c.status == 429 {
					w.Header().Set("Retry-After", "0")
				}
				w.WriteHeader(c.status)
				io.WriteString(w, c.body)
			}))
			defer srv.Close()
			h, err := NewService("svc", srv.URL+"/run", ServiceOptions{})
			if err != nil {
				t.Fatal(err)
			}
			h.(*serviceHandler).maxWait = 0
			out, err := Call(context.Background(), h, Request{Handler: "svc", RunID: "run", Node: "a", Item: -1, Attempt: 1,
				Config: json.RawMessage(`{"x":1}`), IdempotencyKey: "run/a"})
			if c.out != "" {
				if err != nil || string(out) != c.out {
					t.Fatalf("out %s, err %v", out, err)
				}
			} else if err == nil || CodeOf(err) != c.code || IsPermanent(err) == c.retryable {
				t.Fatalf("err %v (code %s, permanent %v)", err, CodeOf(err), IsPermanent(err))
			}
			if n := tries.Load(); n != c.tries {
				t.Fatalf("%d tries, want %d", n, c.tries)
			}
		})
	}
}

func TestServiceNetwork(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	h, err := NewService("svc", url, ServiceOptions{Tries: 2})
	if err != nil {
		t.Fatal(err)
	}
	h.(*serviceHandler).maxWait = 0
	_, err = h.Run(context.Background(), Request{Handler: "svc"})
	var e *Error
	if !errors.As(err, &e) || e.Code != "http.network" || !e.Retryable {
		t.Fatalf("%v", err)
	}
	for _, bad := range []string{"", "ftp://x/", "http://", "not a url", "/relative"} {
		if _, err := NewService("svc", bad, ServiceOptions{}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if _, err := NewService("svc", "http://user:secret@host/", ServiceOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := NewService("svc", "gopher://user:secret@host/", ServiceOptions{}); err == nil || strings.Contains(err.Error(), "secret") {
		t.Fatalf("error shows the password: %v", err)
	}
}

package handlers

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// countingServer is an httptest server that counts the requests it gets.
func countingServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		if h != nil {
			h(w, r)
			return
		}
		w.Write([]byte(`{}`))
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func port(srv *httptest.Server) string {
	_, p, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	return p
}

// wantDenied checks that err is the policy's refusal, naming what.
func wantDenied(t *testing.T, err error, what ...string) {
	t.Helper()
	if CodeOf(err) != CodeHTTPDenied || !IsPermanent(err) {
		t.Fatalf("want a permanent %s error, got %v (code %q)", CodeHTTPDenied, err, CodeOf(err))
	}
	for _, w := range what {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("the error does not say %q: %v", w, err)
		}
	}
}

// TestLimitHTTPDeniesLoopbackByDefault: by default the http handler does
// not connect to a loopback port (issue #14 item 8: a workflow reached a
// local Redis), whether the URL names the address, a host name that
// resolves to it or an IPv4-mapped IPv6 form; not even a TCP connection
// is made. --http-allow admits it.
func TestLimitHTTPDeniesLoopbackByDefault(t *testing.T) {
	// A stand-in for a local Redis: it counts connections.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var conns atomic.Int32
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			c.Close()
		}
	}()
	_, p, _ := net.SplitHostPort(l.Addr().String())
	r := NewRegistry(Options{})
	_, err = run(t, r, "http", `{"url":"http://127.0.0.1:`+p+`/"}`)
	wantDenied(t, err, "127.0.0.1:"+p+" is a loopback address", "--http-allow 127.0.0.1")
	_, err = run(t, r, "http", `{"url":"http://localhost:`+p+`/"}`)
	wantDenied(t, err, "localhost (", "loopback", "--http-allow localhost")
	_, err = run(t, r, "http", `{"url":"http://[::ffff:127.0.0.1]:`+p+`/"}`)
	wantDenied(t, err, "loopback")
	if n := conns.Load(); n != 0 {
		t.Errorf("the port got %d connections", n)
	}

	srv, calls := countingServer(t, nil)
	_, err = run(t, r, "http", `{"url":"`+srv.URL+`/"}`)
	wantDenied(t, err)
	for _, allow := range [][]string{{"127.0.0.1"}, {"127.0.0.0/8"}, {"127.0.0.1:" + port(srv)}, {"*"}} {
		out, err := run(t, NewRegistry(Options{HTTPAllow: allow}), "http", `{"url":"`+srv.URL+`/"}`)
		if err != nil || !strings.Contains(string(out), `"status":200`) {
			t.Errorf("allowed by %q: %s %v", allow, out, err)
		}
	}
	if calls.Load() != 4 {
		t.Errorf("the server got %d requests, want 4 (the allowed ones)", calls.Load())
	}
	// Allowing another port of the address does not allow this one.
	_, err = run(t, NewRegistry(Options{HTTPAllow: []string{"127.0.0.1:1"}}), "http", `{"url":"`+srv.URL+`/"}`)
	wantDenied(t, err)
}

// TestLimitHTTPDeniesRedirectToLoopback: a redirect from an allowed host
// to a denied one is refused at the hop, and the denied host gets nothing.
func TestLimitHTTPDeniesRedirectToLoopback(t *testing.T) {
	inner, innerCalls := countingServer(t, nil)
	outer, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, inner.URL+"/secret", http.StatusFound)
	})
	r := NewRegistry(Options{HTTPAllow: []string{"127.0.0.1:" + port(outer)}})
	_, err := run(t, r, "http", `{"url":"`+outer.URL+`/go"}`)
	wantDenied(t, err, "127.0.0.1:"+port(inner)+" is a loopback address", outer.URL+"/go")
	if innerCalls.Load() != 0 {
		t.Errorf("the redirect's target got %d requests", innerCalls.Load())
	}
	// Allowed as well, the redirect is followed.
	r = NewRegistry(Options{HTTPAllow: []string{"127.0.0.1:" + port(outer), "127.0.0.1:" + port(inner)}})
	if _, err := run(t, r, "http", `{"url":"`+outer.URL+`/go"}`); err != nil || innerCalls.Load() != 1 {
		t.Errorf("both allowed: %v, %d requests", err, innerCalls.Load())
	}
}

// TestLimitHTTPDenyList: the deny list refuses addresses, ranges and host
// names, over the allow list.
func TestLimitHTTPDenyList(t *testing.T) {
	srv, calls := countingServer(t, nil)
	p := port(srv)
	for _, deny := range [][]string{{"127.0.0.1"}, {"127.0.0.0/8"}, {"127.0.0.1:" + p}, {"Localhost."}, {"*"}} {
		r := NewRegistry(Options{HTTPAllow: []string{"*"}, HTTPDeny: deny})
		url := srv.URL
		if deny[0] == "Localhost." {
			url = "http://localhost:" + p
		}
		_, err := run(t, r, "http", `{"url":"`+url+`/"}`)
		wantDenied(t, err, "--http-deny")
	}
	r := NewRegistry(Options{HTTPAllow: []string{"*"}, HTTPDeny: []string{"127.0.0.1:1", "example.internal"}})
	if _, err := run(t, r, "http", `{"url":"`+srv.URL+`/"}`); err != nil {
		t.Errorf("not on the deny list: %v", err)
	}
	if calls.Load() != 1 {
		t.Errorf("%d requests, want 1", calls.Load())
	}
}

// A list entry that means nothing is reported, and a registry built with
// it fails every http request rather than connecting anywhere.
func TestLimitHTTPPolicyBadEntries(t *testing.T) {
	for _, e := range []string{"not a host", "10.0.0.0/33", "host:0", "host:http", "[::1", "a/b"} {
		if err := CheckHTTPPolicy([]string{e}, nil); err == nil || !strings.Contains(err.Error(), "--http-allow") {
			t.Errorf("allow %q: %v", e, err)
		}
		if err := CheckHTTPPolicy(nil, []string{e}); err == nil || !strings.Contains(err.Error(), "--http-deny") {
			t.Errorf("deny %q: %v", e, err)
		}
	}
	for _, e := range []string{"10.0.0.0/8", "::1", "[::1]:8080", "127.0.0.1:6379", "api.internal", "API.internal:8443", "*", " 192.168.1.1 ", ""} {
		if err := CheckHTTPPolicy([]string{e}, []string{e}); err != nil {
			t.Errorf("%q: %v", e, err)
		}
	}
	srv, calls := countingServer(t, nil)
	_, err := run(t, NewRegistry(Options{HTTPAllow: []string{"*", "bad entry"}}), "http", `{"url":"`+srv.URL+`/"}`)
	if !IsPermanent(err) || !strings.Contains(err.Error(), `"bad entry"`) || calls.Load() != 0 {
		t.Errorf("bad policy: %v, %d requests", err, calls.Load())
	}
}

// TestLimitHTTPDropsSensitiveResponseHeaders: the output leaves out
// response headers that may carry a credential or a session (issue #14
// item 9: Set-Cookie landed in outputs and events); keep_headers keeps
// the ones named.
func TestLimitHTTPDropsSensitiveResponseHeaders(t *testing.T) {
	srv, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Add("Set-Cookie", "sid=s3cret; HttpOnly")
		h.Add("Set-Cookie", "other=s3cret")
		h.Set("X-Auth-Token", "s3cret")
		h.Set("WWW-Authenticate", `Bearer realm="s3cret"`)
		h.Set("X-Session-Id", "s3cret")
		h.Set("X-Api-Key", "s3cret")
		h.Set("X-Request-Id", "r-1")
		h.Set("Content-Type", "application/json")
		w.Write([]byte(`{"ok":true}`))
	})
	r := NewRegistry(Options{HTTPAllow: []string{"127.0.0.1"}})
	out, err := run(t, r, "http", `{"url":"`+srv.URL+`/"}`)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "s3cret") {
		t.Errorf("the output holds a sensitive header: %s", out)
	}
	var o httpOutput
	json.Unmarshal(out, &o)
	if o.Headers["X-Request-Id"] != "r-1" || o.Headers["Content-Type"] != "application/json" {
		t.Errorf("other headers are lost: %v", o.Headers)
	}
	out, err = run(t, r, "http", `{"url":"`+srv.URL+`/","keep_headers":["set-cookie","X-AUTH-TOKEN"]}`)
	if err != nil {
		t.Fatal(err)
	}
	o = httpOutput{}
	json.Unmarshal(out, &o)
	if o.Headers["Set-Cookie"] != "sid=s3cret; HttpOnly, other=s3cret" || o.Headers["X-Auth-Token"] != "s3cret" || o.Headers["X-Session-Id"] != "" {
		t.Errorf("keep_headers: %v", o.Headers)
	}
}

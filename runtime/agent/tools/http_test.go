package tools

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

func hostPort(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

func httpStep(rawURL string, extra string) string {
	return `{"steps":[{"step":"http_request","url":"` + rawURL + `"` + extra + `}]}`
}

func TestHTTPRequest(t *testing.T) {
	var lastKey string
	mux := http.NewServeMux()
	mux.HandleFunc("/items", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"q": %q, "items": [{"id": 2, "p": 5}, {"id": 1, "p": 9}]}`, r.URL.Query().Get("q"))
	})
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, `{"method": %q, "ct": %q, "body": %s}`, r.Method, r.Header.Get("Content-Type"), b)
	})
	mux.HandleFunc("/text", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "plain words") })
	mux.HandleFunc("/badjson", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, "{oops")
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, strings.Repeat("x", 4096)) })
	mux.HandleFunc("/fail", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "boom", 503) })
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	mux.HandleFunc("/key", func(w http.ResponseWriter, r *http.Request) {
		lastKey = r.Header.Get("X-Api-Key")
		io.WriteString(w, `"ok"`)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	other := httptest.NewServer(mux) // another host:port
	defer other.Close()
	redir := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/key", http.StatusFound)
	}))
	defer redir.Close()

	lim := Limits{MaxHTTPBytes: 1024, HTTPTimeout: 300 * time.Millisecond}
	pl := toolset(t, Config{HTTPAllow: []string{hostPort(t, srv), hostPort(t, redir)}, Limits: lim}, Env{})[ExecutePipeline]

	t.Run("get json and chain", func(t *testing.T) {
		got, err := runPipeline(t, pl, `{"steps":[
		  {"step":"http_request","url":"`+srv.URL+`/items","query":{"q":"a b"}},
		  {"step":"jq_transform","program":".items"},
		  {"step":"table_sort","field":"p","order":"desc"}]}`)
		if err != nil {
			t.Fatal(err)
		}
		if !jsonEq(t, got, `[{"id":1,"p":9},{"id":2,"p":5}]`) {
			t.Errorf("got %s", got)
		}
		got, err = runPipeline(t, pl, httpStep(srv.URL+"/items", `,"query":{"q":"a b"}`))
		if err != nil || !strings.Contains(string(got), `"q":"a b"`) {
			t.Errorf("query not sent: %s %v", got, err)
		}
	})
	t.Run("post body", func(t *testing.T) {
		got, err := runPipeline(t, pl, httpStep(srv.URL+"/echo", `,"method":"post","body":{"a":[1,2]}`))
		if err != nil {
			t.Fatal(err)
		}
		if !jsonEq(t, got, `{"method":"POST","ct":"application/json","body":{"a":[1,2]}}`) {
			t.Errorf("got %s", got)
		}
	})
	t.Run("text", func(t *testing.T) {
		got, err := runPipeline(t, pl, httpStep(srv.URL+"/text", ""))
		if err != nil || string(got) != `"plain words"` {
			t.Errorf("got %s, %v", got, err)
		}
	})
	cases := []struct{ name, args, code, sub string }{
		{"bad json", httpStep(srv.URL+"/badjson", ""), CodeFailed, "says it is JSON but is not"},
		{"too big", httpStep(srv.URL+"/big", ""), CodeTooLarge, "larger than 1024 bytes"},
		{"status", httpStep(srv.URL+"/fail", ""), CodeFailed, "answered HTTP 503: boom"},
		{"timeout", httpStep(srv.URL+"/slow", ""), CodeTimeout, "did not finish within 300ms"},
		{"not listed", httpStep(other.URL+"/items", ""), CodeDenied, "is not on the worker's allow-list of hosts (--agent-http-allow)"},
		{"redirect to unlisted", httpStep(redir.URL+"/", ""), CodeDenied, "redirect refused"},
		{"scheme", httpStep("file:///etc/passwd", ""), CodeDenied, "only http and https"},
		{"user info", httpStep("http://u:secret@"+hostPort(t, srv)+"/", ""), CodeDenied, "user info"},
		{"relative", httpStep("/items", ""), CodeBadArgs, "absolute"},
		{"method", httpStep(srv.URL+"/items", `,"method":"TRACE"`), CodeBadArgs, "method"},
		{"host header", httpStep(srv.URL+"/items", `,"headers":{"Host":"evil"}`), CodeBadArgs, "cannot be set"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := runPipeline(t, pl, c.args)
			wantErr(t, err, c.code, c.sub)
			if err != nil && strings.Contains(err.Error(), "secret") {
				t.Errorf("the error shows the password: %v", err)
			}
		})
	}

	t.Run("redirect across hosts drops credentials", func(t *testing.T) {
		pl := toolset(t, Config{HTTPAllow: []string{hostPort(t, redir), hostPort(t, other)}}, Env{})[ExecutePipeline]
		got, err := runPipeline(t, pl, httpStep(redir.URL+"/", `,"headers":{"X-Api-Key":"k1"}`))
		if err != nil || string(got) != `"ok"` {
			t.Fatalf("got %s, %v", got, err)
		}
		if lastKey != "" {
			t.Errorf("X-Api-Key reached the other host: %q", lastKey)
		}
		if _, err := runPipeline(t, pl, httpStep(other.URL+"/key", `,"headers":{"X-Api-Key":"k1"}`)); err != nil || lastKey != "k1" {
			t.Errorf("same host: key %q, %v", lastKey, err)
		}
	})
}

// TestNetPolicy: a listed name is admitted only at public addresses; a
// special address must be listed itself; "*" admits public hosts only.
func TestNetPolicy(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "1") }))
	defer srv.Close()
	_, port, _ := strings.Cut(hostPort(t, srv), ":")
	cases := []struct {
		name  string
		allow []string
		url   string
		code  string
		sub   string
	}{
		{"name resolving to loopback", []string{"localhost"}, "http://localhost:" + port + "/", CodeDenied, "a loopback address"},
		{"star does not admit loopback", []string{"*"}, "http://127.0.0.1:" + port + "/", CodeDenied, "a loopback address"},
		{"star does not admit metadata", []string{"*"}, "http://169.254.169.254/latest/meta-data/", CodeDenied, "a link-local address"},
		{"mapped loopback", []string{"*"}, "http://[::ffff:127.0.0.1]:" + port + "/", CodeDenied, "loopback"},
		{"wrong port", []string{"127.0.0.1:1"}, "http://127.0.0.1:" + port + "/", CodeDenied, "allow-list"},
		{"cidr admits", []string{"127.0.0.0/8"}, "http://127.0.0.1:" + port + "/", "", ""},
		{"name plus address admits", []string{"localhost", "127.0.0.1", "::1"}, "http://localhost:" + port + "/", "", ""},
		{"nothing allowed", nil, "http://127.0.0.1:" + port + "/", CodeDenied, "this worker allows no hosts"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pl := toolset(t, Config{HTTPAllow: c.allow}, Env{})[ExecutePipeline]
			got, err := runPipeline(t, pl, httpStep(c.url, ""))
			if c.code == "" {
				if err != nil || string(got) != "1" {
					t.Fatalf("got %s, %v", got, err)
				}
				return
			}
			wantErr(t, err, c.code, c.sub)
		})
	}
	for _, bad := range []string{"http://x", "a b", "10.0.0.0/99", "host:0", "[::1"} {
		if _, err := NewWorker(Config{HTTPAllow: []string{bad}}); err == nil || !strings.Contains(err.Error(), "--agent-http-allow") {
			t.Errorf("entry %q: err = %v", bad, err)
		}
	}
}

// TestDescriptionListsHosts: the model is told which hosts it may reach.
func TestDescriptionListsHosts(t *testing.T) {
	pl := toolset(t, Config{HTTPAllow: []string{"api.example.com", "10.0.0.0/8", "127.0.0.1:8080"}}, Env{})[ExecutePipeline]
	if d := pl.Description(); !strings.Contains(d, "api.example.com, 10.0.0.0/8, 127.0.0.1:8080") {
		t.Errorf("description does not list the hosts: %s", d)
	}
	var s map[string]any
	if err := json.Unmarshal(pl.Parameters(), &s); err != nil || s["type"] != "object" {
		t.Errorf("parameters: %v %v", s, err)
	}
}

package handlers

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestLimitHTTPErrorsHideTheURLPassword: an http node's error shows its
// URL once, with the password replaced (issue #14 item 9: a password in
// the URL appeared three times in wfc events).
func TestLimitHTTPErrorsHideTheURLPassword(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) }))
	defer srv.Close()
	r := NewRegistry(Options{HTTPAllow: []string{"127.0.0.1"}})
	host := strings.TrimPrefix(srv.URL, "http://")
	for _, u := range []string{
		"http://alice:s3cret@127.0.0.1:1/refused",  // no response
		"http://alice:s3cret@" + host + "/missing", // a 404
		"http://alice:s3cret@[::1",                 // does not parse
	} {
		_, err := run(t, r, "http", `{"url":"`+u+`"}`)
		if err == nil {
			t.Fatalf("%s: no error", u)
		}
		msg := err.Error()
		if strings.Contains(msg, "s3cret") {
			t.Errorf("%s: the error shows the password: %s", u, msg)
		}
		if strings.Count(msg, "alice") > 1 {
			t.Errorf("%s: the error shows the URL more than once: %s", u, msg)
		}
	}
}

// TestLimitHTTPRedirectDropsHeaders: a redirect to another host gets no
// custom header (issue #14 item 8: X-Api-Key followed a redirect across
// hosts); one on the same host keeps them.
func TestLimitHTTPRedirectDropsHeaders(t *testing.T) {
	var got http.Header
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		w.Write([]byte(`{}`))
	}))
	defer other.Close()
	// 127.0.0.1 and localhost are different hosts to the client.
	otherURL := strings.Replace(other.URL, "127.0.0.1", "localhost", 1)
	var same http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/away":
			http.Redirect(w, r, otherURL+"/landed", http.StatusFound)
		case "/here":
			http.Redirect(w, r, "/landed", http.StatusFound)
		default:
			same = r.Header.Clone()
			w.Write([]byte(`{}`))
		}
	}))
	defer srv.Close()
	r := NewRegistry(Options{HTTPAllow: []string{"127.0.0.1", "localhost"}})
	cfg := `,"headers":{"X-Api-Key":"k","Accept-Language":"fr"}}`
	if _, err := run(t, r, "http", `{"url":"`+srv.URL+`/away"`+cfg); err != nil {
		t.Fatal(err)
	}
	if got == nil || got.Get("X-Api-Key") != "" || got.Get("Accept-Language") != "fr" {
		t.Errorf("across hosts: X-Api-Key %q, Accept-Language %q", got.Get("X-Api-Key"), got.Get("Accept-Language"))
	}
	if _, err := run(t, r, "http", `{"url":"`+srv.URL+`/here"`+cfg); err != nil {
		t.Fatal(err)
	}
	if same.Get("X-Api-Key") != "k" {
		t.Errorf("same host: X-Api-Key %q, want k", same.Get("X-Api-Key"))
	}
}

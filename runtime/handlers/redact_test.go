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
	r := NewRegistry(Options{})
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

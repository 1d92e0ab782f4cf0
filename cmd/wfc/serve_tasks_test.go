package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is a bytes.Buffer that the server's goroutines may write
// while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// `wfc serve` mounts the remote task queue behind its tokens: a token with
// scope work polls, another is refused, and the shutdown drains.
func TestServeMountsTaskQueue(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	var errb lockedBuffer
	env := &Env{Stdin: strings.NewReader(""), Stdout: &errb, Stderr: &errb, Getenv: func(k string) string {
		if k == "WFC_SERVE_TOKENS" {
			return "work-token-0123456789ab worker work;read-token-0123456789ab ops read"
		}
		return ""
	}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- dispatch(ctx, env, []string{"serve", "--listen", addr, "--workers", "0", "--task-max-wait", "2s"})
	}()
	defer func() {
		cancel()
		if code := <-done; code != exitOK {
			t.Errorf("serve exit %d: %s", code, errb.String())
		}
	}()
	poll := func(token string) int {
		t.Helper()
		req, _ := http.NewRequest("POST", "http://"+addr+"/v1/tasks/poll", strings.NewReader(`{"worker":"w1","handlers":["crm.lookup"],"wait_ms":0}`))
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return -1
		}
		res.Body.Close()
		return res.StatusCode
	}
	deadline := time.Now().Add(10 * time.Second)
	for poll("work-token-0123456789ab") == -1 {
		if time.Now().After(deadline) {
			t.Fatalf("the server did not start: %s", errb.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	for token, want := range map[string]int{"work-token-0123456789ab": 204, "read-token-0123456789ab": 403, "": 401} {
		if got := poll(token); got != want {
			t.Errorf("poll with %q: %d, want %d", token, got, want)
		}
	}
}

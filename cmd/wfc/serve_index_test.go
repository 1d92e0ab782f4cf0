package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wfc-lang/wfc/runtime"
	"github.com/wfc-lang/wfc/server"
)

// startRedisServer starts a redis-server on a free loopback port with the
// extra arguments, for the test, and returns its port. It skips the test
// when redis-server is not installed (fails with CI=true). The server is
// up when it answers PING with PONG or with NOAUTH (ACL tests).
func startRedisServer(t *testing.T, extra ...string) int {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("redis-server is not on PATH")
		}
		t.Skip("redis-server is not on PATH")
	}
	port := freeTCPPort(t)
	dir := t.TempDir()
	args := append([]string{"--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--logfile", filepath.Join(dir, "redis.log")}, extra...)
	cmd := exec.Command(bin, args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for i := 0; i < 250; i++ {
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.SetDeadline(time.Now().Add(time.Second))
			fmt.Fprint(c, "PING\r\n")
			line, _ := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if strings.HasPrefix(line, "+PONG") || strings.HasPrefix(line, "-NOAUTH") {
				return port
			}
		}
		time.Sleep(40 * time.Millisecond)
	}
	log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
	t.Fatalf("redis-server on %s did not start:\n%s", addr, log)
	return 0
}

func freeTCPPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// wfcIn runs the wfc command in this process with env vars from vars.
func wfcIn(ctx context.Context, vars map[string]string, args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	env := &Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return vars[k] }}
	code := dispatch(ctx, env, args)
	return code, out.String(), errb.String()
}

// TestServeListsRunsSubmittedElsewhere: runs submitted with `wfc submit
// --redis` (not through the server) are in the server's GET /v1/runs and
// its filters, on the embedded Redis and on a real redis-server.
func TestServeListsRunsSubmittedElsewhere(t *testing.T) {
	for _, real := range []bool{false, true} {
		t.Run(map[bool]string{false: "miniredis", true: "redis"}[real], func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			url := ""
			if real {
				url = fmt.Sprintf("redis://127.0.0.1:%d/0", startRedisServer(t))
			}
			eng, err := runtime.Open(ctx, runtime.Options{RedisURL: url})
			if err != nil {
				t.Fatal(err)
			}
			defer eng.Close()
			if url == "" {
				url = eng.EmbeddedURL()
			}
			eng.StartWorkers(ctx, 2)
			defer eng.StopWorkers()
			srv, err := server.New(server.Config{Engine: eng})
			if err != nil {
				t.Fatal(err)
			}
			hs := httptest.NewServer(srv)
			defer hs.Close()

			submit := func(file string, inputs ...string) string {
				args := []string{"submit", "--redis", url, file}
				for _, in := range inputs {
					args = append(args, "--input", in)
				}
				code, out, errs := wfcIn(ctx, nil, args...)
				if code != 0 {
					t.Fatalf("wfc %v: %d %s", args, code, errs)
				}
				return strings.TrimSpace(out)
			}
			greet := submit("../../examples/greet.wf", "name=Ada")
			approval := submit("../../examples/approval.wf", "customer=acme", "percent=15")
			if st, err := eng.Wait(ctx, greet); err != nil || st.State != runtime.RunCompleted {
				t.Fatalf("greet: %v %+v", err, st)
			}
			waitNode(t, eng, approval, "approve")

			list := func(query string) []string {
				resp, err := http.Get(hs.URL + "/v1/runs" + query)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				body, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != 200 {
					t.Fatalf("GET /v1/runs%s: %d %s", query, resp.StatusCode, body)
				}
				var page runtime.RunPage
				if err := json.Unmarshal(body, &page); err != nil {
					t.Fatal(err)
				}
				var ids []string
				for _, r := range page.Runs {
					ids = append(ids, r.RunID)
				}
				return ids
			}
			for _, c := range []struct {
				query string
				want  []string
			}{
				{"", []string{approval, greet}}, // newest first
				{"?workflow=greet", []string{greet}},
				{"?state=completed", []string{greet}},
				{"?state=running&workflow=discount_approval", []string{approval}},
				{"?state=failed", nil},
				{"?from=" + time.Now().Add(time.Hour).UTC().Format(time.RFC3339), nil},
			} {
				if got := list(c.query); strings.Join(got, ",") != strings.Join(c.want, ",") {
					t.Errorf("GET /v1/runs%s: %v, want %v", c.query, got, c.want)
				}
			}
		})
	}
}

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wfc-lang/wfc/runtime"
)

// The in-process workers of wfc run and wfc serve adapt their concurrency
// by default, as wfc worker's do; --concurrency N fixes it and
// --max-concurrency bounds an adaptive one; --workers N is still a fixed
// concurrency, and serve's --workers 0 starts no worker.
func TestInProcessConcurrency(t *testing.T) {
	wf := filepath.Join(t.TempDir(), "ok.wf")
	if err := os.WriteFile(wf, []byte("workflow ok {\n  task a { run \"noop\" }\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	adaptive := runtime.AdaptiveStart()
	for _, c := range []struct {
		name    string
		args    []string
		started bool // an in-process worker started
		conc    int  // its WorkerOptions.Concurrency (0: adaptive)
		max     int  // its WorkerOptions.MaxConcurrency
		limit   int  // its limit when started
		line    string
	}{
		{"run", []string{"run", "-q", wf}, true, 0, runtime.DefaultMaxConcurrency, adaptive, ""},
		{"run --concurrency 3", []string{"run", "-q", "--concurrency", "3", wf}, true, 3, runtime.DefaultMaxConcurrency, 3, ""},
		{"run --max-concurrency 5", []string{"run", "-q", "--max-concurrency", "5", wf}, true, 0, 5, 5, ""},
		{"run --workers 2", []string{"run", "-q", "--workers", "2", wf}, true, 2, runtime.DefaultMaxConcurrency, 2, ""},
		{"serve", []string{"serve", "--listen", "127.0.0.1:0"}, true, 0, runtime.DefaultMaxConcurrency, adaptive,
			"in-process worker concurrency adaptive, " + strconv.Itoa(adaptive) + " to start, at most 256)"},
		{"serve --concurrency 3", []string{"serve", "--listen", "127.0.0.1:0", "--concurrency", "3"}, true, 3, runtime.DefaultMaxConcurrency, 3,
			"in-process worker concurrency 3)"},
		{"serve --max-concurrency 6", []string{"serve", "--listen", "127.0.0.1:0", "--max-concurrency", "6"}, true, 0, 6, 6,
			"in-process worker concurrency adaptive, 6 to start, at most 6)"},
		{"serve --workers 0", []string{"serve", "--listen", "127.0.0.1:0", "--workers", "0"}, false, 0, 0, 0, "no in-process worker)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var (
				mu     sync.Mutex
				opts   []runtime.WorkerOptions
				limits []int64
				stderr syncBuffer
			)
			inProcessStarted = func(o runtime.WorkerOptions, wk *runtime.Worker) {
				mu.Lock()
				opts, limits = append(opts, o), append(limits, wk.Stats().Limit)
				mu.Unlock()
			}
			t.Cleanup(func() { inProcessStarted = func(runtime.WorkerOptions, *runtime.Worker) {} })
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			env := &Env{Stdin: strings.NewReader(""), Stdout: &bytes.Buffer{}, Stderr: &stderr, Getenv: func(string) string { return "" }}
			done := make(chan int, 1)
			go func() { done <- dispatch(ctx, env, c.args) }()
			if c.args[0] == "serve" {
				// Serve until it says it listens, then stop it.
				listening := regexp.MustCompile(`wfc serve: listening on .*\n`)
				for !listening.MatchString(stderr.String()) {
					select {
					case code := <-done:
						t.Fatalf("wfc serve exited %d: %s", code, stderr.String())
					default:
						time.Sleep(10 * time.Millisecond)
					}
				}
				if line := listening.FindString(stderr.String()); !strings.HasSuffix(line, c.line+"\n") {
					t.Errorf("wfc serve says %q, want it to end with %q", line, c.line)
				}
				cancel()
			}
			if code := <-done; code != exitOK {
				t.Fatalf("wfc %s: exit %d: %s", strings.Join(c.args, " "), code, stderr.String())
			}
			mu.Lock()
			defer mu.Unlock()
			if !c.started {
				if len(opts) != 0 {
					t.Fatalf("in-process workers started: %+v", opts)
				}
				return
			}
			if len(opts) != 1 {
				t.Fatalf("%d in-process workers started, want 1", len(opts))
			}
			if o := opts[0]; o.Concurrency != c.conc || o.MaxConcurrency != c.max || limits[0] != int64(c.limit) {
				t.Errorf("worker of concurrency %d, max %d, limit %d; want %d, %d, %d", o.Concurrency, o.MaxConcurrency, limits[0], c.conc, c.max, c.limit)
			}
		})
	}
}

// Bad concurrency flags are usage errors that say what is wrong, the
// same in wfc run, serve and worker.
func TestConcurrencyUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--concurrency", "-1", "x.wf"}, "wfc run: --concurrency must be 0 (adaptive) or more, not -1\n"},
		{[]string{"run", "--max-concurrency", "0", "x.wf"}, "wfc run: --max-concurrency must be at least 1, not 0\n"},
		{[]string{"run", "--workers", "0", "x.wf"}, "wfc run: --workers must be at least 1\n"},
		{[]string{"run", "--workers", "2", "--concurrency", "3", "x.wf"}, "wfc run: --workers is the former name of --concurrency: give --concurrency only\n"},
		{[]string{"serve", "--concurrency", "-2"}, "wfc serve: --concurrency must be 0 (adaptive) or more, not -2\n"},
		{[]string{"serve", "--max-concurrency", "-1"}, "wfc serve: --max-concurrency must be at least 1, not -1\n"},
		{[]string{"serve", "--workers", "-1"}, "wfc serve: --workers must be 0 (no in-process worker) or more, not -1\n"},
		{[]string{"serve", "--workers", "0", "--max-concurrency", "8"}, "wfc serve: --workers 0 runs no in-process worker: it takes no --concurrency or --max-concurrency\n"},
		{[]string{"serve", "--workers", "4", "--concurrency", "8"}, "wfc serve: --workers N is the former name of --concurrency N: give --concurrency only\n"},
		{[]string{"worker", "--redis", "redis://127.0.0.1:1", "--concurrency", "-1"}, "wfc worker: --concurrency must be 0 (adaptive) or more, not -1\n"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			var stderr bytes.Buffer
			env := &Env{Stdin: strings.NewReader(""), Stdout: &bytes.Buffer{}, Stderr: &stderr, Getenv: func(string) string { return "" }}
			if code := dispatch(context.Background(), env, c.args); code != exitUsage {
				t.Errorf("exit %d, want %d (usage): %s", code, exitUsage, stderr.String())
			}
			if !strings.HasPrefix(stderr.String(), c.want) || !strings.Contains(stderr.String(), "usage: wfc "+c.args[0]) {
				t.Errorf("stderr %q, want it to start with %q and show the usage", stderr.String(), c.want)
			}
		})
	}
}

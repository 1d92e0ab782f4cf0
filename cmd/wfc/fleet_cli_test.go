package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fleetRedis starts a redis-server for a test, or skips it (fails under
// CI=true) when there is none.
func fleetRedis(t *testing.T) string {
	t.Helper()
	url, err := startPortRedis(t)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	return url
}

// TestLimitRunTakesOnlyItsOwnRun: `wfc run --redis URL --allow-exec` runs
// its own run only: an exec run another user queued on the same Redis is
// not executed by its workers (issue #14 item 7), and `wfc status` says
// that run waits for a worker serving exec's queue.
func TestLimitRunTakesOnlyItsOwnRun(t *testing.T) {
	url := fleetRedis(t)
	dir := t.TempDir()
	marker := filepath.Join(dir, "foreign-ran")
	foreign := filepath.Join(dir, "foreign.wf")
	own := filepath.Join(dir, "own.wf")
	write := func(p, src string) {
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(foreign, "workflow foreign {\n  task a { run \"echo\"  with { v = 1 } }\n  task x after a { run \"exec\"  with { argv = [\"touch\", \""+marker+"\"] } }\n}\n")
	write(own, "workflow own {\n  task nap { run \"sleep\"  with { duration = \"300ms\" } }\n  task x after nap { run \"exec\"  with { argv = [\"true\"] } }\n}\n")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a hang guard
	defer cancel()
	env, stdout, stderr := bufEnv()
	if code := Run(ctx, env, []string{"submit", "--redis", url, foreign}); code != exitOK {
		t.Fatalf("submit: exit %d: %s", code, stderr)
	}
	if want := "no live worker serves queue default (handler echo), h:exec (handler exec) yet"; !strings.Contains(stderr.String(), want) {
		t.Errorf("submit's stderr lacks %q: %s", want, stderr)
	}
	id := strings.TrimSpace(stdout.String())
	env, _, stderr = bufEnv()
	if code := Run(ctx, env, []string{"run", "-q", "--redis", url, "--allow-exec", own}); code != exitOK {
		t.Fatalf("run: exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("wfc run executed another run's exec node")
	}
	env, stdout, stderr = bufEnv()
	if code := Run(ctx, env, []string{"status", "--redis", url, id}); code != exitOK {
		t.Fatalf("status: exit %d: %s", code, stderr)
	}
	out := stdout.String()
	if !strings.Contains(out, "running") || !strings.Contains(out, "a                        queued (waiting: no live worker serves queue default)") {
		t.Errorf("status of the foreign run:\n%s", out)
	}
}

// TestLimitRunRefusesUnservedHandler: `wfc run --redis` of a workflow whose
// handler neither the process (exec without --allow-exec) nor any live
// worker runs fails at once instead of waiting for ever.
func TestLimitRunRefusesUnservedHandler(t *testing.T) {
	url := fleetRedis(t)
	src := filepath.Join(t.TempDir(), "ex.wf")
	if err := os.WriteFile(src, []byte("workflow ex {\n  task x { run \"exec\"  with { argv = [\"true\"] } }\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env, _, stderr := bufEnv()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // a hang guard
	defer cancel()
	code := Run(ctx, env, []string{"run", "-q", "--redis", url, src})
	if code != exitFailed || time.Since(start) > 10*time.Second {
		t.Fatalf("exit %d after %s: %s", code, time.Since(start), stderr)
	}
	for _, want := range []string{"cannot run handler exec (exec runs programs only with --allow-exec)", "no live worker on this Redis serves queue h:exec"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q: %s", want, stderr)
		}
	}
}

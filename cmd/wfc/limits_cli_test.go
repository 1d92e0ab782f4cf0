package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wfc-lang/wfc/runtime"
)

func bufEnv() (*Env, *bytes.Buffer, *bytes.Buffer) {
	var stdout, stderr bytes.Buffer
	return &Env{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr, Getenv: func(string) string { return "" }}, &stdout, &stderr
}

// A value wfc cannot encode as JSON is an internal error (exit 3) said on
// standard error, never an empty line and exit 0.
func TestLimitJSONEncodeErrors(t *testing.T) {
	bad := &runtime.Status{RunID: "r1", State: runtime.RunCompleted, Result: json.RawMessage(`{"x": `)}
	for _, c := range []struct {
		name string
		run  func(env *Env) int
		want string
	}{
		{"run --json", func(env *Env) int { return finish(env, "run", bad, true) }, "wfc run: internal error: cannot encode the run's status as JSON"},
		{"run", func(env *Env) int { return finish(env, "run", bad, false) }, "wfc run: internal error: cannot encode the run's result as JSON"},
		{"submit --wait", func(env *Env) int { return finish(env, "submit", bad, false) }, "wfc submit: internal error: cannot encode the run's result as JSON"},
		{"status --json", func(env *Env) int { return writeJSON(env, "status", "the run's status", bad) }, "wfc status: internal error: cannot encode the run's status as JSON"},
		{"events --json", func(env *Env) int { return writeJSON(env, "events", "the run's events", []any{make(chan int)}) }, "wfc events: internal error: cannot encode the run's events as JSON"},
	} {
		env, stdout, stderr := bufEnv()
		code := c.run(env)
		if code != exitInternal || !strings.Contains(stderr.String(), c.want) || strings.TrimSpace(stdout.String()) != "" {
			t.Errorf("%s: exit %d, stdout %q, stderr:\n%s\nwant exit 3, nothing on stdout and %q", c.name, code, stdout, stderr, c.want)
		}
	}
	// A status that encodes still does, with the run's exit code.
	env, stdout, _ := bufEnv()
	ok := &runtime.Status{RunID: "r1", State: runtime.RunCompleted, Result: json.RawMessage(`{"x": 1}`)}
	if code := finish(env, "run", ok, false); code != exitOK || !strings.Contains(stdout.String(), `"x": 1`) {
		t.Errorf("a good result: exit %d, stdout %q", code, stdout)
	}
}

// fmt -w on a symbolic link rewrites the file it points to, with its
// mode; the link stays a link.
func TestLimitFmtSymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "real", "flow.wf")
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(target, []byte("workflow  w{task a{run \"noop\"}}\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.wf")
	if err := os.Symlink(filepath.Join("real", "flow.wf"), link); err != nil {
		t.Skipf("symlink: %v", err)
	}
	env, _, stderr := bufEnv()
	if code := Run(context.Background(), env, []string{"fmt", "-w", link}); code != exitOK {
		t.Fatalf("wfc fmt -w: exit %d: %s", code, stderr)
	}
	if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link is no longer a symbolic link (%v, %v)", st.Mode(), err)
	}
	got, _ := os.ReadFile(target)
	if want := "workflow w { task a { run \"noop\" } }\n"; string(got) != want {
		t.Errorf("the target holds:\n%s\nwant:\n%s", got, want)
	}
	if st, _ := os.Stat(target); st.Mode().Perm() != 0o640 {
		t.Errorf("the target's mode is %v, want 0640", st.Mode().Perm())
	}
	if names, _ := filepath.Glob(filepath.Join(dir, "*", ".wfc-fmt-*")); len(names) > 0 {
		t.Errorf("temporary files left: %v", names)
	}
}

func TestLimitRedactURL(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"redis://:secret@host:6379/0", "redis://:xxxxx@host:6379/0"},
		{"redis://user:secret@host:6379", "redis://user:xxxxx@host:6379"},
		{"redis://host:6379/0", "redis://host:6379/0"},
		{"redis://user@host:6379", "redis://user@host:6379"},
		{"redis+cluster://:secret@h1:1,h2:2", "redis+cluster://:xxxxx@h1:1,h2:2"},
		{"redis+cluster://u:secret@h1:1,h2:2/5?x=1", "redis+cluster://u:xxxxx@h1:1,h2:2/5?x=1"},
		{"redis+cluster://:secret@", "redis+cluster://:xxxxx@"},
		{"redis://:secret@host:port:bad", "redis://:xxxxx@host:port:bad"},
		{"redis://:se/cr@et@host:x", "redis://:xxxxx@host:x"},
		{"rediss://:p%40ss@host:6379", "rediss://:xxxxx@host:6379"},
	} {
		if got := redactURL(c.in); got != c.want {
			t.Errorf("redactURL(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	red := redactor("redis://:s3cret@host:port:bad")
	msg := `runtime: bad Redis URL: parse "redis://:s3cret@host:port:bad": invalid port; s3cret`
	if got := red(msg); strings.Contains(got, "s3cret") {
		t.Errorf("redacted: %s", got)
	}
	if redactor("redis://host:6379") != nil {
		t.Errorf("a redactor for a URL without a password")
	}
}

// wfc run exits promptly when its run ends while a handler still runs (a
// deadline of 1 s over a sleep of 60 s): the handler is cancelled instead
// of finishing or waiting out a 10 s grace (issue #14 item 14). The bound
// is generous: this is about not hanging, not speed.
func TestLimitRunExitsWhenTheRunEnds(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "slow.wf")
	if err := os.WriteFile(src, []byte("workflow slow {\n  deadline 1s\n  task nap { run \"sleep\"  with { duration = \"60s\" } }\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env, _, stderr := bufEnv()
	start := time.Now()
	code := Run(context.Background(), env, []string{"run", "-q", src})
	if d := time.Since(start); code != exitFailed || d > 6*time.Second {
		t.Errorf("wfc run: exit %d after %s (want a failure within a few seconds): %s", code, d, stderr)
	}
	if !strings.Contains(stderr.String(), "deadline") {
		t.Errorf("stderr: %s", stderr)
	}
}

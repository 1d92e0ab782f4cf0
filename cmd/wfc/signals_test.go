//go:build unix

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// newTestSignals is watchSignals without the process's signals: the test
// sends them on s.ch, and exits are reported on the returned channel.
func newTestSignals(cmd string) (*signals, context.Context, chan int, *bytes.Buffer) {
	ctx, cancel := context.WithCancel(context.Background())
	var stderr bytes.Buffer
	exits := make(chan int, 2)
	s := &signals{cmd: cmd, cancel: cancel, stderr: &stderr, ch: make(chan os.Signal, 2), exit: func(code int) {
		fileWrite.Unlock() // exitNow holds it until the process ends
		exits <- code
		select {} // os.Exit does not return
	}}
	go s.loop()
	return s, ctx, exits, &stderr
}

// check, build, fmt and the one-shot commands end at the first signal;
// run, submit, worker and bench are only cancelled, and end at once at the
// second. The exit code is 128+N, except the worker's normal stop.
func TestLimitSignals(t *testing.T) {
	for _, c := range []struct {
		cmd      string
		graceful bool
	}{{"check", false}, {"build", false}, {"fmt", false}, {"lsp", false}, {"status", false}, {"run", true}, {"submit", true}, {"worker", true}} {
		s, ctx, exits, stderr := newTestSignals(c.cmd)
		s.ch <- syscall.SIGTERM
		if !c.graceful {
			// It exits without cancelling its context: a cancelled read
			// would race to print its own error.
			select {
			case code := <-exits:
				if code != 143 || stderr.String() != "wfc "+c.cmd+": interrupted (SIGTERM)\n" {
					t.Errorf("%s: exit %d, stderr %q", c.cmd, code, stderr)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("%s: the first signal did not end the command", c.cmd)
			}
			if ctx.Err() != nil {
				t.Errorf("%s: the context was cancelled before the exit", c.cmd)
			}
			continue
		}
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: the first signal did not cancel the context", c.cmd)
		}
		select {
		case code := <-exits:
			t.Errorf("%s: exit %d at the first signal", c.cmd, code)
			continue
		case <-time.After(50 * time.Millisecond):
		}
		want := 143
		if c.cmd == "worker" {
			want = exitOK
		}
		if code := s.exitCode(exitOK); code != want {
			t.Errorf("%s: exit code %d after a signal, want %d", c.cmd, code, want)
		}
		s.ch <- syscall.SIGINT
		if code := <-exits; code != 130 || stderr.String() != "wfc "+c.cmd+": SIGINT again: exiting at once\n" {
			t.Errorf("%s: second signal: exit %d, stderr %q", c.cmd, code, stderr)
		}
	}
	s, _, _, _ := newTestSignals("check")
	if code := s.exitCode(exitFailed); code != exitFailed {
		t.Errorf("without a signal: exit code %d", code)
	}
}

// A signal waits for a file being replaced (build -o, fmt -w) to be
// renamed into place: the temporary file is never left behind.
func TestLimitSignalWaitsForRename(t *testing.T) {
	fileWrite.Lock()
	s, _, exits, _ := newTestSignals("build")
	s.ch <- syscall.SIGINT
	select {
	case code := <-exits:
		t.Fatalf("exit %d while a file was being replaced", code)
	case <-time.After(100 * time.Millisecond):
	}
	fileWrite.Unlock()
	if code := <-exits; code != 130 {
		t.Errorf("exit %d", code)
	}
}

// submit --wait stops waiting on a signal and says the run goes on (no
// worker of its own: the run is the shared Redis's).
func TestLimitSubmitWaitInterrupt(t *testing.T) {
	mr := miniredis.RunT(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "w.wf")
	if err := os.WriteFile(src, []byte("workflow w {\n  task a { run \"noop\" }\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	code, stderr := runWithin(t, ctx, 5*time.Second, nil, "submit", "--redis", "redis://"+mr.Addr(), "--wait", "-q", src)
	if code != exitFailed || !regexp.MustCompile(`(?m)^wfc submit: interrupted; run \w+ goes on$`).MatchString(stderr) {
		t.Errorf("exit %d, stderr:\n%s", code, stderr)
	}
}

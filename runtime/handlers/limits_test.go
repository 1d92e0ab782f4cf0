//go:build unix

package handlers

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// execWithPidFile runs script with sh -c through the exec handler; the
// script writes the pid of a background child to $PIDFILE. It returns the
// handler's error, how long the call took and the child's pid, and makes
// sure the child does not outlive the test.
func execWithPidFile(t *testing.T, ctx context.Context, script string) (time.Duration, int, error) {
	t.Helper()
	pidFile := filepath.Join(t.TempDir(), "pid")
	h, _ := NewRegistry(Options{AllowExec: true}).Lookup("exec")
	cfg := `{"argv":["sh","-c",` + strconv.Quote(script) + `],"env":{"PIDFILE":` + strconv.Quote(pidFile) + `}}`
	start := time.Now()
	_, err := Call(ctx, h, req("exec", cfg))
	took := time.Since(start)
	b, rerr := os.ReadFile(pidFile)
	if rerr != nil {
		t.Fatalf("the script did not write the child's pid: %v (call: %v after %s)", rerr, err, took)
	}
	pid, perr := strconv.Atoi(strings.TrimSpace(string(b)))
	if perr != nil || pid <= 0 {
		t.Fatalf("bad pid %q", b)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	return took, pid, err
}

// alive reports whether process pid still runs. A zombie (killed, not yet
// reaped by whatever inherited it) does not run.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return !os.IsNotExist(err) || !dirExists("/proc/self")
	}
	// pid (comm) STATE ...: comm may hold spaces and parentheses.
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] != 'Z' && stat[i+2] != 'X'
	}
	return true
}

func dirExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// gone waits up to a second for process pid to end.
func gone(pid int) bool {
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if !alive(pid) {
			return true
		}
	}
	return false
}

// A program whose background child keeps stdout open must not hold the
// handler past the attempt's timeout, and the child must die with it
// (issue 14, item 3).
func TestLimitExecTimeoutKillsBackgroundChild(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	took, pid, err := execWithPidFile(t, ctx, `sleep 30 & echo $! > "$PIDFILE"; echo started; sleep 30`)
	if CodeOf(err) != CodeTimeout || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("want a timeout error, got %v (code %q)", err, CodeOf(err))
	}
	if took > 3*time.Second {
		t.Errorf("the call returned after %s, want about 300ms", took)
	}
	if !gone(pid) {
		t.Errorf("the background child %d still runs a second after the call returned", pid)
	}
}

// Cancelling (wfc cancel, worker shutdown) behaves as a timeout does.
func TestLimitExecCancelKillsBackgroundChild(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	took, pid, err := execWithPidFile(t, ctx, `sleep 30 & echo $! > "$PIDFILE"; echo started; sleep 30`)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("want context.Canceled, got %v", err)
	}
	if took > 3*time.Second {
		t.Errorf("the call returned after %s, want about 300ms", took)
	}
	if !gone(pid) {
		t.Errorf("the background child %d still runs a second after the call returned", pid)
	}
}

// A program that exits, leaving a child that holds stdout, completes
// after the exec wait delay rather than when the child ends, with what it
// wrote; the child is killed.
func TestLimitExecExitedProgramLeavesChild(t *testing.T) {
	took, pid, err := execWithPidFile(t, context.Background(), `sleep 30 & echo $! > "$PIDFILE"; echo started`)
	if err != nil {
		t.Errorf("want success (the program exited 0), got %v", err)
	}
	if took > execWaitDelay+2*time.Second {
		t.Errorf("the call returned after %s, want at most about %s", took, execWaitDelay)
	}
	if !gone(pid) {
		t.Errorf("the background child %d still runs a second after the call returned", pid)
	}
}

// The output of such a program is what it wrote before the call returned.
func TestLimitExecExitedProgramOutput(t *testing.T) {
	h, _ := NewRegistry(Options{AllowExec: true}).Lookup("exec")
	out, err := Call(context.Background(), h, req("exec", `{"argv":["sh","-c","sleep 30 & echo started"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), `"stdout":"started\n"`) || !strings.Contains(string(out), `"exit_code":0`) {
		t.Errorf("output: %s", out)
	}
}

// A program's background children that do not hold its output are killed
// too when it exits: nothing of an exec outlives its node.
func TestLimitExecKillsDetachedChild(t *testing.T) {
	took, pid, err := execWithPidFile(t, context.Background(), `sleep 30 >/dev/null 2>&1 & echo $! > "$PIDFILE"; echo started`)
	if err != nil {
		t.Errorf("want success, got %v", err)
	}
	if took > time.Second {
		t.Errorf("the call returned after %s", took)
	}
	if !gone(pid) {
		t.Errorf("the background child %d still runs a second after the call returned", pid)
	}
}

// A program that ignores SIGTERM is killed execWaitDelay after the
// timeout, with its children.
func TestLimitExecIgnoresSIGTERM(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	took, pid, err := execWithPidFile(t, ctx, `trap "" TERM; sleep 30 & echo $! > "$PIDFILE"; echo started; sleep 30`)
	if CodeOf(err) != CodeTimeout {
		t.Errorf("want a timeout error, got %v (code %q)", err, CodeOf(err))
	}
	if took > execWaitDelay+3*time.Second {
		t.Errorf("the call returned after %s, want about %s", took, 300*time.Millisecond+execWaitDelay)
	}
	if !gone(pid) {
		t.Errorf("the background child %d still runs a second after the call returned", pid)
	}
}

//go:build unix

package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runWithin runs wfc in process with args and fails the test if it takes
// longer than d. It returns the exit code and standard error.
func runWithin(t *testing.T, ctx context.Context, d time.Duration, stdin io.Reader, args ...string) (int, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	env := &Env{Stdin: stdin, Stdout: &stdout, Stderr: &stderr, Getenv: func(string) string { return "" }}
	done := make(chan int, 1)
	go func() { done <- Run(ctx, env, args) }()
	select {
	case code := <-done:
		return code, stderr.String()
	case <-time.After(d):
		t.Fatalf("wfc %s did not end within %v", strings.Join(args, " "), d)
		return 0, ""
	}
}

// Files wfc reads must be regular files: a named pipe, a device or a
// directory is refused at once, with one line and exit code 1, instead of
// blocking or reading forever.
func TestLimitCLISpecialFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pipe.wf")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	t.Cleanup(func() {
		// Frees a reader stuck in open, should the test fail.
		if f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
	ok := filepath.Join(dir, "ok.wf")
	os.WriteFile(ok, []byte("workflow ok {\n  input { n: int }\n  task a { run \"noop\" }\n}\n"), 0o644)
	ir := filepath.Join(dir, "ok.json")

	for _, c := range []struct {
		args []string
		want string // the one line of standard error
	}{
		{[]string{"check", fifo}, "wfc: cannot read " + fifo + ": not a regular file (a named pipe)"},
		{[]string{"build", fifo}, "wfc: cannot read " + fifo + ": not a regular file (a named pipe)"},
		{[]string{"fmt", fifo}, "wfc: cannot read " + fifo + ": not a regular file (a named pipe)"},
		{[]string{"run", fifo}, "wfc: cannot read " + fifo + ": not a regular file (a named pipe)"},
		{[]string{"check", "/dev/zero"}, "wfc: cannot read /dev/zero: not a regular file (a device)"},
		{[]string{"check", dir}, "wfc: cannot read " + dir + ": is a directory"},
		{[]string{"run", "/dev/zero"}, "wfc: cannot read /dev/zero: not a regular file (a device)"},
		{[]string{"run", ir}, "wfc: cannot read " + ir + ": not a regular file (a named pipe)"},
		{[]string{"run", "--input-file", "/dev/zero", ok}, "wfc run: --input-file: cannot read /dev/zero: not a regular file (a device)"},
		{[]string{"run", "--input-file", fifo, ok}, "wfc run: --input-file: cannot read " + fifo + ": not a regular file (a named pipe)"},
		{[]string{"run", "--input-file", dir, ok}, "wfc run: --input-file: cannot read " + dir + ": is a directory"},
	} {
		if c.args[1] == ir {
			os.Remove(ir)
			if err := syscall.Mkfifo(ir, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		code, stderr := runWithin(t, context.Background(), 3*time.Second, strings.NewReader(""), c.args...)
		if code != exitFailed || strings.TrimSuffix(stderr, "1 error\n") != c.want+"\n" {
			t.Errorf("wfc %s: exit %d, stderr:\n%s\nwant exit 1 and:\n%s", strings.Join(c.args, " "), code, stderr, c.want)
		}
	}
}

func TestLimitCLIInputFileSize(t *testing.T) {
	dir := t.TempDir()
	ok := filepath.Join(dir, "ok.wf")
	os.WriteFile(ok, []byte("workflow ok {\n  input { s: string }\n  task a { run \"noop\" }\n}\n"), 0o644)
	big := filepath.Join(dir, "big.json")
	os.WriteFile(big, []byte(`{"s": "`+strings.Repeat("x", maxInputFile)+`"}`), 0o644)
	code, stderr := runWithin(t, context.Background(), 10*time.Second, nil, "run", ok, "--input-file", big)
	want := "wfc run: --input-file: cannot read " + big + ": larger than 10485760 bytes (10 MiB)\n"
	if code != exitFailed || stderr != want {
		t.Errorf("exit %d, stderr:\n%s\nwant exit 1 and:\n%s", code, stderr, want)
	}
}

// Reading standard input ends when the command's context does: wfc turns
// SIGINT into a cancelled context, so a read blocked on a terminal would
// otherwise make wfc deaf to ^C.
func TestLimitCLIStdinInterrupt(t *testing.T) {
	r, w := io.Pipe() // never written: a read blocks
	defer w.Close()
	for _, cmd := range []string{"check", "build", "fmt", "run"} {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(50*time.Millisecond, cancel)
		code, stderr := runWithin(t, ctx, 3*time.Second, r, cmd, "-")
		if code != exitFailed || !regexp.MustCompile(`(?m)^wfc: cannot read standard input: interrupted$`).MatchString(stderr) {
			t.Errorf("wfc %s -: exit %d, stderr:\n%s", cmd, code, stderr)
		}
		cancel()
	}
}

package compiler

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/wfc-lang/wfc/lang"
	"github.com/wfc-lang/wfc/lang/diag"
)

// compileWithin compiles src as dir/main.wf with the default ReadFile and
// fails the test if that takes longer than d: an import of a FIFO or a
// device must never hang the compiler.
func compileWithin(t *testing.T, d time.Duration, dir, src string) *Result {
	t.Helper()
	done := make(chan *Result, 1)
	go func() { done <- Compile(filepath.Join(dir, "main.wf"), []byte(src), Config{}) }()
	select {
	case res := <-done:
		return res
	case <-time.After(d):
		t.Fatalf("compiling did not end within %v:\n%s", d, src)
		return nil
	}
}

// wantImportError checks that res has exactly one error, WF1011 at the
// string `at` of src, whose message contains each of msgs.
func wantImportError(t *testing.T, res *Result, src, at string, msgs ...string) {
	t.Helper()
	var errs diag.List
	for _, d := range res.Diags {
		if d.Severity == diag.Error {
			errs = append(errs, d)
		}
	}
	if len(errs) != 1 {
		t.Fatalf("want one error, got %d:\n%v", len(errs), res.Diags)
	}
	d := errs[0]
	if d.Code != diag.ImportError {
		t.Errorf("code = %s, want %s: %s", d.Code, diag.ImportError, d.Message)
	}
	if off := strings.Index(src, at); d.Span.Start.Offset != off {
		t.Errorf("error at offset %d, want %d (%q): %s", d.Span.Start.Offset, off, at, d.Message)
	}
	for _, m := range msgs {
		if !strings.Contains(d.Message, m) {
			t.Errorf("message %q does not contain %q", d.Message, m)
		}
	}
}

const usesSvc = "workflow w { task a { run \"noop\" } }\n"

func TestLimitImportDirectory(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "lib.wf"), 0o755)
	for _, src := range []string{
		"import \"lib.wf\"\n" + usesSvc,
		"workflow w { flow c { uses \"lib.wf\" } }\n",
	} {
		res := compileWithin(t, 3*time.Second, dir, src)
		wantImportError(t, res, src, `"lib.wf"`, `"lib.wf"`, "is a directory")
	}
}

// padTo returns a valid .wf source of exactly n bytes: a handler, then
// comments.
func padTo(t *testing.T, n int) []byte {
	t.Helper()
	var b bytes.Buffer
	b.WriteString("handler \"svc\" { output { v: int } }\n")
	line := "// " + strings.Repeat("padding ", 10) + "\n"
	for b.Len()+len(line) < n {
		b.WriteString(line)
	}
	if rest := n - b.Len(); rest > 0 {
		b.WriteString("//")
		b.WriteString(strings.Repeat("x", rest-2))
	}
	if b.Len() != n {
		t.Fatalf("padTo(%d) made %d bytes", n, b.Len())
	}
	return b.Bytes()
}

func TestLimitImportSize(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "at.wf"), padTo(t, lang.MaxFileSize), 0o644)
	os.WriteFile(filepath.Join(dir, "over.wf"), padTo(t, lang.MaxFileSize+1), 0o644)

	src := "import \"at.wf\"\nworkflow w { task a { run \"svc\" } }\n"
	res := compileWithin(t, 10*time.Second, dir, src)
	if len(res.Diags) != 0 {
		t.Errorf("an import of exactly %d bytes: %v", lang.MaxFileSize, res.Diags)
	}

	want := "larger than 4194304 bytes (4 MiB)"
	src = "import \"over.wf\"\n" + usesSvc
	res = compileWithin(t, 10*time.Second, dir, src)
	wantImportError(t, res, src, `"over.wf"`, `"over.wf"`, want)
	src = "workflow w { flow c { uses \"over.wf\" } }\n"
	res = compileWithin(t, 10*time.Second, dir, src)
	wantImportError(t, res, src, `"over.wf"`, `"over.wf"`, want)
}

// A file that grows between the size check and the read is still cut off
// at the limit.
func TestLimitReadGrowing(t *testing.T) {
	const limit = 100
	for _, n := range []int{0, 1, limit - 1, limit, limit + 1, 10 * limit} {
		r := iotest.OneByteReader(bytes.NewReader(bytes.Repeat([]byte("x"), n)))
		b, err := readLimited(context.Background(), "f", r, 10, limit)
		if n <= limit {
			if err != nil || len(b) != n {
				t.Errorf("%d bytes: got %d bytes, %v", n, len(b), err)
			}
			continue
		}
		if !errors.Is(err, ErrTooLarge) || b != nil {
			t.Errorf("%d bytes: got %d bytes, %v; want ErrTooLarge", n, len(b), err)
		}
	}
}

func TestLimitReadFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.json")
	os.WriteFile(path, []byte(`{"a": 1}`), 0o644)
	if b, err := ReadFileLimit(context.Background(), path, 8); err != nil || string(b) != `{"a": 1}` {
		t.Errorf("at the limit: %q, %v", b, err)
	}
	_, err := ReadFileLimit(context.Background(), path, 7)
	if !errors.Is(err, ErrTooLarge) || err.Error() != "read "+path+": larger than 7 bytes" {
		t.Errorf("over the limit: %v", err)
	}
	_, err = ReadFileLimit(context.Background(), dir, 7)
	if !errors.Is(err, ErrNotRegular) || err.Error() != "read "+dir+": is a directory" {
		t.Errorf("a directory: %v", err)
	}
	if _, err := ReadFileLimit(context.Background(), filepath.Join(dir, "none"), 7); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ReadFileLimit(ctx, path, 8); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled read: %v", err)
	}
	// A symbolic link to a regular file is read.
	if err := os.Symlink(path, filepath.Join(dir, "link.json")); err == nil {
		if b, err := ReadFile(filepath.Join(dir, "link.json")); err != nil || string(b) != `{"a": 1}` {
			t.Errorf("through a symbolic link: %q, %v", b, err)
		}
	}
}

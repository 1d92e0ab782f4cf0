//go:build unix

package lsp

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A document that imports /dev/zero, a named pipe or a directory, or uses
// one as a child flow, gets its diagnostics at once: the server reads
// imports with the compiler's bounded reader, so it neither hangs nor
// reads without end.
func TestLimitLSPSpecialImports(t *testing.T) {
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
	os.Mkdir(filepath.Join(dir, "lib.wf"), 0o755)

	c := newTestClient(t, Options{}, nil)
	c.initialize()
	for i, imp := range []struct{ src, want string }{
		{"import \"/dev/zero\"\nworkflow w { task a { run \"noop\" } }\n", `cannot read "/dev/zero": not a regular file (a device)`},
		{"import \"pipe.wf\"\nworkflow w { task a { run \"noop\" } }\n", `cannot read "pipe.wf": not a regular file (a named pipe)`},
		{"import \"lib.wf\"\nworkflow w { task a { run \"noop\" } }\n", `cannot read "lib.wf": is a directory`},
		{"workflow w {\n  flow c { uses \"/dev/zero\" }\n}\n", `cannot read "/dev/zero": not a regular file (a device)`},
		{"workflow w {\n  flow c { uses \"pipe.wf\" }\n}\n", `cannot read "pipe.wf": not a regular file (a named pipe)`},
	} {
		uri := pathToURI(filepath.Join(dir, "main"+strings.Repeat("x", i)+".wf"))
		start := time.Now()
		c.open(uri, imp.src)
		diags := c.diagnostics(uri, 1)
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("%q: diagnostics after %v", imp.src, d)
		}
		found := false
		for _, d := range diags {
			if d.Code == "WF1011" && d.Message == imp.want {
				found = true
			}
		}
		if !found {
			t.Errorf("%q: diagnostics %+v, want WF1011 %q", imp.src, diags, imp.want)
		}
	}
}

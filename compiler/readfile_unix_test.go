//go:build unix

package compiler

import (
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"
)

func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	// Should a reader be stuck in open, opening the other end frees it,
	// so that a failing test does not leave a goroutine blocked forever.
	t.Cleanup(func() {
		if f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
}

func TestLimitImportDevZero(t *testing.T) {
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip("no /dev/zero")
	}
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	for _, src := range []string{
		"import \"/dev/zero\"\n" + usesSvc,
		"workflow w { flow c { uses \"/dev/zero\" } }\n",
	} {
		res := compileWithin(t, 3*time.Second, t.TempDir(), src)
		wantImportError(t, res, src, `"/dev/zero"`, `"/dev/zero"`, "not a regular file (a device)")
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if grown := int64(after.TotalAlloc - before.TotalAlloc); grown > 64<<20 {
		t.Errorf("compiling allocated %d MiB", grown>>20)
	}
}

func TestLimitImportFIFO(t *testing.T) {
	dir := t.TempDir()
	mkfifo(t, filepath.Join(dir, "pipe.wf"))
	for _, src := range []string{
		"import \"pipe.wf\"\n" + usesSvc,
		"workflow w { flow c { uses \"pipe.wf\" } }\n",
	} {
		res := compileWithin(t, 3*time.Second, dir, src)
		wantImportError(t, res, src, `"pipe.wf"`, `"pipe.wf"`, "not a regular file (a named pipe)")
	}
}

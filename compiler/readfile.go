package compiler

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"

	"github.com/wfc-lang/wfc/lang"
)

// Errors of ReadFileLimit, for errors.Is. The errors it returns are
// *fs.PathError values whose message says more ("not a regular file (a
// named pipe)", "is a directory", "larger than 4194304 bytes (4 MiB)").
var (
	ErrNotRegular = errors.New("not a regular file")
	ErrTooLarge   = errors.New("file too large")
)

// ReadFile reads an imported file or a flow's child workflow: the default
// Config.ReadFile. It is ReadFileLimit with the limit of a source file,
// lang.MaxFileSize, so an import of /dev/zero, a named pipe, a directory
// or a file over the limit is an error (WF1011 at the import) instead of a
// hang or a read that never ends.
func ReadFile(path string) ([]byte, error) {
	return ReadFileLimit(context.Background(), path, lang.MaxFileSize)
}

// ReadFileLimit reads the file at path, which must be a regular file (or
// a symbolic link to one) of at most limit bytes. It refuses named pipes,
// devices, directories and sockets before reading from them, so it never
// blocks on one, and it stops reading at limit+1 bytes, so a file that
// grows while it is read is refused too. It stops early, with ctx's
// error, when ctx is done.
func ReadFileLimit(ctx context.Context, path string, limit int64) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// Stat first, so that a device is never even opened (opening some has
	// effects of its own).
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if err := checkFile(path, st, limit); err != nil {
		return nil, err
	}
	// The file may have been replaced since: open without blocking (a
	// named pipe would block until it has a writer), then check what was
	// opened.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err = f.Stat(); err != nil {
		return nil, err
	}
	if err := checkFile(path, st, limit); err != nil {
		return nil, err
	}
	return readLimited(ctx, path, f, st.Size(), limit)
}

// checkFile refuses what ReadFileLimit must not read.
func checkFile(path string, st fs.FileInfo, limit int64) error {
	if !st.Mode().IsRegular() {
		return &fs.PathError{Op: "read", Path: path, Err: &notRegularError{fileKind(st.Mode())}}
	}
	if st.Size() > limit {
		return &fs.PathError{Op: "read", Path: path, Err: &tooLargeError{limit}}
	}
	return nil
}

// readChunk is how much readLimited reads between checks of its context.
const readChunk = 512 << 10

// readLimited reads r to its end, refusing more than limit bytes; size is
// what r is expected to hold, to allocate once.
func readLimited(ctx context.Context, path string, r io.Reader, size, limit int64) ([]byte, error) {
	r = io.LimitReader(r, limit+1)
	b := make([]byte, 0, min(max(size, 512), limit)+1)
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):min(cap(b), len(b)+readChunk)])
		b = b[:len(b)+n]
		if int64(len(b)) > limit {
			return nil, &fs.PathError{Op: "read", Path: path, Err: &tooLargeError{limit}}
		}
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: path, Err: unwrapPathErr(err)}
		}
	}
}

type notRegularError struct{ kind string }

func (e *notRegularError) Error() string {
	if e.kind == kindDir {
		return "is a directory" // as the os package says it
	}
	return ErrNotRegular.Error() + " (" + e.kind + ")"
}

func (e *notRegularError) Is(target error) bool {
	return target == ErrNotRegular || e.kind == kindDir && target == syscall.EISDIR
}

type tooLargeError struct{ limit int64 }

func (e *tooLargeError) Error() string {
	if e.limit >= 1<<20 && e.limit%(1<<20) == 0 {
		return fmt.Sprintf("larger than %d bytes (%d MiB)", e.limit, e.limit>>20)
	}
	return fmt.Sprintf("larger than %d bytes", e.limit)
}

func (e *tooLargeError) Is(target error) bool { return target == ErrTooLarge }

const kindDir = "a directory"

// fileKind names the kind of a file that is not a regular one.
func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return kindDir
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	default:
		return "a special file"
	}
}

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/wfc-lang/wfc/compiler"
	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/lang"
)

// stdinName is how diagnostics name standard input.
const stdinName = "<stdin>"

// Limits of what wfc reads (docs/language.md §9). Files must be regular
// files: a named pipe, a device or a directory is refused before it is
// read (compiler.ReadFileLimit), so `wfc check /dev/zero` ends at once.
const (
	// maxRead bounds a .wf file or standard input. It is well above
	// lang.MaxFileSize so that the compiler, not the reader, reports an
	// oversized file (WF0006) with its real size.
	maxRead = 4 * lang.MaxFileSize
	// maxIRFile bounds a compiled workflow (.json, .yaml, .yml): the
	// largest document the IR decoder accepts.
	maxIRFile = ir.MaxSize
	// maxInputFile bounds --input-file, a JSON object of run inputs; as
	// large as an IR document.
	maxInputFile = 10 << 20
)

// readSource reads the source named by arg: a path, or "-" for standard
// input. It returns the name diagnostics should use.
func readSource(ctx context.Context, env *Env, arg string) (name string, src []byte, err error) {
	return readFile(ctx, env, arg, maxRead)
}

// readFile is readSource with a limit other than maxRead.
func readFile(ctx context.Context, env *Env, arg string, limit int64) (name string, src []byte, err error) {
	if arg == "-" {
		src, err = readStdin(ctx, env.Stdin, limit)
		if err != nil {
			return stdinName, nil, &readError{name: "standard input", err: err}
		}
		return stdinName, src, nil
	}
	src, err = compiler.ReadFileLimit(ctx, arg, limit)
	if err != nil {
		return arg, nil, &readError{name: arg, err: tooLarge(err, limit)}
	}
	return arg, src, nil
}

// readInputFile reads the file of --input-file. (A regular file of at
// most maxInputFile bytes: there is nothing to wait for that a context
// could cut short.)
func readInputFile(path string) ([]byte, error) {
	b, err := compiler.ReadFileLimit(context.Background(), path, maxInputFile)
	if err != nil {
		return nil, &readError{name: path, err: err}
	}
	return b, nil
}

var errTooLarge = fmt.Errorf("larger than %d MiB (a .wf file may have at most %d MiB)", maxRead>>20, lang.MaxFileSize>>20)

// tooLarge says what the limit of a .wf file is when one is over maxRead.
func tooLarge(err error, limit int64) error {
	if limit == maxRead && errors.Is(err, compiler.ErrTooLarge) {
		return errTooLarge
	}
	return err
}

// readStdin reads r to its end, at most limit bytes of it. A read that
// blocks (a terminal) ends when ctx does: wfc handles SIGINT through ctx,
// so an interrupt would not end it otherwise.
func readStdin(ctx context.Context, r io.Reader, limit int64) ([]byte, error) {
	type result struct {
		b   []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		b, err := io.ReadAll(io.LimitReader(r, limit+1))
		done <- result{b, err}
	}()
	select {
	case res := <-done:
		if res.err != nil {
			return nil, res.err
		}
		if int64(len(res.b)) > limit {
			return nil, tooLarge(fmt.Errorf("larger than %d bytes: %w", limit, compiler.ErrTooLarge), limit)
		}
		return res.b, nil
	case <-ctx.Done():
		return nil, errInterrupted
	}
}

var errInterrupted = errors.New("interrupted")

// A readError says which input could not be read and why, without the
// "open NAME:" prefix the os package adds.
type readError struct {
	name string
	err  error
}

func (e *readError) Error() string {
	err := e.err
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Sprintf("cannot read %s: %v", e.name, err)
}

func (e *readError) Unwrap() error { return e.err }

// writeOutput writes data to path, or to standard output when path is ""
// or "-". A file is replaced atomically: a failed build never leaves a
// truncated or half-written file behind.
func writeOutput(env *Env, path string, data []byte) error {
	if path == "" || path == "-" {
		_, err := env.Stdout.Write(data)
		return err
	}
	fileWrite.Lock() // a signal waits for the rename (signals.go)
	defer fileWrite.Unlock()
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return cannotWrite(path, err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename this fails harmlessly
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return cannotWrite(path, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return cannotWrite(path, err)
	}
	if err := tmp.Close(); err != nil {
		return cannotWrite(path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return cannotWrite(path, err)
	}
	return nil
}

func cannotWrite(path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		err = le.Err
	}
	return fmt.Errorf("cannot write %s: %v", path, err)
}

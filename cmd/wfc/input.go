package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/wfc-lang/wfc/lang"
)

// stdinName is how diagnostics name standard input.
const stdinName = "<stdin>"

// maxRead bounds what wfc reads of one input, so that `wfc check /dev/zero`
// ends. It is well above lang.MaxFileSize so that the compiler, not the
// reader, reports an oversized file (WF0006) with its real size.
const maxRead = 4 * lang.MaxFileSize

// readSource reads the source named by arg: a path, or "-" for standard
// input. It returns the name diagnostics should use.
func readSource(env *Env, arg string) (name string, src []byte, err error) {
	if arg == "-" {
		src, err = readLimited(env.Stdin)
		if err != nil {
			return stdinName, nil, &readError{name: "standard input", err: err}
		}
		return stdinName, src, nil
	}
	f, err := os.Open(arg)
	if err != nil {
		return arg, nil, &readError{name: arg, err: err}
	}
	defer f.Close()
	src, err = readLimited(f)
	if err != nil {
		return arg, nil, &readError{name: arg, err: err}
	}
	return arg, src, nil
}

var errTooLarge = fmt.Errorf("larger than %d MiB (a .wf file may have at most %d MiB)", maxRead>>20, lang.MaxFileSize>>20)

func readLimited(r io.Reader) ([]byte, error) {
	src, err := io.ReadAll(io.LimitReader(r, maxRead+1))
	if err != nil {
		return nil, err
	}
	if len(src) > maxRead {
		return nil, errTooLarge
	}
	return src, nil
}

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

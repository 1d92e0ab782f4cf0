package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	format "github.com/wfc-lang/wfc/fmt"
	"github.com/wfc-lang/wfc/lang/diag"
	"github.com/wfc-lang/wfc/lang/source"
)

const fmtDoc = `
Fmt formats .wf files in the one canonical layout (docs/formatting.md).
With no file it formats standard input to standard output. A directory is
walked for *.wf files.

With files and no flag, the formatted text goes to standard output, as
gofmt does. -l lists the files whose formatting differs, -w rewrites them in
place (through a temporary file, so a failure leaves the original intact),
-d prints a unified diff, and --check lists the files that would change, one
a line, and exits 1 when there is any.

A file with syntax errors is never rewritten: its diagnostics are printed
and the exit code is 2. SIGINT or SIGTERM stops fmt at once (a file being
rewritten is renamed into place first), with exit code 130 or 143.`

func runFmt(ctx context.Context, env *Env, args []string) int {
	fs := newFlags("fmt", "wfc fmt [-l] [-w] [-d] [--check] [FILE.wf | DIR]...", fmtDoc)
	list := fs.Bool("l", false, "list files whose formatting differs")
	write := fs.Bool("w", false, "rewrite files in place")
	diff := fs.Bool("d", false, "print a unified diff of the changes")
	check := fs.Bool("check", false, "list the files that are not formatted and exit 1 if any")
	args, code, ok := fs.parse(env, args)
	if !ok {
		return code
	}
	if len(args) == 0 {
		if *write {
			return fs.usageError(env, "-w needs files: standard input cannot be rewritten")
		}
		args = []string{"-"}
	}
	files, err := expandFiles(args)
	if err != nil {
		fmt.Fprintf(env.Stderr, "wfc fmt: %v\n", err)
		return exitFailed
	}
	exit := exitOK
	for _, path := range files {
		name, src, err := readSource(ctx, env, path)
		if err != nil {
			fmt.Fprintf(env.Stderr, "wfc: %v\n", err)
			exit = max(exit, exitFailed)
			continue
		}
		out, diags, err := format.Source(name, src)
		if err != nil {
			if errors.Is(err, format.ErrSyntax) {
				diag.WriteText(env.Stderr, diags, map[string]*source.File{name: source.NewFile(name, src)})
				exit = exitUsage // gofmt's contract: syntax errors exit 2
				continue
			}
			fmt.Fprintf(env.Stderr, "wfc fmt: %s: %v\n", name, err)
			exit = max(exit, exitInternal)
			continue
		}
		changed := string(out) != string(src)
		if !*list && !*write && !*diff && !*check {
			env.Stdout.Write(out)
			continue
		}
		if !changed {
			continue
		}
		if *check && exit == exitOK {
			exit = exitFailed
		}
		if *list || *check {
			fmt.Fprintln(env.Stdout, name)
		}
		if *diff {
			fmt.Fprint(env.Stdout, format.Diff(name, src, out))
		}
		if *write && path != "-" {
			if err := rewrite(path, out); err != nil {
				fmt.Fprintf(env.Stderr, "wfc fmt: %v\n", err)
				exit = max(exit, exitFailed)
			}
		}
	}
	return exit
}

// expandFiles replaces directories by the .wf files under them, sorted.
func expandFiles(args []string) ([]string, error) {
	var out []string
	for _, a := range args {
		if a == "-" {
			out = append(out, a)
			continue
		}
		st, err := os.Stat(a)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			out = append(out, a)
			continue
		}
		var found []string
		err = filepath.WalkDir(a, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && p != a && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir // .git and friends
			}
			if !d.IsDir() && strings.HasSuffix(p, ".wf") {
				found = append(found, p)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		sort.Strings(found)
		out = append(out, found...)
	}
	return out, nil
}

// rewrite replaces path with data through a temporary file in the same
// directory, keeping the file's permissions. A symbolic link stays one:
// the file it points to is rewritten.
func rewrite(path string, data []byte) error {
	path, err := filepath.EvalSymlinks(path)
	if err != nil {
		return err
	}
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	fileWrite.Lock() // a signal waits for the rename (signals.go)
	defer fileWrite.Unlock()
	tmp, err := os.CreateTemp(filepath.Dir(path), ".wfc-fmt-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(st.Mode().Perm()); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/wfc-lang/wfc/lang"
)

var update = flag.Bool("update", false, "update the cmp files of the testscript scripts")

func TestMain(m *testing.M) {
	// A hidden command that panics, to test the top-level recovery. It is
	// registered here, in the test binary only; the scripts run this
	// binary as `wfc`.
	commands = append(commands, &command{
		Name:   "internal-panic",
		Hidden: true,
		Run: func(ctx context.Context, env *Env, args []string) int {
			var m map[string]int
			m["boom"]++ // a real runtime panic, not just a panic(string)
			return 0
		},
	})
	testscript.Main(m, map[string]func(){
		"wfc": func() { os.Exit(Main()) },
	})
}

// TestScripts runs testdata/script/*.txtar. Run with -update to rewrite
// the files that `cmp` compares against.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("testdata", "script"),
		UpdateScripts:       *update,
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		Setup: func(e *testscript.Env) error {
			root, err := filepath.Abs(filepath.Join("..", ".."))
			if err != nil {
				return err
			}
			e.Setenv("REPO", root)
			return nil
		},
		Condition: func(cond string) (bool, error) {
			switch cond {
			case "root":
				return os.Geteuid() == 0, nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exitcode": cmdExitcode,
			"json":     cmdJSON,
			"genwf":    cmdGenwf,
		},
	})
}

// exitcode N PROG ARGS... runs PROG and requires exit code N. Its stdout
// and stderr are then available to stdout, stderr and cmp like exec's.
func cmdExitcode(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exitcode N program [args...]")
	}
	want, err := strconv.Atoi(args[0])
	ts.Check(err)
	err = ts.Exec(args[1], args[2:]...)
	got := 0
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			ts.Fatalf("%s: %v", args[1], err)
		}
		got = ee.ExitCode()
	}
	if got != want {
		ts.Fatalf("%s exited with %d, want %d", args[1], got, want)
	}
}

// json SOURCE [PATH=VALUE | len(PATH)=N]... requires SOURCE (stdout, stderr
// or a file) to hold exactly one JSON document, and checks values in it.
// PATH is dot-separated object keys and array indices ("files.0.file", or
// "." for the whole document); VALUE is compared with the compact JSON
// encoding of what PATH finds; N with the length of an array or object.
func cmdJSON(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 {
		ts.Fatalf("usage: json stdout|stderr|FILE [PATH=VALUE | len(PATH)=N]...")
	}
	dec := json.NewDecoder(strings.NewReader(ts.ReadFile(args[0]))) // ReadFile knows stdout and stderr
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		ts.Fatalf("%s is not JSON: %v", args[0], err)
	}
	if _, err := dec.Token(); err == nil {
		ts.Fatalf("%s holds more than one JSON document", args[0])
	}
	for _, a := range args[1:] {
		lhs, want, ok := strings.Cut(a, "=")
		if !ok {
			ts.Fatalf("json: %q is not PATH=VALUE or len(PATH)=N", a)
		}
		path, isLen := lhs, false
		if p, ok := strings.CutPrefix(lhs, "len("); ok && strings.HasSuffix(p, ")") {
			path, isLen = strings.TrimSuffix(p, ")"), true
		}
		v, err := jsonLookup(doc, path)
		if err != nil {
			ts.Fatalf("json %s: %v", path, err)
		}
		var got string
		if isLen {
			switch v := v.(type) {
			case []any:
				got = strconv.Itoa(len(v))
			case map[string]any:
				got = strconv.Itoa(len(v))
			default:
				ts.Fatalf("json %s: %T has no length", path, v)
			}
		} else {
			var b bytes.Buffer
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(false)
			ts.Check(enc.Encode(v))
			got = strings.TrimSuffix(b.String(), "\n")
		}
		if got != want {
			ts.Fatalf("json %s: got %s, want %s", lhs, got, want)
		}
	}
}

func jsonLookup(v any, path string) (any, error) {
	if path == "." || path == "" {
		return v, nil
	}
	for _, key := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			next, ok := x[key]
			if !ok {
				return nil, fmt.Errorf("no key %q", key)
			}
			v = next
		case []any:
			i, err := strconv.Atoi(key)
			if err != nil || i < 0 || i >= len(x) {
				return nil, fmt.Errorf("no index %q in an array of %d", key, len(x))
			}
			v = x[i]
		default:
			return nil, fmt.Errorf("cannot index %T with %q", v, key)
		}
	}
	return v, nil
}

// genwf KIND FILE N writes a generated input:
//
//	large  a valid workflow of at least N bytes (a few dozen more)
//	nested a workflow whose one expression nests N parentheses deep
//	junk   N deterministic pseudo-random bytes
//
// N is a number, or "limit" (lang.MaxFileSize) or "maxread" (how much wfc
// reads of one input) followed by +K or -K.
func cmdGenwf(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: genwf large|nested|junk FILE N")
	}
	n, err := genSize(args[2])
	ts.Check(err)
	var b bytes.Buffer
	switch args[0] {
	case "large":
		// 1,000 nodes (well under the node limit), then comments.
		b.WriteString("workflow large {\n")
		for i := 0; i < 1000 && b.Len() < n; i++ {
			fmt.Fprintf(&b, "  task t%04d { run \"noop\" }\n", i)
		}
		for b.Len() < n-2 {
			b.WriteString("  // " + strings.Repeat("padding ", 8) + "\n")
		}
		b.WriteString("}\n")
	case "nested":
		fmt.Fprintf(&b, "workflow deep {\n  task t { run \"cel\"  with { x = %s1%s } }\n}\n",
			strings.Repeat("(", n), strings.Repeat(")", n))
	case "junk":
		x := uint32(2463534242)
		for range n {
			x ^= x << 13
			x ^= x >> 17
			x ^= x << 5
			b.WriteByte(byte(x))
		}
	default:
		ts.Fatalf("genwf: unknown kind %q", args[0])
	}
	ts.Check(os.WriteFile(ts.MkAbs(args[1]), b.Bytes(), 0o644))
}

func genSize(s string) (int, error) {
	base := 0
	for name, v := range map[string]int{"limit": lang.MaxFileSize, "maxread": maxRead} {
		if rest, ok := strings.CutPrefix(s, name); ok {
			base, s = v, rest
			if s == "" {
				return base, nil
			}
		}
	}
	n, err := strconv.Atoi(s)
	return base + n, err
}

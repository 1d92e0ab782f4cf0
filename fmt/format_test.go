package format

import (
	"bytes"
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wfc-lang/wfc/lang"
	"github.com/wfc-lang/wfc/lang/ast"
	"github.com/wfc-lang/wfc/lang/source"
)

// go test ./fmt -update rewrites testdata/golden/fmt/*.golden.wf from the
// .input.wf files beside them.
var update = flag.Bool("update", false, "rewrite the golden files")

const goldenDir = "../testdata/golden/fmt"

// TestGolden formats each NAME.input.wf of testdata/golden/fmt and compares
// the result with NAME.golden.wf; the golden file must format to itself.
func TestGolden(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join(goldenDir, "*.input.wf"))
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no inputs in %s: %v", goldenDir, err)
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".input.wf")
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			got := mustFormat(t, in, src)
			golden := filepath.Join(goldenDir, name+".golden.wf")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./fmt -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("formatting %s differs from %s:\n%s", in, golden, Diff(golden, want, got))
			}
			if again := mustFormat(t, golden, want); !bytes.Equal(again, want) {
				t.Errorf("%s is not canonical:\n%s", golden, Diff(golden, want, again))
			}
		})
	}
}

// mustFormat formats src and checks the properties every output has.
func mustFormat(t *testing.T, name string, src []byte) []byte {
	t.Helper()
	out, _, err := Source(name, src)
	if err != nil {
		t.Fatalf("Source(%s): %v", name, err)
	}
	for _, p := range outputProblems(src, out) {
		t.Errorf("%s: %s", name, p)
	}
	return out
}

// outputProblems checks the invariants of a formatted file out of src: it
// parses without errors to the same tree with the same comments, formatting
// it again changes nothing, no line ends in whitespace, no tab or CR
// outside strings and comments, and it ends with exactly one newline.
func outputProblems(src, out []byte) []string {
	f, _, _ := lang.ParseString("in.wf", string(src))
	return treeProblems(f, out)
}

// treeProblems is outputProblems for the tree f parsed from the input.
func treeProblems(f *ast.File, out []byte) []string {
	var probs []string
	g, _, diags := lang.ParseString("out.wf", string(out))
	if diags.HasErrors() {
		return append(probs, "output does not parse: "+diags[0].Error()+"\n"+string(out))
	}
	if msg := equal(f, g); msg != "" {
		probs = append(probs, "output parses differently: "+msg)
	}
	if a, b := commentTexts(f.Comments), commentTexts(g.Comments); !slices.Equal(a, b) {
		probs = append(probs, "comments changed: "+strings.Join(a, " | ")+" became "+strings.Join(b, " | "))
	}
	again, err := render(g, out)
	if err != nil {
		probs = append(probs, "second pass: "+err.Error())
	} else if !bytes.Equal(again, out) {
		probs = append(probs, "not idempotent:\n"+Diff("once", out, again))
	}
	if len(out) > 0 && (!bytes.HasSuffix(out, []byte("\n")) || bytes.HasSuffix(out, []byte("\n\n"))) {
		probs = append(probs, "output does not end with exactly one newline")
	}
	// Whitespace outside strings and comments (and the expressions, kept
	// as written).
	mask := verbatimMask(g, out)
	for i := 0; i < len(out); i++ {
		if mask[i] {
			continue
		}
		switch out[i] {
		case '\t', '\r':
			probs = append(probs, "tab or CR at offset "+strconv.Itoa(i))
		case '\n':
			if i > 0 && out[i-1] == ' ' && !mask[i-1] {
				probs = append(probs, "trailing space before offset "+strconv.Itoa(i))
			}
		}
	}
	return probs
}

// verbatimMask marks the bytes of out that the formatter copies as written:
// comments, string literals and expressions.
func verbatimMask(f *ast.File, out []byte) []bool {
	mask := make([]bool, len(out))
	set := func(r ast.Range) {
		for i := r.Start; i < r.End && i < len(mask); i++ {
			mask[i] = true
		}
	}
	for _, c := range f.Comments {
		set(c.Range)
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.Expr:
			set(n.Range)
			return false
		case *ast.String:
			set(n.Range)
		}
		return true
	})
	return mask
}

// commentTexts lists the texts of comments as the formatter keeps them.
func commentTexts(cs []*ast.Comment) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = commentText(c.Text)
	}
	return out
}

// wfFiles lists every .wf file under the repository's testdata/golden and
// examples directories.
func wfFiles(t testing.TB) []string {
	var files []string
	for _, root := range []string{"../testdata/golden", "../examples"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && strings.HasSuffix(path, ".wf") {
				files = append(files, path)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(files) == 0 {
		t.Fatal("no .wf files found")
	}
	return files
}

// TestAllFiles formats every .wf file of testdata/golden and examples: a
// file that parses formats to a file that parses to the same tree, with the
// same comments, and that formats to itself; a file with syntax errors is
// refused with ErrSyntax and its diagnostics.
func TestAllFiles(t *testing.T) {
	formatted := 0
	for _, name := range wfFiles(t) {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		_, diags := lang.ParseFile(source.NewFile(name, src))
		out, gotDiags, err := Source(name, src)
		if diags.HasErrors() {
			if !errors.Is(err, ErrSyntax) || out != nil || len(gotDiags) != len(diags) {
				t.Errorf("%s: syntax errors: got %d bytes, %d diagnostics, error %v", name, len(out), len(gotDiags), err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		formatted++
		for _, p := range outputProblems(src, out) {
			t.Errorf("%s: %s", name, p)
		}
	}
	t.Logf("%d files formatted", formatted)
}

// TestMoveComment inserts `// c` and `/* c */` at every byte offset of a few
// files (every token boundary, and the inside of every token): whenever the
// result parses without errors, it formats to a file that parses to the
// same tree with the same comments, and formatting is idempotent.
func TestMoveComment(t *testing.T) {
	files := []string{
		"../examples/lead.wf",
		"../testdata/golden/fmt/constructs.input.wf",
		"../testdata/golden/fmt/blocks.input.wf",
		"../testdata/golden/compiler/separators.wf",
	}
	if testing.Short() {
		files = files[:1]
	}
	for _, name := range files {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		tried, failed := 0, 0
		for off := 0; off <= len(src) && failed < 10; off++ {
			for _, c := range []string{"// c\n", "/* c */"} {
				in := make([]byte, 0, len(src)+len(c))
				in = append(append(append(in, src[:off]...), c...), src[off:]...)
				f, _, diags := lang.ParseString(name, string(in))
				if diags.HasErrors() {
					continue
				}
				tried++
				out, err := render(f, in)
				if err != nil {
					t.Errorf("%s: comment %q at offset %d: %v", name, c, off, err)
					failed++
					continue
				}
				if !strings.Contains(string(out), strings.TrimSpace(c)) && len(f.Comments) > 0 {
					t.Errorf("%s: comment %q at offset %d: lost", name, c, off)
				}
				for _, p := range treeProblems(f, out) {
					t.Errorf("%s: comment %q at offset %d: %s\n%s", name, c, off, p, out)
					failed++
				}
			}
		}
		t.Logf("%s: %d placements formatted", name, tried)
	}
}

// TestSyntaxError: a file with a syntax error is not formatted.
func TestSyntaxError(t *testing.T) {
	out, diags, err := Source("bad.wf", []byte("workflow w { task a { run } }"))
	if !errors.Is(err, ErrSyntax) || out != nil || !diags.HasErrors() {
		t.Errorf("got %q, %v, %v", out, diags, err)
	}
}

// TestFile: File prints a parsed tree as Source does.
func TestFile(t *testing.T) {
	src := []byte("workflow w {task a {run \"x\"; timeout 90s}}\n")
	f, _, _ := lang.ParseString("f.wf", string(src))
	want := "workflow w { task a { run \"x\"  timeout 1m30s } }\n"
	if got := string(File(f, src)); got != want {
		t.Errorf("File = %q, want %q", got, want)
	}
	// Trees with syntax errors come back unchanged: with a Bad item, or
	// with a token no node covers.
	for _, bad := range []string{
		"workflow w { task a { run } task b { run \"x\" } }",
		"workflow w { task a run \"x\" } task b {} }",
	} {
		f, _, diags := lang.ParseString("bad.wf", bad)
		if !diags.HasErrors() {
			t.Fatalf("%q parses", bad)
		}
		if got := string(File(f, []byte(bad))); got != bad {
			t.Errorf("File(%q) = %q", bad, got)
		}
	}
	// A tree that leaves a token out (here: an item removed) is not printed.
	src = []byte("workflow w { task a {}  task b {} }")
	f, _, _ = lang.ParseString("f.wf", string(src))
	w := f.Items[0].(*ast.Workflow)
	w.Items = w.Items[1:]
	if got := string(File(f, src)); got != string(src) {
		t.Errorf("File of a tree without task a = %q", got)
	}
}

// TestDiff: Diff is a unified diff, empty for equal texts.
func TestDiff(t *testing.T) {
	if d := Diff("a.wf", []byte("x\n"), []byte("x\n")); d != "" {
		t.Errorf("equal texts: %q", d)
	}
	d := Diff("a.wf", []byte("a\nb\nc\n"), []byte("a\nB\nc\n"))
	for _, want := range []string{"--- a.wf.orig\n", "+++ a.wf\n", "@@ -1,3 +1,3 @@\n", "-b\n", "+B\n"} {
		if !strings.Contains(d, want) {
			t.Errorf("diff lacks %q:\n%s", want, d)
		}
	}
}

// TestDuration pins the canonical spelling of durations.
func TestDuration(t *testing.T) {
	for in, want := range map[string]string{
		"90s": "1m30s", "1h0m0s": "1h", "1h": "1h", "72h": "72h", "1.5h": "1h30m",
		"90m": "1h30m", "3600s": "1h", "2h0m5s": "2h5s", "1500ms": "1.5s",
		"500ms": "500ms", "1000ms": "1s", "0.5s": "500ms", "1500us": "1.5ms",
		"100us": "100us", "100µs": "100us", "10ns": "10ns", "0s": "0s", "0h": "0s",
		"1m0.25s": "1m0.25s", "60.25s": "1m0.25s", "1h30m15s": "1h30m15s",
		"1s500ms": "1.5s", "1.000000001s": "1.000000001s", ".5h": "30m",
		"30s": "30s", "250ms": "250ms", "48h": "48h", "1m": "1m",
		"99999999999999h": "99999999999999h", // too large: as written
	} {
		if got := Duration(in); got != want {
			t.Errorf("Duration(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestOutputTime: formatting a large file whose blocks are full of
// comments and aligned entries takes linear time (a quadratic pass over
// the comments of a block would take minutes here).
func TestOutputTime(t *testing.T) {
	if testing.Short() {
		t.Skip("formats a 2 MB file")
	}
	var b strings.Builder
	b.WriteString("workflow w {\n  task t {\n    run \"echo\"\n    with {\n")
	for i := range 40000 {
		b.WriteString("      // entry " + strconv.Itoa(i) + "\n      a" + strconv.Itoa(i) + " = 1 // trailing\n")
	}
	b.WriteString("    }\n  }\n}\n")
	start := time.Now()
	out, _, err := Source("big.wf", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("formatting %d bytes took %v", len(out), d)
	}
}

// TestDocExamples checks the examples of docs/formatting.md: every wf block
// is canonical, and a text block right before a wf block formats to it.
func TestDocExamples(t *testing.T) {
	doc, err := os.ReadFile("../docs/formatting.md")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile("(?s)```(wf|text)\n(.*?)```\n(\\s*```wf\n(.*?)```)?")
	n := 0
	for _, m := range re.FindAllStringSubmatch(string(doc), -1) {
		kind, body, next := m[1], m[2], m[4]
		switch {
		case kind == "wf":
			n++
			if out := mustFormat(t, "doc.wf", []byte(body)); string(out) != body {
				t.Errorf("example is not canonical:\n%s", Diff("doc.wf", []byte(body), out))
			}
		case m[3] != "":
			n += 2
			if out := mustFormat(t, "doc.wf", []byte(body)); string(out) != next {
				t.Errorf("example does not format as shown:\n%s", Diff("doc.wf", []byte(next), out))
			}
			if out := mustFormat(t, "doc.wf", []byte(next)); string(out) != next {
				t.Errorf("example is not canonical:\n%s", Diff("doc.wf", []byte(next), out))
			}
		}
	}
	if n == 0 {
		t.Fatal("no examples found")
	}
}

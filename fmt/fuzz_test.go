package format

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/wfc-lang/wfc/lang"
	"github.com/wfc-lang/wfc/lang/ast"
)

// FuzzFormat: formatting never panics; a file that parses without errors
// formats to a file that parses without errors to the same tree, keeps
// every comment, and formats to itself; a file with syntax errors is
// refused with ErrSyntax. Seeded with every .wf file of testdata/golden and
// examples.
//
//	go test ./fmt -run '^$' -fuzz FuzzFormat -fuzztime 2m
func FuzzFormat(f *testing.F) {
	for _, name := range wfFiles(f) {
		if b, err := os.ReadFile(name); err == nil && len(b) <= 64<<10 {
			f.Add(string(b))
		}
	}
	for _, s := range []string{
		"", "workflow w {}", "// c", "/* c */", "workflow w { task a { when x; in 3 } }",
		"workflow w { a b; after c {} }", "workflow w { task a { for_each v in x; parallel 2 } }",
		"workflow w { task a { timeout - /* c */ 3  x [1,\n2,] } }",
		"\xef\xbb\xbfworkflow w {\r\n\ttask a { run \"x\" }\r\n}",
		// Line width (rule 11): a long after list and a long condition.
		"workflow w { task z after " + strings.Repeat("abcdefgh, ", 14) + "i { run \"x\" } }",
		"workflow w { task a { when " + strings.Repeat("x.y > 1 && ", 12) + "(b ||\n c) } }",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		f, _, diags := lang.ParseString("fuzz.wf", src)
		out, _, err := Source("fuzz.wf", []byte(src))
		if diags.HasErrors() {
			if !errors.Is(err, ErrSyntax) || out != nil {
				t.Fatalf("syntax errors, but Source returned %d bytes and %v", len(out), err)
			}
			// The printer refuses a broken tree without panicking (File
			// then returns the source as it is).
			if _, err := render(f, []byte(src)); err == nil && hasBad(f) {
				t.Fatal("a tree with a Bad item was printed")
			}
			return
		}
		if err != nil {
			t.Fatalf("Source: %v", err)
		}
		for _, p := range outputProblems([]byte(src), out) {
			t.Error(p)
		}
		if got := File(f, []byte(src)); string(got) != string(out) {
			t.Errorf("File and Source disagree:\n%s", Diff("fuzz.wf", out, got))
		}
	})
}

// hasBad reports whether the tree has a *ast.Bad node.
func hasBad(f *ast.File) bool {
	bad := false
	ast.Inspect(f, func(n ast.Node) bool {
		if _, ok := n.(*ast.Bad); ok {
			bad = true
		}
		return !bad
	})
	return bad
}

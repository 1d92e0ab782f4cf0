package lang

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wfc-lang/wfc/lang/ast"
)

// go test ./lang -update rewrites the golden files: the grammar
// (../testdata/golden/grammar.ebnf) and the parse dumps (testdata/parse).
var update = flag.Bool("update", false, "rewrite golden files")

const grammarGolden = "../testdata/golden/grammar.ebnf"

func TestGrammarGolden(t *testing.T) {
	got := Grammar() + "\n"
	if *update {
		if err := os.MkdirAll(filepath.Dir(grammarGolden), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(grammarGolden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(grammarGolden)
	if err != nil {
		t.Fatalf("%v (run go test ./lang -update to create it)", err)
	}
	if got != strings.ReplaceAll(string(want), "\r\n", "\n") {
		t.Errorf("lang.Grammar() differs from %s; if the change is intended, run go test ./lang -update and update docs/language.md\n--- got\n%s", grammarGolden, got)
	}
}

// dump renders what the parser makes of src: its diagnostics, then the tree.
func dump(src string) string {
	f, _, diags := ParseString("t.wf", src)
	var b strings.Builder
	for _, d := range diagStrings(diags) {
		b.WriteString("diag ")
		b.WriteString(d)
		b.WriteByte('\n')
	}
	b.WriteString(ast.DebugString(f))
	return b.String()
}

// TestParseGolden parses each testdata/parse/*.wf and compares the
// diagnostics and the tree dump with the .golden file beside it. Every tree
// also passes the span checks.
func TestParseGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/parse/*.wf")
	if err != nil || len(files) == 0 {
		t.Fatalf("no inputs: %v", err)
	}
	for _, in := range files {
		name := strings.TrimSuffix(filepath.Base(in), ".wf")
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			f, diags := parse(t, string(src))
			_ = f
			got := dump(string(src))
			golden := strings.TrimSuffix(in, ".wf") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./lang -update)", err)
			}
			if got != string(want) {
				t.Errorf("%s differs from the parse; run go test ./lang -update and review the diff\n--- got\n%s", golden, got)
			}
			// Inputs named err_* must report errors; all others must not.
			if strings.HasPrefix(name, "err_") != diags.HasErrors() {
				t.Errorf("errors = %v: %v", diags.HasErrors(), diagStrings(diags))
			}
		})
	}
}

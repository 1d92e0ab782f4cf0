package format

import (
	"bytes"
	"math/rand"
	"os"
	"testing"

	"github.com/wfc-lang/wfc/lang"
	"github.com/wfc-lang/wfc/lang/ast"
)

// TestReflow rewrites the whitespace of every .wf file of testdata/golden
// and examples at random (seeded): each run of whitespace between tokens
// becomes spaces, tabs, a newline or a blank line (always a line break
// after a // comment). Every variant formats to a file that parses to the
// same tree with the same comments and formats to itself; and a variant
// that only changed spaces and tabs (no line break added or removed) outside
// expressions formats exactly like the original: the layout depends on line
// breaks and comments, never on spaces (the continuation lines of a
// multi-line expression included: they are indented on the grid, not where
// the source had them).
func TestReflow(t *testing.T) {
	variants := 12
	if testing.Short() {
		variants = 2
	}
	rng := rand.New(rand.NewSource(1))
	for _, name := range wfFiles(t) {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f0, _, diags := lang.ParseString(name, string(src))
		if diags.HasErrors() {
			continue
		}
		want, _, err := Source(name, src)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		runs := whitespaceRuns(src)
		// Expressions are copied as written: their spaces count.
		inExpr := map[int]bool{}
		ast.Inspect(f0, func(n ast.Node) bool {
			if e, ok := n.(*ast.Expr); ok {
				for k, r := range runs {
					if r.start > e.Start && r.end < e.End {
						inExpr[k] = true
					}
				}
				return false
			}
			return true
		})
		for v := range variants {
			spacesOnly := v%3 == 0
			in := reflow(src, runs, inExpr, rng, spacesOnly)
			f, _, diags := lang.ParseString(name, string(in))
			if diags.HasErrors() {
				t.Fatalf("%s: variant %d does not parse: %v\n%s", name, v, diags[0], in)
			}
			out, err := render(f, in)
			if err != nil {
				t.Errorf("%s: variant %d: %v\n%s", name, v, err, in)
				continue
			}
			for _, p := range treeProblems(f, out) {
				t.Errorf("%s: variant %d: %s\ninput:\n%s", name, v, p, in)
			}
			if spacesOnly && !bytes.Equal(out, want) {
				t.Errorf("%s: variant %d changed only spaces but formats differently:\n%s\ninput:\n%s", name, v, Diff(name, want, out), in)
			}
		}
	}
}

// A wsRun is a run of whitespace between two tokens or comments of a file:
// src[start:end]; afterLine tells that a // comment ends just before it.
type wsRun struct {
	start, end int
	afterLine  bool
}

// whitespaceRuns finds the runs of whitespace of src outside strings and
// comments, the way the lexer reads them.
func whitespaceRuns(src []byte) []wsRun {
	s := string(src)
	var runs []wsRun
	afterLine := false
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\r' || c == '\n':
			j := i
			for j < len(s) && (s[j] == ' ' || s[j] == '\t' || s[j] == '\r' || s[j] == '\n') {
				j++
			}
			runs = append(runs, wsRun{i, j, afterLine})
			i = j
		case c == '/' && i+1 < len(s) && s[i+1] == '/':
			for i < len(s) && s[i] != '\n' {
				i++
			}
			afterLine = true
			continue
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			e := bytes.Index(src[i+2:], []byte("*/"))
			i = i + 2 + e + 2
		case c == '"' || c == '\'':
			i = stringEnd(s, i, i)
		case isLetter(c):
			j := i
			for j < len(s) && j-i < 2 && (s[j]|0x20 == 'r' || s[j]|0x20 == 'b') {
				j++
			}
			if j > i && j < len(s) && (s[j] == '"' || s[j] == '\'') {
				i = stringEnd(s, i, j)
			} else {
				for i < len(s) && (isLetter(s[i]) || isDigit(s[i])) {
					i++
				}
			}
		default:
			i++
		}
		afterLine = false
	}
	return runs
}

// reflow returns src with each whitespace run replaced at random; with
// spacesOnly, a run keeps its line breaks and only its spaces change.
func reflow(src []byte, runs []wsRun, inExpr map[int]bool, rng *rand.Rand, spacesOnly bool) []byte {
	var b bytes.Buffer
	prev := 0
	for k, r := range runs {
		b.Write(src[prev:r.start])
		old := src[r.start:r.end]
		nl := bytes.Count(old, []byte("\n"))
		var ws string
		switch {
		case spacesOnly && inExpr[k]:
			ws = string(old)
		case spacesOnly:
			ws = []string{" ", "  ", "\t", " \t "}[rng.Intn(4)]
			if nl > 0 {
				ws = ""
				for k := range nl {
					if k > 0 {
						ws += "\n"
					}
					ws += []string{"", " ", "\t\t"}[rng.Intn(3)] + "\n" + []string{"", "   ", "\t"}[rng.Intn(3)]
				}
			}
		default:
			ws = []string{" ", "\n", "\n\n", "  ", "\n    ", "\t"}[rng.Intn(6)]
			if r.afterLine && !bytes.ContainsRune([]byte(ws), '\n') {
				ws = "\n"
			}
		}
		b.WriteString(ws)
		prev = r.end
	}
	b.Write(src[prev:])
	return b.Bytes()
}

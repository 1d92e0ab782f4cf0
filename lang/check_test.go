package lang

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/wfc-lang/wfc/lang/ast"
	"github.com/wfc-lang/wfc/lang/diag"
	"github.com/wfc-lang/wfc/lang/source"
)

// treeProblems checks the invariants every parse must keep, for any input:
//   - every diagnostic span lies inside the file, start before end, and its
//     line:col agrees with its offset;
//   - every node's range lies inside the file with Start <= End, and inside
//     its parent's range;
//   - with strict, every node's range starts at the first byte of a token and
//     ends at the last byte of a token (no leading or trailing whitespace or
//     comments); template parts and the expressions in them lie inside their
//     string literal, and expressions have no surrounding blanks;
//   - messages are for humans: no participle grammar names.
//
// It returns the problems found, for tests and for the fuzzer.
func treeProblems(src string, f *ast.File, diags diag.List, strict bool) []string {
	var out []string
	bad := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	sf := source.NewFile("t.wf", []byte(src))
	for _, d := range diags {
		s, e := d.Span.Start, d.Span.End
		if s.Offset < 0 || e.Offset > len(src) || s.Offset > e.Offset {
			bad("diagnostic %v outside the file (len %d): %s", d.Span, len(src), d.Message)
		}
		if !s.IsValid() || sf.Pos(s.Offset) != s || sf.Pos(e.Offset) != e {
			bad("diagnostic span %+v does not agree with its offsets: %s", d.Span, d.Message)
		}
		if unhuman(d.Message, src) {
			bad("message is not for humans: %q", d.Message)
		}
	}
	if f == nil {
		return append(out, "nil file")
	}
	if f.Start != 0 || f.End != len(src) {
		bad("file range %v, want 0-%d", f.Range, len(src))
	}
	// Token boundaries, for strict checks.
	starts, ends := map[int]bool{}, map[int]bool{}
	if strict {
		sc := scan(sf, &diag.Reporter{File: sf})
		for _, t := range sc.toks {
			starts[t.Pos.Offset] = true
			ends[t.Pos.Offset+len(t.Value)] = true
		}
		for _, c := range sc.comments {
			starts[c.Start] = true
			ends[c.End] = true
		}
	}
	var stack []ast.Node
	inString := 0 // depth of String nodes being visited
	ast.Inspect(f, func(n ast.Node) bool {
		if n == nil {
			top := stack[len(stack)-1]
			if _, ok := top.(*ast.String); ok {
				inString--
			}
			stack = stack[:len(stack)-1]
			return true
		}
		r := n.Rng()
		name := fmt.Sprintf("%T %v", n, r)
		if r.Start < 0 || r.End > len(src) || r.Start > r.End {
			bad("%s outside the file (len %d)", name, len(src))
			stack = append(stack, n)
			return false
		}
		if len(stack) > 0 {
			pr := stack[len(stack)-1].Rng()
			if r.Start < pr.Start || r.End > pr.End {
				bad("%s %q not inside its parent %T %v", name, src[r.Start:r.End], stack[len(stack)-1], pr)
			}
		}
		if _, ok := n.(*ast.String); ok {
			inString++
		}
		stack = append(stack, n)
		if !strict {
			return true
		}
		text := src[r.Start:r.End]
		switch n := n.(type) {
		case *ast.File:
		case *ast.TemplatePart:
			if n.Expr == nil && n.Text == "" {
				bad("%s: empty text part", name)
			}
		default:
			if inString > 0 && !isStringNode(n) {
				// An expression inside a template: inside the literal, no blanks around.
				if text == "" || strings.TrimSpace(text) != text {
					bad("%s %q has surrounding blanks", name, text)
				}
				break
			}
			if r.Start == r.End {
				bad("%s is empty", name)
				break
			}
			if !starts[r.Start] {
				bad("%s %q does not start at a token", name, text)
			}
			if !ends[r.End] {
				bad("%s %q does not end at a token", name, text)
			}
		}
		return true
	})
	return out
}

func isStringNode(n ast.Node) bool { _, ok := n.(*ast.String); return ok }

// Grammar names (GItem, gValue), participle's token classes (<ident>,
// <EOF>), lookahead syntax: none of these may reach a user.
var unhumanRe = regexp.MustCompile(`\b[gG][A-Z][a-z]+|<[a-z]+>|<EOF>|\(\?[=!]|\bIdent\b|\bPunct\b|reflect|participle|\x00`)

// unhuman reports whether msg shows grammar internals. Text that occurs in
// the source (a message may quote the user's tokens) does not count.
func unhuman(msg, src string) bool {
	if strings.ContainsRune(msg, 0) {
		return true
	}
	for _, m := range unhumanRe.FindAllString(msg, -1) {
		if !strings.Contains(src, m) {
			return true
		}
	}
	return false
}

// checkTree fails t on any treeProblems with strict checks.
func checkTree(t *testing.T, src string, f *ast.File, diags diag.List) {
	t.Helper()
	for _, p := range treeProblems(src, f, diags, true) {
		t.Error(p)
	}
}

// parse parses src, checks the tree and returns it with its diagnostics.
func parse(t *testing.T, src string) (*ast.File, diag.List) {
	t.Helper()
	f, _, diags := ParseString("t.wf", src)
	checkTree(t, src, f, diags)
	return f, diags
}

// parseOK parses src and fails t on any diagnostic.
func parseOK(t *testing.T, src string) *ast.File {
	t.Helper()
	f, diags := parse(t, src)
	for _, d := range diags {
		t.Errorf("%s: unexpected diagnostic %s", src, d.Error())
	}
	return f
}

// diagStrings renders diagnostics as `line:col CODE message`.
func diagStrings(diags diag.List) []string {
	var out []string
	for _, d := range diags {
		out = append(out, fmt.Sprintf("%d:%d %s %s", d.Span.Start.Line, d.Span.Start.Col, d.Code, d.Message))
	}
	return out
}

// slowDump is dump without the fast path: participle alone.
func slowDump(src string) string {
	f, d := parseFile(source.NewFile("t.wf", []byte(src)), false)
	var b strings.Builder
	for _, s := range diagStrings(d) {
		b.WriteString("diag " + s + "\n")
	}
	b.WriteString(ast.DebugString(f))
	return b.String()
}

// fastDisagrees compares the parse of src with and without the fast path,
// and checks that the fast parser accepts exactly what participle accepts.
func fastDisagrees(src string) string {
	fast, slow := dump(src), slowDump(src)
	if fast != slow {
		return fmt.Sprintf("fast path and participle disagree on %q\n--- fast\n%s--- participle\n%s", src, fast, slow)
	}
	sf := source.NewFile("t.wf", []byte(src))
	toks := scan(sf, &diag.Reporter{File: sf}).toks
	_, fastOK := (&fastParser{toks: toks}).file()
	_, err := fileParser.ParseFromLexer(peeking(toks))
	if fastOK != (err == nil) {
		return fmt.Sprintf("fast parser ok=%v, participle error %v, on %q", fastOK, err, src)
	}
	return ""
}

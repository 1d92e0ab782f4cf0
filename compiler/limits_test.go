package compiler

import (
	"fmt"
	"strings"
	"testing"

	"github.com/wfc-lang/wfc/lang"
	"github.com/wfc-lang/wfc/lang/diag"
)

// Each limit is tested at the limit (accepted) and one past it (a
// positioned diagnostic with the limit's code).
func TestLimits(t *testing.T) {
	chain := func(n int) string {
		var b strings.Builder
		b.WriteString("workflow w {\n")
		for i := 0; i < n; i++ {
			if i == 0 {
				b.WriteString("  task n0 { run \"noop\" }\n")
				continue
			}
			fmt.Fprintf(&b, "  task n%d after n%d { run \"noop\" }\n", i, i-1)
		}
		b.WriteString("}\n")
		return b.String()
	}
	fanout := func(n int) string {
		var b strings.Builder
		b.WriteString("workflow w {\n  task root { run \"noop\" }\n")
		for i := 0; i < n; i++ {
			fmt.Fprintf(&b, "  task c%d after root { run \"noop\" }\n", i)
		}
		b.WriteString("}\n")
		return b.String()
	}
	expr := func(body string) string {
		return "workflow w {\n  input { xs: list<int> }\n  task a {\n    run \"cel\"\n    with { v = " + body + " }\n  }\n}\n"
	}
	// Nesting: workflow, task and with blocks are 3 levels; brackets in
	// the expression add to them. (CEL's own recursion limit, 100, is a
	// backstop this limit reaches first.)
	nested := func(brackets int) string {
		return strings.Repeat("[", brackets) + strings.Repeat("]", brackets)
	}
	sized := func(n int) string { // expression size in code points
		s := "'" + strings.Repeat("é", n-2) + "'"
		return s
	}
	cases := []struct {
		name     string
		at, over string
		code     diag.Code
		line     int
	}{
		{"nodes", chain(DefaultMaxNodes), chain(DefaultMaxNodes + 1), diag.TooMany, DefaultMaxNodes + 2},
		{"fan-out", fanout(DefaultMaxFanout), fanout(DefaultMaxFanout + 1), diag.TooMany, 2},
		{"expression size", expr(sized(MaxExprSize)), expr(sized(MaxExprSize + 1)), diag.ExprSyntax, 5},
		{"nesting depth", expr(nested(lang.MaxDepth - 3)), expr(nested(lang.MaxDepth - 2)), diag.TooDeep, 5},
		{"expression cost", expr("input.xs.all(x, x > 0)"), expr("input.xs.all(x, input.xs.all(y, input.xs.all(z, x + y + z > 0)))"), diag.CostLimit, 5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			at := Compile("at.wf", []byte(c.at), Config{})
			if at.Diags.HasErrors() {
				t.Fatalf("at the limit: %v", at.Diags[0])
			}
			over := Compile("over.wf", []byte(c.over), Config{})
			var found *diag.Diagnostic
			for i, d := range over.Diags {
				if d.Code == c.code {
					found = &over.Diags[i]
					break
				}
			}
			if found == nil {
				t.Fatalf("past the limit: no %s in %v", c.code, over.Diags)
			}
			if found.Span.Start.Line != c.line {
				t.Errorf("past the limit: %s at line %d, want %d", c.code, found.Span.Start.Line, c.line)
			}
		})
	}
}

func TestImportDepthLimit(t *testing.T) {
	files := map[string]string{}
	// f0 imports f1 imports ... f(n); each declares one handler.
	mk := func(n int) {
		for i := 0; i <= n; i++ {
			src := fmt.Sprintf("handler \"h%d\" { config {} output {} }\n", i)
			if i < n {
				src = fmt.Sprintf("import \"f%d.wf\"\n", i+1) + src
			}
			files[fmt.Sprintf("f%d.wf", i)] = src
		}
	}
	read := func(p string) ([]byte, error) {
		if s, ok := files[p]; ok {
			return []byte(s), nil
		}
		return nil, fmt.Errorf("no such file")
	}
	main := func(last int) []byte {
		return []byte(fmt.Sprintf("import \"f0.wf\"\nworkflow w { task a { run \"h%d\" } }\n", last))
	}
	mk(MaxImportDepth - 1) // main imports f0 (depth 1) ... f(15) (depth 16)
	if r := Compile("main.wf", main(MaxImportDepth-1), Config{ReadFile: read}); r.Diags.HasErrors() {
		t.Fatalf("at the limit: %v", r.Diags)
	}
	files = map[string]string{}
	mk(MaxImportDepth)
	r := Compile("main.wf", main(MaxImportDepth), Config{ReadFile: read})
	found := false
	for _, d := range r.Diags {
		if d.Code == diag.ImportError && d.Span.Start.Line == 1 {
			found = true
		}
	}
	if !found {
		t.Fatalf("past the limit: no positioned WF1011 in %v", r.Diags)
	}
}

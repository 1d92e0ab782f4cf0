package gen_test

import (
	"go/parser"
	"go/token"
	"strings"
	"testing"

	"github.com/wfc-lang/wfc/lang"
	"github.com/wfc-lang/wfc/lang/ast"
	"github.com/wfc-lang/wfc/lang/gen"
)

func TestWorkflowParses(t *testing.T) {
	for _, shape := range gen.Shapes {
		for _, n := range []int{1, 2, 3, 10, 200} {
			src := gen.Workflow(shape, n, 1)
			f, _, diags := lang.ParseString(shape+".wf", src)
			for _, d := range diags {
				t.Errorf("%s/%d: %s", shape, n, d.Error())
			}
			nodes := 0
			ast.Inspect(f, func(x ast.Node) bool {
				if _, ok := x.(*ast.NodeDecl); ok {
					nodes++
				}
				return true
			})
			if nodes != n {
				t.Errorf("%s/%d: %d nodes", shape, n, nodes)
			}
			if src != gen.Workflow(shape, n, 1) {
				t.Errorf("%s/%d: not deterministic", shape, n)
			}
		}
	}
}

func TestGoFile(t *testing.T) {
	src := gen.GoFile(1000, 1)
	if n := strings.Count(src, "\n"); n < 1000 || n > 1020 {
		t.Errorf("%d lines", n)
	}
	if _, err := parser.ParseFile(token.NewFileSet(), "g.go", src, parser.ParseComments); err != nil {
		t.Fatal(err)
	}
}

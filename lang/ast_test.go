package lang

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wfc-lang/wfc/lang/ast"
)

// TestInspect walks the trees of all golden inputs: every kind of node is
// visited, each call has its f(nil), and Inspect and Fprint agree on how
// many nodes there are.
func TestInspect(t *testing.T) {
	files, _ := filepath.Glob("testdata/parse/*.wf")
	seen := map[string]bool{}
	for _, in := range files {
		src, err := os.ReadFile(in)
		if err != nil {
			t.Fatal(err)
		}
		f, _, _ := ParseString(in, string(src))
		n, open := 0, 0
		ast.Inspect(f, func(x ast.Node) bool {
			if x == nil {
				open--
				return true
			}
			open++
			n++
			seen[fmt.Sprintf("%T", x)] = true
			return true
		})
		if open != 0 {
			t.Errorf("%s: %d visits without their f(nil)", in, open)
		}
		if lines := strings.Count(ast.DebugString(f), "\n"); lines != n {
			t.Errorf("%s: Inspect visited %d nodes, Fprint printed %d", in, n, lines)
		}
	}
	// A Bad with a name comes from a broken file.
	f, _, _ := ParseString("bad.wf", "workflow w { task a after { } }")
	ast.Inspect(f, func(x ast.Node) bool {
		if x != nil {
			seen[fmt.Sprintf("%T", x)] = true
		}
		return true
	})
	for _, typ := range []string{"File", "Comment", "Ident", "String", "TemplatePart", "Expr", "Value",
		"Import", "Handler", "Workflow", "NodeDecl", "Setting", "Goto", "Cond", "ForEach", "Block",
		"Branch", "Rule", "TypeBlock", "Field", "Type", "InputBlock", "ParamBlock", "Param", "Bad"} {
		if !seen["*ast."+typ] {
			t.Errorf("Inspect never visited an *ast.%s", typ)
		}
	}
}

func TestInspectPrune(t *testing.T) {
	f := parseOK(t, `workflow w { task a { run "x" } task b { run "y" } }`)
	var visited []string
	ast.Inspect(f, func(x ast.Node) bool {
		switch x := x.(type) {
		case *ast.NodeDecl:
			visited = append(visited, x.Name.Name)
			return false // do not enter nodes
		case *ast.Ident:
			visited = append(visited, x.Name)
		}
		return true
	})
	if got := strings.Join(visited, " "); got != "w a b" {
		t.Errorf("visited %q", got)
	}
	// Nil nodes are ignored.
	ast.Inspect(nil, func(ast.Node) bool { t.Error("called for nil"); return true })
	var nd *ast.NodeDecl
	ast.Inspect(nd, func(ast.Node) bool { t.Error("called for typed nil"); return true })
}

func TestFprint(t *testing.T) {
	src := `workflow w { task a after b join any { run "x" } }`
	f := parseOK(t, src)
	want := `Workflow @0-50
  Name: Ident @9-10 w
  NodeDecl @13-48
    Kind: Ident @13-17 task
    Name: Ident @18-19 a
    After: Ident @26-27 b
    Join: Ident @33-36 any
    Setting @39-46
      Key: Ident @39-42 run
      Value @43-46 string "x"
        String @43-46 "x"
`
	if got := ast.DebugString(f.Items[0]); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// TestTemplateParts checks the exact ranges of template parts.
func TestTemplateParts(t *testing.T) {
	tests := []struct {
		lit   string
		parts []string // source text of each part; exprs as {{...}}=text
	}{
		{`"a{{ b }}c"`, []string{`a`, `{{ b }}=b`, `c`}},
		{`"{{a}}{{ b.c }}x{{  d  }}"`, []string{`{{a}}=a`, `{{ b.c }}=b.c`, `x`, `{{  d  }}=d`}},
		{`'x {{ f(1, "y") }} z'`, []string{`x `, `{{ f(1, "y") }}=f(1, "y")`, ` z`}},
		{`"""l1
{{ a }}
l3"""`, []string{"l1\n", `{{ a }}=a`, "\nl3"}},
		{`r"\d{{ a }}"`, []string{`\d`, `{{ a }}=a`}},
		{`"\t{{ a }}\n"`, []string{`\t`, `{{ a }}=a`, `\n`}},
		{`"{{ a }}}"`, []string{`{{ a }}=a`, `}`}},
		{`"{ {{ a }} }"`, []string{`{ `, `{{ a }}=a`, ` }`}},
	}
	for _, tt := range tests {
		src := "workflow w { agent a { prompt " + tt.lit + " } }"
		f := parseOK(t, src)
		st := f.Workflow().Items[0].(*ast.NodeDecl).Items[0].(*ast.Setting)
		s := st.Value.Str
		if s == nil {
			t.Errorf("%s: no string", tt.lit)
			continue
		}
		var got []string
		for _, p := range s.Template {
			text := src[p.Start:p.End]
			if p.Expr != nil {
				text += "=" + src[p.Expr.Start:p.Expr.End]
				if p.Expr.Text != src[p.Expr.Start:p.Expr.End] {
					t.Errorf("%s: expr text %q", tt.lit, p.Expr.Text)
				}
			}
			got = append(got, text)
		}
		if strings.Join(got, "|") != strings.Join(tt.parts, "|") {
			t.Errorf("%s: parts\n got %q\nwant %q", tt.lit, got, tt.parts)
		}
	}
}

// TestComments: every comment is kept, in order, with its exact range, and
// no node range starts or ends inside one (checked by parse).
func TestComments(t *testing.T) {
	src := "// a\nworkflow w { /* b */ task x { run \"y\" // c\n } /* d\n e */ }\n// f"
	f := parseOK(t, src)
	var got []string
	for _, c := range f.Comments {
		if src[c.Start:c.End] != c.Text {
			t.Errorf("comment %q has range text %q", c.Text, src[c.Start:c.End])
		}
		got = append(got, c.Text)
	}
	want := []string{"// a", "/* b */", "// c", "/* d\n e */", "// f"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("comments = %q", got)
	}
	// A block comment inside an expression is blanked in Expr.Text, so
	// offsets still map one to one.
	f = parseOK(t, "workflow w { task a { when x /* c */ > 1 } }")
	e := f.Workflow().Items[0].(*ast.NodeDecl).Items[0].(*ast.Cond).Expr
	if e.Text != "x         > 1" || len(e.Text) != e.End-e.Start {
		t.Errorf("expr text %q", e.Text)
	}
}

// TestLeadExample parses the example of the language design.
func TestLeadExample(t *testing.T) {
	src, err := os.ReadFile("testdata/parse/lead.wf")
	if err != nil {
		t.Fatal(err)
	}
	if string(src) != leadWF {
		t.Error("testdata/parse/lead.wf and leadWF differ")
	}
	parseOK(t, string(src))
}

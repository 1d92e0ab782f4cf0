package lang

import (
	"strings"
	"testing"

	"github.com/wfc-lang/wfc/lang/ast"
)

// nodeNames lists the nodes in the tree, with broken nodes as BAD (or
// BAD:name when the header could be read).
func nodeNames(f *ast.File) string {
	var names []string
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.NodeDecl:
			names = append(names, n.Name.Name)
		case *ast.Bad:
			s := "BAD"
			if n.Name != nil {
				s += ":" + n.Name.Name
			}
			names = append(names, s)
		}
		return true
	})
	return strings.Join(names, " ")
}

func TestRecoveryCases(t *testing.T) {
	tests := []struct {
		name  string
		src   string
		diags []string // line:col code message
		nodes string
	}{
		{"missing values in two nodes", `workflow w {
  task a { run "noop" timeout }
  task b after a { run "noop" }
  task c after b { run "noop" when }
  task d after c { run "noop" }
}`, []string{
			`2:31 WF0001 unexpected "}" in ` + "`timeout`" + ` item of task a`,
			`4:36 WF0001 unexpected "}" in ` + "`when`" + ` item of task c`,
		}, "a BAD b c BAD d"},
		{"unclosed node does not swallow the next", `workflow w {
  task a { run "x"
  task b { run "y" }
  task c { run "z" }
}`, []string{`2:10 WF0001 the "{" of task a is never closed`}, "a b c"},
		{"unclosed node with an inner block", `workflow w {
  task a { run "x"
    retry { attempts 3
  }
  task b { run "y" }
}`, []string{`2:10 WF0001 the "{" of task a is never closed`}, "a b"},
		{"every broken parameter of a with block", `workflow w {
  task a {
    run "cel"
    with {
      x = 1 +
      y = "ok"
      z = (2
      w = 3
    }
  }
  task b after a { run "noop" }
}`, []string{
			`6:7 WF0001 expected an expression, found "y"`,
			`7:11 WF0001 "(" is not closed`,
		}, "a BAD b"},
		{"every broken output", `workflow w {
  output { a = 1 *  b = 2  c = [1,  d = 4 }
  task t { run "noop" }
}`, []string{
			`2:21 WF0001 expected an expression, found "b"`,
			`2:32 WF0001 "[" is not closed`,
		}, "BAD t"},
		{"an error between parameters is the block's own", `workflow w {
  task a { run "cel"  with { x = 1,, y = 2 } }
}`, []string{`2:36 WF0001 unexpected "," in ` + "`with`" + ` item of task a; expected "}"`}, "a BAD"},
		{"unclosed paren", `workflow w {
  task a { with { x = f(1 } }
  task b { run "y" }
}`, []string{`2:27 WF0001 unexpected "}": "(" at 2:24 is not closed`}, "a BAD b"},
		{"unclosed paren before the node's brace", `workflow w { task a { when (a } task b { run "x" } }`,
			[]string{`1:28 WF0001 "(" is not closed`}, "a BAD b"},
		{"unclosed workflow", `workflow w {
  task a { run "x" }
  task b { run "y" }`, []string{`3:10 WF0001 the "{" of task b is never closed`}, "a b"},
		{"extra closing brace", `workflow w {
  task a { run "x" } }
  task b { run "y" }
}`, []string{`2:22 WF0001 unexpected "}": it closes workflow w but more of its body follows`}, "a b"},
		{"broken headers", `workflow w {
  task { run "x" }
  task b after { }
  task c join { }
  task d after a, { }
  task e after a b { }
  task f { run "ok" }
}`, []string{
			`2:8 WF0001 expected a name after "task", found "{"`,
			`3:16 WF0001 expected a node name after "after" in task b, found "{"`,
			`4:15 WF0001 expected a join mode (all, any, settled or first) after "join" in task c, found "{"`,
			`5:19 WF0001 expected a node name after "," in task d, found "{"`,
			`6:18 WF0001 expected "{" to start the body of task e, found "b"`,
		}, "BAD BAD:b BAD:c BAD:d BAD:e f"},
		{"workflow items", `workflow w {
  input { a: }
  output { x = }
  version
  task a { run "x" }
}`, []string{
			"2:14 WF0001 unexpected \"}\" in `input` block of workflow w",
			`3:16 WF0001 expected an expression, found "}"`,
			`4:3 WF0001 missing value after "version"`,
		}, "BAD BAD BAD a"},
		{"node items", `workflow w {
  task a { retry { attempts } timeout 3s }
  task b { branch { when x } }
  task c { branch { x => y } }
  task d { for_each x y }
  task e { routes }
  task f { on_error => }
  task g { approvers [1, }
  task h { run "ok" }
}`, []string{
			"2:29 WF0001 unexpected \"}\" in `retry` item of task a, after \"attempts\"",
			"3:28 WF0001 unexpected \"}\" in `branch` item of task b",
			"4:21 WF0001 unexpected \"x\" in `branch` item of task c; expected \"when\" or \"else\"",
			"5:23 WF0001 unexpected \"y\" in `for_each` item of task d",
			"6:19 WF0001 unexpected \"}\" in `routes` item of task e",
			"7:24 WF0001 unexpected \"}\" in `on_error` item of task f",
			"8:22 WF0001 \"[\" is not closed",
		}, "a BAD b BAD c BAD d BAD e BAD f BAD g BAD h"},
		{"more node items", `workflow w {
  task a { with { a 1 } output { a int } }
  task b { when a.
  }
  task c { run "x" ]
  task d { run "x" # }
  task e { run "ok" }
}`, []string{
			"2:21 WF0001 unexpected \"1\" in `with` item of task a, after \"a\"",
			"2:36 WF0001 unexpected \"int\" in `output` item of task a, after \"a\"",
			`4:3 WF0001 expected a field name after ".", found "}"`,
			`5:10 WF0001 the "{" of task c is never closed`,
			`5:20 WF0001 unexpected "]" in the body of task c`,
			`6:20 WF0002 unexpected character '#'`,
		}, "a BAD BAD b BAD c BAD d e"},
		{"branch rule", `workflow w {
  task a {
    branch {
      when x > => b
      else => c
    }
  }
  task b { run "y" }
}`, []string{`4:16 WF0001 expected an expression, found "=>"`}, "a BAD b"},
		{"top level", `handler "x" { config { a } }
handler y { }
import x
foo bar
workflow w { task a { run "x" } }`, []string{
			`1:26 WF0001 unexpected "}" in handler declaration, after "a"`,
			`2:9 WF0001 expected a handler name in quotes after "handler", found "y"`,
			`3:8 WF0001 expected a file name in quotes after "import", found "x"`,
		}, "BAD BAD BAD a"},
		{"stray closers at top", `}}}} workflow w { task a { run "x" } }`,
			[]string{`1:1 WF0001 unexpected "}" at the top level of the file; expected import, handler or workflow`}, "BAD a"},
		{"stray paren in workflow", `workflow w { task a { run "x" } ) task b { run "y" } }`,
			[]string{`1:33 WF0001 unexpected ")" in the body of workflow w`}, "a BAD b"},
		{"stray bracket in node", `workflow w { task a { with { x = 1 } ) } }`,
			[]string{`1:38 WF0001 unexpected ")" in the body of task a`}, "a BAD"},
		{"error in a second workflow", "workflow w { task a { run \"x\" } }\nworkflow v { task b { run 5 + } }",
			[]string{`2:29 WF0001 unexpected "+" in the body of task b`}, "a b BAD"},
		{"semicolons", `workflow w { task a { run "x" } ; ; task b { run "y" } ; }`, nil, "a b"},
		{"duration as expression", `workflow w { input { d: duration = 30s } task a {} }`,
			[]string{`1:36 WF0001 expected an expression, found the duration 30s; CEL writes it duration("30s")`}, "BAD a"},
		{"node without body", `workflow w { task a }`,
			[]string{`1:21 WF0001 expected "{" to start the body of task a, found "}"`}, "BAD:a"},
		{"templates", `workflow w {
  task a {
    run "x"
    with { u = "{{ a " v = "{{ }}" }
  }
}`, []string{
			`4:17 WF2001 template expression "{{" is not closed by "}}"`,
			`4:29 WF2001 empty template expression`,
		}, "a"},
		{"bad escape", `workflow w { task a { run "\q" } }`, []string{`1:27 WF0004 invalid escape sequence in string literal`}, "a"},
		// Truncated files.
		{"workflow", "workflow", []string{`1:9 WF0001 expected a workflow name after "workflow", found end of file`}, "BAD"},
		{"workflow w", "workflow w", []string{`1:11 WF0001 unexpected end of workflow`}, "BAD"},
		{"workflow w {", "workflow w {", []string{`1:12 WF0001 the "{" of workflow w is never closed`}, ""},
		{"workflow w { task a", "workflow w { task a", []string{
			`1:12 WF0001 the "{" of workflow w is never closed`,
			`1:20 WF0001 expected "{" to start the body of task a, found end of file`,
		}, "BAD:a"},
		{"workflow w { task a {", "workflow w { task a {", []string{
			`1:12 WF0001 the "{" of workflow w is never closed`,
			`1:21 WF0001 the "{" of task a is never closed`,
		}, "a"},
		{"workflow w { task a { run", "workflow w { task a { run", []string{
			`1:12 WF0001 the "{" of workflow w is never closed`,
			`1:21 WF0001 the "{" of task a is never closed`,
			"1:26 WF0001 unexpected end of `run` item of task a",
		}, "a BAD"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, diags := parse(t, tt.src)
			got := diagStrings(diags)
			if strings.Join(got, "\n") != strings.Join(tt.diags, "\n") {
				t.Errorf("diagnostics:\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(tt.diags, "\n     "))
			}
			if got := nodeNames(f); got != tt.nodes {
				t.Errorf("nodes = %q, want %q", got, tt.nodes)
			}
		})
	}
}

// TestRecoveryKeepsGoodNodes breaks one node of a larger workflow in many
// ways; every other node must still be in the tree, complete.
func TestRecoveryKeepsGoodNodes(t *testing.T) {
	breaks := []string{
		`task b { run }`,
		`task b { run "x"`,
		`task b { with { x = f(1 } }`,
		`task b { with { x = [1, 2 } }`,
		`task b after { run "x" }`,
		`task b { branch { when => c } }`,
		`task b { retry { attempts 3 }`,
		`task b { run "x" } }`,
		`task b { run "x" } )`,
		`task b { run "x" # @ }`,
		`task b { for_each in x }`,
		`task b { when a. }`,
		`task { }`,
		`task b { "x" }`,
		`task b { prompt "unterminated }`,
		`task b { run 'x' /* unterminated comment }`,
	}
	for _, br := range breaks {
		src := "workflow w {\n  task a { run \"x\"  timeout 3s }\n  " + br + "\n  task c after a {\n    run \"y\"\n    with { k = a.output.v }\n  }\n  task d { run \"z\" }\n}\n"
		f, diags := parse(t, src)
		if len(diags) == 0 {
			t.Errorf("%s: no diagnostic", br)
			continue
		}
		if strings.Contains(br, "unterminated comment") {
			continue // the comment runs to the end of the file
		}
		var kept []string
		for _, it := range f.Workflow().Items {
			if n, ok := it.(*ast.NodeDecl); ok && n.Name.Name != "b" {
				kept = append(kept, n.Name.Name+":"+src[n.Start:n.End])
			}
		}
		want := []string{
			`a:task a { run "x"  timeout 3s }`,
			"c:task c after a {\n    run \"y\"\n    with { k = a.output.v }\n  }",
			`d:task d { run "z" }`,
		}
		// A break inside a prompt's string: the string runs to the end
		// of its line, and the rest parses as well.
		if strings.Join(kept, "|") != strings.Join(want, "|") {
			t.Errorf("%s: kept\n%s\nwant\n%s\ndiags %v", br, strings.Join(kept, "\n"), strings.Join(want, "\n"), diagStrings(diags))
		}
	}
}

// A handler declared inside the workflow does not end the workflow when the
// file is recovered after a syntax error (found by the language server).
func TestRecoveryHandlerInWorkflow(t *testing.T) {
	src := "workflow w {\n handler \"h\" { }\n task a { run \"noop\" }\n task b { run }\n}\n"
	f, _, diags := ParseString("h.wf", src)
	if len(diags) != 1 || diags[0].Span.Start.Line != 4 {
		t.Fatalf("want one error on line 4, got %v", diags)
	}
	w := f.Workflow()
	if w == nil || len(w.Items) != 3 {
		t.Fatalf("workflow items: %+v", w)
	}
}

package compiler

import (
	"strings"
	"testing"

	"github.com/wfc-lang/wfc/lang/diag"
)

// TestLimitURLEscapeFunctions: url.pathEscape and url.queryEscape (issue
// #14 item 8; package cellib) type-check as string -> string, in
// expressions and templates; another argument type is a type error at the
// call.
func TestLimitURLEscapeFunctions(t *testing.T) {
	ok := `workflow w {
  input { name: string }
  task a {
    run "cel"
    with { p = "https://x/{{ url.pathEscape(input.name) }}?q={{ url.queryEscape(input.name) }}"  n = url.pathEscape(input.name).size() }
  }
  // A node named url keeps its output; the functions stay callable.
  task url after a { run "cel"  with { v = url.pathEscape(a.output.p) } }
  output { v = url.output.v  q = url.queryEscape(input.name) != "" }
}
`
	if r := Compile("ok.wf", []byte(ok), Config{}); len(r.Diags) != 0 {
		t.Fatalf("valid uses: %v", r.Diags)
	}
	for _, c := range []struct {
		src  string
		code diag.Code
		msg  string
	}{
		{`with { p = url.pathEscape(input.n) }`, diag.TypeError, "no function `url.pathEscape` takes (int)"},
		{`with { p = "x{{ url.queryEscape(input.n) }}" }`, diag.TypeError, "no function `url.queryEscape` takes (int)"},
		{`with { p = url.pathEscape("a", "b") }`, diag.TypeError, "no function `url.pathEscape` takes (string, string)"},
		{`when url.pathEscape("a")`, diag.NotBool, "must be bool, found string"},
	} {
		src := "workflow w {\n  input { n: int }\n  task a {\n    run \"cel\"\n    " + c.src + "\n  }\n}\n"
		r := Compile("bad.wf", []byte(src), Config{})
		if len(r.Diags) != 1 || r.Diags[0].Code != c.code || !strings.Contains(r.Diags[0].Message, c.msg) {
			t.Errorf("%s: got %v, want one %s saying %q", c.src, r.Diags, c.code, c.msg)
		}
	}
}

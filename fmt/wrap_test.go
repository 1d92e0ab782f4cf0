package format

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestLineWidth: after lists, targets and expressions joined by && and ||
// of every length around the width, written on one line, at several depths:
// the output is idempotent (mustFormat), no line is wider than lineWidth
// (every operand and name here fits on a line), and formatting it again with
// its line breaks moved keeps those the author wrote between list elements
// (issue #20: a 30-parent header became 470 columns, a 599-column `when`
// stayed, and the breaks of an after list were joined).
func TestLineWidth(t *testing.T) {
	rng := rand.New(rand.NewSource(20))
	names := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("n%d_%s", i, strings.Repeat("x", rng.Intn(12)))
		}
		return out
	}
	for n := 1; n <= 40; n++ {
		ns := names(n)
		conds := make([]string, n)
		for i := range conds {
			conds[i] = fmt.Sprintf("input.v%s > %d", strings.Repeat("y", rng.Intn(10)), rng.Intn(1000))
		}
		var b strings.Builder
		b.WriteString("workflow w {\n  input { n: int }\n")
		for _, x := range ns {
			fmt.Fprintf(&b, "  task %s { run \"noop\" }\n", x)
		}
		join := ""
		if n%3 == 0 {
			join = " join settled"
		}
		fmt.Fprintf(&b, "  task last after %s%s { run \"noop\" }\n", strings.Join(ns, ", "), join)
		fmt.Fprintf(&b, "  task cond {\n    when %s\n    routes %s\n", strings.Join(conds, " && "), strings.Join(ns, ", "))
		fmt.Fprintf(&b, "    with { x = \"%s\" != \"\" && %s }\n", strings.Repeat("ü", 30), strings.Join(conds, " && "))
		fmt.Fprintf(&b, "    on_error \"timeout\" => %s\n", strings.Join(ns, ", "))
		// Columns are counted in characters, not bytes.
		fmt.Fprintf(&b, "    on_error \"%s\" => %s\n", strings.Repeat("é", 20+n), strings.Join(ns, ", "))
		fmt.Fprintf(&b, "    branch {\n      when %s => %s\n      else => last\n    }\n  }\n}\n", strings.Join(conds, " || "), strings.Join(ns, ", "))
		src := b.String()
		out := mustFormat(t, "w.wf", []byte(src))
		for i, line := range strings.Split(string(out), "\n") {
			if w := utf8.RuneCountInString(line); w > lineWidth {
				t.Errorf("n=%d: line %d is %d columns:\n%s", n, i+1, w, line)
			}
		}
	}

	// The breaks written between elements are kept, and the elements
	// before them joined by the one-line rule are not split.
	src := "workflow w {\n  task a after x, y,\n    z { run \"noop\" }\n  task b { run \"noop\"  routes x,\n  y }\n}\n"
	want := "workflow w {\n  task a after x, y,\n      z {\n    run \"noop\"\n  }\n  task b {\n    run \"noop\"\n    routes x,\n      y\n  }\n}\n"
	if got := mustFormat(t, "k.wf", []byte(src)); string(got) != want {
		t.Errorf("kept breaks:\n%s", Diff("k.wf", []byte(want), got))
	}
}

// TestExprGrid: the continuation lines of a multi-line expression are
// indented on the grid by bracket depth, whatever the source's spaces.
func TestExprGrid(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"a &&\n        b", "a &&\n      b"},
		{"f(\n 1,\n   2,\n)", "f(\n      1,\n      2,\n    )"},
		{"[1,\n  f(2,\n 3),\n]", "[1,\n      f(2,\n        3),\n    ]"},
		{"x\n   ? y\n : z", "x\n      ? y\n      : z"},
		{"'''a\n  b''' +\n c", "'''a\n  b''' +\n      c"},
		{"a /* x\n   y */ +\n b", "a /* x\n   y */ +\n      b"},
		{"a +  \n\n b", "a +\n\n      b"},
	} {
		if got := layoutExpr(c.in, 4, 10, 0, false); got != c.want {
			t.Errorf("layoutExpr(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

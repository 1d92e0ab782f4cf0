package runtime

import (
	"context"
	"testing"

	"github.com/wfc-lang/wfc/ir"
)

// Expressions whose cost cel-go bounds statically run without a deadline
// (eval's timer and contexts); any that may walk a value of unknown size
// (a comprehension, a string built or matched) keeps the deadline.
func TestCheapExpressions(t *testing.T) {
	w := build(t, wfSpec{nodes: []*nodeSpec{task("a", "cel")}})
	p, err := newPlan(w, func(string) string { return "q" }, "q")
	if err != nil {
		t.Fatal(err)
	}
	for src, want := range map[string]bool{
		"a.output.v * 2":                     true,
		"size(a.output)":                     true,
		"input.n":                            true,
		"has(a.output) ? a.output : null":    true,
		"[a.output.v, 1, 2]":                 true,
		"a.output.v in [1, 2, 3]":            true,
		"a.output.l[0]":                      true,
		`"x" + a.output.s`:                   false,
		"a.output.items.map(x, x * 2)":       false,
		"a.output.items.exists(x, x > 1)":    false,
		`a.output.s.replace("a", "b")`:       false,
		`a.output.s.matches("x+")`:           false,
		"string(a.output.v)":                 false,
		"[1, 2, 3].all(x, x > 0)":            true, // its size is known
		"a.output.l.filter(x, x > 0).size()": false,
	} {
		if _, err := p.cel.program(src); err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if got := p.cel.isCheap(src); got != want {
			t.Errorf("%s: cheap %v, want %v", src, got, want)
		}
	}
}

// BenchmarkEvalCheap: a cheap expression with and without the deadline.
func BenchmarkEvalCheap(b *testing.B) {
	w := build(b, wfSpec{nodes: []*nodeSpec{task("a", "cel")}})
	p, err := newPlan(w, func(string) string { return "q" }, "q")
	if err != nil {
		b.Fatal(err)
	}
	e := &ir.Expr{CEL: "a.output.v * 2"}
	act := vars{"a": map[string]any{"output": map[string]any{"v": int64(21)}}}
	for _, deadline := range []bool{false, true} {
		name := "cheap"
		if deadline {
			name = "deadline"
		}
		b.Run(name, func(b *testing.B) {
			x, err := p.cel.compile(e.CEL)
			if err != nil {
				b.Fatal(err)
			}
			x.cheap = !deadline
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.eval(context.Background(), e, "x", act); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

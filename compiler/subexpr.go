package compiler

import (
	"strings"

	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/lang/source"
)

// subexprs lists every sub-expression of a checked expression with its
// whole extent and its type, for hover. cel-go locates an expression at one
// token only (a select at its dot, a call at its "(" or operator, a macro
// at its "("), so the extent is rebuilt: a select spans its operand and
// field name, a call its function name or receiver through its ")", an
// operator its operands, a macro its receiver or name through its ")".
// The variable a macro declares (`e` in `xs.exists(e, …)`) is listed too,
// with the element type. Nodes the macros generate (no text of their own)
// are left out.
func (s *state) subexprs(a *celast.AST, m *offsetMap) []SubExpr {
	info := a.SourceInfo()
	text := m.text
	// byte offsets in text of cel-go's code point offsets
	at := func(cp int32) int { return m.off(cp) - m.base }
	type span struct{ start, end int }
	spans := map[int64]span{}
	var out []SubExpr
	var walk func(e celast.Expr) (span, bool)
	emit := func(sp span, t *types.Type) {
		if sp.end > sp.start {
			out = append(out, SubExpr{Range: source.Range{Start: m.base + sp.start, End: m.base + sp.end}, Type: s.hoverType(t)})
		}
	}
	walk = func(e celast.Expr) (span, bool) {
		if sp, ok := spans[e.ID()]; ok {
			return sp, true
		}
		r, ok := info.GetOffsetRange(e.ID())
		if !ok {
			return span{}, false
		}
		own := span{at(r.Start), at(r.Stop)}
		sp, real := own, own.end > own.start
		// A node the macros generate has no text; its children may
		// (the user's predicate). A macro itself is located at its "(".
		// (math.greatest(…) becomes a call of math.@max located so.)
		generated := !real && e.Kind() != celast.ComprehensionKind &&
			(e.Kind() != celast.SelectKind || !e.AsSelect().IsTestOnly()) &&
			(e.Kind() != celast.CallKind || !strings.Contains(e.AsCall().FunctionName(), ".@"))
		union := func(x span) {
			if !real {
				sp, real = x, true
				return
			}
			sp.start, sp.end = min(sp.start, x.start), max(sp.end, x.end)
		}
		opener := own.start < len(text) && strings.IndexByte("([{", text[own.start]) >= 0
		switch e.Kind() {
		case celast.IdentKind:
			if strings.HasPrefix(e.AsIdent(), "@") {
				real = false // a macro's accumulator
			}
		case celast.SelectKind:
			sel := e.AsSelect()
			op, opOK := walk(sel.Operand())
			if sel.IsTestOnly() && opener { // has(x.f)
				sp = span{identBefore(text, own.start), closeAfter(text, own.start)}
				real = true
				break
			}
			f := fieldEnd(text, own.end, sel.FieldName())
			if opOK && f > 0 {
				sp, real = span{op.start, f}, true
			}
		case celast.CallKind:
			call := e.AsCall()
			var argsSpan span
			argsOK := false
			for _, x := range call.Args() {
				if xs, ok := walk(x); ok {
					if !argsOK {
						argsSpan, argsOK = xs, true
					} else {
						argsSpan = span{min(argsSpan.start, xs.start), max(argsSpan.end, xs.end)}
					}
				}
			}
			var target span
			targetOK := false
			if call.IsMemberFunction() {
				target, targetOK = walk(call.Target())
			}
			switch {
			case opener && text[own.start] == '(':
				start := identBefore(text, own.start)
				if targetOK {
					start = target.start
				}
				sp, real = span{start, closeAfter(text, own.start)}, true
			case opener && text[own.start] == '[': // x[i]
				union(span{own.start, closeAfter(text, own.start)})
				if argsOK {
					union(argsSpan)
				}
			default: // an operator
				if argsOK {
					union(argsSpan)
				}
			}
		case celast.ListKind:
			for _, x := range e.AsList().Elements() {
				walk(x)
			}
			if opener {
				sp, real = span{own.start, closeAfter(text, own.start)}, true
			}
		case celast.MapKind:
			for _, x := range e.AsMap().Entries() {
				en := x.AsMapEntry()
				walk(en.Key())
				walk(en.Value())
			}
			if opener {
				sp, real = span{own.start, closeAfter(text, own.start)}, true
			}
		case celast.StructKind:
			for _, x := range e.AsStruct().Fields() {
				walk(x.AsStructField().Value())
			}
		case celast.ComprehensionKind:
			c := e.AsComprehension()
			rng, rngOK := walk(c.IterRange())
			for _, x := range []celast.Expr{c.AccuInit(), c.LoopCondition(), c.LoopStep(), c.Result()} {
				walk(x)
			}
			if !opener || text[own.start] != '(' {
				real = false
				break
			}
			start := identBefore(text, own.start)
			if rngOK && memberOf(text, rng.end, own.start) {
				start = rng.start // xs.exists(…)
			}
			sp, real = span{start, closeAfter(text, own.start)}, true
			// The variable, first in the parentheses.
			if v := c.IterVar(); v != "" {
				k := own.start + 1
				for k < len(text) && isSpace(text[k]) {
					k++
				}
				if strings.HasPrefix(text[k:], v) && (k+len(v) == len(text) || !isIdentByte(text[k+len(v)])) {
					if rt := a.GetType(c.IterRange().ID()); rt != nil {
						switch rt.Kind() {
						case types.ListKind:
							emit(span{k, k + len(v)}, rt.Parameters()[0])
						case types.MapKind:
							emit(span{k, k + len(v)}, rt.Parameters()[0])
						}
					}
				}
			}
		}
		if !real || generated {
			return span{}, false
		}
		spans[e.ID()] = sp
		if t := a.GetType(e.ID()); t != nil {
			emit(sp, t)
		}
		return sp, true
	}
	walk(a.Expr())
	return out
}

// hoverType names a type for hover: an object with its fields, a node as
// "node x".
func (s *state) hoverType(t *types.Type) string {
	if t == nil {
		return typeName(t)
	}
	switch t.Kind() {
	case types.StructKind:
		if !strings.HasPrefix(t.TypeName(), "wf.node.") {
			if it := s.prov.irType(t); it.Kind == ir.KindObject {
				return it.String()
			}
		}
	case types.ListKind:
		return "list<" + s.hoverType(t.Parameters()[0]) + ">"
	case types.MapKind:
		return "map<" + s.hoverType(t.Parameters()[1]) + ">"
	}
	return typeName(t)
}

// memberOf reports whether text[end:at] is `.name`: a macro at at has the
// receiver that ends at end.
func memberOf(text string, end, at int) bool {
	if end > at || at > len(text) {
		return false
	}
	k := end
	for k < at && isSpace(text[k]) {
		k++
	}
	if k == at || text[k] != '.' {
		return false
	}
	k++
	for k < at && isSpace(text[k]) {
		k++
	}
	n := k
	for k < at && isIdentByte(text[k]) {
		k++
	}
	for k < at && isSpace(text[k]) {
		k++
	}
	return k > n && k == at
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func isIdentByte(c byte) bool {
	return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// identBefore returns the start of the name (dotted: math.greatest) that
// ends before the "(" at i, or i.
func identBefore(text string, i int) int {
	k := i
	for k > 0 && isSpace(text[k-1]) {
		k--
	}
	start := i
	for k > 0 && (isIdentByte(text[k-1]) || text[k-1] == '.') {
		k--
		if text[k] != '.' {
			start = k
		}
	}
	return start
}

// fieldEnd returns the end of the field name after the dot at i, or -1.
func fieldEnd(text string, i int, name string) int {
	k := i
	for k < len(text) && isSpace(text[k]) {
		k++
	}
	if strings.HasPrefix(text[k:], name) {
		return k + len(name)
	}
	// A quoted field (`x.`f-g``) or a surprise: just past the dot.
	return -1
}

// closeAfter returns the offset just past the bracket that closes the one
// at i, skipping string literals; the end of text when it is not closed.
func closeAfter(text string, i int) int {
	depth := 0
	for k := i; k < len(text); k++ {
		switch c := text[k]; c {
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			depth--
			if depth == 0 {
				return k + 1
			}
		case '"', '\'':
			raw := k > 0 && (text[k-1] == 'r' || text[k-1] == 'R')
			q := string(c)
			if strings.HasPrefix(text[k:], q+q+q) {
				q = q + q + q
			}
			k += len(q)
			for k < len(text) && !strings.HasPrefix(text[k:], q) {
				if text[k] == '\\' && !raw {
					k++
				}
				k++
			}
			k += len(q) - 1
		}
	}
	return len(text)
}

package compiler

import (
	"regexp"
	"strings"

	"github.com/google/cel-go/common/types"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/lang/ast"
	"github.com/wfc-lang/wfc/lang/source"
)

// The fast paths below type-check the commonest expression shapes without
// cel-go, whose parser and checker cost tens of microseconds per
// expression: most of a large workflow's compile time. Each takes only
// expressions it fully understands and that cel-go would accept, and
// records exactly what check records for them after cel-go (type, hover
// sub-expressions, references, output reads); anything else — an unknown
// name or field, a type an operator does not take — falls through to
// cel-go, which reports the error as usual. TestFastExprsAgree compiles
// with and without them and compares everything.

// fastExprs switches the fast paths; tests turn it off to compare.
var fastExprs = true

// chainRE matches a plain selector chain: `input.id`, `fetch.output.items`.
var chainRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$`)

// celReserved are CEL's reserved words; a chain using one goes to cel-go,
// which reports it.
var celReserved = map[string]bool{
	"as": true, "break": true, "const": true, "continue": true, "else": true,
	"false": true, "for": true, "function": true, "if": true, "import": true,
	"in": true, "let": true, "loop": true, "package": true, "namespace": true,
	"null": true, "return": true, "true": true, "var": true, "void": true, "while": true,
}

// chainTypes splits a selector chain and returns the type after each of
// its parts, or ok=false if cel-go is needed: a reserved word, an unknown
// name or field, a selection on something other than an object or map.
func (s *state) chainTypes(sc *scope, text string) (parts []string, ts []*types.Type, ok bool) {
	if len(text) > 256 || !chainRE.MatchString(text) {
		return nil, nil, false
	}
	parts = strings.Split(text, ".")
	for _, p := range parts {
		if celReserved[p] {
			return nil, nil, false
		}
	}
	root := parts[0]
	var t *types.Type
	switch {
	case sc.vars[root] != nil:
		t = sc.vars[root]
	case root == "input":
		t = types.NewObjectType("wf.input")
	case root == "output":
		if sc.self == nil || sc.self.outType == nil || sc.self.outType.Kind != ir.KindObject {
			return nil, nil, false
		}
		t = types.NewObjectType(sc.selfType)
	case s.byID[root] != nil:
		t = types.NewObjectType("wf.node." + root)
	default:
		return nil, nil, false
	}
	ts = make([]*types.Type, len(parts))
	ts[0] = t
	for i, f := range parts[1:] {
		switch t.Kind() {
		case types.StructKind:
			ft, ok := s.prov.FindStructFieldType(t.TypeName(), f)
			if !ok {
				return nil, nil, false
			}
			t = ft.Type
		case types.MapKind:
			t = t.Parameters()[1]
		case types.DynKind, types.AnyKind:
			t = types.DynType
		default:
			return nil, nil, false
		}
		ts[i+1] = t
	}
	return parts, ts, true
}

// checkChain type-checks a plain selector chain without cel-go. Such
// chains are most of a workflow's expressions (`with { id = input.id }`,
// `{{ fetch.output.name }}`); the provider answers the checker's questions
// directly.
func (s *state) checkChain(sc *scope, e *ast.Expr, owner *node) (*types.Type, bool) {
	if !fastExprs {
		return nil, false
	}
	parts, ts, ok := s.chainTypes(sc, e.Text)
	if !ok {
		return nil, false
	}
	subs := make([]SubExpr, len(parts))
	starts := make([]int, len(parts)) // offset of each part
	end := e.Start - 1
	for i, p := range parts {
		starts[i] = end + 1
		end += 1 + len(p)
		subs[i] = SubExpr{Range: source.Range{Start: e.Start, End: end}, Type: typeName(ts[i])}
	}
	// References and output reads, as collect records them from a CEL tree.
	root := parts[0]
	rng := func(i int) source.Range { return source.Range{Start: starts[i], End: starts[i] + len(parts[i])} }
	switch {
	case sc.vars[root] != nil:
	case root == "input":
		if _, ok := s.info.Inputs[parts[1]]; ok {
			s.info.Refs = append(s.info.Refs, Ref{Range: rng(1), Kind: RefInput, Name: parts[1]})
			s.useInput(owner, parts[1])
		}
	case s.byID[root] != nil && parts[1] == "output":
		s.info.Refs = append(s.info.Refs, Ref{Range: rng(0), Kind: RefNode, Name: root})
		if len(parts) > 2 {
			s.info.Refs = append(s.info.Refs, Ref{Range: rng(2), Kind: RefField, Name: root + "." + parts[2]})
		}
		s.reads = append(s.reads, exprReads{owner: owner, expr: e, reads: []read{{
			node: s.byID[root].idx, rng: source.Range{Start: starts[0], End: starts[1] + len("output")}}}})
	}
	t := ts[len(ts)-1]
	s.info.Exprs[e] = &ExprInfo{Type: s.prov.irType(t), Subexprs: subs}
	return t, true
}

// binaryRE matches `chain OP int`: `fetch.output.v + 1`,
// `output.status != 200`. Spaces only: a line break or comment would need
// cel-go's position mapping.
var binaryRE = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+)( *)(==|!=|<=|>=|<|>|\+|-|\*)( *)(0|[1-9][0-9]{0,17})$`)

// checkBinary type-checks `chain OP int` without cel-go when the chain is
// an int: CEL's int overloads of + - * give an int, the comparisons a
// bool, and nothing can fail (the literal has at most 18 digits, so it
// fits; no folding applies, as the chain is a variable). Hover ranges are
// cel-go's: a select is located at its dot, a call at its operator.
func (s *state) checkBinary(sc *scope, e *ast.Expr, owner *node) (*types.Type, bool) {
	if !fastExprs || len(e.Text) > 256 {
		return nil, false
	}
	m := binaryRE.FindStringSubmatchIndex(e.Text)
	if m == nil {
		return nil, false
	}
	parts, ts, ok := s.chainTypes(sc, e.Text[m[2]:m[3]])
	if !ok || ts[len(ts)-1].Kind() != types.IntKind {
		return nil, false
	}
	op := e.Text[m[6]:m[7]]
	out := types.BoolType
	switch op {
	case "+", "-", "*":
		out = types.IntType
	}
	at := func(start, end int) source.Range { return source.Range{Start: e.Start + start, End: e.Start + end} }
	subs := make([]SubExpr, 0, len(parts)+2)
	subs = append(subs, SubExpr{Range: at(0, len(parts[0])), Type: typeName(ts[0])})
	dot := len(parts[0]) // offset of the dot before part i
	for i := 1; i < len(parts); i++ {
		subs = append(subs, SubExpr{Range: at(dot, dot+1), Type: typeName(ts[i])})
		dot += 1 + len(parts[i])
	}
	subs = append(subs,
		SubExpr{Range: at(m[6], m[7]), Type: typeName(out)},
		SubExpr{Range: at(m[10], m[11]), Type: typeName(types.IntType)})
	// References and reads in the order collect visits the CEL tree:
	// outermost select first.
	root := parts[0]
	part := func(i int) source.Range {
		off := len(parts[0])
		for k := 1; k <= i; k++ {
			off += 1 + len(parts[k])
		}
		return at(off-len(parts[i]), off)
	}
	switch {
	case sc.vars[root] != nil:
	case root == "input":
		if _, ok := s.info.Inputs[parts[1]]; ok {
			s.info.Refs = append(s.info.Refs, Ref{Range: part(1), Kind: RefInput, Name: parts[1]})
			s.useInput(owner, parts[1])
		}
	case s.byID[root] != nil && parts[1] == "output":
		if len(parts) > 2 {
			s.info.Refs = append(s.info.Refs, Ref{Range: part(2), Kind: RefField, Name: root + "." + parts[2]})
		}
		s.info.Refs = append(s.info.Refs, Ref{Range: part(0), Kind: RefNode, Name: root})
		s.reads = append(s.reads, exprReads{owner: owner, expr: e, reads: []read{{
			node: s.byID[root].idx, rng: source.Range{Start: e.Start, End: part(1).End}}}})
	}
	s.info.Exprs[e] = &ExprInfo{Type: s.prov.irType(out), Subexprs: subs}
	return out, true
}

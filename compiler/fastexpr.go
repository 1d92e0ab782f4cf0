package compiler

import (
	"strconv"
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
// with and without them (Config.celOnly) and compares everything.

// chainEnd returns the end of the selector chain that text starts with
// (ident, then one or more .ident; an ident is [A-Za-z_][A-Za-z0-9_]*), or
// 0 if it does not start with one. (A regexp cost more than the check.)
func chainEnd(text string) int {
	i, dots := 0, 0
	for {
		if i >= len(text) || !(text[i] == '_' || 'a' <= text[i]|0x20 && text[i]|0x20 <= 'z') {
			return 0 // an ident must start here
		}
		for i < len(text) && (text[i] == '_' || 'a' <= text[i]|0x20 && text[i]|0x20 <= 'z' || '0' <= text[i] && text[i] <= '9') {
			i++
		}
		if i < len(text) && text[i] == '.' {
			i, dots = i+1, dots+1
			continue
		}
		if dots == 0 {
			return 0
		}
		return i
	}
}

// isChain reports whether text is a plain selector chain: `input.id`,
// `fetch.output.items`.
func isChain(text string) bool { return chainEnd(text) == len(text) && len(text) > 0 }

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
	if len(text) > 256 || !isChain(text) {
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
			ft, ok := s.prov.fieldType(t.TypeName(), f)
			if !ok {
				return nil, nil, false
			}
			t = ft
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
	if s.cfg.celOnly {
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
		subs[i] = SubExpr{Range: source.Range{Start: e.Start, End: end}, Type: s.hoverType(ts[i])}
	}
	rng := func(i int) source.Range { return source.Range{Start: starts[i], End: starts[i] + len(parts[i])} }
	s.chainRefs(sc, e, owner, parts, ts, rng, true)
	t := ts[len(ts)-1]
	s.info.Exprs[e] = &ExprInfo{Type: s.prov.irType(t), Subexprs: subs}
	return t, true
}

// chainRefs records what collect records from the CEL tree of the member
// chain parts (part i spans rng(i)) in expression e: a reference to the
// input or to the node and its output field, and the read of the node's
// output. Collect visits the outermost select first, so for a chain inside
// a binary expression the field comes before the node (nodeFirst false);
// for a chain on its own the node comes first.
func (s *state) chainRefs(sc *scope, e *ast.Expr, owner *node, parts []string, ts []*types.Type, rng func(int) source.Range, nodeFirst bool) {
	root := parts[0]
	// Fields below the first of an output, and those of the node's own
	// output, where the type they are selected from is an object (as
	// collect records them). Parts from..i name the path.
	fields := func(owner string, from, first int) {
		for i := first; i < len(parts); i++ {
			if ts[i-1] == nil || ts[i-1].Kind() != types.StructKind {
				return
			}
			s.info.Refs = append(s.info.Refs, Ref{Range: rng(i), Kind: RefField, Name: owner + "." + strings.Join(parts[from:i+1], ".")})
		}
	}
	switch {
	case sc.vars[root] != nil:
	case root == "output" && sc.self != nil:
		fields(sc.self.id, 1, 1)
	case root == "input":
		if _, ok := s.info.Inputs[parts[1]]; ok {
			s.info.Refs = append(s.info.Refs, Ref{Range: rng(1), Kind: RefInput, Name: parts[1]})
			s.useInput(owner, parts[1])
		}
	case s.byID[root] != nil && parts[1] == "output":
		nodeRef := Ref{Range: rng(0), Kind: RefNode, Name: root}
		if nodeFirst {
			s.info.Refs = append(s.info.Refs, nodeRef)
		}
		if len(parts) > 2 {
			s.info.Refs = append(s.info.Refs, Ref{Range: rng(2), Kind: RefField, Name: root + "." + parts[2]})
		}
		if !nodeFirst {
			s.info.Refs = append(s.info.Refs, nodeRef)
		}
		fields(root, 2, 3)
		s.reads = append(s.reads, exprReads{owner: owner, expr: e, final: s.inFinally, reads: []read{{
			node: s.byID[root].idx, rng: source.Range{Start: rng(0).Start, End: rng(1).End}}}})
	case s.byID[root] != nil && parts[1] == "error" && len(s.byID[root].onError) > 0:
		s.info.Refs = append(s.info.Refs, Ref{Range: rng(0), Kind: RefNode, Name: root})
		s.reads = append(s.reads, exprReads{owner: owner, expr: e, final: s.inFinally, reads: []read{{
			node: s.byID[root].idx, rng: source.Range{Start: rng(0).Start, End: rng(1).End}, err: true}}})
	case s.byID[root] != nil && parts[1] == "iteration" && s.byID[root].loop != nil:
		s.info.Refs = append(s.info.Refs, Ref{Range: rng(0), Kind: RefNode, Name: root})
		s.reads = append(s.reads, exprReads{owner: owner, expr: e, final: s.inFinally, reads: []read{{
			node: s.byID[root].idx, rng: source.Range{Start: rng(0).Start, End: rng(1).End}, iter: true}}})
	}
}

// splitBinary splits `chain OP int` (`fetch.output.v + 1`,
// `output.status != 200`) into the offsets of its chain's end, its
// operator and its literal; ok=false for anything else. Spaces only around
// the operator: a line break or comment would need cel-go's position
// mapping. The literal is decimal, at most 18 digits (so it fits an int)
// and without a leading zero.
func splitBinary(text string) (chain, opStart, opEnd, lit int, ok bool) {
	chain = chainEnd(text)
	if chain == 0 {
		return 0, 0, 0, 0, false
	}
	i := chain
	for i < len(text) && text[i] == ' ' {
		i++
	}
	opStart = i
	switch {
	case i+1 < len(text) && text[i+1] == '=' && (text[i] == '=' || text[i] == '!' || text[i] == '<' || text[i] == '>'):
		i += 2
	case i < len(text) && (text[i] == '<' || text[i] == '>' || text[i] == '+' || text[i] == '-' || text[i] == '*'):
		i++
	default:
		return 0, 0, 0, 0, false
	}
	opEnd = i
	for i < len(text) && text[i] == ' ' {
		i++
	}
	lit = i
	if !isIntLit(text[lit:]) {
		return 0, 0, 0, 0, false
	}
	return chain, opStart, opEnd, lit, true
}

// isIntLit reports whether s is a decimal int literal of at most 18 digits
// without a leading zero: it fits an int64, and it is spelt the way cel-go
// prints the constant back.
func isIntLit(s string) bool {
	if len(s) == 0 || len(s) > 18 || len(s) > 1 && s[0] == '0' {
		return false
	}
	for k := 0; k < len(s); k++ {
		if s[k] < '0' || s[k] > '9' {
			return false
		}
	}
	return true
}

// checkIntLit types an int literal (`n = 0`) without cel-go. The fold pass
// turns it into the same constant cel-go's constant folding gives (an
// int64); the folded text would be the literal itself.
func (s *state) checkIntLit(e *ast.Expr) (*types.Type, bool) {
	if s.cfg.celOnly || !isIntLit(e.Text) {
		return nil, false
	}
	v, err := strconv.ParseInt(e.Text, 10, 64)
	if err != nil {
		return nil, false
	}
	s.intLits[e] = v
	s.info.Exprs[e] = &ExprInfo{Type: &ir.Type{Kind: ir.KindInt}, Subexprs: []SubExpr{{Range: e.Range, Type: typeName(types.IntType)}}}
	return types.IntType, true
}

// checkBinary type-checks `chain OP int` without cel-go when the chain is
// an int: CEL's int overloads of + - * give an int, the comparisons a
// bool, and nothing can fail (the literal has at most 18 digits, so it
// fits; no folding applies, as the chain is a variable). Hover ranges are
// those subexprs gives: a select spans its prefix of the chain, the
// operator the whole expression.
func (s *state) checkBinary(sc *scope, e *ast.Expr, owner *node) (*types.Type, bool) {
	if s.cfg.celOnly || len(e.Text) > 256 {
		return nil, false
	}
	chain, opStart, opEnd, lit, ok := splitBinary(e.Text)
	if !ok {
		return nil, false
	}
	parts, ts, ok := s.chainTypes(sc, e.Text[:chain])
	if !ok || ts[len(ts)-1].Kind() != types.IntKind {
		return nil, false
	}
	op := e.Text[opStart:opEnd]
	out := types.BoolType
	switch op {
	case "+", "-", "*":
		out = types.IntType
	}
	at := func(start, end int) source.Range { return source.Range{Start: e.Start + start, End: e.Start + end} }
	subs := make([]SubExpr, 0, len(parts)+2)
	subs = append(subs, SubExpr{Range: at(0, len(parts[0])), Type: s.hoverType(ts[0])})
	end := len(parts[0]) // the end of the chain's prefix through part i
	for i := 1; i < len(parts); i++ {
		end += 1 + len(parts[i])
		subs = append(subs, SubExpr{Range: at(0, end), Type: s.hoverType(ts[i])})
	}
	subs = append(subs,
		SubExpr{Range: at(0, len(e.Text)), Type: typeName(out)},
		SubExpr{Range: at(lit, len(e.Text)), Type: typeName(types.IntType)})
	part := func(i int) source.Range {
		off := len(parts[0])
		for k := 1; k <= i; k++ {
			off += 1 + len(parts[k])
		}
		return at(off-len(parts[i]), off)
	}
	s.chainRefs(sc, e, owner, parts, ts, part, false)
	s.info.Exprs[e] = &ExprInfo{Type: s.prov.irType(out), Subexprs: subs}
	return out, true
}

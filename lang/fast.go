package lang

import (
	"github.com/alecthomas/participle/v2/lexer"
)

// The fast path. Participle's reflective parser is the grammar's definition
// and does all error handling and recovery, but it allocates a branch and a
// deferred field assignment for every alternative it tries, which made the
// parser too slow for large workflows (see docs/performance.md). fastParser
// is a hand-written recursive-descent parser for the same grammar that
// builds the same grammar values (gFile and below, with the same Pos and
// EndPos) and gives up — returning false — as soon as anything is not
// exactly as expected. ParseFile then falls back to participle, so errors,
// their messages and recovery are participle's alone.
//
// Invariant, checked by TestFastPathAgrees and FuzzParse: the fast parser
// succeeds exactly when participle does, with the same tree. Each
// production follows the order of participle's alternatives. Participle
// (with one token of lookahead) moves on to the next alternative when one
// fails within its first token, and reports an error when one fails later;
// the fast parser picks the alternative by looking at the first two or
// three tokens, so that the one it picks is the one participle would keep,
// and fails exactly where participle would report an error.
type fastParser struct {
	toks []lexer.Token // ends with EOF
	i    int
}

// Peek and Next make the fast parser a tokenStream for the expression
// skimmer; they behave like participle's PeekingLexer (Next stays at EOF).
func (f *fastParser) Peek() *lexer.Token { return &f.toks[f.i] }

func (f *fastParser) Next() *lexer.Token {
	t := &f.toks[f.i]
	if t.Type != tEOF {
		f.i++
	}
	return t
}

// at returns the token k places ahead (EOF past the end).
func (f *fastParser) at(k int) *lexer.Token {
	if f.i+k < len(f.toks) {
		return &f.toks[f.i+k]
	}
	return &f.toks[len(f.toks)-1]
}

// is reports whether the token k places ahead is the literal v. Participle
// matches an untyped literal by value alone; no EOF has a non-empty value
// here (chunk EOFs never reach the fast path).
func (f *fastParser) is(k int, v string) bool { return f.at(k).Value == v && f.at(k).Type != tEOF }

// lit consumes the literal v if it is next.
func (f *fastParser) lit(v string) bool {
	if f.is(0, v) {
		f.i++
		return true
	}
	return false
}

func (f *fastParser) ident() (*gIdent, bool) {
	t := f.Peek()
	if t.Type != tIdent {
		return nil, false
	}
	f.i++
	return &gIdent{Pos: t.Pos, Name: t.Value}, true
}

func (f *fastParser) str() (*gString, bool) {
	t := f.Peek()
	if t.Type != tString {
		return nil, false
	}
	f.i++
	return &gString{Pos: t.Pos, Raw: t.Value}, true
}

// end is the EndPos participle gives a struct: the position of the next token.
func (f *fastParser) end() lexer.Position { return f.toks[f.i].Pos }

// idents parses `ident ("," ident)*`; a "," not followed by a name is left
// for the caller (participle's repetition rewinds it).
func (f *fastParser) idents() ([]*gIdent, bool) {
	first, ok := f.ident()
	if !ok {
		return nil, false
	}
	out := []*gIdent{first}
	for f.is(0, ",") && f.at(1).Type == tIdent {
		f.i++
		id, _ := f.ident()
		out = append(out, id)
	}
	return out, true
}

func (f *fastParser) file() (*gFile, bool) {
	g := &gFile{}
	for f.Peek().Type != tEOF {
		t, ok := f.top()
		if !ok {
			return nil, false
		}
		g.Items = append(g.Items, t)
		f.lit(";")
	}
	return g, true
}

func (f *fastParser) top() (*gTop, bool) {
	g := &gTop{Pos: f.Peek().Pos}
	ok := false
	switch {
	case f.is(0, "import"):
		f.i++
		g.Import, ok = f.str()
	case f.is(0, "handler"):
		g.Handler, ok = f.handler()
	case f.is(0, "workflow"):
		g.Workflow, ok = f.workflow()
	}
	g.EndPos = f.end()
	return g, ok
}

func (f *fastParser) handler() (*gHandler, bool) {
	g := &gHandler{Pos: f.Peek().Pos}
	f.i++ // "handler"
	var ok bool
	if g.Name, ok = f.str(); !ok || !f.lit("{") {
		return nil, false
	}
	for !f.is(0, "}") {
		it := &gHandItem{Pos: f.Peek().Pos}
		switch {
		case f.Peek().Type == tIdent && f.is(1, "{"):
			it.Types, ok = f.typeBlock()
		case f.Peek().Type == tIdent && startsValue(f.at(1)):
			it.Setting, ok = f.setting()
		default:
			return nil, false
		}
		if !ok {
			return nil, false
		}
		it.EndPos = f.end()
		g.Items = append(g.Items, it)
		f.lit(";")
	}
	f.i++ // "}"
	g.EndPos = f.end()
	return g, true
}

func (f *fastParser) workflow() (*gWorkflow, bool) {
	g := &gWorkflow{Pos: f.Peek().Pos}
	f.i++ // "workflow"
	var ok bool
	if g.Name, ok = f.ident(); !ok || !f.lit("{") {
		return nil, false
	}
	for !f.is(0, "}") {
		it, ok := f.wItem()
		if !ok {
			return nil, false
		}
		g.Items = append(g.Items, it)
		f.lit(";")
	}
	f.i++ // "}"
	g.EndPos = f.end()
	return g, true
}

// wItem parses one workflow item.
func (f *fastParser) wItem() (*gWItem, bool) {
	it := &gWItem{Pos: f.Peek().Pos}
	t0, t1, t2 := f.Peek(), f.at(1), f.at(2)
	ok := false
	switch {
	case t0.Type == tIdent && t1.Type == tIdent && (f.is(2, "{") || f.is(2, "after") || f.is(2, "join")) && t2.Type != tEOF:
		it.Node, ok = f.node()
	case f.is(0, "handler") && t1.Type == tString:
		it.Handler, ok = f.handler()
	case f.is(0, "input") && f.is(1, "{"):
		it.Input, ok = f.fieldBlock()
	case f.is(0, "output") && f.is(1, "{"):
		it.Params, ok = f.paramBlock()
	case f.is(0, "finally") && f.is(1, "{"):
		it.Block, ok = f.block()
	case t0.Type == tIdent && startsValue(t1):
		it.Setting, ok = f.setting()
	}
	if !ok {
		return nil, false
	}
	it.EndPos = f.end()
	return it, true
}

func (f *fastParser) node() (*gNode, bool) {
	g := &gNode{Pos: f.Peek().Pos}
	g.Kind, _ = f.ident()
	g.Name, _ = f.ident()
	var ok bool
	if f.lit("after") {
		if g.After, ok = f.idents(); !ok {
			return nil, false
		}
	}
	if f.is(0, "join") && f.at(1).Type == tIdent {
		f.i++
		g.Join, _ = f.ident()
	}
	if !f.lit("{") {
		return nil, false
	}
	if g.Items, ok = f.items(); !ok {
		return nil, false
	}
	g.EndPos = f.end()
	return g, true
}

// items parses `(item ";"?)* "}"`.
func (f *fastParser) items() ([]*gItem, bool) {
	var out []*gItem
	for !f.is(0, "}") {
		it, ok := f.item()
		if !ok {
			return nil, false
		}
		out = append(out, it)
		f.lit(";")
	}
	f.i++ // "}"
	return out, true
}

func (f *fastParser) item() (*gItem, bool) {
	g := &gItem{Pos: f.Peek().Pos}
	t0, t1 := f.Peek(), f.at(1)
	if t0.Type != tIdent {
		return nil, false
	}
	ok := false
	switch {
	case t0.Value == "with" && f.is(1, "{"):
		g.Params, ok = f.paramBlock()
	case (t0.Value == "output" || t0.Value == "config") && f.is(1, "{"):
		g.Types, ok = f.typeBlock()
	case (t0.Value == "approvers" || t0.Value == "escalate_to") && f.stringList(1):
		g.Approvers, ok = f.setting()
	case t0.Value == "when" || t0.Value == "while" || t0.Value == "dispatch" || t0.Value == "approvers" || t0.Value == "escalate_to":
		g.Cond, ok = f.cond()
	case t0.Value == "for_each" && t1.Type == tIdent:
		g.ForEach, ok = f.forEach()
	case t0.Value == "branch" && f.is(1, "{"):
		g.Branch, ok = f.branch()
	case t0.Value == "routes" && t1.Type == tIdent:
		g.Routes, ok = f.routes()
	case f.is(1, "=>") || t1.Type == tString && f.codesThenArrow(1):
		g.Goto, ok = f.gotoItem()
	case startsValue(t1):
		g.Setting, ok = f.setting()
	case f.is(1, "{"):
		g.Block, ok = f.block()
	}
	if !ok {
		return nil, false
	}
	g.EndPos = f.end()
	return g, true
}

func (f *fastParser) paramBlock() (*gParamBlock, bool) {
	g := &gParamBlock{Pos: f.Peek().Pos}
	var ok bool
	if g.Key, ok = f.ident(); !ok || !f.lit("{") {
		return nil, false
	}
	for !f.is(0, "}") {
		pr := &gParam{Pos: f.Peek().Pos}
		if pr.Name, ok = f.ident(); !ok || !f.lit("=") {
			return nil, false
		}
		if pr.Value, ok = f.expr(); !ok {
			return nil, false
		}
		pr.EndPos = f.end()
		g.Params = append(g.Params, pr)
		if !f.lit(";") {
			f.lit(",")
		}
	}
	f.i++ // "}"
	g.EndPos = f.end()
	return g, true
}

// fieldList parses `(field (";" | ",")?)* "}"`.
func (f *fastParser) fieldList() ([]*gField, bool) {
	var out []*gField
	for !f.is(0, "}") {
		fl, ok := f.field()
		if !ok {
			return nil, false
		}
		out = append(out, fl)
		if !f.lit(";") {
			f.lit(",")
		}
	}
	f.i++ // "}"
	return out, true
}

func (f *fastParser) typeBlock() (*gTypeBlock, bool) {
	g := &gTypeBlock{Pos: f.Peek().Pos}
	var ok bool
	if g.Key, ok = f.ident(); !ok || !f.lit("{") {
		return nil, false
	}
	if g.Fields, ok = f.fieldList(); !ok {
		return nil, false
	}
	g.EndPos = f.end()
	return g, true
}

// fieldBlock parses an input block: a type block under the grammar's
// other name (the two differ only in participle's lookahead tags).
func (f *fastParser) fieldBlock() (*gFieldBlock, bool) {
	g, ok := f.typeBlock()
	return (*gFieldBlock)(g), ok
}

func (f *fastParser) field() (*gField, bool) {
	g := &gField{Pos: f.Peek().Pos}
	var ok bool
	if g.Name, ok = f.ident(); !ok {
		return nil, false
	}
	g.Optional = f.lit("?")
	if !f.lit(":") {
		return nil, false
	}
	if g.Type, ok = f.typ(); !ok {
		return nil, false
	}
	if f.lit("=") {
		if g.Default, ok = f.expr(); !ok {
			return nil, false
		}
	}
	g.EndPos = f.end()
	return g, true
}

func (f *fastParser) typ() (*gType, bool) {
	g := &gType{Pos: f.Peek().Pos}
	var ok bool
	if f.lit("{") {
		if g.Fields, ok = f.fieldList(); !ok {
			return nil, false
		}
		g.EndPos = f.end()
		return g, true
	}
	if g.Name, ok = f.ident(); !ok {
		return nil, false
	}
	if f.lit("<") {
		for {
			a, ok := f.typ()
			if !ok {
				return nil, false
			}
			g.Args = append(g.Args, a)
			if !f.lit(",") {
				break
			}
		}
		if !f.lit(">") {
			return nil, false
		}
	}
	g.EndPos = f.end()
	return g, true
}

func (f *fastParser) expr() (*gExpr, bool) {
	e := &gExpr{}
	if e.parse(f) != nil {
		return nil, false
	}
	return e, true
}

func (f *fastParser) cond() (*gCond, bool) {
	g := &gCond{Pos: f.Peek().Pos}
	g.Key, _ = f.ident()
	var ok bool
	if g.Expr, ok = f.expr(); !ok {
		return nil, false
	}
	g.EndPos = f.end()
	return g, true
}

func (f *fastParser) forEach() (*gForEach, bool) {
	g := &gForEach{Pos: f.Peek().Pos}
	g.Key, _ = f.ident()
	var ok bool
	if f.at(0).Type == tIdent && f.is(1, ",") {
		g.Index, _ = f.ident()
		f.i++ // ","
	}
	if g.Var, ok = f.ident(); !ok || !f.lit("in") {
		return nil, false
	}
	if g.Items, ok = f.expr(); !ok {
		return nil, false
	}
	// `parallel` not followed by a value is left for the next item, as
	// participle's optional group rewinds it.
	if f.is(0, "parallel") && startsValue(f.at(1)) {
		f.i++
		if g.Parallel, ok = f.value(); !ok {
			return nil, false
		}
	}
	if f.is(0, "tolerate") && startsValue(f.at(1)) {
		f.i++
		if g.Tolerate, ok = f.value(); !ok {
			return nil, false
		}
		g.Percent = f.lit("%")
	}
	g.EndPos = f.end()
	return g, true
}

func (f *fastParser) branch() (*gBranch, bool) {
	g := &gBranch{Pos: f.Peek().Pos}
	g.Key, _ = f.ident()
	if !f.lit("{") {
		return nil, false
	}
	for !f.is(0, "}") {
		r := &gRule{Pos: f.Peek().Pos}
		var ok bool
		switch {
		case f.lit("else"):
			r.Else = true
		case f.lit("when"):
			if r.Cond, ok = f.expr(); !ok {
				return nil, false
			}
		default:
			return nil, false
		}
		if !f.lit("=>") {
			return nil, false
		}
		if r.Targets, ok = f.idents(); !ok {
			return nil, false
		}
		r.EndPos = f.end()
		g.Rules = append(g.Rules, r)
		f.lit(";")
	}
	f.i++ // "}"
	g.EndPos = f.end()
	return g, true
}

func (f *fastParser) routes() (*gRoutes, bool) {
	g := &gRoutes{Pos: f.Peek().Pos}
	g.Key, _ = f.ident()
	var ok bool
	if g.Targets, ok = f.idents(); !ok {
		return nil, false
	}
	g.EndPos = f.end()
	return g, true
}

// stringList reports whether the tokens from offset k on are a list of
// string literals: `[ ("s" ("," "s")* ","?)? ]`.
func (f *fastParser) stringList(k int) bool {
	if !f.is(k, "[") {
		return false
	}
	k++
	for f.at(k).Type == tString {
		k++
		if !f.is(k, ",") {
			break
		}
		k++
	}
	return f.is(k, "]")
}

// codesThenArrow reports whether the tokens from offset k on are
// `"A" ("," "B")* =>` (a goto's error codes).
func (f *fastParser) codesThenArrow(k int) bool {
	for {
		if f.at(k).Type != tString {
			return false
		}
		if f.is(k+1, "=>") {
			return true
		}
		if !f.is(k+1, ",") {
			return false
		}
		k += 2
	}
}

func (f *fastParser) gotoItem() (*gGoto, bool) {
	g := &gGoto{Pos: f.Peek().Pos}
	g.Key, _ = f.ident()
	for !f.is(0, "=>") { // (codesThenArrow checked the shape)
		s, _ := f.str()
		g.Codes = append(g.Codes, s)
		f.lit(",")
	}
	f.i++ // "=>"
	var ok bool
	if g.Targets, ok = f.idents(); !ok {
		return nil, false
	}
	g.EndPos = f.end()
	return g, true
}

func (f *fastParser) setting() (*gSetting, bool) {
	g := &gSetting{Pos: f.Peek().Pos}
	g.Key, _ = f.ident()
	var ok bool
	if g.Value, ok = f.value(); !ok {
		return nil, false
	}
	g.EndPos = f.end()
	return g, true
}

func (f *fastParser) block() (*gBlock, bool) {
	g := &gBlock{Pos: f.Peek().Pos}
	g.Key, _ = f.ident()
	f.i++ // "{"
	var ok bool
	if g.Items, ok = f.items(); !ok {
		return nil, false
	}
	g.EndPos = f.end()
	return g, true
}

// startsValue reports whether t can start a gValue.
func startsValue(t *lexer.Token) bool {
	switch t.Type {
	case tDuration, tInt, tFloat, tString, tIdent:
		return true
	case tPunct:
		return t.Value == "-" || t.Value == "["
	}
	return false
}

func (f *fastParser) value() (*gValue, bool) {
	t := f.Peek()
	g := &gValue{Pos: t.Pos}
	switch t.Type {
	case tDuration:
		v := t.Value
		g.Duration = &v
		f.i++
	case tInt, tFloat:
		v := t.Value
		g.Number = &v
		f.i++
	case tString:
		g.Str, _ = f.str()
	case tIdent:
		g.Ident, _ = f.ident()
	case tPunct:
		switch t.Value {
		case "-":
			n := f.at(1)
			if n.Type != tInt && n.Type != tFloat {
				return nil, false
			}
			v := "-" + n.Value
			g.Number = &v
			f.i += 2
		case "[":
			l, ok := f.list()
			if !ok {
				return nil, false
			}
			g.List = l
		default:
			return nil, false
		}
	default:
		return nil, false
	}
	g.EndPos = f.end()
	return g, true
}

func (f *fastParser) list() (*gList, bool) {
	g := &gList{Pos: f.Peek().Pos}
	f.i++ // "["
	if startsValue(f.Peek()) {
		v, ok := f.value()
		if !ok {
			return nil, false
		}
		g.Items = append(g.Items, v)
		for f.is(0, ",") && startsValue(f.at(1)) {
			f.i++
			if v, ok = f.value(); !ok {
				return nil, false
			}
			g.Items = append(g.Items, v)
		}
		f.lit(",")
	}
	if !f.lit("]") {
		return nil, false
	}
	g.EndPos = f.end()
	return g, true
}

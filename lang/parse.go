package lang

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/alecthomas/participle/v2"
	"github.com/alecthomas/participle/v2/lexer"

	"github.com/wfc-lang/wfc/lang/ast"
	"github.com/wfc-lang/wfc/lang/diag"
	"github.com/wfc-lang/wfc/lang/source"
)

// ParseFile parses src. It always returns a tree (possibly with *ast.Bad
// items) and the diagnostics of the lexer and parser, sorted. A syntax error
// in one node or item does not hide the rest of the file: the parser
// re-parses the workflow item by item, and a broken node item by item.
// At most diag.MaxPerFile diagnostics are returned (see diag.Reporter.List).
func ParseFile(f *source.File) (*ast.File, diag.List) {
	return parseFile(f, true)
}

// Parse is ParseFile reporting into rp, a new Reporter for f: the compiler
// adds its own diagnostics to the same one before it takes rp.List.
func Parse(f *source.File, rp *diag.Reporter) *ast.File {
	return parseInto(f, rp, true)
}

// parseFile is ParseFile; with fast false it never takes the fast path (for
// the tests that compare the two).
func parseFile(f *source.File, fast bool) (*ast.File, diag.List) {
	rp := &diag.Reporter{File: f}
	file := parseInto(f, rp, fast)
	return file, rp.List()
}

func parseInto(f *source.File, rp *diag.Reporter, fast bool) *ast.File {
	file := &ast.File{Name: f.Name, Range: source.Range{Start: 0, End: len(f.Src)}}
	if len(f.Src) > MaxFileSize {
		// Point at the first byte past the limit.
		rp.Add(diag.FileTooLarge, source.Range{Start: MaxFileSize, End: MaxFileSize + 1},
			fmt.Sprintf("file is %d bytes; the limit is %d bytes (%d MiB)", len(f.Src), MaxFileSize, MaxFileSize>>20))
		return file
	}
	sc := scan(f, rp)
	file.Comments = sc.comments
	if sc.tooDeep {
		// A pathological file; parsing it recursively is what the limit prevents.
		return file
	}
	toks := sc.toks
	p := &parser{f: f, rp: rp, src: string(f.Src), comments: sc.comments, toks: toks, fast: fast, swallowed: -1}
	for _, d := range rp.Diags {
		if d.Code == diag.Unterminated && (p.swallowed < 0 || d.Span.Start.Offset < p.swallowed) {
			p.swallowed = d.Span.Start.Offset
		}
	}
	nLex := len(rp.Diags)
	var g *gFile
	var err error
	if fast {
		// The fast parser fails exactly where participle would (see
		// fast.go), so on failure go straight to recovery.
		var ok bool
		if g, ok = (&fastParser{toks: toks}).file(); !ok {
			err = errFastFailed
		}
	} else {
		g, err = fileParser.ParseFromLexer(peeking(toks))
	}
	if err == nil {
		for _, t := range g.Items {
			file.Items = append(file.Items, p.top(t))
		}
	} else {
		file.Items = p.recoverTop(toks)
	}
	if p.swallowed >= 0 {
		// The unterminated string or comment took the rest of its line or
		// of the file, closing brackets included: syntax errors from there
		// on follow from it (unclosed braces are not reported either).
		kept := rp.Diags[:nLex]
		for _, d := range rp.Diags[nLex:] {
			if d.Code != diag.SyntaxError || d.Span.Start.Offset < p.swallowed {
				kept = append(kept, d)
			}
		}
		rp.Diags = kept
	}
	return file
}

// ParseString is a convenience for tests and tools.
func ParseString(name, src string) (*ast.File, *source.File, diag.List) {
	f := source.NewFile(name, []byte(src))
	af, d := ParseFile(f)
	return af, f, d
}

type parser struct {
	f        *source.File
	rp       *diag.Reporter
	src      string
	comments []*ast.Comment
	toks     []lexer.Token // all tokens of the file, ending with EOF
	fast     bool          // use the fast parser where it applies
	// swallowed is the offset of the first string or block comment that
	// is not terminated, or -1: the lexer reported it (WF0003), and the
	// syntax errors it causes are not.
	swallowed int
}

var errFastFailed = errors.New("the fast parser failed")

func peeking(toks []lexer.Token) *lexer.PeekingLexer {
	pl, _ := lexer.Upgrade(&sliceLexer{toks: toks}) // a slice lexer never fails
	return pl
}

// withEOF returns toks[i:j] followed by an EOF token at the position of toks[j]
// (the token after the chunk), so errors at the end of a chunk point there.
func withEOF(toks []lexer.Token, i, j int) []lexer.Token {
	out := make([]lexer.Token, 0, j-i+1)
	out = append(out, toks[i:j]...)
	return append(out, lexer.Token{Type: tEOF, Value: chunkEnd + toks[j].Value, Pos: toks[j].Pos})
}

// chunkEnd marks the Value of the EOF token that ends a chunk: the value
// names the real token there for messages, and the marker keeps participle
// from matching the EOF against a literal ("}" would otherwise "close" a
// block that the source never closed).
const chunkEnd = "\x00"

// syntaxError turns participle's grammar-shaped error into a diagnostic.
func (p *parser) syntaxError(err error, context string) {
	var pe participle.Error
	off := len(p.src)
	msg := err.Error()
	if errors.As(err, &pe) {
		off = pe.Position().Offset
		msg = pe.Message()
	}
	var ut *participle.UnexpectedTokenError
	if errors.As(err, &ut) {
		tok := ut.Unexpected
		off = tok.Pos.Offset
		k := p.tokenIndex(off)
		expect := ut.Expect
		if m := ut.Message(); expect == "" && strings.HasSuffix(m, ")") {
			if i := strings.LastIndex(m, " (expected "); i >= 0 {
				expect = m[i+len(" (expected ") : len(m)-1]
			}
		}
		hint := expectHint(expect)
		if tok.Type == tIdent && expect == `"}"` && k+1 < len(p.toks) {
			// No item of the block could start with this word: in a
			// branch the word itself is wrong, elsewhere what follows it.
			if key := p.blockKey(k); key == "branch" {
				hint = `"when" or "else"`
			} else {
				next := &p.toks[k+1]
				off = next.Pos.Offset
				context = fmt.Sprintf("%s, after %q", context, tok.Value)
				tok, hint = *next, ""
			}
		}
		if tok.EOF() && (tok.Value == "" || tok.Value == chunkEnd) {
			msg = "unexpected end of " + context
		} else {
			msg = fmt.Sprintf("unexpected %s in %s", describe(&tok), context)
		}
		if hint != "" {
			msg += "; expected " + hint
		}
	}
	p.rp.Add(diag.SyntaxError, p.tokenRange(p.toks[p.tokenIndex(off)]), msg)
}

// blockKey returns the word before the "{" that encloses token k ("" at
// top level).
func (p *parser) blockKey(k int) string {
	depth := 0
	for m := k - 1; m > 0; m-- {
		t := p.toks[m]
		if t.Type != tPunct {
			continue
		}
		switch t.Value {
		case "}":
			depth++
		case "{":
			if depth == 0 {
				return p.toks[m-1].Value
			}
			depth--
		}
	}
	return ""
}

// grammarish matches grammar production names (GItem) and token classes
// (<ident>) in participle's messages.
var grammarish = regexp.MustCompile(`\b[gG][A-Z][a-z]+|<[a-zA-Z]+>`)

// expectHint keeps participle's expectation only when it is a short literal
// list; grammar productions are not something a user should read.
func expectHint(expect string) string {
	if expect == "" || strings.ContainsAny(expect, "()|*?<") || grammarish.MatchString(expect) {
		return ""
	}
	return expect
}

// ---- conversion from the grammar types to the public tree ----

func rng(pos, end lexer.Position) source.Range {
	return source.Range{Start: pos.Offset, End: end.Offset}
}

// trim turns participle's range, whose end is the position of the next
// token, into one that ends at the end of the node's last token: never past
// whitespace, comments or characters the lexer skipped.
func (p *parser) trim(r source.Range) source.Range {
	if e := p.endBefore(r.End); e >= r.Start {
		r.End = e
	}
	return r
}

// endBefore returns the end of the last token that starts before off.
func (p *parser) endBefore(off int) int {
	k := p.tokenIndex(off)
	if k == 0 {
		return 0
	}
	t := &p.toks[k-1]
	return t.Pos.Offset + len(t.Value)
}

// tokenIndex returns the index of the first token at or after off.
func (p *parser) tokenIndex(off int) int {
	toks := p.toks
	lo, hi := 0, len(toks)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if toks[m].Pos.Offset < off {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

func (p *parser) ident(t lexer.Token) *ast.Ident {
	return &ast.Ident{Range: source.Range{Start: t.Pos.Offset, End: t.Pos.Offset + len(t.Value)}, Name: t.Value}
}

func (p *parser) gident(g *gIdent) *ast.Ident {
	if g == nil {
		return nil
	}
	return &ast.Ident{Range: source.Range{Start: g.Pos.Offset, End: g.Pos.Offset + len(g.Name)}, Name: g.Name}
}

func (p *parser) idents(gs []*gIdent) []*ast.Ident {
	if len(gs) == 0 {
		return nil
	}
	out := make([]*ast.Ident, len(gs))
	for i, g := range gs {
		out[i] = p.gident(g)
	}
	return out
}

func (p *parser) top(g *gTop) ast.Item {
	switch {
	case g.Import != nil:
		return &ast.Import{Range: p.trim(rng(g.Pos, g.EndPos)), Path: p.str(g.Import)}
	case g.Handler != nil:
		return p.handler(g.Handler)
	case g.Workflow != nil:
		w := &ast.Workflow{Range: p.trim(rng(g.Workflow.Pos, g.Workflow.EndPos)), Name: p.gident(g.Workflow.Name)}
		for _, it := range g.Workflow.Items {
			w.Items = append(w.Items, p.wItem(it))
		}
		return w
	}
	return &ast.Bad{Range: p.trim(rng(g.Pos, g.EndPos))}
}

func (p *parser) handler(g *gHandler) *ast.Handler {
	h := &ast.Handler{Range: p.trim(rng(g.Pos, g.EndPos)), Name: p.str(g.Name)}
	for _, it := range g.Items {
		switch {
		case it.Types != nil:
			h.Items = append(h.Items, p.typeBlock(it.Types))
		case it.Setting != nil:
			h.Items = append(h.Items, p.setting(it.Setting))
		}
	}
	return h
}

func (p *parser) wItem(g *gWItem) ast.Item {
	switch {
	case g.Node != nil:
		return p.node(g.Node)
	case g.Handler != nil:
		return p.handler(g.Handler)
	case g.Input != nil:
		return &ast.InputBlock{Range: p.trim(rng(g.Input.Pos, g.Input.EndPos)), Key: p.gident(g.Input.Key), Fields: p.fields(g.Input.Fields)}
	case g.Params != nil:
		return p.params(g.Params)
	case g.Block != nil:
		b := &ast.Block{Range: p.trim(rng(g.Block.Pos, g.Block.EndPos)), Key: p.gident(g.Block.Key)}
		for _, it := range g.Block.Items {
			b.Items = append(b.Items, p.item(it))
		}
		return b
	case g.Setting != nil:
		st := p.setting(g.Setting)
		if nodeKinds[st.Key.Name] && st.Value.Kind == ast.IdentValue {
			// `task a` without a body parses as a setting; it is a node
			// missing its "{".
			next := p.toks[p.tokenIndex(st.End)]
			p.rp.Add(diag.SyntaxError, p.tokenRange(next), fmt.Sprintf("expected \"{\" to start the body of %s %s, found %s", st.Key.Name, st.Value.Raw, describe(&next)))
			return &ast.Bad{Range: st.Range, Kind: st.Key, Name: &ast.Ident{Range: st.Value.Range, Name: st.Value.Raw}}
		}
		return st
	}
	return &ast.Bad{Range: p.trim(rng(g.Pos, g.EndPos))}
}

func (p *parser) node(g *gNode) *ast.NodeDecl {
	n := &ast.NodeDecl{Range: p.trim(rng(g.Pos, g.EndPos)), Kind: p.gident(g.Kind), Name: p.gident(g.Name), After: p.idents(g.After), Join: p.gident(g.Join)}
	for _, it := range g.Items {
		n.Items = append(n.Items, p.item(it))
	}
	return n
}

func (p *parser) item(g *gItem) ast.Item {
	r := p.trim(rng(g.Pos, g.EndPos))
	switch {
	case g.Params != nil:
		return p.params(g.Params)
	case g.Types != nil:
		return p.typeBlock(g.Types)
	case g.Cond != nil:
		return &ast.Cond{Range: r, Key: p.gident(g.Cond.Key), Expr: p.expr(g.Cond.Expr)}
	case g.ForEach != nil:
		fe := g.ForEach
		out := &ast.ForEach{Range: r, Key: p.gident(fe.Key), Var: p.gident(fe.Var), Items: p.expr(fe.Items), Percent: fe.Percent}
		if fe.Index != nil {
			out.Index = p.gident(fe.Index)
		}
		if fe.Parallel != nil {
			out.Parallel = p.value(fe.Parallel)
		}
		if fe.Tolerate != nil {
			out.Tolerate = p.value(fe.Tolerate)
		}
		return out
	case g.Branch != nil:
		b := &ast.Branch{Range: r, Key: p.gident(g.Branch.Key)}
		for _, gr := range g.Branch.Rules {
			rule := &ast.Rule{Range: p.trim(rng(gr.Pos, gr.EndPos)), Else: gr.Else, Targets: p.idents(gr.Targets)}
			if gr.Cond != nil {
				rule.Cond = p.expr(gr.Cond)
			}
			b.Rules = append(b.Rules, rule)
		}
		return b
	case g.Routes != nil:
		return &ast.Goto{Range: r, Key: p.gident(g.Routes.Key), Targets: p.idents(g.Routes.Targets)}
	case g.Goto != nil:
		gt := &ast.Goto{Range: r, Key: p.gident(g.Goto.Key), Arrow: true, Targets: p.idents(g.Goto.Targets)}
		for _, c := range g.Goto.Codes {
			gt.Codes = append(gt.Codes, p.str(c))
		}
		return gt
	case g.Approvers != nil:
		return p.setting(g.Approvers)
	case g.Setting != nil:
		return p.setting(g.Setting)
	case g.Block != nil:
		b := &ast.Block{Range: r, Key: p.gident(g.Block.Key)}
		for _, it := range g.Block.Items {
			b.Items = append(b.Items, p.item(it))
		}
		return b
	}
	return &ast.Bad{Range: r}
}

func (p *parser) params(g *gParamBlock) *ast.ParamBlock {
	pb := &ast.ParamBlock{Range: p.trim(rng(g.Pos, g.EndPos)), Key: p.gident(g.Key)}
	for _, gp := range g.Params {
		pb.Params = append(pb.Params, &ast.Param{Range: p.trim(rng(gp.Pos, gp.EndPos)), Name: p.gident(gp.Name), Value: p.expr(gp.Value)})
	}
	return pb
}

func (p *parser) typeBlock(g *gTypeBlock) *ast.TypeBlock {
	return &ast.TypeBlock{Range: p.trim(rng(g.Pos, g.EndPos)), Key: p.gident(g.Key), Fields: p.fields(g.Fields)}
}

func (p *parser) fields(gs []*gField) []*ast.Field {
	var out []*ast.Field
	for _, g := range gs {
		f := &ast.Field{Range: p.trim(rng(g.Pos, g.EndPos)), Name: p.gident(g.Name), Optional: g.Optional, Type: p.typ(g.Type)}
		if g.Default != nil {
			f.Default = p.expr(g.Default)
		}
		out = append(out, f)
	}
	return out
}

func (p *parser) typ(g *gType) *ast.Type {
	if g == nil {
		return nil
	}
	t := &ast.Type{Range: p.trim(rng(g.Pos, g.EndPos)), Name: p.gident(g.Name)}
	if g.Name == nil {
		t.Fields = p.fields(g.Fields)
		if t.Fields == nil {
			t.Fields = []*ast.Field{}
		}
	}
	for _, a := range g.Args {
		t.Args = append(t.Args, p.typ(a))
	}
	return t
}

func (p *parser) setting(g *gSetting) *ast.Setting {
	return &ast.Setting{Range: p.trim(rng(g.Pos, g.EndPos)), Key: p.gident(g.Key), Value: p.value(g.Value)}
}

func (p *parser) value(g *gValue) *ast.Value {
	v := &ast.Value{Range: p.trim(rng(g.Pos, g.EndPos))}
	v.Raw = p.src[v.Start:v.End]
	switch {
	case g.Duration != nil:
		v.Kind = ast.DurationValue
	case g.Number != nil:
		v.Kind = ast.IntValue
		if strings.ContainsAny(*g.Number, ".eE") && !strings.HasPrefix(strings.TrimPrefix(*g.Number, "-"), "0x") {
			v.Kind = ast.FloatValue
		}
	case g.Str != nil:
		v.Kind = ast.StringValue
		v.Str = p.str(g.Str)
	case g.List != nil:
		v.Kind = ast.ListValue
		v.List = []*ast.Value{}
		for _, it := range g.List.Items {
			v.List = append(v.List, p.value(it))
		}
	case g.Ident != nil:
		v.Kind = ast.IdentValue
	}
	return v
}

func (p *parser) expr(g *gExpr) *ast.Expr {
	e := &ast.Expr{Range: source.Range{Start: g.Start, End: g.End}, Text: p.exprText(g.Start, g.End)}
	// A lone string literal: keep it decoded, with any template parts.
	if g.Str {
		e.Str = p.strAt(e.Start, e.End)
	}
	return e
}

func (p *parser) str(g *gString) *ast.String {
	return p.strAt(g.Pos.Offset, g.Pos.Offset+len(g.Raw))
}

// strAt decodes the string literal at [start, end) and splits templates.
func (p *parser) strAt(start, end int) *ast.String {
	raw := p.src[start:end]
	s := &ast.String{Range: source.Range{Start: start, End: end}, Raw: raw}
	val, err := Unquote(raw)
	if err != nil && !errors.Is(err, errUnterminated) { // the lexer reported that (WF0003)
		p.rp.Add(diag.BadString, s.Range, err.Error())
	}
	s.Value = val
	if strings.Contains(raw, "{{") {
		s.Template = p.template(s)
	}
	return s
}

// errUnterminated is Unquote's error for a literal without its closing
// quote, which the lexer reports (WF0003).
var errUnterminated = errors.New("string literal is not terminated")

// Unquote decodes a string literal: "..." and '...' with CEL/Go escapes,
// triple-quoted forms, and the r (raw) prefix.
func Unquote(raw string) (string, error) {
	rawPrefix := false
	for len(raw) > 0 && (raw[0] == 'r' || raw[0] == 'R' || raw[0] == 'b' || raw[0] == 'B') {
		if raw[0] == 'r' || raw[0] == 'R' {
			rawPrefix = true
		}
		raw = raw[1:]
	}
	if len(raw) < 2 {
		return "", errUnterminated
	}
	q := raw[0]
	body := ""
	switch {
	case len(raw) >= 6 && raw[1] == q && raw[2] == q && strings.HasSuffix(raw, strings.Repeat(string(q), 3)):
		body = raw[3 : len(raw)-3]
	case raw[len(raw)-1] == q:
		body = raw[1 : len(raw)-1]
	default:
		return raw[1:], errUnterminated
	}
	if rawPrefix || !strings.Contains(body, "\\") {
		return body, nil
	}
	var b strings.Builder
	for len(body) > 0 {
		r, multi, tail, err := strconv.UnquoteChar(body, q)
		if err != nil {
			// Quotes of the other kind need no escape; Go's UnquoteChar
			// rejects some CEL escapes (\' in "..."), so accept those.
			if len(body) >= 2 && body[0] == '\\' && (body[1] == '\'' || body[1] == '"' || body[1] == '`' || body[1] == '?') {
				b.WriteByte(body[1])
				body = body[2:]
				continue
			}
			return b.String(), fmt.Errorf("invalid escape sequence in string literal")
		}
		if multi || r < 0x80 {
			b.WriteRune(r)
		} else {
			b.WriteRune(r)
		}
		body = tail
	}
	return b.String(), nil
}

// template splits a string literal into text and {{ expr }} parts. The
// expression text is taken from the source as written (so positions map
// one-to-one); use single quotes for strings inside a template expression.
func (p *parser) template(s *ast.String) []*ast.TemplatePart {
	raw := s.Raw
	// Skip prefix and opening quote(s).
	i := 0
	for i < len(raw) && raw[i] != '"' && raw[i] != '\'' {
		i++
	}
	rawPrefix := strings.ContainsAny(raw[:i], "rR")
	q := raw[i]
	open := 1
	if len(raw) >= i+6 && raw[i+1] == q && raw[i+2] == q {
		open = 3
	}
	bodyStart, bodyEnd := i+open, len(raw)-open
	if bodyEnd < bodyStart {
		return nil
	}
	var parts []*ast.TemplatePart
	lit := func(a, b int) {
		if b <= a {
			return
		}
		text := raw[a:b]
		if !rawPrefix {
			if dec, err := Unquote(string(q) + text + string(q)); err == nil {
				text = dec
			} // else: the bad escape was reported; keep the text as written
		}
		parts = append(parts, &ast.TemplatePart{Range: source.Range{Start: s.Start + a, End: s.Start + b}, Text: text})
	}
	k := bodyStart
	for k < bodyEnd {
		o := strings.Index(raw[k:bodyEnd], "{{")
		if o < 0 {
			break
		}
		o += k
		c := strings.Index(raw[o+2:bodyEnd], "}}")
		if c < 0 {
			p.rp.Add(diag.ExprSyntax, source.Range{Start: s.Start + o, End: s.Start + o + 2}, "template expression \"{{\" is not closed by \"}}\"")
			break
		}
		c += o + 2
		lit(k, o)
		inner := raw[o+2 : c]
		lead := len(inner) - len(strings.TrimLeft(inner, " \t"))
		trail := len(inner) - len(strings.TrimRight(inner, " \t"))
		es, ee := s.Start+o+2+lead, s.Start+c-trail
		if ee <= es {
			p.rp.Add(diag.ExprSyntax, source.Range{Start: s.Start + o, End: s.Start + c + 2}, "empty template expression")
		} else {
			parts = append(parts, &ast.TemplatePart{Range: source.Range{Start: s.Start + o, End: s.Start + c + 2},
				Expr: &ast.Expr{Range: source.Range{Start: es, End: ee}, Text: p.src[es:ee]}})
		}
		k = c + 2
	}
	lit(k, bodyEnd)
	return parts
}

package lang

import (
	"errors"
	"fmt"
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
func ParseFile(f *source.File) (*ast.File, diag.List) {
	rp := &diag.Reporter{File: f}
	file := &ast.File{Name: f.Name, Range: source.Range{Start: 0, End: len(f.Src)}}
	if len(f.Src) > MaxFileSize {
		rp.Add(diag.FileTooLarge, source.Range{}, fmt.Sprintf("file is %d bytes; the limit is %d", len(f.Src), MaxFileSize))
		return file, rp.Diags.Sorted()
	}
	sc := scan(f, rp)
	file.Comments = sc.comments
	if sc.tooDeep {
		// A pathological file; parsing it recursively is what the limit prevents.
		return file, rp.Diags.Sorted()
	}
	p := &parser{f: f, rp: rp, src: string(f.Src), comments: sc.comments}
	toks := sc.toks
	g, err := fileParser.ParseFromLexer(peeking(toks))
	if err == nil {
		for _, t := range g.Items {
			file.Items = append(file.Items, p.top(t))
		}
	} else {
		file.Items = p.recoverTop(toks)
	}
	return file, rp.Diags.Sorted()
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
}

func peeking(toks []lexer.Token) *lexer.PeekingLexer {
	pl, _ := lexer.Upgrade(&sliceLexer{toks: toks}) // a slice lexer never fails
	return pl
}

// withEOF returns toks[i:j] followed by an EOF token at the position of toks[j]
// (the token after the chunk), so errors at the end of a chunk point there.
func withEOF(toks []lexer.Token, i, j int) []lexer.Token {
	out := make([]lexer.Token, 0, j-i+1)
	out = append(out, toks[i:j]...)
	return append(out, lexer.Token{Type: tEOF, Value: toks[j].Value, Pos: toks[j].Pos})
}

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
		if tok.EOF() && tok.Value == "" {
			msg = "unexpected end of " + context
		} else {
			msg = fmt.Sprintf("unexpected %s in %s", describe(&tok), context)
		}
		if hint := expectHint(ut.Expect); hint != "" {
			msg += "; expected " + hint
		}
	}
	end := off + 1
	if off < len(p.src) {
		_, end = tokenAt(p.src, off)
	}
	p.rp.Add(diag.SyntaxError, source.Range{Start: off, End: min(end, len(p.src))}, msg)
}

// expectHint keeps participle's expectation only when it is a short literal
// list; grammar productions are not something a user should read.
func expectHint(expect string) string {
	if expect == "" || strings.ContainsAny(expect, "()|*?") || strings.Contains(expect, "G") {
		return ""
	}
	return expect
}

func tokenAt(src string, off int) (int, int) {
	end := off + 1
	for end < len(src) && (isLetter(src[end]) || isDigit(src[end])) && (isLetter(src[off]) || isDigit(src[off])) {
		end++
	}
	return off, end
}

// ---- recovery ----

// recoverTop splits the token stream at top-level declarations and parses
// each on its own.
func (p *parser) recoverTop(toks []lexer.Token) []ast.Item {
	var items []ast.Item
	starts := splitTop(toks)
	for k, i := range starts {
		j := len(toks) - 1
		if k+1 < len(starts) {
			j = starts[k+1]
		}
		if i == j {
			continue
		}
		g, err := topParser.ParseFromLexer(peeking(withEOF(toks, i, j)))
		if err == nil {
			items = append(items, p.top(g))
			continue
		}
		if toks[i].Value == "workflow" && j-i >= 3 && toks[i+1].Type == tIdent && toks[i+2].Value == "{" {
			items = append(items, p.recoverWorkflow(toks, i, j))
			continue
		}
		p.syntaxError(err, context(toks[i]))
		items = append(items, &ast.Bad{Range: source.Range{Start: toks[i].Pos.Offset, End: endOf(toks, j)}})
	}
	return items
}

func context(t lexer.Token) string {
	switch t.Value {
	case "workflow":
		return "workflow"
	case "handler":
		return "handler declaration"
	case "import":
		return "import"
	case "task", "agent", "human", "flow":
		return t.Value + " " + "declaration"
	}
	return "file"
}

func endOf(toks []lexer.Token, j int) int {
	if j == 0 {
		return 0
	}
	t := toks[j-1]
	return t.Pos.Offset + len(t.Value)
}

var topKeywords = map[string]bool{"import": true, "handler": true, "workflow": true}

// splitTop returns the indexes of tokens that start a top-level declaration:
// a top keyword at depth 0, or a `workflow name {` / `handler "x" {` at any
// depth (a missing `}` must not swallow the rest of the file).
func splitTop(toks []lexer.Token) []int {
	starts := []int{0}
	depth := 0
	for i := 0; i < len(toks)-1; i++ {
		t := toks[i]
		if i > 0 && t.Type == tIdent && topKeywords[t.Value] && (depth == 0 || startsDecl(toks, i)) {
			starts = append(starts, i)
			depth = 0
		}
		depth += depthDelta(t)
	}
	return starts
}

func depthDelta(t lexer.Token) int {
	if t.Type != tPunct {
		return 0
	}
	switch t.Value {
	case "{", "(", "[":
		return 1
	case "}", ")", "]":
		return -1
	}
	return 0
}

// startsDecl reports whether toks[i] starts `kw name {` (or `kw name after`).
func startsDecl(toks []lexer.Token, i int) bool {
	if i+2 >= len(toks) {
		return false
	}
	if i > 0 && toks[i-1].Type == tPunct && toks[i-1].Value == "." {
		return false
	}
	name, next := toks[i+1], toks[i+2]
	if name.Type != tIdent && !(name.Type == tString && toks[i].Value == "handler") {
		return false
	}
	return next.Value == "{" || (next.Type == tIdent && (next.Value == "after" || next.Value == "join"))
}

var nodeKinds = map[string]bool{"task": true, "agent": true, "human": true, "flow": true}

// wItemKeywords start workflow items.
var wItemKeywords = map[string]bool{
	"task": true, "agent": true, "human": true, "flow": true, "handler": true,
	"input": true, "output": true, "version": true, "description": true,
	"deadline": true, "max_hops": true, "max_fanout": true,
}

func (p *parser) recoverWorkflow(toks []lexer.Token, i, j int) ast.Item {
	w := &ast.Workflow{Range: source.Range{Start: toks[i].Pos.Offset, End: endOf(toks, j)}, Name: p.ident(toks[i+1])}
	bodyStart, bodyEnd := i+3, j
	// The workflow's closing brace is the last `}` at depth 0 of the body.
	closed := false
	if k := closingBrace(toks, bodyStart, j); k >= 0 {
		bodyEnd, closed = k, true
		if k+1 < j {
			// Tokens after the workflow's closing brace.
			p.syntaxError(&participle.UnexpectedTokenError{Unexpected: toks[k+1]}, "file")
		}
	} else if j > bodyStart && toks[j-1].Value == "}" {
		// An inner block is unclosed; the last brace is the workflow's.
		bodyEnd, closed = j-1, true
	}
	starts := splitItems(toks, bodyStart, bodyEnd, wItemKeywords, true)
	for k, s := range starts {
		e := bodyEnd
		if k+1 < len(starts) {
			e = starts[k+1]
		}
		if s == e {
			continue
		}
		g, err := wItemParser.ParseFromLexer(peeking(withEOF(toks, s, e)))
		if err == nil {
			w.Items = append(w.Items, p.wItem(g))
			continue
		}
		if nodeKinds[toks[s].Value] && e-s >= 2 && toks[s+1].Type == tIdent {
			w.Items = append(w.Items, p.recoverNode(toks, s, e))
			continue
		}
		p.syntaxError(err, context(toks[s])+" in workflow")
		w.Items = append(w.Items, &ast.Bad{Range: source.Range{Start: toks[s].Pos.Offset, End: endOf(toks, e)}})
	}
	if !closed {
		p.rp.Add(diag.SyntaxError, source.Range{Start: toks[i+2].Pos.Offset, End: toks[i+2].Pos.Offset + 1}, "the workflow's \"{\" is never closed")
	}
	return w
}

// closingBrace finds the `}` that closes a block whose body starts at i,
// scanning no further than j; -1 if there is none.
func closingBrace(toks []lexer.Token, i, j int) int {
	d := 0
	for k := i; k < j; k++ {
		d += depthDelta(toks[k])
		if d < 0 {
			return k
		}
	}
	return -1
}

// nodeItemKeywords start node items.
var nodeItemKeywords = map[string]bool{
	"run": true, "with": true, "output": true, "when": true, "for_each": true,
	"retry": true, "timeout": true, "branch": true, "loop": true, "on_error": true,
	"compensate": true, "model": true, "temperature": true, "prompt": true,
	"routes": true, "default": true, "approvers": true, "on_timeout": true,
	"on_reject": true, "uses": true, "description": true,
}

// continuesExpr: a keyword right after one of these tokens is part of an
// expression (`when output.x`, `a in b`), not the start of an item.
func continuesExpr(t lexer.Token) bool {
	if t.Type == tPunct {
		switch t.Value {
		case "{", "}", ";", "]", ")":
			return false
		}
		return true
	}
	return t.Type == tIdent && (t.Value == "when" || t.Value == "while" || t.Value == "in")
}

// splitItems returns the indexes in [i, j) where a new item starts: an item
// keyword at depth 0 of the body not continuing an expression; with
// nodesAnywhere, also a node header at any depth (a missing `}` in one node
// must not swallow the next).
func splitItems(toks []lexer.Token, i, j int, kw map[string]bool, nodesAnywhere bool) []int {
	starts := []int{i}
	depth := 0
	for k := i; k < j; k++ {
		t := toks[k]
		if k > i && t.Type == tIdent {
			isStart := depth == 0 && kw[t.Value] && !continuesExpr(toks[k-1])
			if isStart && t.Value == "output" {
				isStart = toks[k+1].Value == "{"
			}
			if !isStart && nodesAnywhere && depth > 0 && nodeKinds[t.Value] && startsDecl(toks, k) {
				isStart = true
			}
			if isStart {
				starts = append(starts, k)
				depth = 0
			}
		}
		depth += depthDelta(t)
		if depth < 0 {
			depth = 0
		}
	}
	return starts
}

func (p *parser) recoverNode(toks []lexer.Token, i, j int) ast.Item {
	n := &ast.NodeDecl{Range: source.Range{Start: toks[i].Pos.Offset, End: endOf(toks, j)}, Kind: p.ident(toks[i]), Name: p.ident(toks[i+1])}
	// Header: after a, b  join x  {
	k := i + 2
	if k < j && toks[k].Value == "after" {
		k++
		for k < j && toks[k].Type == tIdent {
			n.After = append(n.After, p.ident(toks[k]))
			k++
			if k < j && toks[k].Value == "," {
				k++
				continue
			}
			break
		}
	}
	if k+1 < j && toks[k].Value == "join" && toks[k+1].Type == tIdent {
		n.Join = p.ident(toks[k+1])
		k += 2
	}
	if k >= j || toks[k].Value != "{" {
		t := toks[k]
		p.syntaxError(&participle.UnexpectedTokenError{Unexpected: t}, context(toks[i]))
		return &ast.Bad{Range: n.Range, Kind: n.Kind, Name: n.Name}
	}
	open := toks[k]
	bodyStart, bodyEnd := k+1, j
	if c := closingBrace(toks, bodyStart, j); c >= 0 {
		bodyEnd = c
		if c+1 < j {
			p.syntaxError(&participle.UnexpectedTokenError{Unexpected: toks[c+1]}, "workflow")
		}
	} else {
		p.rp.Add(diag.SyntaxError, source.Range{Start: open.Pos.Offset, End: open.Pos.Offset + 1}, fmt.Sprintf("the \"{\" of %s %s is never closed", n.Kind.Name, n.Name.Name))
	}
	starts := splitItems(toks, bodyStart, bodyEnd, nodeItemKeywords, false)
	for x, s := range starts {
		e := bodyEnd
		if x+1 < len(starts) {
			e = starts[x+1]
		}
		if s == e {
			continue
		}
		// A trailing ";" belongs to the item.
		end := e
		if end > s && toks[end-1].Value == ";" {
			end--
		}
		g, err := itemParser.ParseFromLexer(peeking(withEOF(toks, s, end)))
		if err == nil {
			n.Items = append(n.Items, p.item(g))
			continue
		}
		p.syntaxError(err, "`"+toks[s].Value+"` item of "+n.Kind.Name+" "+n.Name.Name)
		n.Items = append(n.Items, &ast.Bad{Range: source.Range{Start: toks[s].Pos.Offset, End: endOf(toks, e)}})
	}
	return n
}

// ---- conversion from the grammar types to the public tree ----

func rng(pos, end lexer.Position) source.Range {
	return source.Range{Start: pos.Offset, End: end.Offset}
}

// trim shrinks a range whose end participle put at the next token (past
// whitespace and comments) back to the end of the last real token.
func (p *parser) trim(r source.Range) source.Range {
	e := r.End
	for e > r.Start {
		c := p.src[e-1]
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			e--
			continue
		}
		// A comment before the next token: back up over it.
		if ls := strings.LastIndex(p.src[r.Start:e], "//"); ls >= 0 && !strings.Contains(p.src[r.Start+ls:e], "\n") && p.inComment(r.Start+ls) {
			e = r.Start + ls
			continue
		}
		if e >= 2 && p.src[e-2:e] == "*/" {
			if bs := strings.LastIndex(p.src[r.Start:e-2], "/*"); bs >= 0 && p.inComment(r.Start+bs) {
				e = r.Start + bs
				continue
			}
		}
		break
	}
	r.End = e
	return r
}

// inComment reports whether off starts a comment (and not, say, "//" inside
// a string). It consults the comment list, which is sorted.
func (p *parser) inComment(off int) bool {
	return p.commentAt(off)
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
	case g.Setting != nil:
		return p.setting(g.Setting)
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
		out := &ast.ForEach{Range: r, Key: p.gident(fe.Key), Var: p.gident(fe.Var), Items: p.expr(fe.Items)}
		if fe.Parallel != nil {
			out.Parallel = p.value(fe.Parallel)
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
		return &ast.Goto{Range: r, Key: p.gident(g.Goto.Key), Arrow: true, Targets: p.idents(g.Goto.Targets)}
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
	e := &ast.Expr{Range: source.Range{Start: g.Start, End: g.End}, Text: p.src[g.Start:g.End]}
	// A lone string literal: keep it decoded, with any template parts.
	if c := e.Text[0]; c == '"' || c == '\'' {
		if _, end := stringEnd(e.Text); end == len(e.Text) {
			e.Str = p.strAt(e.Start, e.End)
		}
	}
	return e
}

// stringEnd returns the end of the string literal starting text (simple
// quotes only); used to tell `"a"` from `"a" + b`.
func stringEnd(text string) (int, int) {
	q := text[0]
	if len(text) >= 3 && text[1] == q && text[2] == q {
		if k := strings.Index(text[3:], strings.Repeat(string(q), 3)); k >= 0 {
			return 0, k + 6
		}
		return 0, len(text) + 1
	}
	for i := 1; i < len(text); i++ {
		switch text[i] {
		case '\\':
			i++
		case q:
			return 0, i + 1
		}
	}
	return 0, len(text) + 1
}

func (p *parser) str(g *gString) *ast.String {
	return p.strAt(g.Pos.Offset, g.Pos.Offset+len(g.Raw))
}

// strAt decodes the string literal at [start, end) and splits templates.
func (p *parser) strAt(start, end int) *ast.String {
	raw := p.src[start:end]
	s := &ast.String{Range: source.Range{Start: start, End: end}, Raw: raw}
	val, err := Unquote(raw)
	if err != nil {
		p.rp.Add(diag.BadString, s.Range, err.Error())
	}
	s.Value = val
	if strings.Contains(raw, "{{") {
		s.Template = p.template(s)
	}
	return s
}

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
		return "", errors.New("string literal is not terminated")
	}
	q := raw[0]
	body := ""
	switch {
	case len(raw) >= 6 && raw[1] == q && raw[2] == q && strings.HasSuffix(raw, strings.Repeat(string(q), 3)):
		body = raw[3 : len(raw)-3]
	case raw[len(raw)-1] == q:
		body = raw[1 : len(raw)-1]
	default:
		return raw[1:], errors.New("string literal is not terminated")
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
		text, _ := Unquote(string(q) + raw[a:b] + string(q))
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

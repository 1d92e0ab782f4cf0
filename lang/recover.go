package lang

import (
	"fmt"
	"strings"

	"github.com/alecthomas/participle/v2"
	"github.com/alecthomas/participle/v2/lexer"

	"github.com/wfc-lang/wfc/lang/ast"
	"github.com/wfc-lang/wfc/lang/diag"
	"github.com/wfc-lang/wfc/lang/source"
)

// Error recovery. When the whole file does not parse, the token stream is
// split at top-level declarations and each is parsed on its own. A workflow
// that does not parse is parsed item by item ("panic mode"): each item is
// parsed from where the previous one ended; when one fails, its error is
// reported and parsing resumes at the next plausible item start. A broken
// node is parsed the same way, item by item, so the tree keeps everything
// that can be read.

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
		for i < j && isPunct(toks[i], ";") {
			i++
		}
		for j > i && isPunct(toks[j-1], ";") { // a separator, not part of the declaration
			j--
		}
		if i == j {
			continue
		}
		isWorkflow := toks[i].Value == "workflow" && j-i >= 3 && toks[i+1].Type == tIdent && isPunct(toks[i+2], "{")
		var g *gTop
		var err error
		chunk := withEOF(toks, i, j)
		if p.fast {
			fp := &fastParser{toks: chunk}
			if t, ok := fp.top(); ok && fp.i == j-i {
				g = t
			} else {
				err = errFastFailed
			}
		}
		if g == nil && (!p.fast || !isWorkflow) {
			// Participle's error is needed for the message (a workflow
			// is recovered item by item instead).
			g, err = topParser.ParseFromLexer(peeking(chunk))
		}
		if err == nil {
			items = append(items, p.top(g))
			continue
		}
		if isWorkflow {
			items = append(items, p.recoverWorkflow(toks, i, j))
			continue
		}
		if msg := headerError(toks, i); msg != "" {
			p.rp.Add(diag.SyntaxError, p.tokenRange(toks[i+1]), msg)
		} else if topKeywords[toks[i].Value] {
			p.syntaxError(err, context(toks[i]))
		} else {
			p.rp.Add(diag.SyntaxError, p.tokenRange(toks[i]), fmt.Sprintf("unexpected %s at the top level of the file; expected import, handler or workflow", describe(&toks[i])))
		}
		items = append(items, &ast.Bad{Range: source.Range{Start: toks[i].Pos.Offset, End: endOf(toks, j)}})
	}
	return items
}

// headerError checks the word after a top-level keyword at toks[i].
func headerError(toks []lexer.Token, i int) string {
	next := &toks[i+1]
	switch toks[i].Value {
	case "import":
		if next.Type != tString {
			return fmt.Sprintf("expected a file name in quotes after \"import\", found %s", describe(next))
		}
	case "handler":
		if next.Type != tString {
			return fmt.Sprintf("expected a handler name in quotes after \"handler\", found %s", describe(next))
		}
	case "workflow":
		if next.Type != tIdent {
			return fmt.Sprintf("expected a workflow name after \"workflow\", found %s", describe(next))
		}
	}
	return ""
}

func isPunct(t lexer.Token, v string) bool { return t.Type == tPunct && t.Value == v }

// context names what a declaration or item starting with t is, for messages.
func context(t lexer.Token) string {
	switch t.Value {
	case "workflow":
		return "workflow"
	case "handler":
		return "handler declaration"
	case "import":
		return "import"
	case "task", "agent", "human", "flow":
		return t.Value + " declaration"
	case "input", "output":
		return "`" + t.Value + "` block"
	}
	if t.Type == tIdent {
		return "`" + t.Value + "` item"
	}
	return "the body"
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
		// Inside a workflow a handler declaration is a workflow item, not
		// the start of the next top-level declaration.
		inWorkflow := toks[starts[len(starts)-1]].Value == "workflow"
		nested := depth > 0 && startsDecl(toks, i) && !(inWorkflow && t.Value == "handler")
		if i > 0 && t.Type == tIdent && topKeywords[t.Value] && (depth == 0 || nested) && !isPunct(toks[i-1], ".") {
			starts = append(starts, i)
			depth = 0
		}
		depth += depthDelta(t)
		if depth < 0 {
			depth = 0
		}
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

// startsDecl reports whether toks[i] starts `kw name {` (or `kw name after`,
// `kw name join`).
func startsDecl(toks []lexer.Token, i int) bool {
	if i+2 >= len(toks) {
		return false
	}
	if i > 0 && isPunct(toks[i-1], ".") {
		return false
	}
	name, next := toks[i+1], toks[i+2]
	if name.Type != tIdent && !(name.Type == tString && toks[i].Value == "handler") {
		return false
	}
	return isPunct(next, "{") || (next.Type == tIdent && (next.Value == "after" || next.Value == "join"))
}

var nodeKinds = map[string]bool{"task": true, "agent": true, "human": true, "flow": true}

// wItemKeywords start workflow items.
var wItemKeywords = map[string]bool{
	"task": true, "agent": true, "human": true, "flow": true, "handler": true,
	"input": true, "output": true, "version": true, "description": true,
	"deadline": true, "max_hops": true, "max_fanout": true, "finally": true,
	"max_input_bytes": true, "max_output_bytes": true, "max_state_bytes": true,
}

// nodeItemKeywords start node items.
var nodeItemKeywords = map[string]bool{
	"run": true, "with": true, "output": true, "when": true, "for_each": true,
	"retry": true, "timeout": true, "branch": true, "loop": true, "on_error": true,
	"compensate": true, "model": true, "temperature": true, "prompt": true,
	"routes": true, "default": true, "approvers": true, "on_timeout": true,
	"on_reject": true, "uses": true, "description": true, "dispatch": true,
	"escalate_to": true, "escalate_after": true,
	"max_routes": true, "tools": true, "max_tool_calls": true, "max_tokens": true,
}

// notItemStart are words that continue a node header or an item; they never
// start an item even first on a line.
var notItemStart = map[string]bool{"after": true, "join": true, "in": true, "parallel": true, "tolerate": true, "else": true}

// continuesExpr: a word right after one of these tokens is part of an
// expression or list (`when output.x`, `a in b`, `after a, b`), not the start
// of an item.
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

// nextItemStart returns the index in (k, e] where the item after the broken
// one at k presumably starts: at the depth of k, a word that is an item
// keyword or the first on its line, and does not continue an expression; or,
// with nodesAnywhere, a node header at any depth (a missing `}` in one node
// must not swallow the next).
func nextItemStart(toks []lexer.Token, k, e int, kw map[string]bool, nodesAnywhere bool) int {
	depth := max(0, depthDelta(toks[k]))
	for m := k + 1; m < e; m++ {
		t := toks[m]
		if t.Type == tIdent {
			prev := toks[m-1]
			if depth == 0 && !continuesExpr(prev) && !notItemStart[t.Value] {
				if kw[t.Value] && (t.Value != "output" || isPunct(toks[m+1], "{")) {
					return m
				}
				if t.Pos.Line > prev.Pos.Line {
					return m
				}
			}
			if nodesAnywhere && depth > 0 && nodeKinds[t.Value] && startsDecl(toks, m) {
				return m
			}
		}
		depth += depthDelta(t)
		if depth < 0 {
			depth = 0
		}
	}
	return e
}

// closingBrace finds the "}" that closes the "{" just before i, scanning
// toks[i:j]; -1 if there is none. Brackets are matched by kind: a closer that
// matches an outer opener also closes the unclosed ones inside it (so in
// `{ when (a }` the brace closes the block), and a stray closer that matches
// no opener is skipped.
func closingBrace(toks []lexer.Token, i, j int) int {
	stack := []byte{'{'}
	for k := i; k < j; k++ {
		t := toks[k]
		if t.Type != tPunct || len(t.Value) != 1 {
			continue
		}
		switch c := t.Value[0]; c {
		case '{', '(', '[':
			stack = append(stack, c)
		case '}', ')', ']':
			open := map[byte]byte{'}': '{', ')': '(', ']': '['}[c]
			m := len(stack) - 1
			for m >= 0 && stack[m] != open {
				m--
			}
			if m < 0 {
				continue
			}
			stack = stack[:m]
			if len(stack) == 0 {
				return k
			}
		}
	}
	return -1
}

// recoverItems parses the items of a block body toks[s:e) one at a time,
// with the fast parser (fastParse), or with participle (parse, reading one
// item from lex with trailing tokens allowed) when the fast path is off.
// When an item fails, fail(k, n, errOf) reports the item toks[k:n) and
// returns a node for it, n being the next item start; errOf gives
// participle's error for the item, parsed on its own (so the message is the
// same on both paths, and a broken item costs no more than its own length).
func (p *parser) recoverItems(toks []lexer.Token, s, e int, kw map[string]bool,
	fastParse func(*fastParser) (ast.Item, bool),
	parse func(*lexer.PeekingLexer) (ast.Item, error),
	next func(k int) int,
	fail func(k, n int, errOf func() error) ast.Item) []ast.Item {
	var items []ast.Item
	chunk := withEOF(toks, s, e)
	fp := &fastParser{toks: chunk}
	var lex *lexer.PeekingLexer // participle over the body, when the fast path is off
	k := s
	for k < e {
		if isPunct(toks[k], ";") {
			k++
			continue
		}
		var it ast.Item
		var ok bool
		var end int
		if p.fast {
			fp.i = k - s
			it, ok = fastParse(fp)
			end = s + fp.i
		} else {
			if lex == nil {
				lex = peeking(chunk)
			}
			for lex.Cursor() < k-s {
				lex.Next()
			}
			saved := *lex
			var err error
			it, err = parse(lex)
			ok, end = err == nil && s+lex.Cursor() > k, s+lex.Cursor()
			*lex = saved
		}
		if ok {
			if st, took := p.settingTookKeyword(it, toks, k, kw); took {
				// `version` on one line and `task a {` on the next: the
				// setting took the next item's keyword for its value.
				p.rp.Add(diag.SyntaxError, st.Key.Range, fmt.Sprintf("missing value after %q", st.Key.Name))
				items = append(items, &ast.Bad{Range: st.Key.Range})
				k = p.tokenIndex(st.Value.Start)
				continue
			}
			items = append(items, it)
			k = end
			continue
		}
		n := next(k)
		errOf := func() error {
			l := peeking(withEOF(toks, k, n))
			_, err := parse(l)
			if err == nil {
				err = &participle.UnexpectedTokenError{Unexpected: toks[min(k+l.Cursor(), n)]}
			}
			return err
		}
		items = append(items, fail(k, n, errOf))
		k = n
	}
	return items
}

// settingTookKeyword reports whether it, parsed at toks[k], is a setting
// whose value is an item keyword on a later line: `version` without its
// value, followed by `task a {`.
func (p *parser) settingTookKeyword(it ast.Item, toks []lexer.Token, k int, kw map[string]bool) (*ast.Setting, bool) {
	st, ok := it.(*ast.Setting)
	if !ok || st.Value.Kind != ast.IdentValue || !kw[st.Value.Raw] {
		return nil, false
	}
	return st, toks[p.tokenIndex(st.Value.Start)].Pos.Line > toks[k].Pos.Line
}

func (p *parser) recoverWorkflow(toks []lexer.Token, i, j int) ast.Item {
	w := &ast.Workflow{Range: source.Range{Start: toks[i].Pos.Offset, End: endOf(toks, j)}, Name: p.ident(toks[i+1])}
	bodyStart, bodyEnd := i+3, j
	closed := false
	stray := -1 // an extra "}" inside the body
	if k := closingBrace(toks, bodyStart, j); k >= 0 {
		bodyEnd, closed = k, true
		w.End = endOf(toks, k+1)
		if k+1 < j {
			if isPunct(toks[j-1], "}") && closingBrace(toks, k+1, j-1) < 0 {
				// More of the body follows, up to a final "}": the brace at
				// k is one too many, not the end of the workflow.
				stray, bodyEnd, w.End = k, j-1, endOf(toks, j)
				p.rp.Add(diag.SyntaxError, p.tokenRange(toks[k]), "unexpected \"}\": it closes workflow "+w.Name.Name+" but more of its body follows")
			} else {
				p.syntaxError(&participle.UnexpectedTokenError{Unexpected: toks[k+1]}, "file after the end of workflow "+w.Name.Name)
			}
		}
	} else if j > bodyStart && isPunct(toks[j-1], "}") {
		// An inner block is unclosed; the last brace is the workflow's.
		bodyEnd, closed = j-1, true
	}
	where := " of workflow " + w.Name.Name
	if stray >= 0 {
		w.Items = p.recoverWorkflowItems(toks, bodyStart, stray, where)
		w.Items = append(w.Items, p.recoverWorkflowItems(toks, stray+1, bodyEnd, where)...)
	} else {
		w.Items = p.recoverWorkflowItems(toks, bodyStart, bodyEnd, where)
	}
	if !closed && p.swallowed < 0 {
		p.rp.Add(diag.SyntaxError, source.Range{Start: toks[i+2].Pos.Offset, End: toks[i+2].Pos.Offset + 1}, "the \"{\" of workflow "+w.Name.Name+" is never closed")
	}
	return w
}

// recoverWorkflowItems parses the workflow items in toks[bodyStart:bodyEnd]
// one at a time.
func (p *parser) recoverWorkflowItems(toks []lexer.Token, bodyStart, bodyEnd int, where string) []ast.Item {
	return p.recoverItems(toks, bodyStart, bodyEnd, wItemKeywords,
		func(fp *fastParser) (ast.Item, bool) {
			g, ok := fp.wItem()
			if !ok {
				return nil, false
			}
			return p.wItem(g), true
		},
		func(lex *lexer.PeekingLexer) (ast.Item, error) {
			g, err := wItemParser.ParseFromLexer(lex, participle.AllowTrailing(true))
			if err != nil {
				return nil, err
			}
			return p.wItem(g), nil
		},
		func(k int) int { return nextItemStart(toks, k, bodyEnd, wItemKeywords, true) },
		func(k, n int, errOf func() error) ast.Item {
			if n-k >= 2 && toks[k].Type == tIdent && toks[k+1].Type == tIdent &&
				(nodeKinds[toks[k].Value] || (n-k >= 3 && (isPunct(toks[k+2], "{") || toks[k+2].Value == "after" || toks[k+2].Value == "join"))) {
				return p.recoverNode(toks, k, n)
			}
			if p.recoverParams(toks, k, n, "output", strings.TrimPrefix(where, " of ")) {
				return &ast.Bad{Range: source.Range{Start: toks[k].Pos.Offset, End: endOf(toks, n)}}
			}
			if nodeKinds[toks[k].Value] && toks[k+1].Type != tIdent {
				p.rp.Add(diag.SyntaxError, p.tokenRange(toks[k+1]), fmt.Sprintf("expected a name after %q, found %s", toks[k].Value, describe(&toks[k+1])))
			} else {
				p.syntaxError(errOf(), context(toks[k])+where)
			}
			return &ast.Bad{Range: source.Range{Start: toks[k].Pos.Offset, End: endOf(toks, n)}}
		})
}

// recoverNode reads the node toks[i:j) whose header or body is broken.
func (p *parser) recoverNode(toks []lexer.Token, i, j int) ast.Item {
	n := &ast.NodeDecl{Range: source.Range{Start: toks[i].Pos.Offset, End: endOf(toks, j)}, Kind: p.ident(toks[i]), Name: p.ident(toks[i+1])}
	what := n.Kind.Name + " " + n.Name.Name
	bad := func(t lexer.Token, msg string) ast.Item {
		p.rp.Add(diag.SyntaxError, p.tokenRange(t), msg)
		return &ast.Bad{Range: n.Range, Kind: n.Kind, Name: n.Name}
	}
	// Header: after a, b  join x  {
	k := i + 2
	if k < j && toks[k].Value == "after" {
		k++
		for {
			if k >= j || toks[k].Type != tIdent {
				return bad(toks[k], fmt.Sprintf("expected a node name after %q in %s, found %s", toks[k-1].Value, what, describe(&toks[k])))
			}
			n.After = append(n.After, p.ident(toks[k]))
			k++
			if k < j && isPunct(toks[k], ",") {
				k++
				continue
			}
			break
		}
	}
	if k < j && toks[k].Value == "join" {
		if k+1 >= j || toks[k+1].Type != tIdent {
			return bad(toks[k+1], fmt.Sprintf("expected a join mode (all, any, settled or first) after \"join\" in %s, found %s", what, describe(&toks[k+1])))
		}
		n.Join = p.ident(toks[k+1])
		k += 2
	}
	if k >= j || !isPunct(toks[k], "{") {
		return bad(toks[k], fmt.Sprintf("expected \"{\" to start the body of %s, found %s", what, describe(&toks[k])))
	}
	open := toks[k]
	bodyStart, bodyEnd := k+1, j
	if c := closingBrace(toks, bodyStart, j); c >= 0 {
		bodyEnd = c
		n.End = endOf(toks, c+1)
		if c+1 < j {
			p.syntaxError(&participle.UnexpectedTokenError{Unexpected: toks[c+1]}, "workflow after the end of "+what)
		}
	} else if p.swallowed < 0 {
		p.rp.Add(diag.SyntaxError, source.Range{Start: open.Pos.Offset, End: open.Pos.Offset + 1}, fmt.Sprintf("the \"{\" of %s is never closed", what))
	}
	n.Items = p.recoverItems(toks, bodyStart, bodyEnd, nodeItemKeywords,
		func(fp *fastParser) (ast.Item, bool) {
			g, ok := fp.item()
			if !ok {
				return nil, false
			}
			return p.item(g), true
		},
		func(lex *lexer.PeekingLexer) (ast.Item, error) {
			g, err := itemParser.ParseFromLexer(lex, participle.AllowTrailing(true))
			if err != nil {
				return nil, err
			}
			return p.item(g), nil
		},
		func(k int) int { return nextItemStart(toks, k, bodyEnd, nodeItemKeywords, false) },
		func(k, e int, errOf func() error) ast.Item {
			if p.recoverParams(toks, k, e, "with", what) {
				return &ast.Bad{Range: source.Range{Start: toks[k].Pos.Offset, End: endOf(toks, e)}}
			}
			if toks[k].Type == tIdent {
				p.syntaxError(errOf(), "`"+toks[k].Value+"` item of "+what)
			} else {
				p.syntaxError(errOf(), "the body of "+what)
			}
			return &ast.Bad{Range: source.Range{Start: toks[k].Pos.Offset, End: endOf(toks, e)}}
		})
	return n
}

// recoverParams reports the errors of a `key { name = expr ... }` block
// toks[k:e) (a node's `with`, a workflow's `output`) whose parse failed, one
// parameter at a time: every `name =` starts a parameter (a single "="
// cannot occur inside an expression), so an error in one parameter does not
// hide the errors of the next. It reports nothing and returns false when the
// block is not such a block, is unclosed, or its parameters parse one by one
// (the error is then between them, and the block's own error says it best).
func (p *parser) recoverParams(toks []lexer.Token, k, e int, key, what string) bool {
	if e-k < 3 || toks[k].Type != tIdent || toks[k].Value != key || !isPunct(toks[k+1], "{") {
		return false
	}
	c := closingBrace(toks, k+2, e)
	if c < 0 || c+1 != e {
		return false
	}
	var starts []int
	for m := k + 2; m+1 < c; m++ {
		if toks[m].Type == tIdent && isPunct(toks[m+1], "=") {
			starts = append(starts, m)
		}
	}
	if len(starts) < 2 || starts[0] != k+2 {
		return false
	}
	starts = append(starts, c)
	var errs []error
	for i := 0; i+1 < len(starts); i++ {
		a, b := starts[i], starts[i+1]
		// Separators after a parameter are left out: one is the grammar's,
		// and an error in more of them is found by the block's own parse
		// (when every parameter parses alone, the block's error is used).
		for b-1 > a && (isPunct(toks[b-1], ";") || isPunct(toks[b-1], ",")) {
			b--
		}
		if _, err := paramParser.ParseFromLexer(peeking(withEOF(toks, a, b))); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		return false
	}
	for _, err := range errs {
		p.syntaxError(err, "`"+key+"` item of "+what)
	}
	return true
}

// tokenRange is the range of token t (a single position at the end of file).
func (p *parser) tokenRange(t lexer.Token) source.Range {
	return source.Range{Start: t.Pos.Offset, End: t.Pos.Offset + len(t.Value)}
}

package lsp

import (
	"sort"
	"strings"

	protocol "github.com/tliron/glsp/protocol_3_16"

	"github.com/wfc-lang/wfc/compiler"
	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/lang/ast"
	"github.com/wfc-lang/wfc/lang/source"
)

// completion offers what may be written at the cursor: keywords of the
// block it is in, node ids where ids go, handler names in `run "..."`,
// config fields in `with`, and names and fields in expressions and
// templates.
//
// The syntax tree of the latest text locates the declaration and item the
// cursor is in; the text of that item before the cursor, which may not
// parse yet, says where in the item it is (scan.go). Names and types come
// from compiler.Info of the latest compiled snapshot, which may be one edit
// older: completion never waits for a compilation when one has finished.
func (s *server) completion(p *protocol.CompletionParams) (any, error) {
	d := s.docs.get(p.TextDocument.URI)
	if d == nil {
		return nil, nil
	}
	snap := d.latest()
	info := d.infoSnapshot().result().Info
	off := snap.m.Offset(p.Position)
	trigger := ""
	if p.Context != nil && p.Context.TriggerKind == protocol.CompletionTriggerKindTriggerCharacter && p.Context.TriggerCharacter != nil {
		trigger = *p.Context.TriggerCharacter
	}
	if items, ok := pathCompletion(snap, off); ok || trigger == "/" { // workspace.go
		if items == nil {
			items = []protocol.CompletionItem{}
		}
		return protocol.CompletionList{Items: items}, nil
	}
	items := complete(snap, info, off, trigger, s.snippets)
	return protocol.CompletionList{IsIncomplete: false, Items: items}, nil
}

// cursor is the completion context.
type cursor struct {
	src       []byte
	m         *Mapper
	f         *ast.File
	info      *compiler.Info
	off       int
	wordStart int

	container string        // "top", "workflow", "handler", "node"
	header    bool          // in a node header, before its "{"
	node      *ast.NodeDecl // the node the cursor is in, when it parsed
	nodeKind  string
	nodeID    string
	local     int             // where the text of the current item starts
	item      ast.Item        // the node item the cursor is in
	frames    []frame         // open brackets of the local text, outermost first
	toks      []ltok          // tokens of the local text
	seen      map[string]bool // completion labels already added
	out       []protocol.CompletionItem
	replace   source.Range

	// trigger is the character that made the editor ask ("" when the
	// user asked): after a space, only node ids and setting values are
	// offered, after a quote only handler names, so that typing an
	// expression does not pop up a list at every space.
	trigger string
	allowed bool // the current context may answer the trigger

	g *nodeGraph // built on first use (rank.go)

	snippets bool // the client takes snippet syntax (snippets.go)

	words map[string]bool // identifiers of the latest text (textWords)
}

// A frame is an open bracket of the local text, or the container itself.
type frame struct {
	head     string // "node", "workflow", "handler", "top", "retry", "loop", "compensate", "branch", "with", "wfoutput", "input", "config", "output", "type", "expr", "list", "unknown"
	nodeKind string
	nodeID   string
	after    []string // a node's `after` list, from its header tokens
	open     string   // "{", "(", "[" or "" for the container
	start    int      // index of the first token inside
	boundary int      // index of the first token of the current item
}

func complete(snap *snapshot, info *compiler.Info, off int, trigger string, snippets bool) []protocol.CompletionItem {
	c := &cursor{src: snap.src(), m: snap.m, f: snap.ast(), info: info, off: off, seen: map[string]bool{}, trigger: trigger, snippets: snippets}
	c.wordStart = off
	for c.wordStart > 0 && isIdentByte(c.src[c.wordStart-1]) {
		c.wordStart--
	}
	if c.wordStart < off && c.src[c.wordStart] >= '0' && c.src[c.wordStart] <= '9' {
		return []protocol.CompletionItem{} // a number
	}
	c.replace = source.Range{Start: c.wordStart, End: off}
	if c.inComment() {
		return []protocol.CompletionItem{}
	}
	c.locate()
	c.run()
	if c.out == nil {
		return []protocol.CompletionItem{}
	}
	return c.out
}

func (c *cursor) inComment() bool {
	for _, cm := range c.f.Comments {
		if cm.Start < c.off && (c.off < cm.End || c.off == cm.End && strings.HasPrefix(cm.Text, "//")) {
			return true
		}
		if cm.Start < c.off && strings.HasPrefix(cm.Text, "/*") && !strings.HasSuffix(cm.Text, "*/") {
			return true
		}
	}
	return false
}

// inside reports whether off is within item n: after its first byte, and
// before its end or at it when the item does not end with a closing brace
// (the cursor right after `timeout 30s` is still on that item).
func (c *cursor) inside(r source.Range) bool {
	if !(r.Start < c.off) {
		return false
	}
	if c.off < r.End {
		return true
	}
	return c.off == r.End && r.End > 0 && r.End <= len(c.src) && c.src[r.End-1] != '}'
}

func (c *cursor) itemAt(items []ast.Item) ast.Item {
	for _, it := range items {
		if c.inside(it.Rng()) {
			return it
		}
	}
	return nil
}

// lastBefore returns the start of the last item that starts before the
// cursor, or from when there is none: the local text starts there, so a
// half-written item before the cursor (`on_timeout `, `after a, `) is read
// even when the cursor is past its end. When that item did not parse, the
// local text starts one item earlier: recovery may have cut a half-written
// item in two (`routes x` and a bad `,`).
func (c *cursor) lastBefore(items []ast.Item, from int) int {
	start, prev := from, from
	var last ast.Item
	for _, it := range items {
		if r := it.Rng(); r.Start < c.off && r.Start >= start {
			prev, start, last = start, r.Start, it
		}
	}
	if _, bad := last.(*ast.Bad); bad {
		return prev
	}
	return start
}

// braceAfter returns the offset of the first "{" at or after from, before
// limit, or -1.
func (c *cursor) braceAfter(from, limit int) int {
	for i := from; i < limit && i < len(c.src); i++ {
		if c.src[i] == '{' {
			return i
		}
	}
	return -1
}

// locate finds the container and the start of the local text.
func (c *cursor) locate() {
	c.container = "top"
	c.local = c.lastBefore(c.f.Items, 0)
	top := c.itemAt(c.f.Items)
	w, ok := top.(*ast.Workflow)
	if !ok {
		return // a handler, an import or a broken declaration: read as text
	}
	from := w.Start
	if w.Name != nil {
		from = w.Name.End
	}
	brace := c.braceAfter(from, w.End)
	if brace < 0 || c.off <= brace {
		c.container = "header"
		return
	}
	c.container = "workflow"
	c.local = c.lastBefore(w.Items, brace+1)
	n, ok := c.itemAt(w.Items).(*ast.NodeDecl)
	if !ok {
		return
	}
	c.container, c.node, c.nodeKind, c.nodeID = "node", n, n.Kind.Name, n.Name.Name
	from = n.Name.End
	if n.Join != nil {
		from = n.Join.End
	} else if len(n.After) > 0 {
		from = n.After[len(n.After)-1].End
	}
	brace = c.braceAfter(from, n.End)
	if brace < 0 || c.off <= brace {
		c.header = true
		c.local = n.Start
		return
	}
	c.local = c.lastBefore(n.Items, brace+1)
	c.item = c.itemAt(n.Items)
}

// run scans the local text and decides what to offer.
func (c *cursor) run() {
	if c.container == "header" {
		return
	}
	sc, ok := c.scanFrames()
	if !ok {
		return
	}
	fr := c.frames[len(c.frames)-1]
	if c.header && len(c.frames) == 1 {
		c.completeHeader(c.toks)
		return
	}
	if sc.inString != nil {
		c.completeInString(*sc.inString)
		return
	}
	tail := c.toks[fr.boundary:]
	if fr.head == "expr" {
		c.completeExpr()
		return
	}
	if fr.head == "workflow" && len(tail) >= 2 && tail[0].kind == lWord && nodeKindWord(tail[0].text) && tail[1].kind == lWord {
		// The header of a node whose body is not there yet.
		c.nodeKind, c.nodeID = tail[0].text, tail[1].text
		c.completeHeader(tail)
		return
	}
	if len(tail) == 0 {
		c.completeItems(fr)
		return
	}
	prev := tail[len(tail)-1]
	switch prev.kind {
	case lPunct:
		switch prev.text {
		case ".":
			c.completeExpr()
		case "=>":
			c.completeNodeIDs(c.listed(tail), "")
		case ",":
			c.completeAfterComma(tail, fr)
		case "=":
			c.completeExpr()
		case ":", "<":
			if isTypeFrame(fr.head) {
				c.completeTypes()
			} else {
				c.completeExpr()
			}
		case ")", "]", "}":
			c.completeItems(fr)
		default:
			if isTypeFrame(fr.head) {
				return
			}
			c.completeExpr() // an operator
		}
	case lWord:
		switch {
		case len(tail) == 1 && fr.head == "workflow" && nodeKindWord(prev.text):
			// `task `: the node id comes next.
		case enumValues[prev.text] != nil && isSettingKey(tail, len(tail)-1):
			c.completeWords(enumValues[prev.text], protocol.CompletionItemKindEnumMember)
		case targetKeys[prev.text] && isSettingKey(tail, len(tail)-1):
			c.completeNodeIDs(nil, targetKind(prev.text))
		case (prev.text == "when" || prev.text == "while") && isSettingKey(tail, len(tail)-1):
			c.completeExpr()
		case prev.text == "in" && len(tail) >= 3 && tail[len(tail)-3].text == "for_each":
			c.completeExpr()
		case valueKeys[prev.text] && isSettingKey(tail, len(tail)-1), prev.text == "else", prev.text == "in":
		default:
			c.completeItems(fr)
		}
	default:
		c.completeItems(fr)
	}
}

// scanFrames scans the local text up to the word at the cursor: its
// tokens and its open brackets (c.toks, c.frames); false in a comment.
func (c *cursor) scanFrames() (localScan, bool) {
	text := string(c.src[c.local:c.wordStart])
	sc := scanLocal(text)
	if sc.inComment {
		return sc, false
	}
	c.toks = sc.toks
	base := frame{head: c.container, nodeKind: c.nodeKind, nodeID: c.nodeID}
	c.frames = []frame{base}
	for i, t := range c.toks {
		top := &c.frames[len(c.frames)-1]
		if t.kind != lPunct {
			continue
		}
		switch t.text {
		case "{":
			f := c.openBrace(i)
			f.open, f.start, f.boundary = "{", i+1, i+1
			c.frames = append(c.frames, f)
			c.header = false
		case "(", "[":
			head := "expr"
			if t.text == "[" && i > 0 && c.toks[i-1].kind == lWord && valueKeys[c.toks[i-1].text] {
				head = "list"
			}
			c.frames = append(c.frames, frame{head: head, open: t.text, start: i + 1, boundary: i + 1})
		case "}", ")", "]":
			if len(c.frames) > 1 {
				c.frames = c.frames[:len(c.frames)-1]
			}
			c.frames[len(c.frames)-1].boundary = i + 1
		case ";":
			top.boundary = i + 1
		}
	}
	return sc, true
}

func nodeKindWord(s string) bool {
	for _, k := range nodeKinds {
		if k == s {
			return true
		}
	}
	return false
}

// isSettingKey reports whether tail[i] starts an item: it is first in the
// item, or follows the end of a value.
func isSettingKey(tail []ltok, i int) bool {
	if i == 0 {
		return true
	}
	p := tail[i-1]
	switch p.kind {
	case lNumber, lString:
		return true
	case lWord:
		return true
	}
	return p.text == ")" || p.text == "]" || p.text == "}" || p.text == ";"
}

func isTypeFrame(head string) bool {
	switch head {
	case "input", "config", "output", "type":
		return true
	}
	return false
}

// openBrace decides what the "{" at token i opens.
func (c *cursor) openBrace(i int) frame {
	cur := c.frames[len(c.frames)-1]
	if cur.head == "expr" || cur.head == "with" || cur.head == "wfoutput" {
		// A CEL map literal (in an expression, or a with/output value).
		if cur.head == "expr" || i > 0 && c.toks[i-1].text != "{" {
			return frame{head: "expr"}
		}
	}
	if i == 0 {
		return frame{head: "unknown"}
	}
	prev := c.toks[i-1]
	if prev.kind == lPunct {
		switch prev.text {
		case ":":
			if isTypeFrame(cur.head) {
				return frame{head: "type"}
			}
			return frame{head: "expr"}
		case "=", "?", "(", "[", ",", "&&", "||", "+":
			return frame{head: "expr"}
		}
	}
	if prev.kind == lWord {
		switch prev.text {
		case "retry", "loop", "compensate", "branch", "config", "input", "finally":
			return frame{head: prev.text}
		case "with":
			return frame{head: "with"}
		case "output":
			if cur.head == "workflow" {
				return frame{head: "wfoutput"}
			}
			return frame{head: "output"}
		}
	}
	seg := c.toks[cur.boundary:i]
	if len(seg) >= 2 && seg[0].kind == lWord && seg[1].kind == lWord && nodeKindWord(seg[0].text) {
		return frame{head: "node", nodeKind: seg[0].text, nodeID: seg[1].text, after: afterNames(seg)}
	}
	if len(seg) > 0 && seg[0].kind == lWord {
		switch seg[0].text {
		case "workflow":
			return frame{head: "workflow"}
		case "handler":
			return frame{head: "handler"}
		}
	}
	return frame{head: "unknown"}
}

// completeHeader completes a node header: `task id after a, b join any`.
func (c *cursor) completeHeader(toks []ltok) {
	if len(toks) < 2 {
		return // the kind, then the id being typed
	}
	prev := toks[len(toks)-1]
	switch {
	case prev.text == "after" || prev.text == ",":
		c.completeNodeIDs(c.listed(toks), "after")
	case prev.text == "join":
		c.completeWords(enumValues["join"], protocol.CompletionItemKindEnumMember)
	case len(toks) == 2:
		c.completeWords([]string{"after", "join"}, protocol.CompletionItemKindKeyword)
	case prev.kind == lWord && len(toks) >= 4 && toks[len(toks)-2].text != "join":
		c.completeWords([]string{"join"}, protocol.CompletionItemKindKeyword)
	}
}

// listed returns the words of a target list ending the tokens, to leave
// them out of the suggestions.
func (c *cursor) listed(toks []ltok) map[string]bool {
	out := map[string]bool{}
	for i := len(toks) - 1; i >= 0; i-- {
		t := toks[i]
		if t.kind == lWord {
			out[t.text] = true
			continue
		}
		if t.text != "," {
			break
		}
	}
	return out
}

func (c *cursor) completeAfterComma(tail []ltok, fr frame) {
	j := len(tail) - 1 // the ","
	for j >= 2 && tail[j-1].kind == lWord && tail[j-2].text == "," {
		j -= 2
	}
	if j >= 2 && tail[j-1].kind == lWord {
		head := tail[j-2]
		if head.text == "=>" || head.kind == lWord && targetKeys[head.text] {
			c.completeNodeIDs(c.listed(tail), targetKind(head.text))
			return
		}
	}
	switch fr.head {
	case "with", "wfoutput":
		c.completeItems(fr)
	case "expr":
		c.completeExpr()
	}
}

// completeInString completes in a string literal: handler names after
// `run`, expressions in an open {{ of a template.
func (c *cursor) completeInString(t ltok) {
	body := t.text[stringBody(t):]
	rest := string(c.src[c.wordStart:c.off])
	if k := strings.LastIndex(body+rest, "{{"); k >= 0 && !strings.Contains((body + rest)[k:], "}}") {
		c.completeExpr()
		return
	}
	// The token before the string.
	var before *ltok
	for i := len(c.toks) - 1; i >= 0; i-- {
		if c.toks[i].start == t.start {
			if i > 0 {
				before = &c.toks[i-1]
			}
			break
		}
	}
	if before != nil && before.kind == lWord && before.text == "run" {
		start := c.local + t.start + stringBody(t)
		c.replace = source.Range{Start: start, End: c.off}
		c.completeHandlers()
	}
}

// completeItems offers the items of the block of frame fr.
func (c *cursor) completeItems(fr frame) {
	switch fr.head {
	case "top":
		ws := topItems
		if c.hasWorkflow() {
			ws = nil
			for _, w := range topItems {
				if w.name != "workflow" { // a file has one
					ws = append(ws, w)
				}
			}
		}
		c.addWords(fr.head, ws)
	case "workflow":
		c.addWords(fr.head, workflowItems)
	case "handler":
		c.addWords(fr.head, handlerItems)
	case "node":
		kind := fr.nodeKind
		have := map[string]bool{}
		if fr.open == "" && c.node != nil {
			for _, it := range c.node.Items {
				if k := ast.KeyOf(it); k != nil && it != c.item {
					have[k.Name] = true
				}
			}
		}
		var ws []word
		for _, w := range nodeItems {
			if contains(w.kinds, kind) && !have[w.name] {
				ws = append(ws, w)
			}
		}
		c.addWords(fr.head, ws)
	case "retry", "loop", "compensate", "branch", "finally":
		have := c.blockKeys(fr)
		var ws []word
		for _, w := range blockItems[fr.head] {
			if !have[w.name] || w.name == "when" { // a branch has many rules
				ws = append(ws, w)
			}
		}
		c.addWords(fr.head, ws)
	case "with":
		c.completeConfigFields()
	}
}

// hasWorkflow reports whether the file declares a workflow the cursor is
// not in.
func (c *cursor) hasWorkflow() bool {
	for _, it := range c.f.Items {
		if w, ok := it.(*ast.Workflow); ok && !c.inside(w.Rng()) {
			return true
		}
	}
	return false
}

// blockKeys returns the keys of the items of the block of frame fr already
// written: before the cursor in the local text, and after it when the
// block parsed. Words inside nested brackets and values are not keys.
func (c *cursor) blockKeys(fr frame) map[string]bool {
	have := map[string]bool{}
	isKey := func(name string) bool {
		for _, w := range blockItems[fr.head] {
			if w.name == name {
				return true
			}
		}
		return false
	}
	depth := 0
	for i := fr.start; i < len(c.toks); i++ {
		t := c.toks[i]
		switch {
		case t.kind == lPunct && (t.text == "{" || t.text == "(" || t.text == "["):
			depth++
		case t.kind == lPunct && (t.text == "}" || t.text == ")" || t.text == "]"):
			depth--
		case depth == 0 && t.kind == lWord && isKey(t.text) && isSettingKey(c.toks[fr.start:i+1], i-fr.start):
			have[t.text] = true
		}
	}
	// The items after the cursor, from the syntax tree.
	if c.node == nil {
		return have
	}
	var block *ast.Block
	ast.Inspect(c.node, func(n ast.Node) bool {
		if b, ok := n.(*ast.Block); ok && b.Key != nil && b.Key.Name == fr.head && b.Range.Start < c.off && c.off < b.Range.End {
			block = b
		}
		return n != nil && block == nil
	})
	if block != nil {
		for _, it := range block.Items {
			if k := ast.KeyOf(it); k != nil && !k.Range.Contains(c.off) {
				have[k.Name] = true
			}
		}
	}
	return have
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// nodeScope returns the kind and id of the node the cursor is in, from the
// innermost node frame.
func (c *cursor) nodeScope() (kind, id string) {
	for i := len(c.frames) - 1; i >= 0; i-- {
		if c.frames[i].head == "node" {
			return c.frames[i].nodeKind, c.frames[i].nodeID
		}
	}
	return c.nodeKind, c.nodeID
}

func (c *cursor) inFrame(heads ...string) bool {
	for _, f := range c.frames {
		if contains(heads, f.head) {
			return true
		}
	}
	return false
}

// completeConfigFields offers the config fields of the handler of the
// node (or of its compensate block) not set yet.
func (c *cursor) completeConfigFields() {
	_, id := c.nodeScope()
	handler := ""
	if c.inFrame("compensate") {
		handler = c.compensateHandler()
	} else if c.inFrame("finally") {
		handler = c.finallyHandler()
	} else if ni := c.info.Nodes[id]; ni != nil && ni.Handler != "" {
		handler = ni.Handler
	} else if c.completeChildInputs(id) { // workspace.go
		return
	} else {
		handler = c.runSetting()
	}
	h := handlerOf(c.info, handler)
	if h == nil || h.Open || h.Config == nil {
		return
	}
	set := map[string]bool{}
	fr := c.frames[len(c.frames)-1]
	for i := fr.start; i+1 < len(c.toks); i++ {
		if c.toks[i].kind == lWord && c.toks[i+1].text == "=" {
			set[c.toks[i].text] = true
		}
	}
	for _, f := range h.Config.Fields {
		if set[f.Name] {
			continue
		}
		detail := f.Type.String()
		if f.Optional {
			detail = "optional " + detail
		} else {
			detail = "required " + detail
		}
		c.add(f.Name, protocol.CompletionItemKindField, detail, "config field of handler \""+h.Name+"\"", "0")
	}
}

// runSetting reads `run "x"` from the node's items or the local text.
func (c *cursor) runSetting() string {
	if c.node != nil {
		for _, it := range c.node.Items {
			if st, ok := it.(*ast.Setting); ok && st.Key.Name == "run" && st.Value != nil && st.Value.Str != nil {
				return st.Value.Str.Value
			}
		}
	}
	return c.runInTokens(0)
}

func (c *cursor) runInTokens(from int) string {
	for i := from; i+1 < len(c.toks); i++ {
		if c.toks[i].kind == lWord && c.toks[i].text == "run" && c.toks[i+1].kind == lString {
			t := c.toks[i+1]
			body := t.text[stringBody(t):]
			return strings.TrimRight(body, `"'`)
		}
	}
	return ""
}

func (c *cursor) compensateHandler() string {
	if c.node != nil {
		for _, it := range c.node.Items {
			if b, ok := it.(*ast.Block); ok && b.Key.Name == "compensate" {
				for _, bi := range b.Items {
					if st, ok := bi.(*ast.Setting); ok && st.Key.Name == "run" && st.Value != nil && st.Value.Str != nil {
						return st.Value.Str.Value
					}
				}
			}
		}
	}
	for i := len(c.frames) - 1; i >= 0; i-- {
		if c.frames[i].head == "compensate" {
			return c.runInTokens(c.frames[i].start)
		}
	}
	return ""
}

// finallyHandler is the handler the finally block around the cursor runs.
func (c *cursor) finallyHandler() string {
	for i := len(c.frames) - 1; i >= 0; i-- {
		if c.frames[i].head == "finally" {
			return c.runInTokens(c.frames[i].start)
		}
	}
	return ""
}

func (c *cursor) completeHandlers() {
	c.allowed = true
	names := map[string]*compiler.HandlerInfo{}
	for n, h := range builtins {
		names[n] = h
	}
	for n, h := range c.info.Handlers {
		names[n] = h
	}
	keys := make([]string, 0, len(names))
	for n := range names {
		keys = append(keys, n)
	}
	sort.Strings(keys)
	for _, n := range keys {
		h := names[n]
		detail := "handler"
		if h.Builtin {
			detail = "built-in handler"
		}
		order := "0"
		if h.Builtin {
			order = "1"
		}
		c.add(n, protocol.CompletionItemKindModule, detail, h.Doc, order)
	}
}

// targetKind is the kind of node list a key starts, for completeNodeIDs.
func targetKind(key string) string {
	switch key {
	case "after", "back_to":
		return key
	}
	return ""
}

// nodeIDs lists the node ids in source order.
func (c *cursor) nodeIDs() []string {
	var ids []string
	if len(c.info.Order) > 0 {
		ids = c.info.Order
	} else {
		ids = make([]string, 0, len(c.info.Nodes))
		for id := range c.info.Nodes {
			ids = append(ids, id)
		}
		sort.Strings(ids)
	}
	// The compiled snapshot may be an edit older than the text: a node
	// whose name was being typed (`shi` of `ship`) is in it and not in the
	// text. Offer only names the text still has.
	words := c.textWords()
	kept := ids[:0:0]
	for _, id := range ids {
		if words[id] {
			kept = append(kept, id)
		}
	}
	return kept
}

// textWords returns the identifiers of the latest text, once per request.
func (c *cursor) textWords() map[string]bool {
	if c.words != nil {
		return c.words
	}
	c.words = map[string]bool{}
	src := c.src
	for i := 0; i < len(src); {
		if !isIdentByte(src[i]) {
			i++
			continue
		}
		j := i
		for j < len(src) && isIdentByte(src[j]) {
			j++
		}
		c.words[string(src[i:j])] = true
		i = j
	}
	return c.words
}

func (c *cursor) addNode(id, order string) {
	n := c.info.Nodes[id]
	detail := ""
	if n != nil {
		detail = n.Kind
		if n.Handler != "" {
			detail += " · run \"" + n.Handler + "\""
		}
	}
	doc := ""
	if n != nil {
		doc = n.Doc
	}
	c.add(id, protocol.CompletionItemKindFunction, detail, doc, order)
}

func (c *cursor) completeTypes() {
	for _, t := range typeNames {
		c.add(t, protocol.CompletionItemKindTypeParameter, "type", "", "0")
	}
}

func (c *cursor) completeWords(ws []string, kind protocol.CompletionItemKind) {
	c.allowed = c.trigger != "\""
	for _, w := range ws {
		c.add(w, kind, "", "", "0")
	}
}

func (c *cursor) addWords(head string, ws []word) {
	for _, w := range ws {
		c.add(w.name, protocol.CompletionItemKindKeyword, w.form, w.doc, "0")
	}
	for _, w := range ws {
		c.addSnippet(head, w) // snippets.go
	}
}

// add appends a completion item replacing the word before the cursor.
func (c *cursor) add(label string, kind protocol.CompletionItemKind, detail, doc, order string) {
	switch c.trigger {
	case " ", "\"":
		if !c.allowed {
			return
		}
	}
	if c.seen[label] {
		return
	}
	c.seen[label] = true
	k := kind
	sortText := order + label
	item := protocol.CompletionItem{
		Label:    label,
		Kind:     &k,
		SortText: &sortText,
		TextEdit: protocol.TextEdit{Range: c.m.Range(c.replace), NewText: label},
	}
	if detail != "" {
		d := detail
		item.Detail = &d
	}
	if doc != "" {
		item.Documentation = protocol.MarkupContent{Kind: protocol.MarkupKindMarkdown, Value: doc}
	}
	c.out = append(c.out, item)
}

// completeExpr completes in a CEL expression: after `a.b.` the fields of
// the type of a.b, which it reads from the identifier chain before the
// cursor and the declared types (the expression need not check); else the
// names in scope and CEL's functions.
func (c *cursor) completeExpr() {
	chain, ok := c.chain()
	if !ok {
		return // after a call or an index: the type is not known here
	}
	if len(chain) == 0 {
		c.completeScope()
		return
	}
	if len(chain) == 1 {
		if fns := celNamespace(chain[0]); len(fns) > 0 {
			for _, f := range fns {
				c.add(f, protocol.CompletionItemKindFunction, "function", "", "0")
			}
			return
		}
	}
	t, isNode := c.resolveChain(chain, c.wordStart)
	if isNode {
		n := c.info.Nodes[chain[0]]
		c.add("output", protocol.CompletionItemKindField, n.Output.String(), "the output of "+n.Kind+" "+n.ID, "0")
		if n.Loop {
			c.add("iteration", protocol.CompletionItemKindField, "int", "the iteration of "+n.ID+"'s loop (in its body), or how many it ran", "1")
		}
		if n.OnError {
			c.add("error", protocol.CompletionItemKindField, "{code: string, message: string}", "the failure of "+n.ID+", on its on_error path", "1")
		}
		return
	}
	if t == nil {
		return
	}
	for _, f := range fieldsOf(t) {
		detail := f.Type.String()
		if f.Optional {
			detail = "optional " + detail
		}
		c.add(f.Name, protocol.CompletionItemKindField, detail, "", "0")
	}
	for _, fn := range celMembers(t) {
		c.add(fn, protocol.CompletionItemKindMethod, "function", "", "1")
	}
}

// chain returns the identifiers of `a.b.c.` before the word at the cursor
// ([a b c]); ok is false when the operand before a dot is not a name.
func (c *cursor) chain() ([]string, bool) {
	var parts []string
	j := c.wordStart
	for {
		k := j
		for k > c.local && (c.src[k-1] == ' ' || c.src[k-1] == '\t' || c.src[k-1] == '\n' || c.src[k-1] == '\r') {
			k--
		}
		if k == c.local || c.src[k-1] != '.' {
			return parts, true
		}
		k--
		for k > c.local && (c.src[k-1] == ' ' || c.src[k-1] == '\t' || c.src[k-1] == '\n' || c.src[k-1] == '\r') {
			k--
		}
		e := k
		for k > c.local && isIdentByte(c.src[k-1]) {
			k--
		}
		if k == e {
			return nil, false
		}
		parts = append([]string{string(c.src[k:e])}, parts...)
		j = k
		if len(parts) > 32 {
			return nil, false
		}
	}
}

// resolveChain returns the type of the value the chain names; isNode is set
// when the chain is just a node id (whose only field is output).
//
// end is where the chain ends: a macro variable is looked up in the calls
// open there.
func (c *cursor) resolveChain(chain []string, end int) (t *ir.Type, isNode bool) {
	root := chain[0]
	_, self := c.nodeScope()
	mv := c.macroVar(root, end)
	switch {
	case mv != nil:
		t = mv
	case root == "input" && !c.localVar("input"):
		t = c.inputType()
	case root == "run" && !c.localVar("run"):
		// The ended run's metadata in finally, its id elsewhere.
		t = compiler.RunType(c.inFrame("finally"))
	case root == "output" && c.selfScope():
		if n := c.info.Nodes[self]; n != nil {
			t = n.Output
		}
	case c.localVar(root):
		t = c.forEachElem()
	case c.info.Nodes[root] != nil:
		if len(chain) == 1 {
			return nil, true
		}
		if chain[1] != "output" {
			return nil, false
		}
		t = c.info.Nodes[root].Output
		chain = chain[1:]
	default:
		return nil, false
	}
	for _, p := range chain[1:] {
		t = fieldType(t, p)
		if t == nil {
			return nil, false
		}
	}
	return t, false
}

// comprehensions are the macros that bind a variable: xs.exists(e, …).
var comprehensions = map[string]bool{"all": true, "exists": true, "exists_one": true, "filter": true, "map": true}

// macroVar returns the type of name when it is the variable of a
// comprehension macro open at end: in `xs.exists(e, e.`, the element type
// of xs (a string for a map's keys); nil otherwise. Strings in between
// are not skipped: a bracket in one may hide the call.
func (c *cursor) macroVar(name string, end int) *ir.Type {
	if bs := c.macroVars(name, end); len(bs) > 0 {
		return bs[0].elem // the innermost hides the others
	}
	return nil
}

// A macroBinding is the variable of a comprehension macro open at the
// cursor, and its type (nil when unknown).
type macroBinding struct {
	name string
	elem *ir.Type
}

// macroVars lists the variables of the comprehension macros open at end,
// innermost first; only those called name unless name is "".
func (c *cursor) macroVars(name string, end int) []macroBinding {
	var out []macroBinding
	depth := 0
	for p := end - 1; p >= c.local; p-- {
		switch c.src[p] {
		case ')', ']', '}':
			depth++
			continue
		case '[', '{':
			if depth > 0 {
				depth--
			}
			continue
		case '(':
			if depth > 0 {
				depth--
				continue
			}
		default:
			continue
		}
		// An open call: `recv.macro(v,`?
		k := c.skipSpace(p+1, end)
		v := k
		for v < end && isIdentByte(c.src[v]) {
			v++
		}
		if v == k || name != "" && string(c.src[k:v]) != name || c.skipSpace(v, end) >= end || c.src[c.skipSpace(v, end)] != ',' {
			continue
		}
		m := c.skipSpaceBack(p)
		ms := m
		for ms > c.local && isIdentByte(c.src[ms-1]) {
			ms--
		}
		dot := c.skipSpaceBack(ms)
		if !comprehensions[string(c.src[ms:m])] || dot <= c.local || c.src[dot-1] != '.' {
			continue
		}
		b := macroBinding{name: string(c.src[k:v])}
		if recv := c.identsEnding(dot - 1); len(recv) > 0 {
			switch rt, _ := c.resolveChain(recv, dot-1); {
			case rt == nil:
			case rt.Kind == ir.KindList:
				b.elem = rt.Elem
			case rt.Kind == ir.KindMap:
				b.elem = &ir.Type{Kind: ir.KindString}
			}
		}
		out = append(out, b)
	}
	return out
}

func (c *cursor) skipSpace(i, end int) int {
	for i < end && (c.src[i] == ' ' || c.src[i] == '\t' || c.src[i] == '\n' || c.src[i] == '\r') {
		i++
	}
	return i
}

func (c *cursor) skipSpaceBack(i int) int {
	for i > c.local && (c.src[i-1] == ' ' || c.src[i-1] == '\t' || c.src[i-1] == '\n' || c.src[i-1] == '\r') {
		i--
	}
	return i
}

// identsEnding reads the identifier chain `a.b.c` that ends at e.
func (c *cursor) identsEnding(e int) []string {
	var parts []string
	for len(parts) <= 32 {
		k := c.skipSpaceBack(e)
		end := k
		for k > c.local && isIdentByte(c.src[k-1]) {
			k--
		}
		if k == end {
			return nil
		}
		parts = append([]string{string(c.src[k:end])}, parts...)
		j := c.skipSpaceBack(k)
		if j == c.local || c.src[j-1] != '.' {
			return parts
		}
		e = j - 1
	}
	return nil
}

func (c *cursor) inputType() *ir.Type {
	ins := make([]*compiler.InputInfo, 0, len(c.info.Inputs))
	for _, in := range c.info.Inputs {
		ins = append(ins, in)
	}
	sort.Slice(ins, func(i, j int) bool {
		a, b := ins[i], ins[j]
		if a.Decl != nil && b.Decl != nil {
			return a.Decl.Start < b.Decl.Start
		}
		return a.Name < b.Name
	})
	t := &ir.Type{Kind: ir.KindObject}
	for _, in := range ins {
		it := ir.Type{Kind: ir.KindAny}
		if in.Type != nil {
			it = *in.Type
		}
		t.Fields = append(t.Fields, ir.Field{Name: in.Name, Type: it, Optional: !in.Required})
	}
	return t
}

// selfScope reports whether `output` names the node's own output here: in
// its branch, loop and compensate blocks.
func (c *cursor) selfScope() bool {
	if c.inFrame("branch", "loop", "compensate") {
		return true
	}
	if c.item != nil {
		if k := ast.KeyOf(c.item); k != nil {
			switch k.Name {
			case "branch", "loop", "compensate":
				return true
			}
		}
	}
	return false
}

// forEach returns the node's for_each item.
func (c *cursor) forEach() *ast.ForEach {
	if c.node == nil {
		return nil
	}
	for _, it := range c.node.Items {
		if fe, ok := it.(*ast.ForEach); ok {
			return fe
		}
	}
	return nil
}

// localVar reports whether name is the for_each variable, visible in the
// node's with block.
func (c *cursor) localVar(name string) bool {
	fe := c.forEach()
	return fe != nil && fe.Var != nil && fe.Var.Name == name && c.inFrame("with")
}

func (c *cursor) forEachElem() *ir.Type {
	fe := c.forEach()
	if fe == nil || fe.Items == nil {
		return nil
	}
	if ei := c.info.Exprs[fe.Items]; ei != nil && ei.Type != nil && ei.Type.Kind == ir.KindList {
		return ei.Type.Elem
	}
	return nil
}

// completeScope offers the names an expression may start with.
func (c *cursor) completeScope() {
	// (A workflow that does not parse yet is read from the top: its
	// frames say the cursor is in it.)
	if c.container != "top" && c.container != "handler" || c.inFrame("workflow") {
		c.add("input", protocol.CompletionItemKindVariable, "the workflow's inputs", "", "0")
		if c.inFrame("finally") {
			c.add("run", protocol.CompletionItemKindVariable, "the ended run: id, workflow, status, error, started_at, ended_at, duration, failed_nodes", "", "0")
		} else {
			c.add("run", protocol.CompletionItemKindVariable, "the run: id", "", "0")
		}
		if c.selfScope() {
			c.add("output", protocol.CompletionItemKindVariable, "this node's output", "", "0")
		}
		for _, b := range c.macroVars("", c.wordStart) {
			c.add(b.name, protocol.CompletionItemKindVariable, b.elem.String(), "macro variable", "0")
		}
		if fe := c.forEach(); fe != nil && fe.Var != nil && c.inFrame("with") {
			c.add(fe.Var.Name, protocol.CompletionItemKindVariable, "for_each variable", "", "0")
			if fe.Index != nil {
				c.add(fe.Index.Name, protocol.CompletionItemKindVariable, "int", "for_each index", "0")
			}
		}
		c.completeReadable("1")
	}
	for _, w := range []string{"true", "false", "null"} {
		c.add(w, protocol.CompletionItemKindConstant, "", "", "2")
	}
	for _, fn := range celGlobals() {
		c.add(fn, protocol.CompletionItemKindFunction, "function", "", "3")
	}
}

package lsp

import (
	"errors"
	"fmt"
	"strings"

	protocol "github.com/tliron/glsp/protocol_3_16"

	"github.com/wfc-lang/wfc/compiler"
	"github.com/wfc-lang/wfc/lang/ast"
	"github.com/wfc-lang/wfc/lang/diag"
	"github.com/wfc-lang/wfc/lang/source"
)

// hover shows what the cursor is on: a node, an input, a handler, a field
// of a node's output, the CEL type of the expression under the cursor, or
// the meaning of a keyword.
func (s *server) hover(p *protocol.HoverParams) (*protocol.Hover, error) {
	snap := s.snapshotFor(p.TextDocument.URI)
	if snap == nil {
		return nil, nil
	}
	res := snap.result()
	off := snap.m.Offset(p.Position)
	text, r, ok := hoverText(res, off)
	if !ok {
		return nil, nil
	}
	rng := snap.m.Range(r)
	return &protocol.Hover{Contents: protocol.MarkupContent{Kind: protocol.MarkupKindMarkdown, Value: text}, Range: &rng}, nil
}

func hoverText(res *compiler.Result, off int) (string, source.Range, bool) {
	if sym, ok := symbolAt(res, off); ok {
		if text := describe(res, sym); text != "" {
			return text, sym.at, true
		}
	}
	if l, ok := localAt(res, off); ok {
		return l.text, l.at, true
	}
	if e, ei := exprAt(res, off); ei != nil {
		if sub, ok := ei.TypeAt(off); ok {
			return fmt.Sprintf("```cel\n%s\n```\ntype `%s`", clip(res.File.Text(sub.Range)), sub.Type), sub.Range, true
		}
		if ei.Type != nil {
			return fmt.Sprintf("```cel\n%s\n```\ntype `%s`", clip(e.Text), ei.Type.String()), e.Range, true
		}
	}
	if block, k := keywordAt(res.AST, off); k != nil {
		if w, ok := wordDoc(block, k.Name); ok {
			return fmt.Sprintf("```wf\n%s\n```\n%s", w.form, w.doc), k.Range, true
		}
	}
	return "", source.Range{}, false
}

// joinRule says in words when a node with several sources runs
// (docs/language.md §7.3); "" for a node with fewer.
func joinRule(n *compiler.NodeInfo) string {
	if len(n.Sources) < 2 {
		return ""
	}
	names := make([]string, len(n.Sources))
	for i, s := range n.Sources {
		names[i] = "`" + s + "`"
	}
	list := func(conj string) string {
		return strings.Join(names[:len(names)-1], ", ") + " " + conj + " " + names[len(names)-1]
	}
	mode := n.Join
	if mode == "" {
		mode = "all"
	}
	for _, m := range joinModes { // words.go
		if m.name == mode {
			return fmt.Sprintf(m.rule, list(m.conj))
		}
	}
	return fmt.Sprintf("**join %s** of %s.", mode, list("and"))
}

// clip shortens a long expression for a hover title.
func clip(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// describe renders the hover of a symbol in Markdown.
func describe(res *compiler.Result, sym symbol) string {
	info := res.Info
	var b strings.Builder
	switch sym.kind {
	case compiler.RefNode:
		n := info.Nodes[sym.name]
		if n == nil {
			return ""
		}
		header := n.Kind + " " + n.ID
		if n.Decl != nil && len(n.Decl.After) > 0 {
			names := make([]string, len(n.Decl.After))
			for i, a := range n.Decl.After {
				names[i] = a.Name
			}
			header += " after " + strings.Join(names, ", ")
		}
		fmt.Fprintf(&b, "```wf\n%s\n```\n", header)
		if n.Doc != "" {
			fmt.Fprintf(&b, "%s\n\n", n.Doc)
		}
		if rule := joinRule(n); rule != "" {
			fmt.Fprintf(&b, "%s\n\n", rule)
		}
		if n.Kind == "task" && n.Handler != "" {
			fmt.Fprintf(&b, "runs handler `%s`", n.Handler)
			if h := handlerOf(info, n.Handler); h != nil && h.Doc != "" {
				fmt.Fprintf(&b, ": %s", h.Doc)
			}
			b.WriteString("\n\n")
		}
		if n.Output != nil {
			fmt.Fprintf(&b, "```wf\n%s\n```", formatBlock(n.ID+".output", n.Output))
		}
	case compiler.RefInput:
		in := info.Inputs[sym.name]
		if in == nil {
			return ""
		}
		opt := ""
		if in.Decl != nil && in.Decl.Optional {
			opt = "?"
		}
		fmt.Fprintf(&b, "```wf\ninput.%s%s: %s\n```\n", in.Name, opt, in.Type.String())
		switch {
		case in.Decl != nil && in.Decl.Default != nil:
			fmt.Fprintf(&b, "optional, default `%s`", clip(in.Decl.Default.Text))
		case in.Required:
			b.WriteString("required")
		default:
			fmt.Fprintf(&b, "optional: test it with `has(input.%s)`", in.Name)
		}
	case compiler.RefHandler:
		h := handlerOf(info, sym.name)
		if h == nil {
			return ""
		}
		fmt.Fprintf(&b, "```wf\nhandler %q\n```\n", h.Name)
		if h.Builtin {
			b.WriteString("built in")
			if h.Doc != "" {
				b.WriteString(": ")
			}
		}
		if h.Doc != "" {
			b.WriteString(h.Doc)
		}
		b.WriteString("\n\n")
		if h.Open {
			b.WriteString("config: any fields; output: one field per `with` entry")
		} else {
			fmt.Fprintf(&b, "```wf\n%s\n%s\n```", formatBlock("config", h.Config), formatBlock("output", h.Output))
		}
	case compiler.RefField:
		id, path, _ := strings.Cut(sym.name, ".")
		n := info.Nodes[id]
		if n == nil {
			return ""
		}
		t := n.Output
		for _, f := range strings.Split(path, ".") {
			t = fieldType(t, f)
		}
		fmt.Fprintf(&b, "```wf\n%s.output.%s: %s\n```\nfield of the output of %s %s", id, path, t.String(), n.Kind, id)
	}
	return b.String()
}

// exprAt returns the innermost checked expression that contains off.
func exprAt(res *compiler.Result, off int) (*ast.Expr, *compiler.ExprInfo) {
	var best *ast.Expr
	var bestInfo *compiler.ExprInfo
	if res.AST == nil {
		return nil, nil
	}
	ast.Inspect(res.AST, func(n ast.Node) bool {
		if n == nil {
			return false
		}
		r := n.Rng()
		if off < r.Start || off > r.End {
			return false
		}
		if e, ok := n.(*ast.Expr); ok {
			if ei := res.Info.Exprs[e]; ei != nil && (best == nil || e.Len() <= best.Len()) {
				best, bestInfo = e, ei
			}
		}
		return true
	})
	return best, bestInfo
}

// keywordAt returns the keyword identifier at off (an item's key or a node's
// kind) and the block it is in: "node", "workflow", "handler", "retry", ...
func keywordAt(f *ast.File, off int) (string, *ast.Ident) {
	if f == nil {
		return "", nil
	}
	var block string
	var found *ast.Ident
	var stack []ast.Node
	ast.Inspect(f, func(n ast.Node) bool {
		if n == nil {
			stack = stack[:len(stack)-1]
			return false
		}
		r := n.Rng()
		if off < r.Start || off > r.End || found != nil {
			return false
		}
		if it, ok := n.(ast.Item); ok {
			if k := ast.KeyOf(it); k != nil && k.Range.Contains(off) {
				found = k
				switch parent := parentOf(stack).(type) {
				case *ast.NodeDecl:
					block = "node"
				case *ast.Workflow:
					block = "workflow"
				case *ast.Handler:
					block = "handler"
				case *ast.Block:
					block = parent.Key.Name
				}
				if _, isNode := it.(*ast.NodeDecl); isNode {
					block = "workflow"
				}
				return false
			}
		}
		stack = append(stack, n)
		return true
	})
	return block, found
}

func parentOf(stack []ast.Node) ast.Node {
	if len(stack) == 0 {
		return nil
	}
	return stack[len(stack)-1]
}

// symbolUnder returns the document's snapshot and compiler result and the
// symbol at the position; ok is false when the document is not open or no
// symbol is there.
func (s *server) symbolUnder(uri protocol.DocumentUri, pos protocol.Position) (*snapshot, *compiler.Result, symbol, bool) {
	snap := s.snapshotFor(uri)
	if snap == nil {
		return nil, nil, symbol{}, false
	}
	res := snap.result()
	sym, ok := symbolAt(res, snap.m.Offset(pos))
	return snap, res, sym, ok
}

// definition jumps from a use of a node, input, handler or output field to
// its declaration.
func (s *server) definition(p *protocol.DefinitionParams) (any, error) {
	if locs, ok := s.pathDefinition(p.TextDocument.URI, p.Position); ok { // workspace.go
		return locs, nil
	}
	snap, res, sym, ok := s.symbolUnder(p.TextDocument.URI, p.Position)
	if !ok {
		if snap == nil {
			return nil, nil
		}
		// for_each variables, import paths.
		l, ok := localAt(res, snap.m.Offset(p.Position))
		switch {
		case !ok:
		case l.file != "":
			return []protocol.Location{{URI: pathToURI(l.file)}}, nil
		case l.decl.Len() > 0:
			return []protocol.Location{{URI: snap.uri, Range: snap.m.Range(l.decl)}}, nil
		}
		return nil, nil
	}
	file, r, ok := declRange(res, sym)
	if !ok {
		return nil, nil
	}
	uri, m := locate(snap, res, file)
	if m == nil {
		return nil, nil
	}
	return []protocol.Location{{URI: uri, Range: m.Range(r)}}, nil
}

// references lists the uses of the symbol under the cursor in the document
// (and, for a handler, in the other open documents).
func (s *server) references(p *protocol.ReferenceParams) ([]protocol.Location, error) {
	snap, res, sym, ok := s.symbolUnder(p.TextDocument.URI, p.Position)
	if !ok {
		return nil, nil
	}
	out := []protocol.Location{}
	for _, r := range symbolRefs(res, sym, p.Context.IncludeDeclaration) {
		out = append(out, protocol.Location{URI: snap.uri, Range: snap.m.Range(r)})
	}
	out = append(out, s.handlerRefsElsewhere(snap, res, sym, p.Context.IncludeDeclaration)...) // workspace.go
	return out, nil
}

// highlight marks the declaration and uses of the symbol under the cursor.
func (s *server) highlight(p *protocol.DocumentHighlightParams) ([]protocol.DocumentHighlight, error) {
	snap, res, sym, ok := s.symbolUnder(p.TextDocument.URI, p.Position)
	if !ok {
		return nil, nil
	}
	decl, declOK := source.Range{}, false
	if file, r, ok := declRange(res, sym); ok && file == res.File.Name {
		decl, declOK = r, true
	}
	out := []protocol.DocumentHighlight{}
	for _, r := range symbolRefs(res, sym, true) {
		kind := protocol.DocumentHighlightKindRead
		if declOK && r == decl {
			kind = protocol.DocumentHighlightKindWrite
		}
		out = append(out, protocol.DocumentHighlight{Range: snap.m.Range(r), Kind: &kind})
	}
	return out, nil
}

// renameTarget checks that the symbol at off can be renamed.
func renameTarget(res *compiler.Result, off int) (symbol, error) {
	for _, d := range res.Diags {
		if d.Severity == diag.Error && (strings.HasPrefix(string(d.Code), "WF0") || d.Code == diag.ExprSyntax) {
			return symbol{}, errors.New("the file has syntax errors; fix them first, or references in the broken parts would be missed")
		}
	}
	sym, ok := symbolAt(res, off)
	if !ok {
		return symbol{}, errNothingToRename
	}
	switch sym.kind {
	case compiler.RefNode, compiler.RefInput, compiler.RefField:
	case compiler.RefHandler:
		return symbol{}, errors.New("handlers cannot be renamed: other files may run them by name")
	default:
		return symbol{}, errors.New("only node ids, inputs and output fields can be renamed")
	}
	file, _, ok := declRange(res, sym)
	switch {
	case !ok && sym.kind == compiler.RefField:
		return symbol{}, fmt.Errorf("the field `%s` is not declared in this file (a built-in handler's or a child workflow's output)", fieldPath(sym.name))
	case !ok:
		return symbol{}, fmt.Errorf("`%s` is not declared in this file", sym.name)
	case file != res.File.Name:
		return symbol{}, fmt.Errorf("the field `%s` is declared in %s; rename it there", fieldPath(sym.name), file)
	}
	return sym, nil
}

var errNothingToRename = errors.New("there is no node id, input or field here to rename")

// fieldPath spells a field symbol's name "n.a.b" as n.output.a.b.
func fieldPath(name string) string {
	id, path, _ := strings.Cut(name, ".")
	return id + ".output." + path
}

// prepareRename tells the editor what range a rename would change.
func (s *server) prepareRename(p *protocol.PrepareRenameParams) (any, error) {
	snap := s.snapshotFor(p.TextDocument.URI)
	if snap == nil {
		return nil, nil
	}
	res := snap.result()
	sym, err := renameTarget(res, snap.m.Offset(p.Position))
	if errors.Is(err, errNothingToRename) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return protocol.RangeWithPlaceholder{Range: snap.m.Range(sym.at), Placeholder: sym.name}, nil
}

// rename renames a node id or an input everywhere in the document: its
// declaration, edges and targets, and its uses in expressions and templates.
func (s *server) rename(p *protocol.RenameParams) (*protocol.WorkspaceEdit, error) {
	snap := s.snapshotFor(p.TextDocument.URI)
	if snap == nil {
		return nil, nil
	}
	res := snap.result()
	sym, err := renameTarget(res, snap.m.Offset(p.Position))
	if err != nil {
		return nil, err
	}
	name := p.NewName
	switch {
	case !isIdent(name):
		return nil, fmt.Errorf("%q is not a valid name: use letters, digits and _, not starting with a digit", name)
	case reserved[name]:
		return nil, fmt.Errorf("`%s` is a reserved word", name)
	case name == sym.name:
		return &protocol.WorkspaceEdit{Changes: map[string][]protocol.TextEdit{}}, nil
	}
	switch sym.kind {
	case compiler.RefNode:
		if res.Info.Nodes[name] != nil {
			return nil, fmt.Errorf("a node named `%s` already exists", name)
		}
		if forEachVars(res.AST)[name] {
			return nil, fmt.Errorf("`%s` is a for_each variable", name)
		}
	case compiler.RefInput:
		if res.Info.Inputs[name] != nil {
			return nil, fmt.Errorf("an input named `%s` already exists", name)
		}
	case compiler.RefField:
		id, path, _ := strings.Cut(sym.name, ".")
		parent := ""
		if k := strings.LastIndexByte(path, '.'); k >= 0 {
			parent = path[:k]
		}
		if n := res.Info.Nodes[id]; n != nil {
			t := n.Output
			if parent != "" {
				for _, f := range strings.Split(parent, ".") {
					t = fieldType(t, f)
				}
			}
			if fieldType(t, name) != nil {
				return nil, fmt.Errorf("a field named `%s` already exists", name)
			}
		}
	}
	var edits []protocol.TextEdit
	for _, r := range symbolRefs(res, sym, true) {
		edits = append(edits, protocol.TextEdit{Range: snap.m.Range(r), NewText: name})
	}
	return &protocol.WorkspaceEdit{Changes: map[string][]protocol.TextEdit{snap.uri: edits}}, nil
}

func forEachVars(f *ast.File) map[string]bool {
	out := map[string]bool{}
	if f == nil {
		return out
	}
	ast.Inspect(f, func(n ast.Node) bool {
		if fe, ok := n.(*ast.ForEach); ok && fe.Var != nil {
			out[fe.Var.Name] = true
			if fe.Index != nil {
				out[fe.Index.Name] = true
			}
		}
		return n != nil
	})
	return out
}

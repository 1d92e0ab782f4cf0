package lsp

import (
	"strings"

	protocol "github.com/tliron/glsp/protocol_3_16"

	"github.com/wfc-lang/wfc/lang/ast"
	"github.com/wfc-lang/wfc/lang/source"
)

// documentSymbols returns the outline: handlers, and the workflow with its
// inputs, outputs, handlers and nodes. It reads the syntax tree only, so it
// works on files that do not compile.
func (s *server) documentSymbols(p *protocol.DocumentSymbolParams) (any, error) {
	snap := s.snapshotFor(p.TextDocument.URI)
	if snap == nil {
		return nil, nil
	}
	syms := outline(snap.m, snap.ast())
	if s.hierarchicalSymbols {
		return syms, nil
	}
	return flatten(snap.uri, syms, ""), nil
}

func outline(m *Mapper, f *ast.File) []protocol.DocumentSymbol {
	out := []protocol.DocumentSymbol{}
	for _, it := range f.Items {
		switch it := it.(type) {
		case *ast.Handler:
			out = append(out, handlerSymbol(m, it))
		case *ast.Workflow:
			out = append(out, workflowSymbol(m, it))
		}
	}
	return out
}

func docSymbol(m *Mapper, name, detail string, kind protocol.SymbolKind, r, sel source.Range) protocol.DocumentSymbol {
	if name == "" {
		name = "(unnamed)" // editors reject empty names
	}
	if sel.Start < r.Start || sel.End > r.End {
		sel = r
	}
	ds := protocol.DocumentSymbol{Name: name, Kind: kind, Range: m.Range(r), SelectionRange: m.Range(sel)}
	if detail != "" {
		ds.Detail = &detail
	}
	return ds
}

func handlerSymbol(m *Mapper, h *ast.Handler) protocol.DocumentSymbol {
	name := ""
	sel := h.Range
	if h.Name != nil {
		name, sel = h.Name.Value, h.Name.Range
	}
	ds := docSymbol(m, name, "handler", protocol.SymbolKindInterface, h.Range, sel)
	for _, it := range h.Items {
		if tb, ok := it.(*ast.TypeBlock); ok {
			ds.Children = append(ds.Children, fieldsSymbol(m, tb.Key.Name, tb.Range, tb.Key.Range, tb.Fields))
		}
	}
	return ds
}

func fieldsSymbol(m *Mapper, key string, r, keyRange source.Range, fields []*ast.Field) protocol.DocumentSymbol {
	ds := docSymbol(m, key, "", protocol.SymbolKindNamespace, r, keyRange)
	for _, f := range fields {
		detail := ""
		if f.Type != nil {
			detail = typeText(m, f.Type)
		}
		if f.Optional {
			detail = "optional " + detail
		}
		ds.Children = append(ds.Children, docSymbol(m, f.Name.Name, detail, protocol.SymbolKindField, f.Range, f.Name.Range))
	}
	return ds
}

// typeText is the source text of a type expression, on one line.
func typeText(m *Mapper, t *ast.Type) string {
	return strings.Join(strings.Fields(m.f.Text(t.Range)), " ")
}

func workflowSymbol(m *Mapper, w *ast.Workflow) protocol.DocumentSymbol {
	name, sel := "", w.Range
	if w.Name != nil {
		name, sel = w.Name.Name, w.Name.Range
	}
	ds := docSymbol(m, name, "workflow", protocol.SymbolKindModule, w.Range, sel)
	ds.Children = []protocol.DocumentSymbol{}
	for _, it := range w.Items {
		switch it := it.(type) {
		case *ast.InputBlock:
			in := fieldsSymbol(m, "input", it.Range, it.Key.Range, it.Fields)
			for i := range in.Children {
				in.Children[i].Kind = protocol.SymbolKindVariable
			}
			ds.Children = append(ds.Children, in)
		case *ast.ParamBlock:
			out := docSymbol(m, it.Key.Name, "", protocol.SymbolKindNamespace, it.Range, it.Key.Range)
			for _, p := range it.Params {
				out.Children = append(out.Children, docSymbol(m, p.Name.Name, "", protocol.SymbolKindProperty, p.Range, p.Name.Range))
			}
			ds.Children = append(ds.Children, out)
		case *ast.Handler:
			ds.Children = append(ds.Children, handlerSymbol(m, it))
		case *ast.NodeDecl:
			ds.Children = append(ds.Children, docSymbol(m, it.Name.Name, nodeDetail(it), nodeSymbolKind(it.Kind.Name), it.Range, it.Name.Range))
		case *ast.Bad:
			if it.Kind != nil && it.Name != nil {
				ds.Children = append(ds.Children, docSymbol(m, it.Name.Name, it.Kind.Name+" (does not parse)", nodeSymbolKind(it.Kind.Name), it.Range, it.Name.Range))
			}
		}
	}
	return ds
}

func nodeDetail(n *ast.NodeDecl) string {
	d := n.Kind.Name
	for _, it := range n.Items {
		if st, ok := it.(*ast.Setting); ok && st.Key.Name == "run" && st.Value != nil && st.Value.Str != nil {
			d += " · run " + st.Value.Str.Raw
		}
	}
	return d
}

func nodeSymbolKind(kind string) protocol.SymbolKind {
	switch kind {
	case "agent":
		return protocol.SymbolKindClass
	case "human":
		return protocol.SymbolKindEvent
	case "flow":
		return protocol.SymbolKindModule
	}
	return protocol.SymbolKindFunction
}

// flatten turns the outline into SymbolInformation for clients without
// hierarchical symbols.
func flatten(uri string, syms []protocol.DocumentSymbol, container string) []protocol.SymbolInformation {
	out := []protocol.SymbolInformation{}
	for _, ds := range syms {
		si := protocol.SymbolInformation{Name: ds.Name, Kind: ds.Kind, Location: protocol.Location{URI: uri, Range: ds.Range}}
		if container != "" {
			c := container
			si.ContainerName = &c
		}
		out = append(out, si)
		out = append(out, flatten(uri, ds.Children, ds.Name)...)
	}
	return out
}

// foldingRanges folds every block that spans lines, multi-line strings,
// block comments and runs of line comments.
func (s *server) foldingRanges(p *protocol.FoldingRangeParams) ([]protocol.FoldingRange, error) {
	snap := s.snapshotFor(p.TextDocument.URI)
	if snap == nil {
		return nil, nil
	}
	f := snap.ast()
	m := snap.m
	out := []protocol.FoldingRange{}
	add := func(r source.Range, kind string) {
		start, end := m.Position(r.Start), m.Position(r.End)
		endLine := end.Line
		// Keep a closing brace on its own line visible.
		if r.End > 0 && r.End <= len(m.f.Src) && m.f.Src[r.End-1] == '}' {
			ls := m.f.LineStart(int(end.Line) + 1)
			if strings.TrimSpace(string(m.f.Src[ls:r.End-1])) == "" && endLine > 0 {
				endLine--
			}
		}
		if endLine <= start.Line {
			return
		}
		fr := protocol.FoldingRange{StartLine: start.Line, EndLine: endLine}
		if kind != "" {
			k := kind
			fr.Kind = &k
		}
		out = append(out, fr)
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.Workflow, *ast.Handler, *ast.NodeDecl, *ast.Block, *ast.Branch, *ast.TypeBlock, *ast.InputBlock, *ast.ParamBlock:
			add(n.Rng(), "")
		case *ast.String:
			add(n.Range, "")
		case *ast.File:
			return true
		case nil:
			return false
		}
		return true
	})
	// Comments: a block comment, or consecutive // lines.
	var run *source.Range
	lastLine := -2
	for _, c := range f.Comments {
		if strings.HasPrefix(c.Text, "/*") {
			add(c.Range, string(protocol.FoldingRangeKindComment))
			continue
		}
		line := int(m.Position(c.Start).Line)
		if run != nil && line == lastLine+1 {
			run.End = c.End
		} else {
			if run != nil {
				add(*run, string(protocol.FoldingRangeKindComment))
			}
			r := c.Range
			run = &r
		}
		lastLine = line
	}
	if run != nil {
		add(*run, string(protocol.FoldingRangeKindComment))
	}
	return out, nil
}

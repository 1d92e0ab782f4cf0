package lsp

import (
	"strings"

	"github.com/wfc-lang/wfc/compiler"
	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/lang/ast"
	"github.com/wfc-lang/wfc/lang/source"
)

// A symbol is a declared name the cursor can be on: a node, an input, a
// handler, or a field of a node's output.
type symbol struct {
	kind compiler.RefKind
	name string       // node id, input name, handler name, or "node.field"
	at   source.Range // the occurrence under the cursor
	decl bool         // the occurrence is the declaration
}

// symbolAt finds the symbol at off: a reference the compiler recorded, or a
// declaration's name.
func symbolAt(res *compiler.Result, off int) (symbol, bool) {
	// A reference that contains off. The cursor just after a token touches
	// it too: a token the cursor is on wins over one it is just after, then
	// the shorter one.
	best, found := compiler.Ref{}, false
	rank := func(r source.Range) (int, int) {
		if off < r.End {
			return 0, r.Len()
		}
		return 1, r.Len()
	}
	for _, r := range res.Info.Refs {
		if !r.Range.Contains(off) {
			continue
		}
		a1, a2 := rank(r.Range)
		b1, b2 := rank(best.Range)
		if !found || a1 < b1 || a1 == b1 && a2 < b2 {
			best, found = r, true
		}
	}
	if found {
		return symbol{kind: best.Kind, name: best.Name, at: best.Range}, true
	}
	for _, d := range declarations(res) {
		if d.at.Contains(off) {
			return d, true
		}
	}
	return symbol{}, false
}

// declarations lists the declarations of the file with their name ranges:
// nodes (also those whose body did not parse), inputs and handlers declared
// in this file.
func declarations(res *compiler.Result) []symbol {
	var out []symbol
	if res.AST == nil {
		return nil
	}
	addHandler := func(h *ast.Handler) {
		if h.Name != nil {
			if hi := res.Info.Handlers[h.Name.Value]; hi != nil && hi.Decl == h {
				out = append(out, symbol{kind: compiler.RefHandler, name: hi.Name, at: h.Name.Range, decl: true})
				out = append(out, handlerFieldDeclarations(res, h)...)
			}
		}
	}
	for _, it := range res.AST.Items {
		switch it := it.(type) {
		case *ast.Handler:
			addHandler(it)
		case *ast.Workflow:
			for _, wi := range it.Items {
				switch wi := wi.(type) {
				case *ast.NodeDecl:
					if ni := res.Info.Nodes[wi.Name.Name]; ni != nil && ni.Decl == wi {
						out = append(out, symbol{kind: compiler.RefNode, name: ni.ID, at: wi.Name.Range, decl: true})
						out = append(out, fieldDeclarations(res, ni)...)
					}
				case *ast.Bad:
					if wi.Name != nil {
						if ni := res.Info.Nodes[wi.Name.Name]; ni != nil && ni.Decl == nil {
							out = append(out, symbol{kind: compiler.RefNode, name: ni.ID, at: wi.Name.Range, decl: true})
						}
					}
				case *ast.InputBlock:
					for _, f := range wi.Fields {
						if in := res.Info.Inputs[f.Name.Name]; in != nil && in.Decl == f {
							out = append(out, symbol{kind: compiler.RefInput, name: in.Name, at: f.Name.Range, decl: true})
						}
					}
				case *ast.Handler:
					addHandler(wi)
				}
			}
		}
	}
	return out
}

// fieldDeclarations lists the fields node n's output declares in this
// file: in its output block (nested ones too), in its handler's output
// schema, and, for the open handlers (cel, echo), in its with block. A
// field is named by its path from the node: "n.a.b".
func fieldDeclarations(res *compiler.Result, n *compiler.NodeInfo) []symbol {
	var out []symbol
	for _, it := range n.Decl.Items {
		switch it := it.(type) {
		case *ast.TypeBlock:
			if it.Key.Name == "output" {
				out = appendFieldDecls(out, n.ID, it.Fields)
			}
		case *ast.ParamBlock:
			if h := handlerOf(res.Info, n.Handler); it.Key.Name == "with" && h != nil && h.Open {
				for _, p := range it.Params {
					if p.Name != nil {
						out = append(out, symbol{kind: compiler.RefField, name: n.ID + "." + p.Name.Name, at: p.Name.Range, decl: true})
					}
				}
			}
		}
	}
	return out
}

// appendFieldDecls appends the declarations of fields fs (nested ones
// too), named by their path from prefix: "n.a.b".
func appendFieldDecls(out []symbol, prefix string, fs []*ast.Field) []symbol {
	for _, f := range fs {
		if f == nil || f.Name == nil {
			continue
		}
		name := prefix + "." + f.Name.Name
		out = append(out, symbol{kind: compiler.RefField, name: name, at: f.Name.Range, decl: true})
		if f.Type != nil && f.Type.Name == nil {
			out = appendFieldDecls(out, name, f.Type.Fields)
		}
	}
	return out
}

// handlerFieldDeclarations lists the fields of the output schema of a
// handler declared in this file, named after the first node that runs it
// ("n.a"); none when no node does.
func handlerFieldDeclarations(res *compiler.Result, h *ast.Handler) []symbol {
	if h.Name == nil {
		return nil
	}
	user := ""
	for _, id := range res.Info.Order {
		if n := res.Info.Nodes[id]; n != nil && n.Handler == h.Name.Value && n.Decl != nil {
			user = id
			break
		}
	}
	if user == "" {
		return nil
	}
	var out []symbol
	for _, it := range h.Items {
		if tb, ok := it.(*ast.TypeBlock); ok && tb.Key.Name == "output" {
			out = appendFieldDecls(out, user, tb.Fields)
		}
	}
	return out
}

// declRange returns the file and range of a symbol's declaration; ok is
// false for built-in handlers and names that are not declared.
func declRange(res *compiler.Result, sym symbol) (file string, r source.Range, ok bool) {
	main := res.File.Name
	switch sym.kind {
	case compiler.RefNode:
		for _, d := range declarations(res) {
			if d.kind == compiler.RefNode && d.name == sym.name {
				return main, d.at, true
			}
		}
	case compiler.RefInput:
		if in := res.Info.Inputs[sym.name]; in != nil && in.Decl != nil {
			return main, in.Decl.Name.Range, true
		}
	case compiler.RefHandler:
		if h := res.Info.Handlers[sym.name]; h != nil && h.Decl != nil {
			name := h.File
			if name == "" {
				name = main
			}
			return name, h.Decl.Name.Range, true
		}
	case compiler.RefField:
		return fieldDecl(res, sym.name)
	}
	return "", source.Range{}, false
}

// fieldDecl finds where the field of "node.field" (or "node.a.b", a
// nested field) is declared: in the node's output block, in its handler's
// output schema, or, for the open handlers (cel, echo), in its with block.
func fieldDecl(res *compiler.Result, name string) (string, source.Range, bool) {
	id, path, _ := strings.Cut(name, ".")
	field, rest, nested := strings.Cut(path, ".")
	ni := res.Info.Nodes[id]
	if ni == nil || ni.Decl == nil {
		return "", source.Range{}, false
	}
	// below descends from the declaration of the first field.
	below := func(file string, f *ast.Field) (string, source.Range, bool) {
		for _, p := range strings.Split(rest, ".") {
			if !nested {
				break
			}
			var next *ast.Field
			if f.Type != nil && f.Type.Name == nil {
				for _, sub := range f.Type.Fields {
					if sub != nil && sub.Name != nil && sub.Name.Name == p {
						next = sub
					}
				}
			}
			if next == nil {
				return "", source.Range{}, false
			}
			f = next
		}
		return file, f.Name.Range, true
	}
	var with *ast.ParamBlock
	for _, it := range ni.Decl.Items {
		switch it := it.(type) {
		case *ast.TypeBlock:
			if it.Key.Name == "output" {
				for _, f := range it.Fields {
					if f.Name.Name == field {
						return below(res.File.Name, f)
					}
				}
			}
		case *ast.ParamBlock:
			if it.Key.Name == "with" {
				with = it
			}
		}
	}
	if h := handlerOf(res.Info, ni.Handler); h != nil {
		if h.Decl != nil {
			for _, it := range h.Decl.Items {
				if tb, ok := it.(*ast.TypeBlock); ok && tb.Key.Name == "output" {
					for _, f := range tb.Fields {
						if f.Name.Name == field {
							file := h.File
							if file == "" {
								file = res.File.Name
							}
							return below(file, f)
						}
					}
				}
			}
		}
		if h.Open && with != nil && !nested {
			for _, p := range with.Params {
				if p.Name.Name == field {
					return res.File.Name, p.Name.Range, true
				}
			}
		}
	}
	if !nested {
		return childFieldDecl(res, ni, field)
	}
	return "", source.Range{}, false
}

// references returns every use of sym in the file, in source order, and
// its declaration first when withDecl is set and it is in this file.
func symbolRefs(res *compiler.Result, sym symbol, withDecl bool) []source.Range {
	var out []source.Range
	if withDecl {
		if file, r, ok := declRange(res, sym); ok && file == res.File.Name {
			out = append(out, r)
		}
	}
	seen := map[source.Range]bool{}
	for _, r := range out {
		seen[r] = true
	}
	// A field is every use of its declaration: a handler's output field
	// is read through each node that runs the handler.
	var same func(compiler.Ref) bool
	if sym.kind == compiler.RefField {
		if file, decl, ok := declRange(res, sym); ok {
			memo := map[string]bool{}
			same = func(r compiler.Ref) bool {
				v, ok := memo[r.Name]
				if !ok {
					f, d, ok := fieldDecl(res, r.Name)
					v = ok && f == file && d == decl
					memo[r.Name] = v
				}
				return v
			}
		}
	}
	for _, r := range res.Info.Refs {
		if r.Kind == sym.kind && (r.Name == sym.name || same != nil && same(r)) && !seen[r.Range] {
			seen[r.Range] = true
			out = append(out, r.Range)
		}
	}
	return out
}

// formatBlock writes an object type as a block, one field per line, for
// hovers.
func formatBlock(key string, t *ir.Type) string {
	if t == nil || t.Kind != ir.KindObject {
		return key + ": " + t.String()
	}
	if len(t.Fields) == 0 {
		return key + " {}"
	}
	var b strings.Builder
	b.WriteString(key + " {\n")
	for _, f := range t.Fields {
		b.WriteString("  " + f.String() + "\n")
	}
	b.WriteString("}")
	return b.String()
}

// fieldsOf returns the fields of an object type (through a list for
// nothing: a list has no fields).
func fieldsOf(t *ir.Type) []ir.Field {
	if t == nil || t.Kind != ir.KindObject {
		return nil
	}
	return t.Fields
}

func fieldType(t *ir.Type, name string) *ir.Type {
	for i, f := range fieldsOf(t) {
		if f.Name == name {
			return &fieldsOf(t)[i].Type
		}
	}
	return nil
}

// handlerOf returns the handler info for name: declared, imported or built
// in.
func handlerOf(info *compiler.Info, name string) *compiler.HandlerInfo {
	if h := info.Handlers[name]; h != nil {
		return h
	}
	return builtins[name]
}

var builtins = compiler.Builtins()

package lsp

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/wfc-lang/wfc/compiler"
	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/lang"
	"github.com/wfc-lang/wfc/lang/ast"
	"github.com/wfc-lang/wfc/lang/source"
)

// Hover and definition of the names the compiler keeps no references for:
// for_each variables (declared in the node, used in its with block), the
// entries of the workflow's output block, import paths, and the output
// fields of a flow node (declared in the child workflow's output block).

// A local is such a name under the cursor.
type local struct {
	at   source.Range // the occurrence under the cursor
	decl source.Range // its declaration in this file (Len 0: none)
	file string       // the file it leads to, when another (an import, a child)
	text string       // the hover
}

// localAt finds a for_each variable, a workflow output entry or an import
// path at off.
func localAt(res *compiler.Result, off int) (local, bool) {
	if res.AST == nil {
		return local{}, false
	}
	for _, it := range res.AST.Items {
		switch it := it.(type) {
		case *ast.Import:
			if it.Path != nil && it.Path.Range.Contains(off) {
				return importLocal(res, it), true
			}
		case *ast.Workflow:
			if !it.Range.Contains(off) {
				continue
			}
			for _, wi := range it.Items {
				switch wi := wi.(type) {
				case *ast.NodeDecl:
					if wi.Range.Contains(off) {
						return forEachLocal(res, wi, off)
					}
				case *ast.ParamBlock:
					if wi.Key == nil || wi.Key.Name != "output" {
						continue
					}
					for _, p := range wi.Params {
						if p.Name != nil && p.Name.Range.Contains(off) {
							t := "any"
							if ei := res.Info.Exprs[p.Value]; ei != nil && ei.Type != nil {
								t = ei.Type.String()
							}
							return local{at: p.Name.Range, decl: p.Name.Range,
								text: fmt.Sprintf("```wf\noutput.%s: %s\n```\nan output of workflow %s: a parent's flow node reads it as `node.output.%s`", p.Name.Name, t, it.Name.Name, p.Name.Name)}, true
						}
					}
				}
			}
		}
	}
	return local{}, false
}

// forEachLocal finds node n's for_each variable or index at off: its
// declaration, or a use in the with block (a name not after a dot).
func forEachLocal(res *compiler.Result, n *ast.NodeDecl, off int) (local, bool) {
	var fe *ast.ForEach
	var with *ast.ParamBlock
	for _, it := range n.Items {
		switch it := it.(type) {
		case *ast.ForEach:
			fe = it
		case *ast.ParamBlock:
			if it.Key != nil && it.Key.Name == "with" {
				with = it
			}
		}
	}
	if fe == nil || fe.Var == nil {
		return local{}, false
	}
	elem := "any"
	if fe.Items != nil {
		if ei := res.Info.Exprs[fe.Items]; ei != nil && ei.Type != nil && ei.Type.Kind == ir.KindList {
			elem = ei.Type.Elem.String()
		}
	}
	items := ""
	if fe.Items != nil {
		items = clip(fe.Items.Text)
	}
	describe := func(id *ast.Ident, at source.Range) local {
		if fe.Index != nil && id == fe.Index {
			return local{at: at, decl: id.Range, text: fmt.Sprintf("```wf\n%s: int\n```\nthe index of the element of `%s` this run of %s handles, from 0 (for_each index)", id.Name, items, n.Name.Name)}
		}
		return local{at: at, decl: id.Range, text: fmt.Sprintf("```wf\n%s: %s\n```\nthe element of `%s` this run of %s handles (for_each variable, visible in `with`)", id.Name, elem, items, n.Name.Name)}
	}
	for _, id := range []*ast.Ident{fe.Var, fe.Index} {
		if id != nil && id.Range.Contains(off) {
			return describe(id, id.Range), true
		}
	}
	if with == nil || !with.Range.Contains(off) {
		return local{}, false
	}
	src := res.File.Src
	start, end := off, off
	for start > 0 && isIdentByte(src[start-1]) {
		start--
	}
	for end < len(src) && isIdentByte(src[end]) {
		end++
	}
	if start == end {
		return local{}, false
	}
	k := start
	for k > 0 && (src[k-1] == ' ' || src[k-1] == '\t' || src[k-1] == '\n' || src[k-1] == '\r') {
		k--
	}
	if k > 0 && src[k-1] == '.' {
		return local{}, false // a field
	}
	name := string(src[start:end])
	for _, id := range []*ast.Ident{fe.Var, fe.Index} {
		if id != nil && id.Name == name {
			return describe(id, source.Range{Start: start, End: end}), true
		}
	}
	return local{}, false
}

// importLocal describes an import: the file it reads and the handlers it
// makes visible.
func importLocal(res *compiler.Result, im *ast.Import) local {
	path := resolvePath(res.File.Name, im.Path.Value)
	var names []string
	for _, h := range res.Info.Handlers {
		if h.File != "" && filepath.Clean(h.File) == filepath.Clean(path) {
			names = append(names, "`"+h.Name+"`")
		}
	}
	sort.Strings(names)
	text := fmt.Sprintf("```wf\nimport %q\n```\n`%s`", im.Path.Value, path)
	if len(names) > 0 {
		text += ": handlers " + strings.Join(names, ", ")
	}
	return local{at: im.Path.Range, file: path, text: text}
}

// childFieldDecl finds the declaration of field of a flow node's output:
// the entry of the child workflow's output block, in the child's file as
// the compiler read it.
func childFieldDecl(res *compiler.Result, n *compiler.NodeInfo, field string) (string, source.Range, bool) {
	if n.Kind != "flow" || n.Decl == nil {
		return "", source.Range{}, false
	}
	for _, it := range n.Decl.Items {
		st, ok := it.(*ast.Setting)
		if !ok || st.Key.Name != "uses" || st.Value == nil || st.Value.Str == nil {
			continue
		}
		path := resolvePath(res.File.Name, st.Value.Str.Value)
		f := res.Files[path]
		if f == nil {
			return "", source.Range{}, false
		}
		child, _ := lang.ParseFile(f)
		if child == nil {
			return "", source.Range{}, false
		}
		for _, ci := range child.Items {
			w, ok := ci.(*ast.Workflow)
			if !ok {
				continue
			}
			for _, wi := range w.Items {
				if pb, ok := wi.(*ast.ParamBlock); ok && pb.Key != nil && pb.Key.Name == "output" {
					for _, p := range pb.Params {
						if p.Name != nil && p.Name.Name == field {
							return path, p.Name.Range, true
						}
					}
				}
			}
		}
	}
	return "", source.Range{}, false
}

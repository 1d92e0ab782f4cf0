package compiler

import (
	"fmt"
	"strings"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/lang/ast"
	"github.com/wfc-lang/wfc/lang/diag"
	"github.com/wfc-lang/wfc/lang/source"
)

// The quick fixes of the diagnostics whose hint spells the edit. Each fix
// must leave a file that compiles without the diagnostic it fixes, so the
// placeholders it writes are values of the right type ("", 0, [] ...), not
// "..." or "<fallback>"; where no such value exists no fix is offered.

// zeroLiteral is a CEL literal of type t, or "" when t has none that
// every reader accepts (secrets, null).
func zeroLiteral(t *ir.Type) string {
	if t == nil {
		return ""
	}
	switch t.Kind {
	case ir.KindString:
		return `""`
	case ir.KindInt:
		return "0"
	case ir.KindNumber:
		return "0.0"
	case ir.KindBool:
		return "false"
	case ir.KindDuration:
		return `"0s"`
	case ir.KindList:
		return "[]"
	case ir.KindMap:
		return "{}"
	}
	return "" // an object type: {} is a map, which CEL does not take for it
}

// memberChain extends a read of x.output to the member chain that follows it
// (x.output.a.b) and returns its end and the names after `output`.
func memberChain(src []byte, end int) (int, []string) {
	var names []string
	for end < len(src) && src[end] == '.' {
		k := end + 1
		for k < len(src) && (src[k] == '_' || src[k] >= 'a' && src[k] <= 'z' || src[k] >= 'A' && src[k] <= 'Z' || k > end+1 && src[k] >= '0' && src[k] <= '9') {
			k++
		}
		if k == end+1 {
			break
		}
		names = append(names, string(src[end+1:k]))
		end = k
	}
	return end, names
}

// guardFix wraps the read r of x.output in has(x.output) ? read : zero,
// the zero value of the type of the member chain read. In a {{ }}
// template the zero of a string is not offered: its quotes could end the
// string the template is in.
func (s *state) guardFix(d *diag.Diagnostic, x *node, r read, e *ast.Expr) {
	end, names := memberChain(s.file.Src, r.rng.End)
	t := x.outType
	for _, name := range names {
		if t == nil || t.Kind != ir.KindObject {
			return
		}
		var next *ir.Type
		for i := range t.Fields {
			if t.Fields[i].Name == name {
				next = &t.Fields[i].Type
			}
		}
		t = next
	}
	zero := zeroLiteral(t)
	if zero == "" || strings.ContainsAny(zero, `"'`) && inTemplate(s.file.Src, e) {
		return
	}
	rng := source.Range{Start: r.rng.Start, End: end}
	text := s.file.Text(rng)
	d.WithFix(fmt.Sprintf("Guard with has(%s.output)", x.id), s.span(rng),
		fmt.Sprintf("(has(%s.output) ? %s : %s)", x.id, text, zero))
}

// afterFix adds x to n's `after` list.
func (s *state) afterFix(d *diag.Diagnostic, n, x *node) {
	if n.decl == nil || n.decl.Name == nil {
		return
	}
	if k := len(n.decl.After); k > 0 {
		last := n.decl.After[k-1]
		if last == nil {
			return
		}
		d.WithFix(fmt.Sprintf("Add `after %s` to %s", x.id, n.id), s.span(source.Range{Start: last.Range.End, End: last.Range.End}), ", "+x.id)
		return
	}
	end := n.decl.Name.Range.End
	d.WithFix(fmt.Sprintf("Add `after %s` to %s", x.id, n.id), s.span(source.Range{Start: end, End: end}), " after "+x.id)
}

// runFix adds `run "noop"` to a task without `run` ("echo" when it has a
// `with`, which noop would reject): a placeholder that compiles.
func (s *state) runFix(d *diag.Diagnostic, n *node) {
	if n.decl == nil || n.kind != "task" {
		return
	}
	handler := "noop"
	if n.with != nil {
		handler = "echo"
	}
	item := `run "` + handler + `"`
	title := "Add `" + item + "`"
	src := string(s.file.Src)
	if len(n.decl.Items) > 0 {
		first := n.decl.Items[0].Rng().Start
		open := strings.LastIndexByte(src[:first], '{')
		if open < 0 {
			return
		}
		sep := " "
		if gap := src[open+1 : first]; strings.Contains(gap, "\n") {
			sep = gap[strings.LastIndexByte(gap, '\n'):]
		}
		d.WithFix(title, s.span(source.Range{Start: first, End: first}), item+sep)
		return
	}
	from := n.decl.Name.Range.End
	if k := len(n.decl.After); k > 0 && n.decl.After[k-1] != nil {
		from = n.decl.After[k-1].Range.End
	}
	if n.decl.Join != nil {
		from = n.decl.Join.Range.End
	}
	open := strings.IndexByte(src[from:n.decl.Range.End], '{')
	if open < 0 {
		return
	}
	at := from + open + 1
	d.WithFix(title, s.span(source.Range{Start: at, End: at}), " "+item+" ")
}

// runSetNode stands for a task with `run [...]` in checkParams: its with
// block must suit every handler of the set, so no fix adds a field one of
// them requires (another may reject it).
var runSetNode = &node{}

// configFix sets the missing required fields to zero values: inside the
// `with` block, or in a new one after the node's run (uses) item.
func (s *state) configFix(d *diag.Diagnostic, cfg *ir.Type, missing []string, with *ast.ParamBlock, n *node) {
	if n == runSetNode {
		return
	}
	var set []string
	for _, m := range missing {
		for i := range cfg.Fields {
			if cfg.Fields[i].Name == m {
				z := zeroLiteral(&cfg.Fields[i].Type)
				if z == "" {
					return
				}
				set = append(set, m+" = "+z)
			}
		}
	}
	title := "Set " + strings.Join(missing, ", ")
	src := string(s.file.Src)
	if with != nil {
		end := with.Range.End
		if end <= 0 || end > len(src) || src[end-1] != '}' {
			return
		}
		text := strings.Join(set, "  ")
		if k := len(with.Params); k > 0 {
			end = with.Params[k-1].Range.End
			d.WithFix(title, s.span(source.Range{Start: end, End: end}), "  "+text)
			return
		}
		if c := src[end-2]; c != ' ' && c != '\t' && c != '\n' {
			text = " " + text
		}
		d.WithFix(title, s.span(source.Range{Start: end - 1, End: end - 1}), text+" ")
		return
	}
	if n == nil || n.decl == nil {
		return
	}
	for _, it := range n.decl.Items {
		if st, ok := it.(*ast.Setting); ok && st.Key != nil && (st.Key.Name == "run" || st.Key.Name == "uses") {
			end := st.Range.End
			d.WithFix(title, s.span(source.Range{Start: end, End: end}), "  with { "+strings.Join(set, "  ")+" }")
			return
		}
	}
}

// inTemplate reports whether e is the expression of a {{ }} template.
func inTemplate(src []byte, e *ast.Expr) bool {
	if e == nil {
		return false
	}
	k := e.Range.Start
	for k > 0 && k <= len(src) && (src[k-1] == ' ' || src[k-1] == '\t') {
		k--
	}
	return k >= 2 && string(src[k-2:k]) == "{{"
}

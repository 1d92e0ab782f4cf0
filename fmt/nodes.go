package format

import (
	"bytes"
	"strings"

	"github.com/wfc-lang/wfc/lang/ast"
	"github.com/wfc-lang/wfc/lang/source"
)

// units are the entries of a block, list or file that the layout puts one
// per line: items, fields, params, branch rules, list elements,
// declarations.
type units interface {
	len() int
	rng(i int) source.Range
	// print prints unit i, its first token with whitespace ws; it calls
	// p.label() where the part that alignment pads ends.
	print(p *printer, i int, ws int)
	// label returns the width of the part of unit i that alignment pads
	// (a param's name, a field's `name?:`, a node's header), or -1.
	label(i int) int
	// brackets reports whether unit i holds a block, object type or list,
	// the constructs that are printed flat or one entry per line.
	brackets(i int) bool
	// sep returns the separator kept after unit i ("" for none).
	sep(i int) string
}

// file prints the top-level declarations and the comments around them.
func (p *printer) file(f *ast.File) {
	p.units(itemUnits{items: f.Items, src: p.src})
	p.flush(len(p.src)+1, wsItem, true, 0)
	p.checkGap(p.lastEnd, len(p.src))
	if p.started {
		p.newline()
	}
	p.pad()
}

// units prints the units of a multi-line body (or of the file), one per
// line at the current indentation: a unit written on one line, without
// comments, that fits in maxWidth columns is printed flat. Then, in runs of
// consecutive units printed on one line each, labels and trailing comments
// are aligned (see align).
func (p *printer) units(u units) {
	n := u.len()
	flat := make([]bool, n)
	for i := range n {
		r := u.rng(i)
		if u.brackets(i) && !p.hasComment(r.Start, r.End) && strings.IndexByte(p.src[r.Start:r.End], '\n') < 0 {
			flat[i] = p.ind+p.width(u, i)+len(u.sep(i)) <= maxWidth
		}
	}
	single := make([]bool, n) // printed on one line
	labels := make([]int, n)  // where the label ends in p.out
	id0 := p.nunits + 1
	p.nunits += n
	saveCont, saveFirst, saveLabel := p.cont, p.unitFirst, p.labelAt
	for i := range n {
		p.flat = flat[i]
		p.cont = p.ind + indentWidth
		p.unitFirst, p.labelAt = -1, -1
		u.print(p, i, wsItem)
		p.flat = false
		if s := u.sep(i); s != "" {
			p.glue(s)
		}
		single[i] = p.unitFirst >= 0 && bytes.IndexByte(p.out[p.unitFirst:], '\n') < 0
		labels[i] = p.labelAt
		p.trailUnit = id0 + i
	}
	p.cont, p.unitFirst, p.labelAt = saveCont, saveFirst, saveLabel
	p.align(u, single, labels, id0)
}

// align records the alignment of the units just printed. In each run of
// consecutive units printed on one line, not separated by a blank line or
// a comment on a line of its own:
//
//   - labels (a with entry's name, a field's `name?:`, a one-line node's
//     header) are padded to the widest of the run;
//   - trailing comments start in the same column; here a unit without a
//     trailing comment also ends the run.
func (p *printer) align(u units, single []bool, labels []int, id0 int) {
	n := u.len()
	for i := 0; i < n; {
		if !single[i] || u.label(i) < 0 || labels[i] < 0 {
			i++
			continue
		}
		j, w := i+1, u.label(i)
		for j < n && single[j] && u.label(j) >= 0 && labels[j] >= 0 && !p.breakBetween(u.rng(j-1).End, u.rng(j).Start) {
			w = max(w, u.label(j))
			j++
		}
		for k := i; k < j; k++ {
			if d := w - u.label(k); d > 0 {
				p.pads = append(p.pads, pad{off: labels[k], n: d})
			}
		}
		i = j
	}
	for len(p.unitRun) < id0+n {
		p.unitRun = append(p.unitRun, 0)
	}
	for i := range n {
		if !single[i] || !p.hasTrailing(u.rng(i).End) {
			continue
		}
		if i > 0 && p.unitRun[id0+i-1] != 0 && !p.breakBetween(u.rng(i-1).End, u.rng(i).Start) {
			p.unitRun[id0+i] = p.unitRun[id0+i-1]
			continue
		}
		p.unitRun[id0+i] = id0 + i
	}
}

// hasTrailing reports whether a comment follows the source offset end on
// the same line, with nothing but spaces and separators before it.
func (p *printer) hasTrailing(end int) bool {
	k := p.firstComment(end)
	if k == len(p.comments) {
		return false
	}
	for i := end; i < p.comments[k].Start; i++ {
		switch p.src[i] {
		case ' ', '\t', ';', ',':
		default:
			return false
		}
	}
	return true
}

// breakBetween reports whether the output has a blank line or a comment
// on a line of its own between the unit ending at end and the one starting
// at start (the printer puts them where the source has them).
func (p *printer) breakBetween(end, start int) bool {
	prev := end
	cs := p.comments
	for k := p.firstComment(end); k < len(cs) && cs[k].Start < start; k++ {
		if p.newlines(prev, cs[k].Start) >= 1 {
			return true
		}
		prev = cs[k].End
	}
	return p.newlines(prev, start) >= 2
}

// body prints a bracketed body: open (the bracket at openPos, printed with
// whitespace ws), the units, and close (at closePos). Flat (p.flat), a
// block is `{ a  b }`, two spaces between items, and a list `[a, b]`;
// otherwise the units go one per line, indented one level. An empty body
// without comments is "{}" or "[]".
func (p *printer) body(openPos int, open string, ws int, u units, closePos int, close string) {
	p.tokAt(openPos, open, ws)
	n := u.len()
	list := open == "["
	if n == 0 && !p.hasComment(openPos, closePos) {
		p.tokAt(closePos, close, 0)
		return
	}
	if p.flat {
		for i := range n {
			w := 2
			switch {
			case i == 0 && list:
				w = 0
			case i == 0 || list:
				w = 1
			}
			u.print(p, i, w)
			if s := u.sep(i); s != "" && (i < n-1 || !list) {
				p.glue(s)
			}
		}
		w := 1
		if list {
			w = 0
		}
		p.tokAt(closePos, close, w)
		return
	}
	p.afterOpen = true
	saveInd := p.ind
	p.ind += indentWidth
	p.units(u)
	// Comments at the end of the body stay inside it.
	p.flush(closePos, wsLine, true, p.ind)
	p.ind = saveInd
	p.tokAt(closePos, close, wsLine)
}

// ident prints a name.
func (p *printer) ident(id *ast.Ident, ws int) {
	p.emit(id.Start, id.End, id.Name, ws)
}

// targets prints `a, b, c`: an after list, the targets of a branch rule
// or of an error route. A line break the source has between two elements
// is kept, and an element that would end past lineWidth (counting the ","
// after it, or tail, the width of what follows the last one on its line)
// starts a new line; those continuation lines are indented cont.
func (p *printer) targets(ids []*ast.Ident, ws, cont, tail int) {
	for i, id := range ids {
		if i > 0 {
			p.glue(",")
			ws = 1
			if !p.flat && !p.measuring {
				after := 1
				if i == len(ids)-1 {
					after = tail
				}
				if p.newlines(ids[i-1].End, id.Start) > 0 || p.col+1+len(id.Name)+after > lineWidth && p.column()+1+len(id.Name)+after > lineWidth {
					ws = wsLine
				}
			}
		}
		if ws == wsLine {
			// The element starts a continuation line (and so does a
			// comment on a line of its own before it).
			saveInd, saveCont := p.ind, p.cont
			p.ind, p.cont = cont, cont
			p.ident(id, ws)
			p.ind, p.cont = saveInd, saveCont
			continue
		}
		p.ident(id, ws)
	}
}

// item prints one item of a block, the workflow, a handler or the file.
func (p *printer) item(it ast.Item, ws int) {
	switch it := it.(type) {
	case *ast.Import:
		p.tokAt(it.Start, "import", ws)
		p.emit(it.Path.Start, it.Path.End, it.Path.Raw, 1)
	case *ast.Handler:
		p.tokAt(it.Start, "handler", ws)
		p.emit(it.Name.Start, it.Name.End, it.Name.Raw, 1)
		p.body(p.next(it.Name.End), "{", 1, itemUnits{items: it.Items, src: p.src}, it.End-1, "}")
	case *ast.Workflow:
		p.tokAt(it.Start, "workflow", ws)
		p.ident(it.Name, 1)
		p.body(p.next(it.Name.End), "{", 1, itemUnits{items: it.Items, workflow: true, src: p.src}, it.End-1, "}")
	case *ast.NodeDecl:
		// The header's continuation lines are indented two levels, so
		// that they stand apart from the items of the body.
		saveCont := p.cont
		p.cont = p.ind + 2*indentWidth
		p.ident(it.Kind, ws)
		p.ident(it.Name, 1)
		end := it.Name.End
		if len(it.After) > 0 {
			p.tok(end, "after", 1)
			tail := len(" {")
			if it.Join != nil {
				tail += len(" join ") + len(it.Join.Name)
			}
			p.targets(it.After, 1, p.cont, tail)
			end = it.After[len(it.After)-1].End
		}
		if it.Join != nil {
			p.tok(end, "join", 1)
			p.ident(it.Join, 1)
			end = it.Join.End
		}
		p.label()
		p.body(p.next(end), "{", 1, itemUnits{items: it.Items, src: p.src}, it.End-1, "}")
		p.cont = saveCont
	case *ast.Setting:
		p.ident(it.Key, ws)
		p.value(it.Value, 1)
	case *ast.Goto:
		p.ident(it.Key, ws)
		end := it.Key.End
		for i, c := range it.Codes {
			if i > 0 {
				p.glue(",")
			}
			p.emit(c.Start, c.End, c.Raw, 1)
			end = c.End
		}
		if it.Arrow {
			p.tok(end, "=>", 1)
		}
		p.targets(it.Targets, 1, p.ind+indentWidth, 0)
	case *ast.Cond:
		p.ident(it.Key, ws)
		p.expr(it.Expr, 1)
	case *ast.ForEach:
		p.ident(it.Key, ws)
		if it.Index != nil {
			p.ident(it.Index, 1)
			p.glue(",")
		}
		p.ident(it.Var, 1)
		p.tok(it.Var.End, "in", 1)
		p.expr(it.Items, 1)
		end := it.Items.End
		if it.Parallel != nil {
			p.tok(it.Items.End, "parallel", 1)
			p.value(it.Parallel, 1)
			end = it.Parallel.End
		}
		if it.Tolerate != nil {
			p.tok(end, "tolerate", 1)
			p.value(it.Tolerate, 1)
			if it.Percent {
				p.tok(it.Tolerate.End, "%", 0)
			}
		}
	case *ast.Block:
		p.ident(it.Key, ws)
		p.body(p.next(it.Key.End), "{", 1, itemUnits{items: it.Items, src: p.src}, it.End-1, "}")
	case *ast.Branch:
		p.ident(it.Key, ws)
		p.body(p.next(it.Key.End), "{", 1, ruleUnits(it.Rules), it.End-1, "}")
	case *ast.TypeBlock:
		p.ident(it.Key, ws)
		p.body(p.next(it.Key.End), "{", 1, fieldUnits(it.Fields), it.End-1, "}")
	case *ast.InputBlock:
		p.ident(it.Key, ws)
		p.body(p.next(it.Key.End), "{", 1, fieldUnits(it.Fields), it.End-1, "}")
	case *ast.ParamBlock:
		p.ident(it.Key, ws)
		p.body(p.next(it.Key.End), "{", 1, paramUnits(it.Params), it.End-1, "}")
	case *ast.Bad:
		p.fail("syntax error at offset %d", it.Start)
	default:
		p.fail("unexpected item %T", it)
	}
}

// value prints the literal of a setting: durations in canonical form,
// lists flat or one element per line, anything else as written.
func (p *printer) value(v *ast.Value, ws int) {
	switch v.Kind {
	case ast.DurationValue:
		p.emit(v.Start, v.End, Duration(v.Raw), ws)
	case ast.ListValue:
		p.body(v.Start, "[", ws, valueUnits(v.List), v.End-1, "]")
	case ast.StringValue:
		p.emit(v.Str.Start, v.Str.End, v.Str.Raw, ws)
	case ast.IntValue, ast.FloatValue:
		if strings.HasPrefix(v.Raw, "-") {
			// `-3`, or `- 3` when the source has anything between the sign
			// and the number: the compiler reads the value's source text,
			// and rejects the latter (see docs/formatting.md).
			p.tokAt(v.Start, "-", ws)
			num := p.next(v.Start + 1)
			p.emit(num, v.End, p.src[num:v.End], min(num-(v.Start+1), 1))
			return
		}
		p.emit(v.Start, v.End, v.Raw, ws)
	default:
		p.emit(v.Start, v.End, v.Raw, ws)
	}
}

// field prints `name?: type = default`.
func (p *printer) field(f *ast.Field, ws int) {
	p.ident(f.Name, ws)
	if f.Optional {
		p.glue("?")
	}
	p.glue(":")
	p.label()
	p.typ(f.Type, 1)
	if f.Default != nil {
		p.tok(f.Type.End, "=", 1)
		p.expr(f.Default, 1)
	}
}

// typ prints a type: `name`, `name<T, U>` or an object `{ fields }`.
func (p *printer) typ(t *ast.Type, ws int) {
	if t.Name == nil {
		p.body(t.Start, "{", ws, fieldUnits(t.Fields), t.End-1, "}")
		return
	}
	p.ident(t.Name, ws)
	if len(t.Args) == 0 {
		return
	}
	p.tok(t.Name.End, "<", 0)
	for i, a := range t.Args {
		if i > 0 {
			p.glue(",")
		}
		p.typ(a, min(i, 1))
	}
	p.tokAt(t.End-1, ">", 0)
}

// itemUnits are the items of a block, a handler, the workflow or the file.
type itemUnits struct {
	items    []ast.Item
	workflow bool // the workflow body, where node headers are aligned
	src      string
}

func (u itemUnits) len() int                    { return len(u.items) }
func (u itemUnits) rng(i int) source.Range      { return u.items[i].Rng() }
func (u itemUnits) print(p *printer, i, ws int) { p.item(u.items[i], ws) }

func (u itemUnits) label(i int) int {
	n, ok := u.items[i].(*ast.NodeDecl)
	if !ok || !u.workflow || len(n.After) > 0 || n.Join != nil {
		return -1
	}
	return len(n.Kind.Name) + 1 + len(n.Name.Name)
}

func (u itemUnits) brackets(i int) bool {
	switch it := u.items[i].(type) {
	case *ast.Setting:
		return it.Value.Kind == ast.ListValue
	case *ast.ForEach:
		return false
	case *ast.Handler, *ast.Workflow, *ast.NodeDecl, *ast.Block, *ast.Branch,
		*ast.TypeBlock, *ast.InputBlock, *ast.ParamBlock:
		return true
	}
	return false
}

// sep keeps a ";" after item i where the next item would otherwise
// continue it: after an expression when the next item starts with `in`
// (CEL's membership operator), after a for_each without parallel when the
// next item starts with `parallel`, and, in the workflow body, after a
// setting with a name value when the next item starts with `after` or
// `join` (the two names would read as a node header).
func (u itemUnits) sep(i int) string {
	if i+1 >= len(u.items) {
		return ""
	}
	next := firstWord(u.items[i+1], u.src)
	switch it := u.items[i].(type) {
	case *ast.Cond:
		if next == "in" {
			return ";"
		}
	case *ast.ForEach:
		if it.Tolerate == nil && (it.Parallel == nil && (next == "in" || next == "parallel") || next == "tolerate") {
			return ";"
		}
	case *ast.Setting:
		if u.workflow && it.Value.Kind == ast.IdentValue && (next == "after" || next == "join") {
			return ";"
		}
	}
	return ""
}

// firstWord returns the identifier an item starts with, or "".
func firstWord(it ast.Item, src string) string {
	if k := ast.KeyOf(it); k != nil {
		return k.Name
	}
	r := it.Rng()
	j := r.Start
	for j < r.End && (isLetter(src[j]) || isDigit(src[j])) {
		j++
	}
	return src[r.Start:j]
}

// fieldUnits are the fields of a type block, the input block or an object
// type.
type fieldUnits []*ast.Field

func (u fieldUnits) len() int                    { return len(u) }
func (u fieldUnits) rng(i int) source.Range      { return u[i].Range }
func (u fieldUnits) print(p *printer, i, ws int) { p.field(u[i], ws) }

func (u fieldUnits) label(i int) int {
	w := len(u[i].Name.Name) + 1
	if u[i].Optional {
		w++
	}
	return w
}

func (u fieldUnits) brackets(i int) bool { return hasObject(u[i].Type) }

func hasObject(t *ast.Type) bool {
	if t == nil {
		return false
	}
	if t.Name == nil {
		return true
	}
	for _, a := range t.Args {
		if hasObject(a) {
			return true
		}
	}
	return false
}

func (u fieldUnits) sep(i int) string {
	if i+1 < len(u) && u[i].Default != nil && u[i+1].Name.Name == "in" {
		return ";"
	}
	return ""
}

// paramUnits are the entries of a with block or the workflow output.
type paramUnits []*ast.Param

func (u paramUnits) len() int               { return len(u) }
func (u paramUnits) rng(i int) source.Range { return u[i].Range }
func (u paramUnits) print(p *printer, i, ws int) {
	p.ident(u[i].Name, ws)
	p.label()
	p.tok(u[i].Name.End, "=", 1)
	p.expr(u[i].Value, 1)
}
func (u paramUnits) label(i int) int     { return len(u[i].Name.Name) }
func (u paramUnits) brackets(i int) bool { return false }
func (u paramUnits) sep(i int) string {
	if i+1 < len(u) && u[i+1].Name.Name == "in" {
		return ";"
	}
	return ""
}

// ruleUnits are the rules of a branch.
type ruleUnits []*ast.Rule

func (u ruleUnits) len() int               { return len(u) }
func (u ruleUnits) rng(i int) source.Range { return u[i].Range }
func (u ruleUnits) print(p *printer, i, ws int) {
	r := u[i]
	end := 0
	if r.Else {
		end = p.tokAt(r.Start, "else", ws)
	} else {
		p.tokAt(r.Start, "when", ws)
		tail := len(" =>")
		if len(r.Targets) > 0 {
			tail += 1 + len(r.Targets[0].Name)
		}
		if len(r.Targets) > 1 {
			tail++ // ","
		}
		p.exprTail(r.Cond, 1, tail)
		end = r.Cond.End
	}
	p.tok(end, "=>", 1)
	p.targets(r.Targets, 1, p.ind+indentWidth, 0)
}
func (u ruleUnits) label(i int) int     { return -1 }
func (u ruleUnits) brackets(i int) bool { return false }
func (u ruleUnits) sep(i int) string    { return "" }

// valueUnits are the elements of a list.
type valueUnits []*ast.Value

func (u valueUnits) len() int                    { return len(u) }
func (u valueUnits) rng(i int) source.Range      { return u[i].Range }
func (u valueUnits) print(p *printer, i, ws int) { p.value(u[i], ws) }
func (u valueUnits) label(i int) int             { return -1 }
func (u valueUnits) brackets(i int) bool         { return u[i].Kind == ast.ListValue }
func (u valueUnits) sep(i int) string            { return "," }

package format

import (
	"fmt"
	"strings"

	"github.com/wfc-lang/wfc/lang/ast"
)

// commentText is a comment as the formatter prints it: line comments lose
// trailing whitespace.
func commentText(t string) string {
	if strings.HasPrefix(t, "//") {
		return strings.TrimRight(t, " \t\r")
	}
	return t
}

// valueText is a literal's text as the formatter may respell it: durations
// canonical, whatever separates "-" from its number as one space.
func valueText(v *ast.Value) string {
	switch v.Kind {
	case ast.DurationValue:
		return Duration(v.Raw)
	case ast.IntValue, ast.FloatValue:
		if strings.HasPrefix(v.Raw, "-") && len(v.Raw) > 1 {
			num := v.Raw[1:]
			if i := strings.LastIndexAny(num, " \t\r\n/"); i >= 0 {
				return "- " + num[i+1:] // apart: the formatter keeps one space
			}
		}
	case ast.ListValue:
		return ""
	}
	return v.Raw
}

// exprText is an expression's text (comments already blanked by the
// parser) with each run of whitespace outside string literals made one
// space: the formatter reindents the lines of an expression, nothing else.
func exprText(t string) string {
	if !strings.ContainsAny(t, "\n\t\r") && !strings.Contains(t, "  ") {
		return t
	}
	var b strings.Builder
	i := 0
	space := false
	for i < len(t) {
		c := t[i]
		j := i + 1
		switch {
		case c == ' ' || c == '\t' || c == '\r' || c == '\n':
			space = true
			i = j
			continue
		case c == '"' || c == '\'':
			j = stringEnd(t, i, i)
		case isLetter(c):
			k := i
			for k < len(t) && k-i < 2 && (t[k]|0x20 == 'r' || t[k]|0x20 == 'b') {
				k++
			}
			if k > i && k < len(t) && (t[k] == '"' || t[k] == '\'') {
				j = stringEnd(t, i, k)
			} else {
				for j < len(t) && (isLetter(t[j]) || isDigit(t[j])) {
					j++
				}
			}
		case isDigit(c):
			for j < len(t) && (isLetter(t[j]) || isDigit(t[j]) || t[j] == '.') {
				j++
			}
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteString(t[i:j])
		i = j
	}
	return b.String()
}

// equal compares two trees (the parse of a file and of its formatted text)
// as the layout may not change them: positions, whitespace inside
// expressions and the spellings the formatter normalises (durations, "- 3")
// left out. It describes the first difference, or returns "".
func equal(a, b *ast.File) string {
	c := &comparer{}
	c.items(a.Items, b.Items)
	if c.diff == "" && len(a.Comments) != len(b.Comments) {
		c.differ("%d comments became %d", len(a.Comments), len(b.Comments))
	}
	for i := 0; c.diff == "" && i < len(a.Comments); i++ {
		if x, y := commentText(a.Comments[i].Text), commentText(b.Comments[i].Text); x != y {
			c.differ("comment %q became %q", x, y)
		}
	}
	return c.diff
}

// A comparer walks two trees in parallel and records the first difference.
type comparer struct{ diff string }

func (c *comparer) differ(format string, args ...any) bool {
	if c.diff == "" {
		c.diff = fmt.Sprintf(format, args...)
	}
	return false
}

func (c *comparer) text(what, a, b string) bool {
	if a != b {
		return c.differ("%s %q became %q", what, a, b)
	}
	return true
}

func (c *comparer) ident(a, b *ast.Ident) bool {
	if a == nil || b == nil {
		if a != b {
			return c.differ("a name appeared or disappeared")
		}
		return true
	}
	return c.text("name", a.Name, b.Name)
}

func (c *comparer) idents(a, b []*ast.Ident) bool {
	if len(a) != len(b) {
		return c.differ("%d names became %d", len(a), len(b))
	}
	for i := range a {
		if !c.ident(a[i], b[i]) {
			return false
		}
	}
	return true
}

func (c *comparer) str(a, b *ast.String) bool {
	if a == nil || b == nil {
		if a != b {
			return c.differ("a string appeared or disappeared")
		}
		return true
	}
	return c.text("string", a.Raw, b.Raw)
}

func (c *comparer) expr(a, b *ast.Expr) bool {
	if a == nil || b == nil {
		if a != b {
			return c.differ("an expression appeared or disappeared")
		}
		return true
	}
	return c.text("expression", exprText(a.Text), exprText(b.Text)) && c.str(a.Str, b.Str)
}

func (c *comparer) value(a, b *ast.Value) bool {
	if a == nil || b == nil {
		if a != b {
			return c.differ("a value appeared or disappeared")
		}
		return true
	}
	if a.Kind != b.Kind {
		return c.differ("a %s value became a %s", a.Kind, b.Kind)
	}
	if !c.text("value", valueText(a), valueText(b)) || !c.str(a.Str, b.Str) {
		return false
	}
	if len(a.List) != len(b.List) {
		return c.differ("a list of %d became %d", len(a.List), len(b.List))
	}
	for i := range a.List {
		if !c.value(a.List[i], b.List[i]) {
			return false
		}
	}
	return true
}

func (c *comparer) items(a, b []ast.Item) bool {
	if len(a) != len(b) {
		return c.differ("%d items became %d", len(a), len(b))
	}
	for i := range a {
		if !c.item(a[i], b[i]) {
			return false
		}
	}
	return true
}

func (c *comparer) item(a, b ast.Item) bool {
	switch x := a.(type) {
	case *ast.Import:
		if y, ok := b.(*ast.Import); ok {
			return c.str(x.Path, y.Path)
		}
	case *ast.Handler:
		if y, ok := b.(*ast.Handler); ok {
			return c.str(x.Name, y.Name) && c.items(x.Items, y.Items)
		}
	case *ast.Workflow:
		if y, ok := b.(*ast.Workflow); ok {
			return c.ident(x.Name, y.Name) && c.items(x.Items, y.Items)
		}
	case *ast.NodeDecl:
		if y, ok := b.(*ast.NodeDecl); ok {
			return c.ident(x.Kind, y.Kind) && c.ident(x.Name, y.Name) && c.idents(x.After, y.After) &&
				c.ident(x.Join, y.Join) && c.items(x.Items, y.Items)
		}
	case *ast.Setting:
		if y, ok := b.(*ast.Setting); ok {
			return c.ident(x.Key, y.Key) && c.value(x.Value, y.Value)
		}
	case *ast.Goto:
		if y, ok := b.(*ast.Goto); ok && x.Arrow == y.Arrow && len(x.Codes) == len(y.Codes) {
			for i := range x.Codes {
				if !c.str(x.Codes[i], y.Codes[i]) {
					return false
				}
			}
			return c.ident(x.Key, y.Key) && c.idents(x.Targets, y.Targets)
		}
	case *ast.Cond:
		if y, ok := b.(*ast.Cond); ok {
			return c.ident(x.Key, y.Key) && c.expr(x.Expr, y.Expr)
		}
	case *ast.ForEach:
		if y, ok := b.(*ast.ForEach); ok {
			return c.ident(x.Key, y.Key) && c.ident(x.Index, y.Index) && c.ident(x.Var, y.Var) && c.expr(x.Items, y.Items) &&
				c.value(x.Parallel, y.Parallel) && c.value(x.Tolerate, y.Tolerate) && x.Percent == y.Percent
		}
	case *ast.Block:
		if y, ok := b.(*ast.Block); ok {
			return c.ident(x.Key, y.Key) && c.items(x.Items, y.Items)
		}
	case *ast.Branch:
		if y, ok := b.(*ast.Branch); ok {
			if !c.ident(x.Key, y.Key) {
				return false
			}
			if len(x.Rules) != len(y.Rules) {
				return c.differ("%d rules became %d", len(x.Rules), len(y.Rules))
			}
			for i, r := range x.Rules {
				s := y.Rules[i]
				if r.Else != s.Else {
					return c.differ("an else rule appeared or disappeared")
				}
				if !c.expr(r.Cond, s.Cond) || !c.idents(r.Targets, s.Targets) {
					return false
				}
			}
			return true
		}
	case *ast.TypeBlock:
		if y, ok := b.(*ast.TypeBlock); ok {
			return c.ident(x.Key, y.Key) && c.fields(x.Fields, y.Fields)
		}
	case *ast.InputBlock:
		if y, ok := b.(*ast.InputBlock); ok {
			return c.ident(x.Key, y.Key) && c.fields(x.Fields, y.Fields)
		}
	case *ast.ParamBlock:
		if y, ok := b.(*ast.ParamBlock); ok {
			if !c.ident(x.Key, y.Key) {
				return false
			}
			if len(x.Params) != len(y.Params) {
				return c.differ("%d entries became %d", len(x.Params), len(y.Params))
			}
			for i, p := range x.Params {
				if !c.ident(p.Name, y.Params[i].Name) || !c.expr(p.Value, y.Params[i].Value) {
					return false
				}
			}
			return true
		}
	case *ast.Bad:
		if _, ok := b.(*ast.Bad); ok {
			return true
		}
	}
	return c.differ("a %T became a %T", a, b)
}

func (c *comparer) fields(a, b []*ast.Field) bool {
	if len(a) != len(b) {
		return c.differ("%d fields became %d", len(a), len(b))
	}
	for i, f := range a {
		g := b[i]
		if f.Optional != g.Optional {
			return c.differ("field %s: optional changed", f.Name.Name)
		}
		if !c.ident(f.Name, g.Name) || !c.typ(f.Type, g.Type) || !c.expr(f.Default, g.Default) {
			return false
		}
	}
	return true
}

func (c *comparer) typ(a, b *ast.Type) bool {
	if a == nil || b == nil {
		if a != b {
			return c.differ("a type appeared or disappeared")
		}
		return true
	}
	if (a.Name == nil) != (b.Name == nil) {
		return c.differ("an object type became a named one or back")
	}
	if !c.ident(a.Name, b.Name) || !c.fields(a.Fields, b.Fields) {
		return false
	}
	if len(a.Args) != len(b.Args) {
		return c.differ("%d type arguments became %d", len(a.Args), len(b.Args))
	}
	for i := range a.Args {
		if !c.typ(a.Args[i], b.Args[i]) {
			return false
		}
	}
	return true
}

package ast

import (
	"fmt"
	"io"
	"strings"
)

// Fprint writes a debugging dump of the tree rooted at n to w: one node per
// line, indented by depth, each with its type, its byte range @start-end,
// the role it plays in its parent when that is not obvious ("Kind:",
// "After:", "Default:" ...) and its literal content. The format is meant for
// tests and for eyes; it is stable but not a serialisation.
//
//	Workflow @0-40
//	  Name: Ident @9-10 w
//	  NodeDecl @13-38
//	    Kind: Ident @13-17 task
//	    Name: Ident @18-19 a
//	    Setting @22-36
//	      Key: Ident @22-25 run
//	      Value @26-32 string "noop"
//	        String @26-32 "noop"
func Fprint(w io.Writer, n Node) error {
	var b strings.Builder
	p := printer{b: &b}
	p.node("", n)
	_, err := io.WriteString(w, b.String())
	return err
}

// DebugString returns the Fprint dump of n.
func DebugString(n Node) string {
	var b strings.Builder
	_ = Fprint(&b, n)
	return b.String()
}

type printer struct {
	b     *strings.Builder
	depth int
}

func (p *printer) line(role string, n Node, name string, extra string) {
	for i := 0; i < p.depth; i++ {
		p.b.WriteString("  ")
	}
	if role != "" {
		p.b.WriteString(role)
		p.b.WriteString(": ")
	}
	r := n.Rng()
	fmt.Fprintf(p.b, "%s @%d-%d", name, r.Start, r.End)
	if extra != "" {
		p.b.WriteByte(' ')
		p.b.WriteString(extra)
	}
	p.b.WriteByte('\n')
}

func (p *printer) node(role string, n Node) {
	if isNil(n) {
		return
	}
	switch n := n.(type) {
	case *File:
		p.line(role, n, "File", fmt.Sprintf("%q", n.Name))
	case *Comment:
		p.line(role, n, "Comment", fmt.Sprintf("%q", n.Text))
	case *Ident:
		p.line(role, n, "Ident", n.Name)
	case *String:
		p.line(role, n, "String", fmt.Sprintf("%q", n.Value))
	case *TemplatePart:
		if n.Expr != nil {
			p.line(role, n, "TemplatePart", "expr")
		} else {
			p.line(role, n, "TemplatePart", fmt.Sprintf("text %q", n.Text))
		}
	case *Expr:
		p.line(role, n, "Expr", fmt.Sprintf("%q", n.Text))
	case *Value:
		extra := n.Kind.String()
		if n.Kind != ListValue {
			extra += " " + n.Raw
		}
		p.line(role, n, "Value", extra)
	case *Import:
		p.line(role, n, "Import", "")
	case *Handler:
		p.line(role, n, "Handler", "")
	case *Workflow:
		p.line(role, n, "Workflow", "")
	case *NodeDecl:
		p.line(role, n, "NodeDecl", "")
	case *Setting:
		p.line(role, n, "Setting", "")
	case *Goto:
		extra := "routes"
		if n.Arrow {
			extra = "=>"
		}
		p.line(role, n, "Goto", extra)
	case *Cond:
		p.line(role, n, "Cond", "")
	case *ForEach:
		p.line(role, n, "ForEach", "")
	case *Block:
		p.line(role, n, "Block", "")
	case *Branch:
		p.line(role, n, "Branch", "")
	case *Rule:
		extra := ""
		if n.Else {
			extra = "else"
		}
		p.line(role, n, "Rule", extra)
	case *TypeBlock:
		p.line(role, n, "TypeBlock", "")
	case *InputBlock:
		p.line(role, n, "InputBlock", "")
	case *Field:
		extra := ""
		if n.Optional {
			extra = "optional"
		}
		p.line(role, n, "Field", extra)
	case *Type:
		extra := ""
		if n.Name == nil {
			extra = "object"
		}
		p.line(role, n, "Type", extra)
	case *ParamBlock:
		p.line(role, n, "ParamBlock", "")
	case *Param:
		p.line(role, n, "Param", "")
	case *Bad:
		p.line(role, n, "Bad", "")
	default:
		p.line(role, n, fmt.Sprintf("%T", n), "")
	}
	p.depth++
	defer func() { p.depth-- }()
	switch n := n.(type) {
	case *File:
		for _, it := range n.Items {
			p.node("", it)
		}
		for _, c := range n.Comments {
			p.node("", c)
		}
	case *Import:
		p.node("Path", n.Path)
	case *String:
		for _, t := range n.Template {
			p.node("", t)
		}
	case *TemplatePart:
		p.node("", n.Expr)
	case *Expr:
		p.node("", n.Str)
	case *Value:
		p.node("", n.Str)
		for _, it := range n.List {
			p.node("", it)
		}
	case *Handler:
		p.node("Name", n.Name)
		for _, it := range n.Items {
			p.node("", it)
		}
	case *Workflow:
		p.node("Name", n.Name)
		for _, it := range n.Items {
			p.node("", it)
		}
	case *NodeDecl:
		p.node("Kind", n.Kind)
		p.node("Name", n.Name)
		for _, a := range n.After {
			p.node("After", a)
		}
		p.node("Join", n.Join)
		for _, it := range n.Items {
			p.node("", it)
		}
	case *Setting:
		p.node("Key", n.Key)
		p.node("", n.Value)
	case *Goto:
		p.node("Key", n.Key)
		for _, t := range n.Targets {
			p.node("Target", t)
		}
	case *Cond:
		p.node("Key", n.Key)
		p.node("", n.Expr)
	case *ForEach:
		p.node("Key", n.Key)
		p.node("Var", n.Var)
		p.node("Items", n.Items)
		p.node("Parallel", n.Parallel)
	case *Block:
		p.node("Key", n.Key)
		for _, it := range n.Items {
			p.node("", it)
		}
	case *Branch:
		p.node("Key", n.Key)
		for _, r := range n.Rules {
			p.node("", r)
		}
	case *Rule:
		p.node("Cond", n.Cond)
		for _, t := range n.Targets {
			p.node("Target", t)
		}
	case *TypeBlock:
		p.node("Key", n.Key)
		for _, f := range n.Fields {
			p.node("", f)
		}
	case *InputBlock:
		p.node("Key", n.Key)
		for _, f := range n.Fields {
			p.node("", f)
		}
	case *Field:
		p.node("Name", n.Name)
		p.node("Type", n.Type)
		p.node("Default", n.Default)
	case *Type:
		p.node("Name", n.Name)
		for _, a := range n.Args {
			p.node("Arg", a)
		}
		for _, f := range n.Fields {
			p.node("", f)
		}
	case *ParamBlock:
		p.node("Key", n.Key)
		for _, pr := range n.Params {
			p.node("", pr)
		}
	case *Param:
		p.node("Name", n.Name)
		p.node("", n.Value)
	case *Bad:
		p.node("Kind", n.Kind)
		p.node("Name", n.Name)
	}
}

package ast

// Inspect traverses the tree rooted at node in depth-first order, the way
// go/ast.Inspect does: it calls f(node); if f returns true, Inspect visits
// each non-nil child of node in source order, then calls f(nil).
//
// Every node is visited: items, identifiers (keys, names, targets), values,
// strings and their template parts, expressions (and the string literal an
// Expr may hold), fields and types, branch rules, params. For a *File the
// comments are visited after the items (they are not attached to nodes).
func Inspect(node Node, f func(Node) bool) {
	if isNil(node) || !f(node) {
		return
	}
	children(node, func(c Node) { Inspect(c, f) })
	f(nil)
}

// isNil reports whether n is nil or a typed nil pointer.
func isNil(n Node) bool {
	switch n := n.(type) {
	case nil:
		return true
	case *File:
		return n == nil
	case *Comment:
		return n == nil
	case *Ident:
		return n == nil
	case *String:
		return n == nil
	case *TemplatePart:
		return n == nil
	case *Expr:
		return n == nil
	case *Value:
		return n == nil
	case *Import:
		return n == nil
	case *Handler:
		return n == nil
	case *Workflow:
		return n == nil
	case *NodeDecl:
		return n == nil
	case *Setting:
		return n == nil
	case *Goto:
		return n == nil
	case *Cond:
		return n == nil
	case *ForEach:
		return n == nil
	case *Block:
		return n == nil
	case *Branch:
		return n == nil
	case *Rule:
		return n == nil
	case *TypeBlock:
		return n == nil
	case *Field:
		return n == nil
	case *Type:
		return n == nil
	case *InputBlock:
		return n == nil
	case *ParamBlock:
		return n == nil
	case *Param:
		return n == nil
	case *Bad:
		return n == nil
	}
	return false
}

// children calls visit for each direct child of n, in source order, skipping
// nil ones.
func children(n Node, visit func(Node)) {
	v := func(c Node) {
		if !isNil(c) {
			visit(c)
		}
	}
	switch n := n.(type) {
	case *File:
		for _, it := range n.Items {
			v(it)
		}
		for _, c := range n.Comments {
			v(c)
		}
	case *Import:
		v(n.Path)
	case *String:
		for _, p := range n.Template {
			v(p)
		}
	case *TemplatePart:
		v(n.Expr)
	case *Expr:
		v(n.Str)
	case *Value:
		v(n.Str)
		for _, it := range n.List {
			v(it)
		}
	case *Handler:
		v(n.Name)
		for _, it := range n.Items {
			v(it)
		}
	case *Workflow:
		v(n.Name)
		for _, it := range n.Items {
			v(it)
		}
	case *NodeDecl:
		v(n.Kind)
		v(n.Name)
		for _, a := range n.After {
			v(a)
		}
		v(n.Join)
		for _, it := range n.Items {
			v(it)
		}
	case *Setting:
		v(n.Key)
		v(n.Value)
	case *Goto:
		v(n.Key)
		for _, t := range n.Targets {
			v(t)
		}
	case *Cond:
		v(n.Key)
		v(n.Expr)
	case *ForEach:
		v(n.Key)
		v(n.Var)
		v(n.Items)
		v(n.Parallel)
	case *Block:
		v(n.Key)
		for _, it := range n.Items {
			v(it)
		}
	case *Branch:
		v(n.Key)
		for _, r := range n.Rules {
			v(r)
		}
	case *Rule:
		v(n.Cond)
		for _, t := range n.Targets {
			v(t)
		}
	case *TypeBlock:
		v(n.Key)
		for _, fl := range n.Fields {
			v(fl)
		}
	case *InputBlock:
		v(n.Key)
		for _, fl := range n.Fields {
			v(fl)
		}
	case *Field:
		v(n.Name)
		v(n.Type)
		v(n.Default)
	case *Type:
		v(n.Name)
		for _, a := range n.Args {
			v(a)
		}
		for _, fl := range n.Fields {
			v(fl)
		}
	case *ParamBlock:
		v(n.Key)
		for _, p := range n.Params {
			v(p)
		}
	case *Param:
		v(n.Name)
		v(n.Value)
	case *Bad:
		v(n.Kind)
		v(n.Name)
	}
}

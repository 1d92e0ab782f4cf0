package compiler

import (
	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/lang/ast"
	"github.com/wfc-lang/wfc/lang/source"
)

// Info holds what the compiler learnt about a file, in side tables keyed by
// syntax: the language server answers hover, definition, references and
// rename from it without a second analysis.
type Info struct {
	Workflow string
	Nodes    map[string]*NodeInfo
	Inputs   map[string]*InputInfo
	Handlers map[string]*HandlerInfo
	// Refs lists every use of a declared name, in source order of discovery:
	// node ids in after/targets/back_to and in expressions, handler names in
	// `run`, input fields in expressions.
	Refs []Ref
	// Exprs maps each checked expression to its type and checked CEL tree.
	Exprs map[*ast.Expr]*ExprInfo
	// Scopes maps each node to the names visible in its expressions.
	Order []string // node ids in source order
	// Graph is set when the graph pass ordered the nodes (no cycle): the
	// NodeInfo.Sources are then complete, and a node may read exactly its
	// forward ancestors through them (WF4003).
	Graph bool
}

// RefKind says what a Ref names.
type RefKind int

const (
	RefNode RefKind = iota + 1
	RefInput
	RefHandler
	RefField // a field of a node's output (x.output.field)
)

// A Ref is one use of a declared name.
type Ref struct {
	Range source.Range
	Kind  RefKind
	Name  string // node id, input name, handler name; for RefField "node.field"
}

// A NodeInfo describes one node.
type NodeInfo struct {
	ID      string
	Kind    string // task, agent, human, flow
	Decl    *ast.NodeDecl
	Handler string   // task: the handler name
	Output  *ir.Type // the type of ID.output
	Doc     string   // description
	// Join is the node's join mode (all, any, settled) and Sources the
	// distinct nodes with a forward edge to it, in source order (graph pass).
	Join    string
	Sources []string
	Loop    bool // a loop node: ID.iteration is readable
	OnError bool // it has on_error: ID.error is readable on its error path
	// ChildInputs is, for a flow node whose child compiles, the type its
	// `with` is checked against: an object with a field per child input
	// (optional when the input need not be set).
	ChildInputs *ir.Type
}

// An InputInfo describes one workflow input.
type InputInfo struct {
	Name     string
	Type     *ir.Type
	Required bool
	Decl     *ast.Field
}

// A HandlerInfo describes a handler: built in or declared.
type HandlerInfo struct {
	Name    string
	Builtin bool
	Config  *ir.Type // object type; nil fields with Open means any fields
	Open    bool     // accepts any config fields (cel, echo): output mirrors `with`
	Output  *ir.Type
	Decl    *ast.Handler // nil for built-ins
	File    string       // the file that declares it (imports are other files)
	Doc     string
}

// An ExprInfo describes one checked expression.
type ExprInfo struct {
	Type *ir.Type
	// Subexprs lists the checked type of every sub-expression, innermost
	// last, for hover.
	Subexprs []SubExpr
}

// A SubExpr is a sub-expression's range and CEL type name.
type SubExpr struct {
	Range source.Range
	Type  string
}

// TypeAt returns the innermost sub-expression at off and its type.
func (e *ExprInfo) TypeAt(off int) (SubExpr, bool) {
	best, ok := SubExpr{}, false
	for _, s := range e.Subexprs {
		if s.Range.Contains(off) && (!ok || s.Range.Len() <= best.Range.Len()) {
			best, ok = s, true
		}
	}
	return best, ok
}

// RefAt returns the reference at offset off, if any.
func (in *Info) RefAt(off int) (Ref, bool) {
	for _, r := range in.Refs {
		if r.Range.Contains(off) {
			return r, true
		}
	}
	return Ref{}, false
}

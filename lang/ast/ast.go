// Package ast declares the syntax tree of a .wf file.
//
// Every node records its exact source Range (byte offsets, end exclusive);
// a source.File turns ranges into line:col spans. Items inside blocks keep
// their source order so the formatter can reprint them; the compiler reads
// them with type switches. Comments are kept in File.Comments, in source
// order, for the formatter and the language server. Semantic results (types,
// definitions, uses) never go into the tree: they live in compiler.Info.
package ast

import "github.com/wfc-lang/wfc/lang/source"

// Range is re-exported so nodes can embed it.
type Range = source.Range

// A Node is any syntax tree node.
type Node interface {
	Rng() source.Range
}

// An Item is an entry of a block: a declaration, setting or sub-block.
type Item interface {
	Node
	item()
}

// A File is a parsed .wf file.
type File struct {
	Range
	Name     string
	Items    []Item // *Import, *Handler, *Workflow, *Bad
	Comments []*Comment
}

// Workflow returns the first workflow declared in the file, or nil.
func (f *File) Workflow() *Workflow {
	for _, it := range f.Items {
		if w, ok := it.(*Workflow); ok {
			return w
		}
	}
	return nil
}

// A Comment is a // line or /* block */ comment. Text includes the markers.
type Comment struct {
	Range
	Text string
}

// An Ident is a name.
type Ident struct {
	Range
	Name string
}

// A String is a string literal. Value is the decoded text; Template is
// non-nil when the literal contains {{ }} expressions.
type String struct {
	Range
	Raw      string
	Value    string
	Template []*TemplatePart
}

// A TemplatePart is literal text or one {{ expression }} of a template.
type TemplatePart struct {
	Range
	Text string // literal text (decoded) when Expr is nil
	Expr *Expr
}

// An Expr is a CEL expression. The parser only finds its extent; the
// compiler hands Text to cel-go and maps CEL's positions back by offset.
// If the whole expression is one string literal, Str holds it, so templates
// inside `with` values are found.
type Expr struct {
	Range
	Text string // source text; comments inside are replaced by spaces
	Str  *String
}

// ValueKind tells which literal a Value holds.
type ValueKind int

const (
	BadValue ValueKind = iota
	IdentValue
	IntValue
	FloatValue
	StringValue
	DurationValue
	ListValue
)

func (k ValueKind) String() string {
	return [...]string{"invalid", "name", "integer", "number", "string", "duration", "list"}[k]
}

// A Value is the literal argument of a setting: `3`, `30s`, `"gpt-4o"`,
// `exponential`, `["a@x", "b@x"]`.
type Value struct {
	Range
	Kind ValueKind
	Raw  string  // source text (for numbers, durations, names)
	Str  *String // StringValue
	List []*Value
}

// An Import is `import "file.wf"`.
type Import struct {
	Range
	Path *String
}

// A Handler declares a handler's config and output schemas.
type Handler struct {
	Range
	Name  *String
	Items []Item // *TypeBlock (config, output), *Setting (description)
}

// A Workflow is the `workflow name { ... }` block.
type Workflow struct {
	Range
	Name  *Ident
	Items []Item // *Setting, *InputBlock, *ParamBlock (output), *Handler, *NodeDecl, *Bad
}

// A NodeDecl is `task|agent|human|flow name [after a, b] [join all|any] { ... }`.
type NodeDecl struct {
	Range
	Kind  *Ident
	Name  *Ident
	After []*Ident
	Join  *Ident
	Items []Item
}

// A Setting is `key value`, e.g. `timeout 30s` or `run "http"`.
type Setting struct {
	Range
	Key   *Ident
	Value *Value
}

// A Goto is `key => a, b` (on_error, on_reject, default, exhausted) or,
// with Arrow false, `routes a, b`. Codes are the error codes of
// `on_error "A", "B" => a`.
type Goto struct {
	Range
	Key     *Ident
	Codes   []*String
	Arrow   bool
	Targets []*Ident
}

// A Cond is `when expr`, `while expr`, `dispatch expr`, `approvers expr`
// or `escalate_to expr`.
type Cond struct {
	Range
	Key  *Ident
	Expr *Expr
}

// A ForEach is `for_each [i,] v in expr [parallel n] [tolerate n[%]]`.
type ForEach struct {
	Range
	Key      *Ident
	Index    *Ident // `for_each i, x in ...`: the item's index
	Var      *Ident
	Items    *Expr
	Parallel *Value
	Tolerate *Value // how many items may fail (Percent: what percentage)
	Percent  bool
}

// A Block is `key { items }`: retry, loop, compensate.
type Block struct {
	Range
	Key   *Ident
	Items []Item
}

// A Branch is `branch { when c => a, b ... else => d }`.
type Branch struct {
	Range
	Key   *Ident
	Rules []*Rule
}

// A Rule is one `when cond => targets` or `else => targets` of a branch.
type Rule struct {
	Range
	Else    bool
	Cond    *Expr
	Targets []*Ident
}

// A TypeBlock is `key { name: type ... }`: handler config/output, node output.
type TypeBlock struct {
	Range
	Key    *Ident
	Fields []*Field
}

// A Field is `name[?]: type [= default]` in a type block or input block.
type Field struct {
	Range
	Name     *Ident
	Optional bool
	Type     *Type
	Default  *Expr
}

// A Type is a type expression: a name with optional arguments
// (`list<int>`), or an object `{ a: int }`.
type Type struct {
	Range
	Name   *Ident
	Args   []*Type
	Fields []*Field // object type when Name is nil
}

// An InputBlock is the workflow's `input { ... }`.
type InputBlock struct {
	Range
	Key    *Ident
	Fields []*Field
}

// A ParamBlock is `key { name = expr ... }`: `with` and the workflow `output`.
type ParamBlock struct {
	Range
	Key    *Ident
	Params []*Param
}

// A Param is `name = expr`.
type Param struct {
	Range
	Name  *Ident
	Value *Expr
}

// A Bad is a region that did not parse; its error was reported.
type Bad struct {
	Range
	// Kind and Name are set when a broken node's header could be read, so
	// later passes still know the node exists and do not report every
	// reference to it as unknown.
	Kind *Ident
	Name *Ident
}

func (*Import) item()     {}
func (*Handler) item()    {}
func (*Workflow) item()   {}
func (*NodeDecl) item()   {}
func (*Setting) item()    {}
func (*Goto) item()       {}
func (*Cond) item()       {}
func (*ForEach) item()    {}
func (*Block) item()      {}
func (*Branch) item()     {}
func (*TypeBlock) item()  {}
func (*InputBlock) item() {}
func (*ParamBlock) item() {}
func (*Bad) item()        {}

// KeyOf returns the keyword that starts an item, or nil.
func KeyOf(it Item) *Ident {
	switch it := it.(type) {
	case *Setting:
		return it.Key
	case *Goto:
		return it.Key
	case *Cond:
		return it.Key
	case *ForEach:
		return it.Key
	case *Block:
		return it.Key
	case *Branch:
		return it.Key
	case *TypeBlock:
		return it.Key
	case *InputBlock:
		return it.Key
	case *ParamBlock:
		return it.Key
	case *NodeDecl:
		return it.Kind
	}
	return nil
}

package compiler

import (
	"sort"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/types"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/ir/cellib"
)

// provider gives cel-go's checker the structure of the workflow's types
// (inputs, node outputs, declared objects) without protobuf: every object
// type gets a name and its fields are looked up here, so a typo in a field
// is a check error with the exact position.
type provider struct {
	*types.Registry
	objs map[string]*objDef
	// alias maps a stand-in type name to a real one. Per-node names
	// (`output`, a for_each variable) are declared once with a stand-in
	// object type that is pointed at the current node's type before its
	// expressions are checked: one environment serves every node, instead of
	// one extended environment per node (which costs O(nodes) each).
	alias map[string]string
	// flat caches the fields of object types without nested objects by
	// IR type: every task of a handler shares its output type, and such
	// fields need no per-node names (read-only once defined).
	flat map[*ir.Type]flatObj
}

type flatObj struct {
	fields map[string]*types.Type
	names  []string
}

func (p *provider) resolve(name string) string {
	if a, ok := p.alias[name]; ok {
		return a
	}
	return name
}

type objDef struct {
	fields map[string]*types.Type
	names  []string
	ir     *ir.Type
}

// newProvider returns a provider with room for about size object types.
func newProvider(size int) *provider {
	r, _ := types.NewRegistry() // no proto types: cannot fail
	return &provider{Registry: r, objs: make(map[string]*objDef, size), alias: map[string]string{}, flat: map[*ir.Type]flatObj{}}
}

func (p *provider) FindStructType(name string) (*types.Type, bool) {
	if _, ok := p.objs[p.resolve(name)]; ok {
		return types.NewTypeTypeWithParam(types.NewObjectType(name)), true
	}
	return p.Registry.FindStructType(name)
}

func (p *provider) FindStructFieldNames(name string) ([]string, bool) {
	if o, ok := p.objs[p.resolve(name)]; ok {
		return o.names, true
	}
	return p.Registry.FindStructFieldNames(name)
}

func (p *provider) FindStructFieldType(name, field string) (*types.FieldType, bool) {
	if o, ok := p.objs[p.resolve(name)]; ok {
		t, ok := o.fields[field]
		if !ok {
			return nil, false
		}
		return &types.FieldType{Type: t}, true
	}
	return p.Registry.FindStructFieldType(name, field)
}

// fieldType is FindStructFieldType for the workflow's own object types,
// without allocating a FieldType (the fast expression paths ask often).
func (p *provider) fieldType(name, field string) (*types.Type, bool) {
	if len(p.alias) > 0 {
		name = p.resolve(name)
	}
	if o, ok := p.objs[name]; ok {
		t, ok := o.fields[field]
		return t, ok
	}
	return nil, false
}

// define registers an object type under name, replacing any earlier one.
func (p *provider) define(name string, t *ir.Type, fields map[string]*types.Type) *types.Type {
	names := make([]string, 0, len(fields))
	for k := range fields {
		names = append(names, k)
	}
	sort.Strings(names)
	p.objs[name] = &objDef{fields: fields, names: names, ir: t}
	return types.NewObjectType(name)
}

// celType converts an IR type to a CEL type, registering object types
// under name (and nested ones under name.field).
func (p *provider) celType(t *ir.Type, name string) *types.Type {
	if t == nil {
		return types.DynType
	}
	switch t.Kind {
	case ir.KindString, ir.KindSecret:
		return types.StringType
	case ir.KindInt:
		return types.IntType
	case ir.KindNumber:
		return types.DoubleType
	case ir.KindBool:
		return types.BoolType
	case ir.KindDuration:
		return types.DurationType
	case ir.KindNull:
		return types.NullType
	case ir.KindList:
		return types.NewListType(p.celType(t.Elem, nested(t.Elem, name, ".item")))
	case ir.KindMap:
		return types.NewMapType(types.StringType, p.celType(t.Elem, nested(t.Elem, name, ".value")))
	case ir.KindObject:
		if c, ok := p.flat[t]; ok {
			p.objs[name] = &objDef{fields: c.fields, names: c.names, ir: t}
			return types.NewObjectType(name)
		}
		fields := make(map[string]*types.Type, len(t.Fields))
		flat := true
		for i := range t.Fields {
			f := &t.Fields[i]
			fields[f.Name] = p.celType(&f.Type, nested(&f.Type, name, "."+f.Name))
			flat = flat && !hasObject(&f.Type)
		}
		ot := p.define(name, t, fields)
		if flat {
			p.flat[t] = flatObj{fields: fields, names: p.objs[name].names}
		}
		return ot
	}
	return types.DynType
}

// nested returns the provider name of a type nested in name (name+suffix)
// if t has objects that need one, else "" (saving the concatenation).
func nested(t *ir.Type, name, suffix string) string {
	if hasObject(t) {
		return name + suffix
	}
	return ""
}

// hasObject reports whether t is or contains an object type.
func hasObject(t *ir.Type) bool {
	for t != nil && (t.Kind == ir.KindList || t.Kind == ir.KindMap) {
		t = t.Elem
	}
	return t != nil && t.Kind == ir.KindObject
}

// irType converts a checked CEL type back to an IR type.
func (p *provider) irType(t *types.Type) *ir.Type {
	if t == nil {
		return &ir.Type{Kind: ir.KindAny}
	}
	switch t.Kind() {
	case types.StringKind:
		return &ir.Type{Kind: ir.KindString}
	case types.IntKind, types.UintKind:
		return &ir.Type{Kind: ir.KindInt}
	case types.DoubleKind:
		return &ir.Type{Kind: ir.KindNumber}
	case types.BoolKind:
		return &ir.Type{Kind: ir.KindBool}
	case types.DurationKind:
		return &ir.Type{Kind: ir.KindDuration}
	case types.NullTypeKind:
		return &ir.Type{Kind: ir.KindNull}
	case types.ListKind:
		return &ir.Type{Kind: ir.KindList, Elem: p.irType(t.Parameters()[0])}
	case types.MapKind:
		ps := t.Parameters()
		if ps[0].Kind() == types.StringKind || ps[0].Kind() == types.DynKind {
			return &ir.Type{Kind: ir.KindMap, Elem: p.irType(ps[1])}
		}
	case types.StructKind:
		if o, ok := p.objs[p.resolve(t.TypeName())]; ok && o.ir != nil {
			c := *o.ir
			return &c
		}
	}
	return &ir.Type{Kind: ir.KindAny}
}

// celOptions are the CEL features a workflow may use: the standard
// definitions plus the strings and math extensions and wfc's functions
// (package cellib). The runtime evaluates with the same set.
func celOptions(p *provider) []cel.EnvOption {
	return append([]cel.EnvOption{cel.CustomTypeProvider(p)}, append(cellib.Options(),
		cel.ParserRecursionLimit(MaxExprRecursion),
		cel.ParserExpressionSizeLimit(MaxExprSize),
		cel.ExpressionNodeLimit(MaxExprNodes),
	)...)
}

// sizeEstimator bounds the sizes the cost estimate assumes for values whose
// size the checker cannot see (inputs, node outputs): 1,000 elements or
// characters. docs/language.md states the assumption.
type sizeEstimator struct{}

const assumedSize = 1000

func (sizeEstimator) EstimateSize(checker.AstNode) *checker.SizeEstimate {
	return &checker.SizeEstimate{Min: 0, Max: assumedSize}
}

func (sizeEstimator) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}

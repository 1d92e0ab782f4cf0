package lsp

import (
	"sort"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/ir/cellib"
)

// The CEL functions completion offers, read once from a cel-go environment
// with the libraries the compiler enables (package cellib): global
// functions, namespaced ones (math.greatest, url.pathEscape), and member
// functions by the kind of their receiver.
type celCatalog struct {
	globals    []string
	namespaces map[string][]string     // "math" -> greatest, least, ...
	members    map[types.Kind][]string // receiver kind -> function names
	anyMembers []string                // members whose receiver is a type parameter
	macros     map[types.Kind][]string // all, exists, ... on lists and maps
}

var (
	catalogOnce sync.Once
	catalog     *celCatalog
)

func celFunctions() *celCatalog {
	catalogOnce.Do(func() {
		catalog = &celCatalog{namespaces: map[string][]string{}, members: map[types.Kind][]string{}, macros: map[types.Kind][]string{}}
		env, err := cel.NewEnv(cellib.Options()...)
		if err != nil {
			return
		}
		globals := map[string]bool{"has": true}
		members := map[types.Kind]map[string]bool{}
		var anyMembers = map[string]bool{}
		for name, fn := range env.Functions() {
			if name == "" || !isIdentByte(name[0]) || strings.HasPrefix(name, "_") || strings.HasPrefix(name, "@") {
				continue // operators: _+_, !_, @in ...
			}
			for _, o := range fn.OverloadDecls() {
				if !o.IsMemberFunction() {
					if ns, short, ok := strings.Cut(name, "."); ok {
						// (math.@max and math.@min implement the
						// math.greatest and math.least macros.)
						if isIdent(short) {
							catalog.namespaces[ns] = appendUnique(catalog.namespaces[ns], short)
						}
					} else if name != "in" { // the deprecated function form of the operator
						globals[name] = true
					}
					continue
				}
				args := o.ArgTypes()
				if len(args) == 0 {
					continue
				}
				k := args[0].Kind()
				if k == types.TypeParamKind || k == types.DynKind || k == types.AnyKind {
					anyMembers[name] = true
					continue
				}
				if members[k] == nil {
					members[k] = map[string]bool{}
				}
				members[k][name] = true
			}
		}
		for _, m := range env.Macros() {
			switch name := m.Function(); {
			case !m.IsReceiverStyle():
				globals[name] = true
			case name == "greatest" || name == "least":
				catalog.namespaces["math"] = appendUnique(catalog.namespaces["math"], name) // math.greatest(...)
			}
		}
		catalog.globals = sortedKeys(globals)
		for k, m := range members {
			catalog.members[k] = sortedKeys(m)
		}
		catalog.anyMembers = sortedKeys(anyMembers)
		comprehensions := []string{"all", "exists", "exists_one", "filter", "map"}
		catalog.macros[types.ListKind] = comprehensions
		catalog.macros[types.MapKind] = comprehensions
		for ns := range catalog.namespaces {
			sort.Strings(catalog.namespaces[ns])
		}
	})
	return catalog
}

func appendUnique(xs []string, x string) []string {
	for _, y := range xs {
		if y == x {
			return xs
		}
	}
	return append(xs, x)
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// celGlobals lists the global functions and macros.
func celGlobals() []string { return celFunctions().globals }

// celNamespace lists the functions of a namespace such as math.
func celNamespace(ns string) []string { return celFunctions().namespaces[ns] }

// celMembers lists the member functions and macros for a value of type t.
func celMembers(t *ir.Type) []string {
	cat := celFunctions()
	var k types.Kind
	switch t.Kind {
	case ir.KindString, ir.KindSecret:
		k = types.StringKind
	case ir.KindInt:
		k = types.IntKind
	case ir.KindNumber:
		k = types.DoubleKind
	case ir.KindBool:
		k = types.BoolKind
	case ir.KindDuration:
		k = types.DurationKind
	case ir.KindList:
		k = types.ListKind
	case ir.KindMap:
		k = types.MapKind
	default:
		return nil
	}
	var out []string
	out = append(out, cat.members[k]...)
	out = append(out, cat.macros[k]...)
	if k == types.ListKind || k == types.MapKind || k == types.StringKind {
		out = append(out, cat.anyMembers...)
	}
	sort.Strings(out)
	return out
}

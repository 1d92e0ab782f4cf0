package compiler

import (
	"fmt"
	"slices"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/decls"
)

// foldEnvs gives the fold pass small environments. cel-go's constant
// folding evaluates each constant part of an expression with every variable
// of the environment marked unknown (Env.PartialVars makes a pattern for
// each), and an expression's environment declares every node: with it,
// folding cost O(nodes) per expression, so O(nodes²) a workflow (a 9,990-node
// chain took 1.3 GiB and seconds to build). A fold environment has the same
// options (celOptions) and only the variables the expression reads, with
// their declarations in its own environment.
type foldEnvs struct {
	prov  *provider
	base  *cel.Env                                    // celOptions, no variable; nil if it failed
	vars  map[*cel.Env]map[string]*decls.VariableDecl // each expression environment's variables by name
	cache map[string]*cel.Env                         // by the declarations they add to base
}

// maxFoldEnvs bounds the cache: in a chain where each node reads the one
// before, no two expressions read the same variables.
const maxFoldEnvs = 256

func newFoldEnvs(p *provider) *foldEnvs {
	f := &foldEnvs{prov: p, vars: map[*cel.Env]map[string]*decls.VariableDecl{}, cache: map[string]*cel.Env{}}
	f.base, _ = cel.NewEnv(celOptions(p)...)
	return f
}

// env returns the environment to fold a, checked in env, with: base and
// the variables a reads. It returns env itself when base could not be built.
func (f *foldEnvs) env(env *cel.Env, a *cel.Ast) *cel.Env {
	if f.base == nil {
		return env
	}
	byName := f.vars[env]
	if byName == nil {
		byName = map[string]*decls.VariableDecl{}
		for _, v := range env.Variables() {
			byName[v.Name()] = v
		}
		f.vars[env] = byName
	}
	var used []*decls.VariableDecl
	for _, r := range a.NativeRep().ReferenceMap() {
		// Identifier references name a variable; a comprehension's own
		// variables are not declared in env.
		if r.Name == "" || len(r.OverloadIDs) > 0 {
			continue
		}
		if v := byName[r.Name]; v != nil && !slices.Contains(used, v) {
			used = append(used, v)
		}
	}
	if len(used) == 0 {
		return f.base
	}
	slices.SortFunc(used, func(x, y *decls.VariableDecl) int { return strings.Compare(x.Name(), y.Name()) })
	var key strings.Builder
	for _, v := range used {
		fmt.Fprintf(&key, "%s\x00%p\x00", v.Name(), v)
	}
	if e, ok := f.cache[key.String()]; ok {
		return e
	}
	e, err := f.base.Extend(cel.VariableDecls(used...))
	if err != nil {
		return env
	}
	if len(f.cache) >= maxFoldEnvs {
		clear(f.cache)
	}
	f.cache[key.String()] = e
	return e
}

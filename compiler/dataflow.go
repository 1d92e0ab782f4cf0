package compiler

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/lang/diag"
	"github.com/wfc-lang/wfc/lang/source"
)

// inputDefaults evaluates input defaults, which must be constants of the
// declared type.
func (s *state) inputDefaults() {
	env, err := cel.NewEnv(celOptions(newProvider(0))...)
	if err != nil {
		return
	}
	for _, in := range s.inputs {
		e := in.Decl.Default
		if implicitSecretDefault(in) {
			if !ir.ValidSecretName(in.Name) {
				s.errorf(diag.DefaultType, in.Decl.Name.Range, "the secret's name defaults to the input's, which is longer than 128 bytes; give a shorter one as the default")
				continue
			}
			s.defaults[in.Name], _ = json.Marshal(in.Name)
			continue
		}
		if e == nil {
			continue
		}
		if e.Str != nil && e.Str.Template != nil {
			s.errorf(diag.DefaultType, e.Range, "an input default must be a constant; templates are not allowed")
			continue
		}
		a, iss := env.Compile(e.Text)
		if iss != nil && iss.Err() != nil {
			ce := iss.Errors()[0]
			if q := quoted.FindStringSubmatch(ce.Message); q != nil && strings.HasPrefix(ce.Message, "undeclared reference") {
				s.errorf(diag.DefaultType, e.Range, "an input default must be a constant; it cannot refer to `%s`", q[1])
				continue
			}
			s.errorf(diag.DefaultType, e.Range, "input default must be a constant expression: %s", cleanCELMessage(ce.Message))
			continue
		}
		if !s.assignable(in.Type, a.OutputType()) {
			s.errorf(diag.DefaultType, e.Range, "default of `%s` must be %s, found %s", in.Name, in.Type.String(), typeName(a.OutputType()))
			continue
		}
		prg, err := env.Program(a, cel.CostLimit(MaxExprCost))
		if err != nil {
			s.errorf(diag.DefaultType, e.Range, "cannot evaluate default: %v", err)
			continue
		}
		v, _, err := prg.Eval(cel.NoVars())
		if err != nil {
			s.errorf(diag.DefaultType, e.Range, "cannot evaluate default: %v", err)
			continue
		}
		j, err := toJSON(v)
		if err != nil {
			s.errorf(diag.DefaultType, e.Range, "default is not representable as JSON: %v", err)
			continue
		}
		// The type check lets maps stand for objects and strings for
		// durations; a constant can be checked completely now.
		if msg := constFits(in.Type, j, ""); msg != "" {
			s.errorf(diag.DefaultType, e.Range, "default of `%s` does not fit %s: %s", in.Name, in.Type.String(), msg)
			continue
		}
		b, _ := json.Marshal(j)
		s.defaults[in.Name] = b
	}
}

// constFits checks a constant JSON value (from toJSON) against t; it
// returns why it does not fit, or "". path names the part being checked.
func constFits(t *ir.Type, v any, path string) string {
	at := func(p string) string {
		if p == "" {
			return ""
		}
		return " at " + p
	}
	switch t.Kind {
	case ir.KindSecret:
		if str, ok := v.(string); !ok || !ir.ValidSecretName(str) {
			return "the default of a secret input is the secret's name ([A-Za-z_][A-Za-z0-9_]*, at most 128 bytes), never its value"
		}
	case ir.KindDuration:
		if str, ok := v.(string); ok {
			if _, err := time.ParseDuration(str); err != nil {
				return fmt.Sprintf("%q is not a duration%s", str, at(path))
			}
		}
	case ir.KindList:
		if l, ok := v.([]any); ok {
			for i, x := range l {
				if msg := constFits(t.Elem, x, fmt.Sprintf("%s[%d]", path, i)); msg != "" {
					return msg
				}
			}
		}
	case ir.KindMap:
		if m, ok := v.(map[string]any); ok {
			for _, k := range sortedKeys(m) {
				if msg := constFits(t.Elem, m[k], fmt.Sprintf("%s[%q]", path, k)); msg != "" {
					return msg
				}
			}
		}
	case ir.KindObject:
		m, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		for _, f := range t.Fields {
			x, ok := m[f.Name]
			if !ok {
				if !f.Optional {
					return fmt.Sprintf("field `%s` is missing%s", f.Name, at(path))
				}
				continue
			}
			if msg := constFits(&f.Type, x, path+"."+f.Name); msg != "" {
				return msg
			}
		}
	case ir.KindString, ir.KindBool, ir.KindInt, ir.KindNumber:
		ok := false
		switch v.(type) {
		case string:
			ok = t.Kind == ir.KindString
		case bool:
			ok = t.Kind == ir.KindBool
		case int64, uint64:
			ok = t.Kind == ir.KindInt || t.Kind == ir.KindNumber
		case float64:
			ok = t.Kind == ir.KindNumber
		}
		if !ok && path != "" { // top-level scalars were type-checked already
			found := map[bool]string{true: "null", false: "a list or object"}[v == nil]
			switch v.(type) {
			case string:
				found = "string"
			case bool:
				found = "bool"
			case int64, uint64, float64:
				found = "number"
			}
			return fmt.Sprintf("%s must be %s, found %s", strings.TrimPrefix(path, "."), t.Kind, found)
		}
	}
	return ""
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// toJSON converts a CEL value to a JSON-compatible Go value. Durations
// become Go duration strings ("1m30s").
func toJSON(v ref.Val) (any, error) {
	switch v.Type() {
	case types.NullType:
		return nil, nil
	case types.BoolType, types.StringType, types.IntType, types.UintType:
		return v.Value(), nil
	case types.DoubleType:
		f := v.Value().(float64)
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, fmt.Errorf("%v is not a JSON number", f)
		}
		return f, nil
	case types.DurationType:
		d, err := v.ConvertToNative(timeDurationType)
		if err != nil {
			return nil, err
		}
		return fmt.Sprint(d), nil
	}
	if l, ok := v.(traits.Lister); ok {
		out := []any{}
		it := l.Iterator()
		for it.HasNext() == types.True {
			x, err := toJSON(it.Next())
			if err != nil {
				return nil, err
			}
			out = append(out, x)
		}
		return out, nil
	}
	if m, ok := v.(traits.Mapper); ok {
		out := map[string]any{}
		it := m.Iterator()
		for it.HasNext() == types.True {
			k := it.Next()
			ks, ok := k.Value().(string)
			if !ok {
				return nil, fmt.Errorf("map key %v is not a string", k.Value())
			}
			x, err := toJSON(m.Get(k))
			if err != nil {
				return nil, err
			}
			out[ks] = x
		}
		return out, nil
	}
	return nil, fmt.Errorf("unsupported value of type %s", v.Type().TypeName())
}

// dataflow checks every x.output read: x must be an ancestor of the
// reading node (it has finished before), and if x may have been skipped the
// read must be guarded with has(x.output) — in the same expression, or by
// the reading node's `when` (whenGuards) — unless x dominates the reader,
// which is then skipped too.
func (s *state) dataflow() {
	if s.cyclic || s.anc == nil {
		return
	}
	guards := map[*node]map[int]bool{} // whenGuards, per reading node
	for _, er := range s.reads {
		var wg map[int]bool
		if n := er.owner; n != nil && n.when != nil {
			if g, ok := guards[n]; ok {
				wg = g
			} else {
				wg = s.whenGuards(n)
				guards[n] = wg
			}
		}
		for _, r := range er.reads {
			x := s.nodes[r.node]
			if !r.iter && !r.err && wg[x.idx] {
				r.guarded = true
			}
			if r.iter {
				s.iterRead(er.owner, x, r)
				continue
			}
			if r.err {
				s.errRead(er.owner, x, r)
				continue
			}
			if er.owner == nil {
				if r.guarded {
					continue
				}
				if er.final {
					s.guardFix(s.errorf(diag.MaybeSkipped, r.rng, "in finally, %s may not have run: the run may have failed or been cancelled before it; guard the read with has(%s.output)", x.id, x.id).
						WithHint(s.guardHint(x, r)), x, r, er.expr)
					continue
				}
				if s.maySkip[x.idx] {
					s.guardFix(s.errorf(diag.MaybeSkipped, r.rng, "%s may have been skipped; guard the read with has(%s.output)", x.id, x.id).
						WithHint(s.guardHint(x, r)), x, r, er.expr)
				} else if len(x.onError) > 0 {
					s.guardFix(s.errorf(diag.MaybeSkipped, r.rng, "%s may have failed (it has on_error) and then has no output; guard the read with has(%s.output)", x.id, x.id).
						WithHint(s.guardHint(x, r)), x, r, er.expr)
				}
				continue
			}
			n := er.owner
			if s.previousIteration(x, n) {
				// x runs after n (or is n) in a loop body holding both: n
				// reads x's output of the previous iteration.
				if !r.guarded {
					s.guardFix(s.errorf(diag.MaybeSkipped, r.rng, "in %s, %s.output is %s's output in the previous iteration, which iteration 1 does not have; guard the read with has(%s.output)", n.id, x.id, x.id, x.id).
						WithHint(s.guardHint(x, r)), x, r, er.expr)
				}
				continue
			}
			if x == n {
				s.errorf(diag.NotAncestor, r.rng, "%s cannot read its own output here", n.id).
					WithHint("inside branch, loop and compensate write `output`; elsewhere the node has not run yet")
				continue
			}
			if !s.anc[n.idx].has(x.idx) {
				if s.afterTypo(n, x) {
					continue // the WF1001 of the typo says it all
				}
				d := s.errorf(diag.NotAncestor, r.rng, "%s reads %s.output, but %s is not guaranteed to have finished", n.id, x.id, x.id)
				if s.anc[x.idx].has(n.idx) {
					d.WithHint(fmt.Sprintf("%s runs after %s, so its output does not exist yet; read it in a node after %s", x.id, n.id, x.id))
				} else if r, ok := s.exclusiveOf(x, n); ok {
					// `after x` would make n a join that can never run (WF4006).
					d.WithHint(fmt.Sprintf("%s and %s run on different outcomes of %s, never in one run; read %s.output in a node after both with `join settled` or `join any`, guarding it with has()", x.id, n.id, r, x.id))
				} else {
					d.WithHint(fmt.Sprintf("add `after %s` to %s", x.id, n.id))
					s.afterFix(d, n, x)
				}
				continue
			}
			if r.guarded {
				continue
			}
			if jf := s.computeJoinFacts(); jf != nil && jf.sure[n.idx].has(x.idx) {
				continue // every way n runs passes through x's success
			}
			if s.onErrorPath(x, n) {
				s.guardFix(s.errorf(diag.MaybeSkipped, r.rng, "%s may have failed when %s runs (it is on %s's on_error path); guard the read with has(%s.output)", x.id, n.id, x.id, x.id).
					WithHint(s.guardHint(x, r)), x, r, er.expr)
				continue
			}
			if s.dominates(x.idx, n.idx) {
				continue
			}
			if s.maySkip[x.idx] {
				s.guardFix(s.errorf(diag.MaybeSkipped, r.rng, "%s may have been skipped when %s runs; guard the read with has(%s.output)", x.id, n.id, x.id).
					WithHint(s.guardHint(x, r)), x, r, er.expr)
			} else if len(x.onError) > 0 {
				s.guardFix(s.errorf(diag.MaybeSkipped, r.rng, "%s may have failed (it has on_error) when %s runs; guard the read with has(%s.output)", x.id, n.id, x.id).
					WithHint(s.guardHint(x, r)), x, r, er.expr)
			} else if n.join == ir.JoinAny || n.join == ir.JoinFirst {
				s.guardFix(s.errorf(diag.MaybeSkipped, r.rng, "%s joins with `%s` and may run before %s has finished; guard the read with has(%s.output)", n.id, n.join, x.id, x.id), x, r, er.expr)
			}
		}
	}
}

// whenGuards returns the nodes x whose output n's `when` requires:
// has(x.output), alone or as an operand of && (at any depth). Where the
// `when` is false n is skipped and evaluates nothing else (for_each, with,
// prompt, branch, loop, compensate), so it guards the reads of x.output in
// all of n's expressions. `has(x.output) || c` and `!has(x.output)` guard
// nothing. A `when` with errors, or without has(), has no checked AST here.
func (s *state) whenGuards(n *node) map[int]bool {
	a := s.checked[n.when]
	if a == nil {
		return nil
	}
	var g map[int]bool
	var walk func(e celast.Expr)
	walk = func(e celast.Expr) {
		switch e.Kind() {
		case celast.CallKind:
			if c := e.AsCall(); c.FunctionName() == operators.LogicalAnd && !c.IsMemberFunction() {
				for _, arg := range c.Args() {
					walk(arg)
				}
			}
		case celast.SelectKind:
			sel := e.AsSelect()
			if !sel.IsTestOnly() || sel.FieldName() != "output" || sel.Operand().Kind() != celast.IdentKind {
				return
			}
			if x := s.byID[sel.Operand().AsIdent()]; x != nil {
				if g == nil {
					g = map[int]bool{}
				}
				g[x.idx] = true
			}
		}
	}
	walk(a.NativeRep().Expr())
	return g
}

// previousIteration reports whether a read of x.output in n means x's
// output in the previous iteration: a loop body holds both, and x is n or
// runs after it in every iteration (x descends from n).
func (s *state) previousIteration(x, n *node) bool {
	if x != n && !s.anc[x.idx].has(n.idx) {
		return false
	}
	for _, l := range s.nodes {
		if l.loop != nil && l.loop.backTo != nil {
			if b := s.loopBody(l); b.has(x.idx) && b.has(n.idx) {
				return true
			}
		}
	}
	return false
}

// errRead checks a read of x.error: it exists when x failed, so a read
// needs a has(x.error) guard unless every way the reader runs passes
// through x's error edges.
func (s *state) errRead(n, x *node, r read) {
	if n != nil && x != n && !s.anc[n.idx].has(x.idx) {
		if s.afterTypo(n, x) {
			return
		}
		s.errorf(diag.NotAncestor, r.rng, "%s reads %s.error, but %s is not guaranteed to have finished", n.id, x.id, x.id).
			WithHint(fmt.Sprintf("read it in %s's on_error path", x.id))
		return
	}
	if r.guarded {
		return
	}
	if n != nil && n != x {
		if jf := s.computeJoinFacts(); jf != nil && jf.failed[n.idx].has(x.idx) {
			return // n runs only on x's error path
		} else if jf != nil && jf.sure[n.idx].has(x.idx) {
			s.errorf(diag.MaybeSkipped, r.rng, "%s.error never exists when %s runs: %s runs only after %s succeeded", x.id, n.id, n.id, x.id).
				WithHint(fmt.Sprintf("read it on %s's on_error path", x.id))
			return
		}
	}
	where := "here"
	if n != nil {
		where = "when " + n.id + " runs"
	}
	s.errorf(diag.MaybeSkipped, r.rng, "%s.error exists only when %s failed, which is not certain %s; read it on %s's on_error path or guard it with has(%s.error)", x.id, x.id, where, x.id, x.id).
		WithHint(fmt.Sprintf("has(%s.error) ? %s.error.code : \"\"", x.id, x.id))
}

// iterRead checks a read of L.iteration: in L's body (and L's own
// expressions) it is the current iteration; after the loop, the count; in
// the workflow output, the count (0 if L never completed). Elsewhere L may
// not have run yet.
func (s *state) iterRead(n, l *node, r read) {
	if n == nil || n == l || s.anc[n.idx].has(l.idx) {
		return
	}
	if l.loop.backTo != nil && s.loopBody(l).has(n.idx) || s.afterTypo(n, l) {
		return
	}
	s.errorf(diag.NotAncestor, r.rng, "%s reads %s.iteration, but %s is neither in %s's loop body nor after it", n.id, l.id, n.id, l.id).
		WithHint(fmt.Sprintf("add `after %s` to %s, or move %s into the loop body", l.id, n.id, n.id))
}

// onErrorPath reports whether n runs on x's on_error path (an on_error
// target of x or a descendant of one), where x has no output.
func (s *state) onErrorPath(x, n *node) bool {
	for _, t := range x.onError {
		if tn := s.byID[t.Name]; tn != nil && (tn == n || s.anc[n.idx].has(tn.idx)) {
			return true
		}
	}
	return false
}

// guardHint shows the read r of x.output guarded with has(): the whole
// member chain that is read (x.output.a.b), not only x.output.
func (s *state) guardHint(x *node, r read) string {
	end, _ := memberChain(s.file.Src, r.rng.End)
	return fmt.Sprintf("has(%s.output) ? %s : <fallback>", x.id, s.file.Text(source.Range{Start: r.rng.Start, End: end}))
}

// joins reports joins that may never run.
func (s *state) joins() {
	if s.cyclic || s.maySkip == nil {
		return
	}
	w := s.skel
	if w == nil {
		return
	}
	s.neverRuns()
	for i, n := range w.Nodes {
		ji := n.JoinInfo
		if ji == nil {
			continue
		}
		nd := s.nodes[i]
		if (ji.Mode == ir.JoinAny || ji.Mode == ir.JoinFirst) && ji.Conditional == ji.Expect && !ji.Covered {
			s.errorf(diag.JoinAllSkippable, nd.ident.Range, "%s joins with `%s`, but every incoming edge may deliver a skip token: it may never run", nd.id, ji.Mode)
		}
		if ji.Mode == ir.JoinFirst {
			s.firstJoin(nd, &w.Nodes[i])
		}
	}
}

var timeDurationType = reflect.TypeOf(time.Duration(0))

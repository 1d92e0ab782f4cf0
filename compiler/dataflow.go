package compiler

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/lang/diag"
)

// inputDefaults evaluates input defaults, which must be constants of the
// declared type.
func (s *state) inputDefaults() {
	env, err := cel.NewEnv(celOptions(newProvider())...)
	if err != nil {
		return
	}
	for _, in := range s.inputs {
		e := in.Decl.Default
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
			s.errorf(diag.DefaultType, e.Range, "input default must be a constant expression: %s", cleanCELMessage(ce.Message))
			continue
		}
		if !s.assignable(in.Type, a.OutputType()) {
			s.errorf(diag.DefaultType, e.Range, "default of `%s` must be %s, found %s", in.Name, irTypeName(in.Type), typeName(a.OutputType()))
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
		b, _ := json.Marshal(j)
		s.defaults[in.Name] = b
	}
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
// read must be guarded with has(x.output) — unless x dominates the reader,
// which is then skipped too.
func (s *state) dataflow() {
	if s.cyclic || s.anc == nil {
		return
	}
	for _, er := range s.reads {
		for _, r := range er.reads {
			x := s.nodes[r.node]
			if er.owner == nil {
				if s.maySkip[x.idx] && !r.guarded {
					s.errorf(diag.MaybeSkipped, r.rng, "%s may have been skipped; guard the read with has(%s.output)", x.id, x.id).
						WithHint(fmt.Sprintf("has(%s.output) ? %s : <fallback>", x.id, s.file.Text(r.rng)))
				}
				continue
			}
			n := er.owner
			if x == n {
				s.errorf(diag.NotAncestor, r.rng, "%s cannot read its own output here", n.id).
					WithHint("inside branch, loop and compensate write `output`; elsewhere the node has not run yet")
				continue
			}
			if !s.anc[n.idx].has(x.idx) {
				s.errorf(diag.NotAncestor, r.rng, "%s reads %s.output, but %s is not guaranteed to have finished", n.id, x.id, x.id).
					WithHint(fmt.Sprintf("add `after %s` to %s", x.id, n.id))
				continue
			}
			if r.guarded {
				continue
			}
			if s.onErrorPath(x, n) {
				s.errorf(diag.MaybeSkipped, r.rng, "%s may have failed when %s runs (it is on %s's on_error path); guard the read with has(%s.output)", x.id, n.id, x.id, x.id)
				continue
			}
			if s.dominates(x.idx, n.idx) {
				continue
			}
			if s.maySkip[x.idx] {
				s.errorf(diag.MaybeSkipped, r.rng, "%s may have been skipped when %s runs; guard the read with has(%s.output)", x.id, n.id, x.id)
			} else if n.join == ir.JoinAny {
				s.errorf(diag.MaybeSkipped, r.rng, "%s joins with `any` and may run before %s has finished; guard the read with has(%s.output)", n.id, x.id, x.id)
			}
		}
	}
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

// joins reports joins that may never run.
func (s *state) joins() {
	if s.cyclic || s.maySkip == nil {
		return
	}
	w := s.skeleton()
	if ir.Analyze(w) != nil {
		return
	}
	for i, n := range w.Nodes {
		ji := n.JoinInfo
		if ji == nil {
			continue
		}
		nd := s.nodes[i]
		if ji.Mode == ir.JoinAny && ji.Conditional == ji.Expect {
			s.errorf(diag.JoinAllSkippable, nd.ident.Range, "%s joins with `any`, but every incoming edge may deliver a skip token: it may never run", nd.id)
		}
	}
}

var timeDurationType = reflect.TypeOf(time.Duration(0))

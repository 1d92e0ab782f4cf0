package runtime

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/ext"

	"github.com/wfc-lang/wfc/ir"
)

// CEL limits at run time (docs/language.md §6.6).
const (
	celCostLimit   = 1_000_000
	celEvalTimeout = time.Second
)

// celCache compiles a plan's expressions once. Every name an expression
// may use is declared as dyn: input, every node id, output and every
// for_each variable; the compiler has type-checked the expressions already.
type celCache struct {
	once sync.Once
	env  *cel.Env
	err  error
	mu   sync.Mutex
	prg  map[string]cel.Program
	refs map[string][]string // names an expression refers to
	vars []string
}

func newCELCache(p *plan) *celCache {
	vars := []string{"input", "output", "run"}
	for i := range p.w.Nodes {
		n := &p.w.Nodes[i]
		vars = append(vars, n.ID)
		if n.ForEach != nil && n.ForEach.Var != "" {
			vars = append(vars, n.ForEach.Var)
		}
		if n.ForEach != nil && n.ForEach.Index != "" {
			vars = append(vars, n.ForEach.Index)
		}
	}
	sort.Strings(vars)
	return &celCache{prg: map[string]cel.Program{}, refs: map[string][]string{}, vars: vars}
}

func (c *celCache) program(src string) (cel.Program, error) {
	c.once.Do(func() {
		opts := []cel.EnvOption{
			ext.Strings(), ext.Math(),
			cel.CrossTypeNumericComparisons(true),
			cel.ParserRecursionLimit(100),
			cel.ParserExpressionSizeLimit(10_000),
		}
		seen := map[string]bool{}
		for _, v := range c.vars {
			if !seen[v] {
				seen[v] = true
				opts = append(opts, cel.Variable(v, cel.DynType))
			}
		}
		c.env, c.err = cel.NewEnv(opts...)
	})
	if c.err != nil {
		return nil, c.err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.prg[src]; ok {
		return p, nil
	}
	ast, iss := c.env.Compile(src)
	if iss.Err() != nil {
		return nil, iss.Err()
	}
	p, err := c.env.Program(ast, cel.CostLimit(celCostLimit), cel.InterruptCheckFrequency(100))
	if err != nil {
		return nil, err
	}
	c.prg[src] = p
	var names []string
	for _, r := range ast.NativeRep().ReferenceMap() {
		if r.Name != "" && !slices.Contains(names, r.Name) {
			names = append(names, r.Name)
		}
	}
	c.refs[src] = names
	return p, nil
}

// names returns the variables an expression refers to.
func (c *celCache) names(src string) ([]string, error) {
	if _, err := c.program(src); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.refs[src], nil
}

// An evalError is an expression that failed to evaluate: it fails the node
// without retry (docs/language.md §6.4).
type evalError struct {
	what string
	loc  *ir.Loc
	err  error
}

func (e *evalError) Error() string {
	pos := ""
	if e.loc != nil {
		pos = fmt.Sprintf("%s:%d:%d: ", e.loc.File, e.loc.Line, e.loc.Col)
	}
	return fmt.Sprintf("%sevaluating %s: %v", pos, e.what, e.err)
}

func (e *evalError) Unwrap() error { return e.err }

// vars is an evaluation's activation: CEL values by name.
type vars map[string]any

func (v vars) with(name string, val any) vars {
	m := make(vars, len(v)+1)
	for k, x := range v {
		m[k] = x
	}
	m[name] = val
	return m
}

func (p *plan) eval(ctx context.Context, e *ir.Expr, what string, act vars) (ref.Val, error) {
	prg, err := p.cel.program(e.CEL)
	if err != nil {
		return nil, &evalError{what, e.Loc, err}
	}
	ctx, cancel := context.WithTimeout(ctx, celEvalTimeout)
	defer cancel()
	val, _, err := prg.ContextEval(ctx, map[string]any(act))
	if err != nil {
		return nil, &evalError{what, e.Loc, err}
	}
	return val, nil
}

func (p *plan) evalBool(ctx context.Context, e *ir.Expr, what string, act vars) (bool, error) {
	v, err := p.eval(ctx, e, what, act)
	if err != nil {
		return false, err
	}
	b, ok := v.(types.Bool)
	if !ok {
		return false, &evalError{what, e.Loc, fmt.Errorf("got %s, want bool", v.Type().TypeName())}
	}
	return bool(b), nil
}

// evalJSON evaluates e to JSON.
func (p *plan) evalJSON(ctx context.Context, e *ir.Expr, what string, act vars) (json.RawMessage, error) {
	v, err := p.eval(ctx, e, what, act)
	if err != nil {
		return nil, err
	}
	data, err := celJSON(v)
	if err != nil {
		return nil, &evalError{what, e.Loc, err}
	}
	return data, nil
}

// value renders one ir.Value to JSON: a constant as is, an expression's
// value, or a template's text (strings spliced as they are, other values as
// JSON).
func (p *plan) value(ctx context.Context, v *ir.Value, what string, act vars) (json.RawMessage, error) {
	switch {
	case v.Const != nil:
		return v.Const, nil
	case v.Expr != nil:
		return p.evalJSON(ctx, v.Expr, what, act)
	case v.Template != nil:
		var b strings.Builder
		for _, part := range v.Template {
			if part.Expr == nil {
				b.WriteString(part.Text)
				continue
			}
			val, err := p.eval(ctx, part.Expr, what, act)
			if err != nil {
				return nil, err
			}
			if s, ok := val.(types.String); ok {
				b.WriteString(string(s))
				continue
			}
			data, err := celJSON(val)
			if err != nil {
				return nil, &evalError{what, part.Expr.Loc, err}
			}
			b.Write(data)
		}
		return json.Marshal(b.String())
	}
	return json.RawMessage("null"), nil
}

// params renders a `with` block to a JSON object, fields in source order.
func (p *plan) params(ctx context.Context, ps []ir.Param, node string, act vars) (json.RawMessage, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i := range ps {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(ps[i].Name)
		b.Write(k)
		b.WriteByte(':')
		v, err := p.value(ctx, &ps[i].Value, fmt.Sprintf("%s.with.%s", node, ps[i].Name), act)
		if err != nil {
			return nil, err
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// celJSON converts a CEL value to JSON.
func celJSON(v ref.Val) (json.RawMessage, error) {
	x, err := celNative(v, 0)
	if err != nil {
		return nil, err
	}
	return json.Marshal(x)
}

func celNative(v ref.Val, depth int) (any, error) {
	if depth > 64 {
		return nil, errors.New("value nested too deeply")
	}
	switch x := v.(type) {
	case types.Null:
		return nil, nil
	case types.Bool:
		return bool(x), nil
	case types.Int:
		return int64(x), nil
	case types.Uint:
		return uint64(x), nil
	case types.Double:
		f := float64(x)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("%v has no JSON form", f)
		}
		return f, nil
	case types.String:
		return string(x), nil
	case types.Bytes:
		return base64.StdEncoding.EncodeToString([]byte(x)), nil
	case types.Duration:
		return x.Duration.String(), nil
	case types.Timestamp:
		return x.Time.UTC().Format(time.RFC3339Nano), nil
	}
	if l, ok := v.(traits.Lister); ok {
		out := []any{}
		for it := l.Iterator(); it.HasNext() == types.True; {
			e, err := celNative(it.Next(), depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, e)
		}
		return out, nil
	}
	if m, ok := v.(traits.Mapper); ok {
		out := map[string]any{}
		for it := m.Iterator(); it.HasNext() == types.True; {
			k := it.Next()
			var ks string
			switch kk := k.(type) {
			case types.String:
				ks = string(kk)
			default:
				kn, err := celNative(k, depth+1)
				if err != nil {
					return nil, err
				}
				ks = fmt.Sprint(kn)
			}
			e, err := celNative(m.Get(k), depth+1)
			if err != nil {
				return nil, err
			}
			out[ks] = e
		}
		return out, nil
	}
	if types.IsError(v) {
		return nil, fmt.Errorf("%v", v)
	}
	return nil, fmt.Errorf("value of type %s has no JSON form", v.Type().TypeName())
}

// decodeJSON decodes a JSON document keeping numbers as json.Number.
func decodeJSON(data []byte) (any, error) {
	if string(data) == "{}" { // the output of many handlers (noop)
		return map[string]any{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// toCEL converts a JSON value (decoded with UseNumber) to the Go value CEL
// should see, guided by its IR type: an int is an int64, a number a float64
// (JSON has one number type), a duration a time.Duration. Where the type
// says nothing (any, nil), a number written without fraction or exponent is
// an int and any other a double.
func toCEL(v any, t *ir.Type) any {
	kind := ir.KindAny
	if t != nil {
		kind = t.Kind
	}
	switch x := v.(type) {
	case json.Number:
		switch kind {
		case ir.KindInt:
			if i, err := x.Int64(); err == nil {
				return i
			}
			if f, err := x.Float64(); err == nil && f == math.Trunc(f) && math.Abs(f) < 1<<63 {
				return int64(f)
			}
		case ir.KindNumber:
			f, _ := x.Float64()
			return f
		}
		if !strings.ContainsAny(x.String(), ".eE") {
			if i, err := x.Int64(); err == nil {
				return i
			}
		}
		f, _ := x.Float64()
		return f
	case string:
		if kind == ir.KindDuration {
			if d, err := time.ParseDuration(x); err == nil {
				return d
			}
		}
		return x
	case []any:
		var elem *ir.Type
		if t != nil && t.Kind == ir.KindList {
			elem = t.Elem
		}
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = toCEL(e, elem)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			var ft *ir.Type
			if t != nil {
				switch t.Kind {
				case ir.KindMap:
					ft = t.Elem
				case ir.KindObject:
					for i := range t.Fields {
						if t.Fields[i].Name == k {
							ft = &t.Fields[i].Type
							break
						}
					}
				}
			}
			out[k] = toCEL(e, ft)
		}
		return out
	}
	return v // bool, nil
}

// jsonToCEL decodes data and converts it with toCEL.
func jsonToCEL(data []byte, t *ir.Type) (any, error) {
	v, err := decodeJSON(data)
	if err != nil {
		return nil, err
	}
	return toCEL(v, t), nil
}

// outputType is the type of a node's output as expressions see it: a
// for_each node outputs a list of per-item outputs.
func outputType(n *ir.Node) *ir.Type {
	t := n.OutputType
	if n.ForEach != nil && (t == nil || t.Kind != ir.KindList) {
		return &ir.Type{Kind: ir.KindList, Elem: t}
	}
	return t
}

// itemType is the type of one handler output of a node: for a for_each
// that tolerates failures, the output field of its item results.
func itemType(n *ir.Node) *ir.Type {
	t := n.OutputType
	if n.ForEach != nil && t != nil && t.Kind == ir.KindList {
		t = t.Elem
		if n.ForEach.Tolerate != nil && t != nil {
			for i := range t.Fields {
				if t.Fields[i].Name == "output" {
					return &t.Fields[i].Type
				}
			}
			return nil
		}
	}
	return t
}

// inputsType is the object type of the workflow's inputs.
func inputsType(w *ir.Workflow) *ir.Type {
	t := &ir.Type{Kind: ir.KindObject}
	for _, in := range w.Inputs {
		t.Fields = append(t.Fields, ir.Field{Name: in.Name, Type: in.Type, Optional: !in.Required})
	}
	return t
}

// activation builds the variables of an evaluation from the run's inputs
// and the outputs present: each node id is bound to {"output": value} when
// the node has an output and to {} otherwise, so has(x.output) is false.
// input is decoded when an evaluation first reads it (a for_each item
// whose expressions do not read it decoded the whole list each time).
func (p *plan) activation(inputs string, ids []string, outputs map[string]string) (vars, error) {
	act := vars{}
	var once sync.Once
	var in any
	act["input"] = func() any {
		once.Do(func() {
			p.inputsDecoded.Add(1)
			v, err := jsonToCEL([]byte(inputs), inputsType(p.w))
			if err != nil {
				in = types.NewErr("run inputs: %v", err)
				return
			}
			in = v
		})
		return in
	}
	for _, id := range ids {
		n := p.nodes[id]
		if n == nil {
			continue
		}
		if raw, ok := outputs[n.ID]; ok {
			v, err := jsonToCEL([]byte(raw), outputType(n))
			if err != nil {
				return nil, fmt.Errorf("output of %s: %w", n.ID, err)
			}
			act[n.ID] = map[string]any{"output": v}
		} else {
			act[n.ID] = map[string]any{}
		}
	}
	return act, nil
}

// checkType reports whether a JSON value (decoded with UseNumber) fits t;
// path names the value in errors (e.g. "output" or "input x"):
// ints must be integral, durations parse, objects have their required
// fields (more are allowed), and optional fields may be null.
func checkType(v any, t *ir.Type, path string) error {
	if t == nil {
		return nil
	}
	bad := func(want string) error {
		return fmt.Errorf("%s: got %s, want %s", path, jsonKind(v), want)
	}
	switch t.Kind {
	case ir.KindAny, "":
		return nil
	case ir.KindNull:
		if v != nil {
			return bad("null")
		}
	case ir.KindString:
		if _, ok := v.(string); !ok {
			return bad("string")
		}
	case ir.KindBool:
		if _, ok := v.(bool); !ok {
			return bad("bool")
		}
	case ir.KindInt:
		n, ok := v.(json.Number)
		if !ok {
			return bad("int")
		}
		if _, err := n.Int64(); err != nil {
			f, err := n.Float64()
			if err != nil || f != math.Trunc(f) {
				return bad("int")
			}
		}
	case ir.KindNumber:
		if _, ok := v.(json.Number); !ok {
			return bad("number")
		}
	case ir.KindDuration:
		s, ok := v.(string)
		if !ok {
			return bad("duration")
		}
		if _, err := time.ParseDuration(s); err != nil {
			return bad("duration")
		}
	case ir.KindList:
		l, ok := v.([]any)
		if !ok {
			return bad("list")
		}
		for i, e := range l {
			if err := checkType(e, t.Elem, path+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
	case ir.KindMap:
		m, ok := v.(map[string]any)
		if !ok {
			return bad("map")
		}
		for k, e := range m {
			if err := checkType(e, t.Elem, path+"."+k); err != nil {
				return err
			}
		}
	case ir.KindObject:
		m, ok := v.(map[string]any)
		if !ok {
			return bad("object")
		}
		for i := range t.Fields {
			f := &t.Fields[i]
			e, present := m[f.Name]
			if !present || e == nil && f.Optional {
				if !f.Optional {
					return fmt.Errorf("%s: missing field %s", path, f.Name)
				}
				continue
			}
			if err := checkType(e, &f.Type, path+"."+f.Name); err != nil {
				return err
			}
		}
	}
	return nil
}

func jsonKind(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case bool:
		return "bool"
	case json.Number:
		if strings.ContainsAny(x.String(), ".eE") {
			return "number"
		}
		return "int"
	case []any:
		return "list"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

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
	"unicode/utf8"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/ext"
	"github.com/google/cel-go/interpreter"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/ir/cellib"
	"github.com/wfc-lang/wfc/runtime/handlers"
)

// CEL limits at run time (docs/language.md §6.6). celMaxString bounds
// the string one call makes (replace, join, format), checked before it is
// made; sizeCost charges 0.1 a byte, so the cost limit allows no more.
const (
	celCostLimit   = 1_000_000
	celEvalTimeout = time.Second
	celMaxString   = 10 * celCostLimit
)

// celCache compiles a plan's expressions once. Every name an expression
// may use is declared as dyn: input, every node id, output and every
// for_each variable; the compiler has type-checked the expressions already.
type celCache struct {
	once  sync.Once
	env   *cel.Env
	err   error
	mu    sync.Mutex
	exprs map[string]*compiled // by source
	vars  []string
}

// A compiled expression.
type compiled struct {
	prg   cel.Program
	names []string // the names it refers to
	// cheap: its cost cel-go bounds statically at celCheapCost or less
	// (no comprehension, no value of unknown size to walk): eval runs it
	// without the deadline's context.
	cheap bool
}

// celCheapCost is the static cost bound under which an expression is
// evaluated without a deadline: a few thousand steps take microseconds,
// and the cost limit still applies. Setting up the deadline (a timer and
// two cancellable contexts) cost more than most evaluations.
const celCheapCost = 10_000

// noSizes estimates nothing: every value of unknown size is unbounded.
type noSizes struct{}

func (noSizes) EstimateSize(checker.AstNode) *checker.SizeEstimate { return nil }
func (noSizes) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
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
	return &celCache{exprs: map[string]*compiled{}, vars: vars}
}

func (c *celCache) program(src string) (cel.Program, error) {
	x, err := c.compile(src)
	if err != nil {
		return nil, err
	}
	return x.prg, nil
}

// compile compiles src once.
func (c *celCache) compile(src string) (*compiled, error) {
	c.once.Do(func() {
		opts := append(cellib.Options(),
			cel.CrossTypeNumericComparisons(true),
			cel.ParserRecursionLimit(100),
			cel.ParserExpressionSizeLimit(10_000),
		)
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
	if x, ok := c.exprs[src]; ok {
		return x, nil
	}
	ast, iss := c.env.Compile(src)
	if iss.Err() != nil {
		return nil, iss.Err()
	}
	p, err := c.env.Program(ast, cel.CostLimit(celCostLimit), cel.CostTracking(sizeCost{}),
		cel.CustomDecoratorV2(guardCalls), cel.InterruptCheckFrequency(100))
	if err != nil {
		return nil, err
	}
	x := &compiled{prg: p}
	for _, r := range ast.NativeRep().ReferenceMap() {
		if r.Name != "" && !slices.Contains(x.names, r.Name) {
			x.names = append(x.names, r.Name)
		}
	}
	if est, err := c.env.EstimateCost(ast, noSizes{}); err == nil && est.Max <= celCheapCost {
		x.cheap = true
	}
	c.exprs[src] = x
	return x, nil
}

// isCheap reports whether an expression compiles and its cost is
// statically bounded by celCheapCost.
func (c *celCache) isCheap(src string) bool {
	x, err := c.compile(src)
	return err == nil && x.cheap
}

// sizeCost charges a call that makes a string, bytes, list or map by the
// size of what it made (0.1 a byte, 1 an element), so that the cost limit
// bounds the memory an evaluation allocates too. cel-go charges `+` on
// strings by their size only when the checker chose the string overload,
// and every name here is dyn: `input.s + input.s` cost 3, and a map over
// 100,000 items concatenating a 1 MB string allocated 2 GB in a second.
// A list is charged by the elements it made: a comprehension's
// accumulator (a mutable list, appended to) by those appended, so that
// `l.map(x, f(x))` stays linear.
type sizeCost struct{}

func (sizeCost) CallCost(_, _ string, args []ref.Val, result ref.Val) *uint64 {
	var n uint64
	switch r := result.(type) {
	case types.String:
		n = uint64(len(r)) / 10
	case types.Bytes:
		n = uint64(len(r)) / 10
	case traits.MutableLister:
		if len(args) == 2 {
			if l, ok := args[1].(traits.Sizer); ok {
				n = sizeOf(l)
			}
		}
	case traits.Sizer:
		n = sizeOf(r)
	}
	if n == 0 {
		return nil // cel-go's own cost
	}
	n++
	return &n
}

func sizeOf(s traits.Sizer) uint64 {
	if n, ok := s.Size().(types.Int); ok && n > 0 {
		return uint64(n)
	}
	return 0
}

// guardCalls wraps the calls that can make a string much larger than
// their arguments — replace (every match, or every character for "",
// replaced by a long string), join and format (of a list holding one long
// string many times) — so that the size of what they would make is
// checked before they make it: the cost limit counts it only afterwards,
// and `s.replace("", s)` with s of 1 MB is 1 TB. The checked call runs
// cel-go's own implementation (a program of that one call).
func guardCalls(i interpreter.InterpretableV2) (interpreter.InterpretableV2, error) {
	call, ok := i.(interpreter.InterpretableCall)
	if !ok {
		return i, nil
	}
	fn, args := call.Function(), call.Args()
	bound := callBounds[fn]
	if bound == nil {
		return i, nil
	}
	impl, err := delegate(fn, len(args))
	if err != nil || impl == nil {
		return i, err
	}
	return interpreter.NewCall(call.ID(), fn, call.OverloadID(), args, func(vals ...ref.Val) ref.Val {
		if n := bound(vals); n > celMaxString {
			return types.NewErr("%s would make a string of more than %d bytes, over the limit of %d", fn, n, celMaxString)
		}
		return impl(vals)
	}), nil
}

// callBounds: for each guarded function, an upper bound of the bytes of
// what a call makes (or a value above celMaxString as soon as it knows
// the call makes more), from its arguments.
var callBounds = map[string]func([]ref.Val) int{
	"replace": func(v []ref.Val) int {
		s, ok1 := strArg(v, 0)
		old, ok2 := strArg(v, 1)
		nw, ok3 := strArg(v, 2)
		if !ok1 || !ok2 || !ok3 || len(nw) <= len(old) {
			return 0
		}
		var k int
		if old == "" {
			k = utf8.RuneCountInString(s) + 1
		} else {
			k = strings.Count(s, old)
		}
		if len(v) > 3 {
			if n, ok := v[3].(types.Int); ok && n >= 0 && int64(n) < int64(k) {
				k = int(n)
			}
		}
		return len(s) + k*(len(nw)-len(old))
	},
	"join": func(v []ref.Val) int {
		sep, _ := strArg(v, 1)
		n := 0
		if l, ok := v[0].(traits.Lister); ok {
			for it := l.Iterator(); it.HasNext() == types.True && n <= celMaxString; {
				if s, ok := it.Next().(types.String); ok {
					n += len(s) + len(sep)
				}
			}
		}
		return n
	},
	"format": func(v []ref.Val) int {
		f, _ := strArg(v, 0)
		n := len(f)
		if len(v) > 1 {
			n += textSize(v[1], celMaxString-n, 0)
		}
		return n
	},
}

func strArg(v []ref.Val, i int) (string, bool) {
	if i >= len(v) {
		return "", false
	}
	s, ok := v[i].(types.String)
	return string(s), ok
}

// textSize bounds the text of v as format prints it (its strings and
// bytes in full, at most 64 bytes for a scalar, 2 per element more),
// stopping once it passes max.
func textSize(v ref.Val, max, depth int) int {
	switch x := v.(type) {
	case types.String:
		return len(x)
	case types.Bytes:
		return 2 * len(x)
	}
	n := 64
	if depth > 64 {
		return n
	}
	if l, ok := v.(traits.Lister); ok {
		for it := l.Iterator(); it.HasNext() == types.True && n <= max; {
			n += 2 + textSize(it.Next(), max-n, depth+1)
		}
	} else if m, ok := v.(traits.Mapper); ok {
		for it := m.Iterator(); it.HasNext() == types.True && n <= max; {
			k := it.Next()
			n += 4 + textSize(k, max-n, depth+1)
			n += textSize(m.Get(k), max-n, depth+1)
		}
	}
	return n
}

var delegates struct {
	once sync.Once
	env  *cel.Env
	err  error
	mu   sync.Mutex
	prg  map[string]cel.Program
}

// delegate returns cel-go's implementation of receiver function fn with
// nargs arguments (the receiver included), as a program of that call.
func delegate(fn string, nargs int) (func([]ref.Val) ref.Val, error) {
	d := &delegates
	d.once.Do(func() {
		d.env, d.err = cel.NewEnv(ext.Strings(), cel.Variable("a0", cel.DynType), cel.Variable("a1", cel.DynType),
			cel.Variable("a2", cel.DynType), cel.Variable("a3", cel.DynType))
		d.prg = map[string]cel.Program{}
	})
	if d.err != nil || nargs < 1 || nargs > 4 {
		return nil, d.err
	}
	names := []string{"a1", "a2", "a3"}[:nargs-1]
	src := fmt.Sprintf("a0.%s(%s)", fn, strings.Join(names, ", "))
	d.mu.Lock()
	prg, ok := d.prg[src]
	if !ok {
		ast, iss := d.env.Compile(src)
		if iss.Err() != nil {
			d.mu.Unlock()
			return nil, nil // no such call: leave it as it is
		}
		var err error
		if prg, err = d.env.Program(ast); err != nil {
			d.mu.Unlock()
			return nil, err
		}
		d.prg[src] = prg
	}
	d.mu.Unlock()
	return func(vals []ref.Val) ref.Val {
		act := make(map[string]any, len(vals))
		for i, v := range vals {
			act["a"+strconv.Itoa(i)] = v
		}
		out, _, err := prg.Eval(act)
		if err != nil {
			return types.WrapErr(err)
		}
		return out
	}, nil
}

// names returns the variables an expression refers to.
func (c *celCache) names(src string) ([]string, error) {
	x, err := c.compile(src)
	if err != nil {
		return nil, err
	}
	return x.names, nil
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
	x, err := p.cel.compile(e.CEL)
	if err != nil {
		return nil, &evalError{what, e.Loc, err}
	}
	var val ref.Val
	if x.cheap {
		val, _, err = x.prg.Eval(map[string]any(act))
	} else {
		ctx, cancel := context.WithTimeout(ctx, celEvalTimeout)
		val, _, err = x.prg.ContextEval(ctx, map[string]any(act))
		cancel()
	}
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

// evalJSON evaluates e to JSON of at most max bytes.
func (p *plan) evalJSON(ctx context.Context, e *ir.Expr, what string, act vars, max int) (json.RawMessage, error) {
	v, err := p.eval(ctx, e, what, act)
	if err != nil {
		return nil, err
	}
	data, err := celJSON(v, max)
	if err != nil {
		return nil, &evalError{what, e.Loc, err}
	}
	return data, nil
}

// value renders one ir.Value to JSON: a constant as is, an expression's
// value, or a template's text (strings spliced as they are, other values as
// JSON), of at most max bytes.
func (p *plan) value(ctx context.Context, v *ir.Value, what string, act vars, max int) (json.RawMessage, error) {
	switch {
	case v.Const != nil:
		return v.Const, nil
	case v.Expr != nil:
		return p.evalJSON(ctx, v.Expr, what, act, max)
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
				if b.Len()+len(s) > max {
					return nil, &evalError{what, part.Expr.Loc, fmt.Errorf("%w: the template's text is over the limit of %d bytes (max_output_bytes)", errTooBig, max)}
				}
				b.WriteString(string(s))
				continue
			}
			data, err := celJSON(val, max-b.Len())
			if err != nil {
				return nil, &evalError{what, part.Expr.Loc, err}
			}
			b.Write(data)
		}
		return appendJSONString(nil, b.String()), nil
	}
	return json.RawMessage("null"), nil
}

// params renders a `with` block to a JSON object, fields in source order,
// each value of at most max bytes.
func (p *plan) params(ctx context.Context, ps []ir.Param, node string, act vars, max int) (json.RawMessage, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i := range ps {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(appendJSONString(b.AvailableBuffer(), ps[i].Name))
		b.WriteByte(':')
		// (The name in errors is made only for an error: every param
		// of every execution made it before.)
		v, err := p.value(ctx, &ps[i].Value, "", act, max)
		if err != nil {
			if e, ok := err.(*evalError); ok && e.what == "" {
				e.what = node + ".with." + ps[i].Name
			}
			return nil, err
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// errTooBig: a value's JSON is over the limit it is converted under
// (max_output_bytes); the node fails with code output, as when a handler's
// output is.
var errTooBig error = &handlers.Error{Code: CodeOutput, Message: "value too large"}

// celJSON converts a CEL value to JSON of at most max bytes. The bound is
// checked while the value is walked, before its JSON is made: a list of
// 10,000 references to one 1 MB string is small in memory and 10 GB as
// JSON.
func celJSON(v ref.Val, max int) (json.RawMessage, error) {
	// A scalar is written directly (jsonout.go: the same bytes and errors
	// as celNative and json.Marshal, without reflection).
	data, n, ok := scalarJSON(v)
	over := ok && n > max
	if !ok {
		budget := max
		x, err := celNative(v, 0, &budget)
		over = errors.Is(err, errTooBig)
		if err != nil && !over {
			return nil, err
		}
		if !over {
			if data, err = json.Marshal(x); err != nil {
				return nil, err
			}
		}
	}
	if over {
		return nil, fmt.Errorf("%w: over the limit of %d bytes as JSON (max_output_bytes)", errTooBig, max)
	}
	if len(data) > max {
		// (Escapes made it longer than the walk counted.)
		return nil, fmt.Errorf("%w: %d bytes as JSON, over the limit of %d (max_output_bytes)", errTooBig, len(data), max)
	}
	return data, nil
}

// celNative converts a CEL value to Go, counting at least the bytes of
// its JSON against *budget and failing once that goes below zero.
func celNative(v ref.Val, depth int, budget *int) (any, error) {
	if depth > 64 {
		return nil, errors.New("value nested too deeply")
	}
	n := 8 // a scalar, or a list's or map's brackets and separators
	if s, ok := v.(types.String); ok {
		n = len(s) + 2
	} else if b, ok := v.(types.Bytes); ok {
		n = len(b)*4/3 + 4
	}
	if *budget -= n; *budget < 0 {
		return nil, errTooBig
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
			e, err := celNative(it.Next(), depth+1, budget)
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
				kn, err := celNative(k, depth+1, budget)
				if err != nil {
					return nil, err
				}
				ks = fmt.Sprint(kn)
			}
			e, err := celNative(m.Get(k), depth+1, budget)
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
	if v, ok := fastJSON(data); ok {
		return v, nil
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
// an int and any other a double. Lists and maps are converted in place
// (v is one jsonToCEL just decoded): a copy of each cost a join of 100
// outputs 100 maps.
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
		for i, e := range x {
			x[i] = toCEL(e, elem)
		}
		return x
	case map[string]any:
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
			x[k] = toCEL(e, ft)
		}
		return x
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
	act := make(vars, len(ids)+1) // (a join of 100 grew it seven times)
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
	case ir.KindSecret:
		// The value is the secret's name, never the secret.
		if s, ok := v.(string); !ok || !ir.ValidSecretName(s) {
			return fmt.Errorf("%s: want the name of a secret ([A-Za-z_][A-Za-z0-9_]*, at most 128 bytes), not its value", path)
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

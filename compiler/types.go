package compiler

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/lang/ast"
	"github.com/wfc-lang/wfc/lang/diag"
	"github.com/wfc-lang/wfc/lang/source"
)

// A read is one `x.output` in an expression, for the dataflow pass.
type read struct {
	node    int
	rng     source.Range
	guarded bool // the expression tests has(x.output)
	iter    bool // a read of x.iteration, not of x.output
	err     bool // a read of x.error (guarded: the expression tests has(x.error))
}

// errorType is the type of x.error: the failure that sent x's token along
// its error edges.
var errorType = &ir.Type{Kind: ir.KindObject, Fields: []ir.Field{
	{Name: "code", Type: ir.Type{Kind: ir.KindString}},
	{Name: "message", Type: ir.Type{Kind: ir.KindString}},
}}

type exprReads struct {
	owner *node // nil for the workflow's output block and finally
	expr  *ast.Expr
	reads []read
	final bool // in the finally block: any node may not have run
}

// scope is what an expression may name besides input and node ids.
type scope struct {
	env      *cel.Env
	self     *node  // `output` refers to self's output
	selfType string // provider name of self's output type
	vars     map[string]*types.Type
}

// types type-checks every expression and template with cel-go against the
// declared types, and `with` blocks against handler config schemas.
func (s *state) types() {
	if s.wf == nil {
		return
	}
	s.prov = newProvider(2 * len(s.nodes)) // each node's wf.node and wf.out types
	inputT := obj()
	for _, in := range s.inputs {
		// Inputs with a default are always present at run time.
		t := *in.Type
		if t.Kind == ir.KindSecret {
			t = ir.Type{Kind: ir.KindString} // expressions see the value
		}
		inputT.Fields = append(inputT.Fields, ir.Field{Name: in.Name, Type: t, Optional: !in.Required && in.Decl.Default == nil && !implicitSecretDefault(in)})
	}
	opts := celOptions(s.prov)
	opts = append(opts, cel.Variable("input", s.prov.celType(inputT, "wf.input")))
	for _, n := range s.nodes {
		opts = append(opts, cel.Variable(n.id, s.nodeVar(n)))
	}
	// `run` differs in finally (the ended run's metadata): both extend base.
	base, err := cel.NewEnv(opts...)
	var env *cel.Env
	if err == nil {
		env, err = base.Extend(cel.Variable("run", s.prov.celType(runType, "wf.run")))
	}
	if err != nil {
		s.errorf(diag.TypeError, s.wf.Name.Range, "cannot build the expression environment: %v", err)
		return
	}
	s.baseEnv = base
	s.env = env
	s.inputDefaults()
	order := s.order
	if len(order) != len(s.nodes) {
		order = make([]int, len(s.nodes))
		for i := range order {
			order[i] = i
		}
	}
	for _, i := range order {
		s.checkNode(s.nodes[i])
	}
	for i, p := range s.outputs {
		s.curOutput = i
		s.check(&scope{env: env}, p.Value, nil)
	}
	s.checkFinally()
	s.lintSecrets()
}

// checkApprovers checks a human node's approvers (or escalate_to: item
// names it, lits and expr are where it goes): a list(string). A list of
// string literals becomes the IR's list (each non-empty, at least one);
// anything else stays an expression evaluated when the node runs.
func (s *state) checkApprovers(sc *scope, n *node, e *ast.Expr, item string, lits *[]string, expr **ast.Expr) {
	t := s.check(sc, e, n)
	if t == nil {
		return
	}
	// A list of literals: each must be a non-empty string, and there must
	// be one.
	if a := s.checked[e]; a != nil && a.NativeRep().Expr().Kind() == celast.ListKind {
		els := a.NativeRep().Expr().AsList().Elements()
		info := a.NativeRep().SourceInfo()
		var strs []string
		allLit, bad := true, false
		for _, el := range els {
			if el.Kind() != celast.LiteralKind {
				allLit = false
				continue
			}
			r := e.Range
			if off, ok := info.GetOffsetRange(el.ID()); ok {
				r = newOffsetMap(e).rng(off.Start, off.Stop) // (CEL counts code points)
			}
			str, ok := el.AsLiteral().Value().(string)
			switch {
			case ok && strings.Contains(str, "{{"):
				s.errorf(diag.BadValue, r, "`%s` takes a plain string; {{ }} templates are only allowed in `with` values, workflow `output` entries and prompts", item)
			case ok && str != "":
				strs = append(strs, str)
				continue
			default:
				s.errorf(diag.BadValue, r, "%s must be non-empty strings", item)
			}
			bad = true
		}
		switch {
		case bad:
			return
		case len(els) == 0:
			s.errorf(diag.BadValue, e.Range, "%s must not be empty", item)
			return
		case allLit:
			*lits, *expr = strs, nil
			return
		}
	}
	if t.Kind() != types.DynKind && (t.Kind() != types.ListKind ||
		(t.Parameters()[0].Kind() != types.StringKind && t.Parameters()[0].Kind() != types.DynKind)) {
		s.errorf(diag.TypeError, e.Range, "%s must be a list(string), found %s", item, typeName(t))
	}
}

// runType is `run` in every expression; runEndType is `run` in the
// finally block, once the run has ended.
var (
	runType    = &ir.Type{Kind: ir.KindObject, Fields: []ir.Field{{Name: "id", Type: ir.Type{Kind: ir.KindString}}}}
	runEndType = &ir.Type{Kind: ir.KindObject, Fields: []ir.Field{
		{Name: "id", Type: ir.Type{Kind: ir.KindString}},
		{Name: "workflow", Type: ir.Type{Kind: ir.KindString}},
		{Name: "status", Type: ir.Type{Kind: ir.KindString}},
		{Name: "error", Type: ir.Type{Kind: ir.KindString}},
		{Name: "started_at", Type: ir.Type{Kind: ir.KindString}},
		{Name: "ended_at", Type: ir.Type{Kind: ir.KindString}},
		{Name: "duration", Type: ir.Type{Kind: ir.KindDuration}},
		{Name: "failed_nodes", Type: ir.Type{Kind: ir.KindList, Elem: &ir.Type{Kind: ir.KindString}}},
	}}
)

// RunType is the type of `run` in expressions: its id, or, in the
// finally block (ended), the ended run's metadata. The language server
// completes its fields.
func RunType(ended bool) *ir.Type {
	t := runType
	if ended {
		t = runEndType
	}
	c := *t
	c.Fields = slices.Clone(t.Fields)
	return &c
}

// checkFinally checks the finally block's with: `run` has the ended run's
// metadata; node outputs need has() guards (the run may have ended
// anywhere).
func (s *state) checkFinally() {
	f := s.finally
	if f != nil {
		s.noWait(f.handler, f.run, "the finally step")
	}
	if f == nil || f.with == nil {
		return
	}
	env, err := s.baseEnv.Extend(cel.Variable("run", s.prov.celType(runEndType, "wf.runend")))
	if err != nil {
		return
	}
	s.inFinally = true
	defer func() { s.inFinally = false }()
	pts := make([]*types.Type, len(f.with.Params))
	for i, p := range f.with.Params {
		pts[i] = s.check(&scope{env: env}, p.Value, nil)
	}
	if h := s.handlers[f.handler]; h != nil && !h.Open {
		s.checkParams(h.Config, f.with, pts, f.block.Key, "handler \""+h.Name+"\"", nil)
	}
}

// nodeVar (re)defines the CEL type of node n: an object with one field,
// output. Redefining it after an open handler's with block is checked
// updates every later expression, because the checker asks the provider.
func (s *state) nodeVar(n *node) *types.Type {
	fields := map[string]*types.Type{
		"output": s.prov.celType(n.outType, "wf.out."+n.id),
	}
	if n.loop != nil {
		// L.iteration: the iteration in L's body, the count after it.
		fields["iteration"] = types.IntType
	}
	if len(n.onError) > 0 {
		// x.error on x's error path.
		fields["error"] = s.prov.celType(errorType, "wf.error")
	}
	return s.prov.define("wf.node."+n.id, nil, fields)
}

func (s *state) checkNode(n *node) {
	if n.decl == nil {
		return
	}
	base := &scope{env: s.env}
	if n.when != nil {
		s.wantBool(s.check(base, n.when, n), n.when, "when")
	}
	if e := n.approversExpr; e != nil {
		s.checkApprovers(base, n, e, "approvers", &n.approvers, &n.approversExpr)
	}
	if e := n.escalateExpr; e != nil {
		s.checkApprovers(base, n, e, "escalate_to", &n.escalateTo, &n.escalateExpr)
	}
	if d := n.dispatch; d != nil {
		if t := s.check(base, d, n); t != nil && t.Kind() != types.StringKind && t.Kind() != types.DynKind {
			s.errorf(diag.TypeError, d.Range, "dispatch must name a handler (a string), found %s", typeName(t))
		}
		if d.Str != nil && d.Str.Template == nil && !slices.ContainsFunc(n.runSet, func(h *ast.String) bool { return h.Value == d.Str.Value }) {
			s.errorf(diag.UnknownHandler, d.Range, "dispatch names %q, which is not in the node's `run [...]`", d.Str.Value)
		}
	}
	withScope := base
	if n.forEach != nil {
		t := s.check(base, n.forEach.Items, n)
		elem := types.DynType
		if t != nil {
			switch t.Kind() {
			case types.ListKind:
				elem = t.Parameters()[0]
			case types.DynKind:
			default:
				s.errorf(diag.NotList, n.forEach.Items.Range, "for_each needs a list, found %s", typeName(t))
			}
		}
		// A variable rejected by the items pass (reserved, or hiding a
		// node) is not declared: CEL would only repeat the error.
		if v := n.forEach.Var.Name; !reserved[v] && s.byID[v] == nil {
			if e := s.scopeEnv(v, "wf.var", elem); e != nil {
				withScope = &scope{env: e, vars: map[string]*types.Type{v: elem}}
				// The index variable: an int, declared after the item's.
				if ix := n.forEach.Index; ix != nil && !reserved[ix.Name] && s.byID[ix.Name] == nil && ix.Name != v {
					if e2, err := e.Extend(cel.Variable(ix.Name, types.IntType)); err == nil {
						withScope = &scope{env: e2, vars: map[string]*types.Type{v: elem, ix.Name: types.IntType}}
					}
				}
			}
		}
	}
	if n.with != nil {
		paramTypes := make([]*types.Type, len(n.with.Params))
		for i, p := range n.with.Params {
			paramTypes[i] = s.check(withScope, p.Value, n)
		}
		s.checkConfig(n, n.with, paramTypes)
	} else if (n.kind == "task" || n.kind == "flow") && !slices.ContainsFunc(n.decl.Items, func(it ast.Item) bool { _, bad := it.(*ast.Bad); return bad }) {
		// (An item that did not parse may be the `with` block: then
		// every config field would be reported missing.)
		s.checkConfig(n, nil, nil)
	}
	if n.prompt != nil && n.prompt.Template != nil {
		s.checkTemplate(base, n.prompt, n)
	}
	if n.branch == nil && n.loop == nil && n.compensate == nil {
		return
	}
	selfName := "wf.self." + n.id
	selfEnv := s.scopeEnv("output", "wf.self", s.prov.celType(n.outType, selfName))
	if selfEnv == nil {
		return
	}
	self := &scope{env: selfEnv, self: n, selfType: s.prov.resolve("wf.self")}
	if n.branch != nil {
		for _, r := range n.branch.Rules {
			if r.Cond != nil {
				s.wantBool(s.check(self, r.Cond, n), r.Cond, "branch rule")
			}
		}
	}
	if n.loop != nil && n.loop.while != nil {
		s.wantBool(s.check(self, n.loop.while, n), n.loop.while, "while")
	}
	if c := n.compensate; c != nil {
		s.noWait(c.handler, c.run, "a compensation")
	}
	if c := n.compensate; c != nil && c.with != nil {
		pts := make([]*types.Type, len(c.with.Params))
		for i, p := range c.with.Params {
			pts[i] = s.check(self, p.Value, n)
		}
		if h := s.handlers[c.handler]; h != nil && !h.Open {
			s.checkParams(h.Config, c.with, pts, c.block.Key, "handler \""+h.Name+"\"", nil)
		}
	}
}

func (s *state) wantBool(t *types.Type, e *ast.Expr, what string) {
	if t == nil || t.Kind() == types.BoolKind || t.Kind() == types.DynKind {
		return
	}
	s.errorf(diag.NotBool, e.Range, "%s condition must be bool, found %s", what, typeName(t))
}

// checkConfig checks a node's with block against its handler's (or child
// workflow's) config, and gives open handlers their output type.
func (s *state) checkConfig(n *node, with *ast.ParamBlock, pts []*types.Type) {
	var cfg *ir.Type
	what := ""
	switch {
	case n.kind == "task" && len(n.runSet) > 0:
		// Every handler of the set must accept the with block.
		anchor := n.ident
		if with != nil {
			anchor = with.Key
		}
		// No quick fix: a field one handler of the set requires, another
		// may reject.
		for _, str := range n.runSet {
			if h := s.handlers[str.Value]; h != nil && !h.Open {
				s.checkParams(h.Config, with, pts, anchor, "handler \""+h.Name+"\"", runSetNode)
			}
		}
		return
	case n.kind == "task":
		h := s.handlers[n.handler]
		if h == nil {
			return
		}
		if h.Open {
			out := obj()
			if with != nil {
				for i, p := range with.Params {
					out.Fields = append(out.Fields, ir.Field{Name: p.Name.Name, Type: *s.prov.irType(pts[i])})
				}
			}
			if n.outDecl == nil {
				s.setOutput(n, out)
				s.nodeVar(n)
			}
			return
		}
		cfg, what = h.Config, "handler \""+h.Name+"\""
		if h.Builtin && h.Name == "wait" {
			s.checkWait(n, with)
		}
		if p, ok := parked[h.Name]; ok && h.Builtin && n.forEach != nil {
			s.errorf(diag.BadValue, n.forEach.Key.Range, "handler %q cannot run per `for_each` item: the runtime parks only a task's own execution", h.Name).
				WithHint(p.perItem)
		}
	case n.kind == "flow":
		if n.child == nil {
			return
		}
		cfg, what = childConfig(n.child), "workflow \""+n.uses.Value+"\""
	default:
		return
	}
	anchor := n.ident
	if with != nil {
		anchor = with.Key
	}
	s.checkParams(cfg, with, pts, anchor, what, n)
}

// checkWait checks that a `wait` task sets exactly one of `for` and
// `until`, which its config schema cannot say.
func (s *state) checkWait(n *node, with *ast.ParamBlock) {
	anchor := n.ident.Range
	var set []string
	if with != nil {
		anchor = with.Key.Range
		for _, p := range with.Params {
			if p.Name.Name == "for" || p.Name.Name == "until" {
				set = append(set, p.Name.Name)
			}
		}
	}
	switch len(set) {
	case 0:
		s.errorf(diag.MissingConfig, anchor, "handler \"wait\" needs `for` (a duration) or `until` (a time)").
			WithHint("write `with { for = \"1h\" }` or `with { until = \"2026-12-01T09:00:00Z\" }`")
	case 2:
		s.errorf(diag.BadValue, anchor, "handler \"wait\" takes `for` or `until`, not both")
	}
}

// parked are the built-ins the runtime parks (only a task's own
// execution can be), with what to write instead per for_each item and as
// a compensation or the finally step.
var parked = map[string]struct{ perItem, elsewhere string }{
	"wait":   {"wait in a task before or after the for_each, or use \"sleep\" for short pauses", "use \"sleep\" for a short pause"},
	"signal": {"wait for the signal in a task before or after the for_each", ""},
}

// noWait refuses the built-in wait and signal where the runtime cannot
// park the execution: a compensation or the finally step.
func (s *state) noWait(handler string, run *ast.String, where string) {
	h := s.handlers[handler]
	if h == nil || !h.Builtin || run == nil {
		return
	}
	if p, ok := parked[h.Name]; ok {
		d := s.errorf(diag.BadValue, run.Range, "handler %q cannot run as %s: the runtime parks only a task's own execution", h.Name, where)
		if p.elsewhere != "" {
			d.WithHint(p.elsewhere)
		}
	}
}

// n is the node whose `with` it is (nil for finally and compensate), where
// a quick fix adds a missing `with` block.
func (s *state) checkParams(cfg *ir.Type, with *ast.ParamBlock, pts []*types.Type, anchor *ast.Ident, what string, n *node) {
	noun := "config field" // what the entries of `with` set
	if strings.HasPrefix(what, "workflow ") {
		noun = "input"
	}
	set := map[string]bool{}
	names := make([]string, 0, len(cfg.Fields))
	for _, f := range cfg.Fields {
		names = append(names, f.Name)
	}
	if with != nil {
		for i, p := range with.Params {
			set[p.Name.Name] = true
			var field *ir.Field
			for k := range cfg.Fields {
				if cfg.Fields[k].Name == p.Name.Name {
					field = &cfg.Fields[k]
				}
			}
			if field == nil {
				d := s.errorf(diag.UnknownConfig, p.Name.Range, "%s has no %s `%s`", what, noun, p.Name.Name)
				s.didYouMean(d, p.Name.Range, p.Name.Name, names)
				switch {
				case d.Hint != "":
				case len(names) > 0:
					d.WithHint("its " + noun + "s are: " + strings.Join(names, ", "))
				default:
					d.WithHint("it takes no " + noun + "s")
				}
				continue
			}
			if pts[i] != nil && !s.assignable(&field.Type, pts[i]) {
				d := s.errorf(diag.ConfigType, p.Value.Range, "`%s` of %s must be %s, found %s", p.Name.Name, what, field.Type.String(), typeName(pts[i]))
				if field.Type.Kind == ir.KindDuration {
					d.WithHint("write a duration as duration('30s') or as a string such as \"30s\"")
				}
			}
		}
	}
	var missing []string
	for _, f := range cfg.Fields {
		if !f.Optional && !set[f.Name] {
			missing = append(missing, f.Name)
		}
	}
	if len(missing) > 0 {
		set := make([]string, len(missing))
		for i, m := range missing {
			set[i] = m + " = ..."
		}
		d := s.errorf(diag.MissingConfig, anchor.Range, "missing required %s of %s", plural(noun, missing), what).
			WithHint(map[bool]string{true: "set it", false: "set them"}[len(set) == 1] + " in `with { " + strings.Join(set, "  ") + " }`")
		s.configFix(d, cfg, missing, with, n)
	}
}

func plural(word string, xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = "`" + x + "`"
	}
	if len(xs) == 1 {
		return word + " " + q[0]
	}
	return word + "s " + strings.Join(q, ", ")
}

// assignable reports whether a value of CEL type actual may be given where
// decl is declared. Numbers are one JSON type, so int fits number; strings
// fit durations (parsed at run time); maps fit objects (fields are checked
// when the value is known).
func (s *state) assignable(decl *ir.Type, actual *types.Type) bool {
	k := actual.Kind()
	if decl.Kind == ir.KindAny || k == types.DynKind || k == types.AnyKind || k == types.ErrorKind {
		return true
	}
	switch decl.Kind {
	case ir.KindString, ir.KindSecret: // (a secret input of a child flow takes the secret's name)
		return k == types.StringKind
	case ir.KindInt:
		return k == types.IntKind || k == types.UintKind
	case ir.KindNumber:
		return k == types.DoubleKind || k == types.IntKind || k == types.UintKind
	case ir.KindBool:
		return k == types.BoolKind
	case ir.KindDuration:
		return k == types.DurationKind || k == types.StringKind
	case ir.KindNull:
		return k == types.NullTypeKind
	case ir.KindList:
		return k == types.ListKind && s.assignable(decl.Elem, actual.Parameters()[0])
	case ir.KindMap:
		return k == types.MapKind && s.assignable(decl.Elem, actual.Parameters()[1])
	case ir.KindObject:
		if k == types.MapKind {
			return true
		}
		if k == types.StructKind {
			o := s.prov.objs[actual.TypeName()]
			if o == nil {
				return false
			}
			for _, f := range decl.Fields {
				ft, ok := o.fields[f.Name]
				if !ok {
					if !f.Optional {
						return false
					}
					continue
				}
				if !s.assignable(&f.Type, ft) {
					return false
				}
			}
			return true
		}
	}
	return false
}

func typeName(t *types.Type) string {
	if t == nil {
		return "unknown"
	}
	switch t.Kind() {
	case types.DoubleKind:
		return "number"
	case types.StructKind:
		name := t.TypeName()
		switch {
		case strings.HasPrefix(name, "wf.out."):
			return "the output of " + strings.TrimPrefix(name, "wf.out.")
		case strings.HasPrefix(name, "wf.node."):
			return "node " + strings.TrimPrefix(name, "wf.node.")
		}
		return "object"
	case types.ListKind:
		return "list<" + typeName(t.Parameters()[0]) + ">"
	case types.MapKind:
		return "map<" + typeName(t.Parameters()[1]) + ">"
	case types.DynKind:
		return "any"
	}
	return t.String()
}

func (s *state) checkTemplate(sc *scope, str *ast.String, owner *node) {
	for _, part := range str.Template {
		if part.Expr != nil {
			s.check(sc, part.Expr, owner)
		}
	}
}

// check parses and type-checks one expression, reporting errors at their
// exact position in the .wf file, and records its type, references and
// output reads. It returns nil if the expression has errors.
func (s *state) check(sc *scope, e *ast.Expr, owner *node) *types.Type {
	if e.Str != nil && e.Str.Template != nil {
		s.checkTemplate(sc, e.Str, owner)
		s.info.Exprs[e] = &ExprInfo{Type: &ir.Type{Kind: ir.KindString}}
		return types.StringType
	}
	if s.lexErrorIn(e.Range) {
		return nil // already reported; CEL would only repeat it less clearly
	}
	if t, ok := s.checkChain(sc, e, owner); ok {
		return t
	}
	if t, ok := s.checkBinary(sc, e, owner); ok {
		return t
	}
	if t, ok := s.checkIntLit(e); ok {
		return t
	}
	m := newOffsetMap(e)
	parsed, iss := sc.env.Parse(e.Text)
	if iss != nil && iss.Err() != nil {
		// Only the first: the parser's later errors are mostly its
		// recovery tripping over the first one.
		ce := iss.Errors()[0]
		s.celError(diag.ExprSyntax, e, m, nil, sc, ce.Location.Line(), ce.Location.Column(), ce.ExprID, cleanCELMessage(ce.Message))
		return nil
	}
	checked, iss := sc.env.Check(parsed)
	if iss != nil && iss.Err() != nil {
		for _, ce := range iss.Errors() {
			s.celError(diag.TypeError, e, m, parsed.NativeRep(), sc, ce.Location.Line(), ce.Location.Column(), ce.ExprID, cleanCELMessage(ce.Message))
		}
		s.collect(parsed.NativeRep(), e, m, owner, false)
		return nil
	}
	if est, err := sc.env.EstimateCost(checked, sizeEstimator{}); err == nil && est.Max > MaxExprCost {
		s.errorf(diag.CostLimit, e.Range, "estimated evaluation cost %s exceeds the limit of %s", thousands(est.Max), thousands(MaxExprCost)).
			WithHint(fmt.Sprintf("the estimate assumes lists, maps and strings of up to %d elements; nested comprehensions multiply", assumedSize))
	}
	s.checked[e] = checked
	s.envs[e] = sc.env
	out := checked.OutputType()
	info := &ExprInfo{Type: s.prov.irType(out)}
	s.info.Exprs[e] = info
	s.collect(checked.NativeRep(), e, m, owner, true)
	info.Subexprs = s.subexprs(checked.NativeRep(), m)
	return out
}

// lexErrorIn reports whether the lexer reported a bad string, number or
// character inside r.
func (s *state) lexErrorIn(r source.Range) bool {
	if s.lexErrs == nil {
		// Lexical errors all come from the parser, before any expression is
		// checked: collect their offsets once, sorted.
		s.lexErrs = []int{}
		for _, d := range s.rp.Diags {
			switch d.Code {
			case diag.BadString, diag.BadNumber, diag.BadChar, diag.Unterminated, diag.BadUTF8:
				if d.Span.File == s.file.Name {
					s.lexErrs = append(s.lexErrs, d.Span.Start.Offset)
				}
			}
		}
		sort.Ints(s.lexErrs)
	}
	i := sort.SearchInts(s.lexErrs, r.Start)
	return i < len(s.lexErrs) && s.lexErrs[i] < r.End
}

// thousands formats n with thousands separators: 1,000,000.
func thousands(n uint64) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// collect records references (for the LSP) and x.output reads (for the
// dataflow pass) of one expression.
func (s *state) collect(a *celast.AST, e *ast.Expr, m *offsetMap, owner *node, record bool) {
	info := a.SourceInfo()
	var reads []read
	guarded, guardedErr := map[string]bool{}, map[string]bool{}
	celast.PreOrderVisit(a.Expr(), celast.NewExprVisitor(func(x celast.Expr) {
		if x.Kind() != celast.SelectKind {
			return
		}
		sel := x.AsSelect()
		op := sel.Operand()
		if op.Kind() == celast.IdentKind {
			name := op.AsIdent()
			r, _ := info.GetOffsetRange(op.ID())
			identRng := m.rng(r.Start, r.Start+int32(utf8.RuneCountInString(name)))
			fieldRng := m.fieldAfter(identRng.End, sel.FieldName())
			switch {
			case name == "input":
				if _, ok := s.info.Inputs[sel.FieldName()]; ok {
					s.info.Refs = append(s.info.Refs, Ref{Range: fieldRng, Kind: RefInput, Name: sel.FieldName()})
					s.useInput(owner, sel.FieldName())
				}
			case s.byID[name] != nil && sel.FieldName() == "output":
				n := s.byID[name]
				s.info.Refs = append(s.info.Refs, Ref{Range: identRng, Kind: RefNode, Name: name})
				if sel.IsTestOnly() {
					guarded[name] = true
				}
				// has(x.output) is recorded too (guarded): x must still be an
				// ancestor, or the test races with x.
				reads = append(reads, read{node: n.idx, rng: source.Range{Start: identRng.Start, End: fieldRng.End}})
			case s.byID[name] != nil && sel.FieldName() == "error" && len(s.byID[name].onError) > 0:
				n := s.byID[name]
				s.info.Refs = append(s.info.Refs, Ref{Range: identRng, Kind: RefNode, Name: name})
				if sel.IsTestOnly() {
					guardedErr[name] = true
				}
				reads = append(reads, read{node: n.idx, rng: source.Range{Start: identRng.Start, End: fieldRng.End}, err: true})
			case s.byID[name] != nil && sel.FieldName() == "iteration" && s.byID[name].loop != nil:
				n := s.byID[name]
				s.info.Refs = append(s.info.Refs, Ref{Range: identRng, Kind: RefNode, Name: name})
				reads = append(reads, read{node: n.idx, rng: source.Range{Start: identRng.Start, End: fieldRng.End}, iter: true})
			case name == "output":
				if node, path, ok := s.outputPath(a, sel, owner); ok {
					s.info.Refs = append(s.info.Refs, Ref{Range: fieldRng, Kind: RefField, Name: node + "." + path})
				}
			}
			return
		}
		// x.output.field
		if op.Kind() == celast.SelectKind && op.AsSelect().FieldName() == "output" && op.AsSelect().Operand().Kind() == celast.IdentKind {
			name := op.AsSelect().Operand().AsIdent()
			if s.byID[name] != nil {
				r, _ := info.GetOffsetRange(op.AsSelect().Operand().ID())
				start := m.rng(r.Start, r.Start).Start
				outRng := m.fieldAfter(start+len(name), "output")
				fr := m.fieldAfter(outRng.End, sel.FieldName())
				s.info.Refs = append(s.info.Refs, Ref{Range: fr, Kind: RefField, Name: name + "." + sel.FieldName()})
			}
			return
		}
		// x.output.a.b and, in a node's branch, loop and compensate,
		// output.a: fields of checked object types.
		if ot := a.GetType(op.ID()); ot == nil || ot.Kind() != types.StructKind {
			return
		}
		if node, path, ok := s.outputPath(a, sel, owner); ok {
			r, _ := info.GetOffsetRange(x.ID())
			fr := m.fieldAfter(m.rng(r.Start, r.Start).Start, sel.FieldName())
			s.info.Refs = append(s.info.Refs, Ref{Range: fr, Kind: RefField, Name: node + "." + path})
		}
	}))
	if !record || len(reads) == 0 {
		return
	}
	for i := range reads {
		if reads[i].err {
			reads[i].guarded = guardedErr[s.nodes[reads[i].node].id]
		} else {
			reads[i].guarded = guarded[s.nodes[reads[i].node].id]
		}
	}
	s.reads = append(s.reads, exprReads{owner: owner, expr: e, reads: reads, final: s.inFinally})
}

// outputPath returns the node and the field path a select names in a
// node's output: x.output.a.b is x and "a.b"; output.a in the owner's own
// scopes (typed wf.self.*) is the owner and "a".
func (s *state) outputPath(a *celast.AST, sel celast.SelectExpr, owner *node) (string, string, bool) {
	path := []string{sel.FieldName()}
	op := sel.Operand()
	for depth := 0; depth < 64; depth++ {
		switch op.Kind() {
		case celast.IdentKind:
			t := a.GetType(op.ID())
			if op.AsIdent() == "output" && owner != nil && t != nil && t.Kind() == types.StructKind && strings.HasPrefix(t.TypeName(), "wf.self") {
				slices.Reverse(path)
				return owner.id, strings.Join(path, "."), true
			}
			return "", "", false
		case celast.SelectKind:
			o := op.AsSelect()
			if o.FieldName() == "output" && o.Operand().Kind() == celast.IdentKind && s.byID[o.Operand().AsIdent()] != nil {
				slices.Reverse(path)
				return o.Operand().AsIdent(), strings.Join(path, "."), true
			}
			path = append(path, o.FieldName())
			op = o.Operand()
		default:
			return "", "", false
		}
	}
	return "", "", false
}

var quoted = regexp.MustCompile("['`]([^'`]+)['`]")

// antlrRE matches the parser's "mismatched input 'x' expecting {...}".
var antlrRE = regexp.MustCompile(`^(?:mismatched|extraneous) input '(.*)' expecting (.*)$`)

// cleanCELMessage drops cel-go's implementation detail from messages, such
// as the parser's list of every token class it could have accepted.
func cleanCELMessage(msg string) string {
	msg = strings.ReplaceAll(msg, " (in container '')", "")
	msg = strings.TrimPrefix(msg, "Syntax error: ")
	if m := antlrRE.FindStringSubmatch(msg); m != nil {
		out := "unexpected `" + m[1] + "`"
		if m[1] == "<EOF>" {
			out = "unexpected end of expression"
		}
		switch exp := strings.Trim(m[2], "{}"); {
		case strings.Contains(exp, "IDENTIFIER") || strings.Contains(exp, "NUM_"):
			out += "; expected a value"
		case exp != "":
			out += "; expected " + strings.Join(strings.Split(exp, ", "), " or ")
		}
		return out
	}
	return msg
}

func (s *state) celError(code diag.Code, e *ast.Expr, m *offsetMap, parsed *celast.AST, sc *scope, line, col int, id int64, msg string) {
	start := m.lineCol(line, col)
	r := source.Range{Start: start, End: start}
	name := ""
	if q := quoted.FindStringSubmatch(msg); q != nil {
		name = q[1]
	}
	if name != "" {
		if k := strings.Index(s.file.Text(source.Range{Start: start, End: e.End}), name); k >= 0 {
			r = source.Range{Start: start + k, End: start + k + len(name)}
		} else if strings.HasSuffix(s.file.Text(source.Range{Start: e.Start, End: start}), name) {
			// A call is located at its "(": underline the function name.
			r = source.Range{Start: start - len(name), End: start}
		}
	}
	if r.End == r.Start {
		r.End = min(r.Start+1, e.End)
		if r.End <= r.Start {
			r = source.Range{Start: max(e.Start, e.End-1), End: e.End}
		}
	}
	var d *diag.Diagnostic
	switch {
	case strings.HasPrefix(msg, "undeclared reference to"):
		d = s.errorf(code, r, "unknown name `%s`", name)
		cands := []string{"input"}
		if sc.self != nil {
			cands = append(cands, "output")
		}
		for v := range sc.vars {
			cands = append(cands, v)
		}
		for _, n := range s.nodes {
			cands = append(cands, n.id)
		}
		for _, n := range s.nodes {
			if n.forEach != nil && n.forEach.Var.Name == name {
				d.WithHint(fmt.Sprintf("`%s` is the for_each variable of %s: it is only visible in %s's `with`", name, n.id, n.id))
			}
		}
		if d.Hint == "" {
			s.didYouMean(d, r, name, cands)
		}
		if d.Hint == "" && name == "output" {
			d.WithHint("`output` is only available in a node's branch, loop and compensate; elsewhere write `node.output`")
		}
	case strings.HasPrefix(msg, "undefined field"):
		owner, fields := s.fieldOwner(parsed, id, sc)
		if owner != "" {
			d = s.errorf(code, r, "`%s` is not a field of %s", name, owner)
		} else {
			d = s.errorf(code, r, "undefined field `%s`", name)
		}
		s.didYouMean(d, r, name, fields)
	case overloadRE.MatchString(msg):
		m := overloadRE.FindStringSubmatch(msg)
		args := celTypeList(m[2])
		if op := celOps[m[1]]; op != "" {
			d = s.errorf(code, r, "`%s` cannot be applied to (%s)", op, args)
		} else {
			d = s.errorf(code, r, "no function `%s` takes (%s)", m[1], args)
		}
		if mixed := regexp.MustCompile(`\bint\b`).MatchString(args) && regexp.MustCompile(`\bnumber\b`).MatchString(args); mixed {
			d.WithHint("CEL does not mix int and number: write a number literal with a decimal point (100000.0), or convert with double(...) or int(...)")
		}
	default:
		d = s.errorf(code, r, "%s", msg)
	}
	_ = d
}

// overloadRE matches cel-go's "found no matching overload" message.
var overloadRE = regexp.MustCompile(`^found no matching overload for '([^']+)' applied to '\((.*)\)'$`)

// celOps names CEL's operator functions as they are written.
var celOps = map[string]string{
	"_>_": ">", "_<_": "<", "_>=_": ">=", "_<=_": "<=", "_==_": "==", "_!=_": "!=",
	"_+_": "+", "_-_": "-", "_*_": "*", "_/_": "/", "_%_": "%", "_&&_": "&&", "_||_": "||",
	"!_": "!", "-_": "-", "_[_]": "[ ]", "@in": "in", "_?_:_": "? :",
}

var (
	celDouble = regexp.MustCompile(`\bdouble\b`)
	celDyn    = regexp.MustCompile(`\bdyn\b`)
	celWfType = regexp.MustCompile(`\bwf\.(out|self|node)\.([A-Za-z0-9_]+)(\.[A-Za-z0-9_.]+)?|\bwf\.input(\.[A-Za-z0-9_.]+)?`)
)

// celTypeList rewrites a list of CEL type names the way wf writes types:
// number, list<T>, map<T>, and the workflow's object types by origin.
func celTypeList(s string) string {
	s = strings.NewReplacer("google.protobuf.Duration", "duration", "google.protobuf.Timestamp", "timestamp").Replace(s)
	s = celDouble.ReplaceAllString(s, "number")
	s = celDyn.ReplaceAllString(s, "any")
	s = celWfType.ReplaceAllStringFunc(s, func(t string) string {
		m := celWfType.FindStringSubmatch(t)
		switch {
		case m[3] != "" || m[4] != "":
			return "object"
		case m[1] == "node":
			return "node " + m[2]
		case m[1] == "out" || m[1] == "self":
			return "the output of " + m[2]
		}
		return "input"
	})
	var b strings.Builder
	var angle []bool // per open "(": was it written as "<"?
	for i := 0; i < len(s); i++ {
		switch {
		case strings.HasPrefix(s[i:], "list("):
			b.WriteString("list<")
			angle = append(angle, true)
			i += len("list(") - 1
		case strings.HasPrefix(s[i:], "map(string, ") || strings.HasPrefix(s[i:], "map(any, "):
			b.WriteString("map<")
			angle = append(angle, true)
			i += strings.Index(s[i:], ", ") + 1
		case s[i] == '(':
			b.WriteByte('(')
			angle = append(angle, false)
		case s[i] == ')' && len(angle) > 0:
			if angle[len(angle)-1] {
				b.WriteByte('>')
			} else {
				b.WriteByte(')')
			}
			angle = angle[:len(angle)-1]
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// fieldOwner finds the operand of the select with the given id in the parsed
// tree and returns a readable name for it and its field names.
func (s *state) fieldOwner(a *celast.AST, id int64, sc *scope) (string, []string) {
	if a == nil {
		return "", nil
	}
	var target celast.Expr
	celast.PreOrderVisit(a.Expr(), celast.NewExprVisitor(func(x celast.Expr) {
		if x.ID() == id && x.Kind() == celast.SelectKind {
			target = x.AsSelect().Operand()
		}
	}))
	if target == nil {
		return "", nil
	}
	var path []string
	x := target
	for x.Kind() == celast.SelectKind {
		path = append([]string{x.AsSelect().FieldName()}, path...)
		x = x.AsSelect().Operand()
	}
	if x.Kind() != celast.IdentKind {
		return "", nil
	}
	root := x.AsIdent()
	typeName := ""
	switch {
	case root == "input":
		typeName = "wf.input"
	case root == "output" && sc.self != nil:
		typeName = sc.selfType
	case s.byID[root] != nil:
		typeName = "wf.node." + root
	default:
		return "", nil
	}
	for _, f := range path {
		ft, ok := s.prov.FindStructFieldType(typeName, f)
		if !ok || ft.Type.Kind() != types.StructKind {
			return "", nil
		}
		typeName = ft.Type.TypeName()
	}
	names, _ := s.prov.FindStructFieldNames(typeName)
	return strings.Join(append([]string{root}, path...), "."), names
}

// offsetMap maps CEL positions (code points within the expression text)
// to byte offsets in the file.
type offsetMap struct {
	base  int
	text  string
	ascii bool
}

func newOffsetMap(e *ast.Expr) *offsetMap {
	ascii := true
	for i := 0; i < len(e.Text); i++ {
		if e.Text[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	return &offsetMap{base: e.Start, text: e.Text, ascii: ascii}
}

func (m *offsetMap) off(cp int32) int {
	if cp < 0 {
		cp = 0
	}
	if m.ascii {
		return m.base + min(int(cp), len(m.text))
	}
	return m.base + source.RuneOffsetToByte(m.text, int(cp))
}

func (m *offsetMap) rng(start, stop int32) source.Range {
	a := m.off(start)
	b := m.off(stop)
	if b < a {
		b = a
	}
	return source.Range{Start: a, End: b}
}

// lineCol maps a CEL line (1-based) and column (0-based, code points).
func (m *offsetMap) lineCol(line, col int) int {
	i := 0
	for l := 1; l < line; l++ {
		k := strings.IndexByte(m.text[i:], '\n')
		if k < 0 {
			break
		}
		i += k + 1
	}
	return m.base + i + source.RuneOffsetToByte(m.text[i:], col)
}

// fieldAfter finds `.name` at or after file offset off and returns the
// range of name.
func (m *offsetMap) fieldAfter(off int, name string) source.Range {
	rel := off - m.base
	if rel < 0 || rel > len(m.text) {
		return source.Range{Start: off, End: off}
	}
	if k := strings.Index(m.text[rel:], name); k >= 0 {
		return source.Range{Start: off + k, End: off + k + len(name)}
	}
	return source.Range{Start: off, End: off}
}

func (s *state) useInput(owner *node, name string) {
	m, k := s.inputUses, -1
	if owner != nil {
		k = owner.idx
	} else {
		m, k = s.outputInputs, s.curOutput
	}
	if m[k] == nil {
		m[k] = map[string]bool{}
	}
	m[k][name] = true
}

// scopeEnv returns an environment that adds one variable, name, of type t,
// to the base environment. Environments are cached: an object type is
// declared as the stand-in `stand` and aliased to t for the node being
// checked, any other type is keyed by its spelling. So a workflow needs a
// handful of environments, not one per node (extending an environment
// re-declares every node: O(nodes) each).
func (s *state) scopeEnv(name, stand string, t *types.Type) *cel.Env {
	key := name + "\x00"
	decl := t
	if t.Kind() == types.StructKind {
		s.prov.alias[stand] = t.TypeName()
		decl = types.NewObjectType(stand)
		key += stand
	} else {
		key += t.String()
	}
	if e, ok := s.scopeEnvs[key]; ok {
		return e
	}
	e, err := s.env.Extend(cel.Variable(name, decl))
	if err != nil {
		return nil
	}
	s.scopeEnvs[key] = e
	return e
}

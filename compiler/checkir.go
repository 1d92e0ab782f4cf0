package compiler

import (
	"fmt"
	"slices"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/lang/diag"
	"github.com/wfc-lang/wfc/lang/source"
)

// CheckIR types the expressions of an IR document the way a build types
// them from source, for IR that did not come from a build: a live patch
// (ir.ApplyPatch) produces one. Every condition, template, `with` value,
// for_each list, approvers list, dispatch and output is compiled against
// the workflow's declared types: inputs, node outputs (x.output,
// x.iteration in a loop, x.error behind on_error), `run`, and the node's
// own `output` in branch rules, loop conditions and compensations. It
// also checks that a node only reads nodes upstream of it (data safety),
// that conditions are bool and for_each lists are lists, and the `with`
// fields of handlers whose config is an object. w must be valid and
// analyzed (ir.Validate, ir.Analyze). Each diagnostic's message starts
// with the JSON pointer at fault; its span is the expression's source
// location when the IR carries one.
func CheckIR(w *ir.Workflow) []diag.Diagnostic {
	c := &irChecker{w: w, prov: newProvider(2 * len(w.Nodes)), handlers: map[string]*ir.Handler{}}
	for i := range w.Handlers {
		c.handlers[w.Handlers[i].Name] = &w.Handlers[i]
	}
	inputT := obj()
	for _, in := range w.Inputs {
		t := in.Type
		if t.Kind == ir.KindSecret {
			t = ir.Type{Kind: ir.KindString}
		}
		inputT.Fields = append(inputT.Fields, ir.Field{Name: in.Name, Type: t, Optional: !in.Required && in.Default == nil})
	}
	opts := celOptions(c.prov)
	opts = append(opts, cel.Variable("input", c.prov.celType(inputT, "wf.input")))
	for i := range w.Nodes {
		n := &w.Nodes[i]
		fields := map[string]*types.Type{"output": c.prov.celType(irOutputType(n), "wf.out."+n.ID)}
		if n.Loop != nil {
			fields["iteration"] = types.IntType
		}
		if len(n.OnError) > 0 {
			fields["error"] = c.prov.celType(errorType, "wf.error")
		}
		opts = append(opts, cel.Variable(n.ID, c.prov.define("wf.node."+n.ID, nil, fields)))
	}
	base, err := cel.NewEnv(opts...)
	if err == nil {
		c.env, err = base.Extend(cel.Variable("run", c.prov.celType(runType, "wf.run")))
	}
	if err == nil && w.Finally != nil {
		c.endEnv, err = base.Extend(cel.Variable("run", c.prov.celType(runEndType, "wf.runend")))
	}
	if err != nil {
		c.add(diag.TypeError, "", nil, fmt.Sprintf("cannot build the expression environment: %v", err))
		return c.out
	}
	for i := range w.Nodes {
		c.node(i)
	}
	for i := range w.Outputs {
		o := &w.Outputs[i]
		c.expr(fmt.Sprintf("/outputs/%d/expr", i), &o.Expr, c.env, nil)
	}
	if f := w.Finally; f != nil {
		c.params("/finally/with", f.With, c.endEnv, nil, c.handlers[f.Handler])
	}
	return c.out
}

type irChecker struct {
	w        *ir.Workflow
	prov     *provider
	env      *cel.Env
	endEnv   *cel.Env
	handlers map[string]*ir.Handler
	anc      map[string]bool // the current node's ancestors
	self     string
	out      []diag.Diagnostic
}

// irOutputType is x.output's type: the declared output type, a list of
// them for a for_each.
func irOutputType(n *ir.Node) *ir.Type {
	t := n.OutputType
	if n.ForEach != nil && (t == nil || t.Kind != ir.KindList) {
		return &ir.Type{Kind: ir.KindList, Elem: t}
	}
	return t
}

func (c *irChecker) add(code diag.Code, path string, loc *ir.Loc, msg string) {
	d := diag.Diagnostic{Code: code, Severity: code.Severity(), Message: msg}
	if path != "" {
		d.Message = path + ": " + msg
	}
	if loc != nil {
		d.Span = source.Span{File: loc.File, Start: source.Pos{Line: loc.Line, Col: loc.Col}, End: source.Pos{Line: loc.EndLine, Col: loc.EndCol}}
	}
	c.out = append(c.out, d)
}

func (c *irChecker) node(i int) {
	n := &c.w.Nodes[i]
	p := fmt.Sprintf("/nodes/%d", i)
	c.anc, c.self = ir.Ancestors(c.w, n.ID), n.ID
	defer func() { c.anc, c.self = nil, "" }()
	env := c.env
	if n.When != nil {
		c.want(p+"/when", n.When, env, types.BoolKind, "a condition must be bool")
	}
	if h := n.Human; h != nil {
		if h.ApproversExpr != nil {
			c.expr(p+"/human/approvers_expr", h.ApproversExpr, env, nil)
		}
		if h.EscalateToExpr != nil {
			c.expr(p+"/human/escalate_to_expr", h.EscalateToExpr, env, nil)
		}
		if h.Prompt != nil {
			c.value(p+"/human/prompt", h.Prompt, env)
		}
	}
	if d := n.Dispatch; d != nil {
		c.want(p+"/dispatch/expr", &d.Expr, env, types.StringKind, "dispatch must name a handler (a string)")
	}
	withEnv := env
	if fe := n.ForEach; fe != nil {
		t := c.want(p+"/for_each/items", &fe.Items, env, types.ListKind, "for_each needs a list")
		elem := types.DynType
		if t != nil && t.Kind() == types.ListKind {
			elem = t.Parameters()[0]
		}
		vars := []cel.EnvOption{cel.Variable(fe.Var, elem)}
		if fe.Index != "" {
			vars = append(vars, cel.Variable(fe.Index, types.IntType))
		}
		if e, err := env.Extend(vars...); err == nil {
			withEnv = e
		}
	}
	if n.Agent != nil {
		c.value(p+"/agent/prompt", &n.Agent.Prompt, env)
	}
	c.params(p+"/with", n.With, withEnv, n, c.handlers[n.Handler])
	if n.Branch == nil && n.Loop == nil && n.Compensate == nil {
		return
	}
	self, err := env.Extend(cel.Variable("output", c.prov.celType(irOutputType(n), "wf.self."+n.ID)))
	if err != nil {
		c.add(diag.TypeError, p, n.Loc, err.Error())
		return
	}
	if b := n.Branch; b != nil {
		for k := range b.Rules {
			c.want(fmt.Sprintf("%s/branch/rules/%d/when", p, k), &b.Rules[k].When, self, types.BoolKind, "a branch rule must be bool")
		}
	}
	if l := n.Loop; l != nil {
		c.want(p+"/loop/while", &l.While, self, types.BoolKind, "a loop condition must be bool")
	}
	if cp := n.Compensate; cp != nil {
		c.params(p+"/compensate/with", cp.With, self, nil, c.handlers[cp.Handler])
	}
}

// params checks a `with` block: each value, and against a handler whose
// config is an object, the fields it names and their types.
func (c *irChecker) params(p string, ps []ir.Param, env *cel.Env, n *ir.Node, h *ir.Handler) {
	var cfg *ir.Type
	if h != nil && h.Config.Kind == ir.KindObject && n != nil && n.Dispatch == nil && n.Flow == nil {
		cfg = &h.Config
	}
	given := map[string]bool{}
	for i := range ps {
		pp := fmt.Sprintf("%s/%d", p, i)
		given[ps[i].Name] = true
		t := c.value(pp+"/value", &ps[i].Value, env)
		if cfg == nil {
			continue
		}
		var decl *ir.Field
		for k := range cfg.Fields {
			if cfg.Fields[k].Name == ps[i].Name {
				decl = &cfg.Fields[k]
			}
		}
		if decl == nil {
			c.add(diag.UnknownConfig, pp+"/name", nil, fmt.Sprintf("handler %q takes no field %q", h.Name, ps[i].Name))
			continue
		}
		if t != nil && t != types.DynType && t.Kind() != types.DynKind {
			want := c.prov.celType(&decl.Type, "wf.cfg."+h.Name+"."+decl.Name)
			if want.Kind() != types.DynKind && !want.IsAssignableType(t) && !assignableKinds(&decl.Type, t) {
				c.add(diag.ConfigType, pp+"/value", nil, fmt.Sprintf("field %q of handler %q is %s, the value is %s", decl.Name, h.Name, decl.Type.String(), typeName(t)))
			}
		}
	}
	if cfg != nil {
		for _, f := range cfg.Fields {
			if !f.Optional && !given[f.Name] {
				c.add(diag.MissingConfig, p, nil, fmt.Sprintf("handler %q needs field %q", h.Name, f.Name))
			}
		}
	}
}

// assignableKinds allows what the runtime converts: a string for a
// duration, an int for a number.
func assignableKinds(decl *ir.Type, t *types.Type) bool {
	switch decl.Kind {
	case ir.KindDuration:
		return t.Kind() == types.StringKind || t.Kind() == types.DurationKind
	case ir.KindNumber:
		return t.Kind() == types.IntKind || t.Kind() == types.UintKind || t.Kind() == types.DoubleKind
	case ir.KindAny:
		return true
	}
	return false
}

// value checks a configured value and returns its type (nil if unknown).
func (c *irChecker) value(p string, v *ir.Value, env *cel.Env) *types.Type {
	switch {
	case v.Expr != nil:
		return c.expr(p+"/expr", v.Expr, env, nil)
	case v.Template != nil:
		for i := range v.Template {
			if e := v.Template[i].Expr; e != nil {
				c.expr(fmt.Sprintf("%s/template/%d/expr", p, i), e, env, nil)
			}
		}
		return types.StringType
	}
	return nil
}

// want checks an expression whose type must be of kind k (or dyn).
func (c *irChecker) want(p string, e *ir.Expr, env *cel.Env, k types.Kind, msg string) *types.Type {
	return c.expr(p, e, env, func(t *types.Type) {
		if t.Kind() != k && t.Kind() != types.DynKind {
			c.add(diag.NotBool, p, e.Loc, fmt.Sprintf("%s, found %s", msg, typeName(t)))
		}
	})
}

// expr compiles one expression, checks that it reads only nodes upstream
// of the current node, and hands its type to then.
func (c *irChecker) expr(p string, e *ir.Expr, env *cel.Env, then func(*types.Type)) *types.Type {
	a, iss := env.Compile(e.CEL)
	if iss != nil && iss.Err() != nil {
		c.add(diag.TypeError, p, e.Loc, cleanCELMessage(strings.TrimSpace(iss.Err().Error())))
		return nil
	}
	if c.self != "" {
		for _, r := range a.NativeRep().ReferenceMap() {
			if r.Value != nil || r.Name == "" {
				continue
			}
			name, _, _ := strings.Cut(r.Name, ".")
			if n := c.w.Node(name); n != nil && name != c.self && !c.anc[name] && !slices.Contains(n.LoopBody, c.self) {
				c.add(diag.TypeError, p, e.Loc, fmt.Sprintf("reads %s, which is not upstream of %s: it may not have run yet (add an edge %s -> %s)", name, c.self, name, c.self))
			}
		}
	}
	t := a.OutputType()
	if then != nil {
		then(t)
	}
	return t
}

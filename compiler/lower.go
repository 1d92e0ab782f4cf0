package compiler

import (
	"encoding/json"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/lang/ast"
	"github.com/wfc-lang/wfc/lang/diag"
	"github.com/wfc-lang/wfc/lang/source"
)

// fold constant-folds every checked expression with cel-go's optimiser and
// records the expressions that became constants.
func (s *state) fold() {
	if s.cfg.NoOptimize {
		return
	}
	// NewConstantFoldingOptimizer returns (optimizer, error); passing both
	// to the variadic ...any NewStaticOptimizer makes it fail on the nil
	// error, which silently turned folding off.
	folder, err := cel.NewConstantFoldingOptimizer()
	if err != nil {
		return
	}
	opt, err := cel.NewStaticOptimizer(folder)
	if err != nil {
		return
	}
	for e, v := range s.intLits {
		s.consts[e] = v // what folding and evaluating the literal gives
	}
	envs := newFoldEnvs(s.prov)
	for e, a := range s.checked {
		if !foldable(a.NativeRep().Expr()) {
			continue
		}
		env := envs.env(s.envs[e], a)
		f, iss := opt.Optimize(env, a)
		if iss != nil && iss.Err() != nil {
			continue
		}
		s.folded[e] = f
		if !hasIdent(f.NativeRep().Expr()) {
			prg, err := env.Program(f, cel.CostLimit(MaxExprCost))
			if err != nil {
				continue
			}
			if v, _, err := prg.Eval(cel.NoVars()); err == nil {
				if j, err := toJSON(v); err == nil {
					s.consts[e] = j
				}
			}
		}
	}
}

// foldable reports whether constant folding can change e: it has a call,
// list or map all of whose operands are literals, or it is a literal. The
// optimiser is costly, and most workflow expressions read variables.
func foldable(e celast.Expr) bool {
	found := false
	lit := func(x celast.Expr) bool {
		return x == nil || x.Kind() == celast.LiteralKind || x.Kind() == celast.UnspecifiedExprKind
	}
	celast.PreOrderVisit(e, celast.NewExprVisitor(func(x celast.Expr) {
		if found {
			return
		}
		switch x.Kind() {
		case celast.LiteralKind:
			found = x == e
		case celast.CallKind:
			c := x.AsCall()
			all := !c.IsMemberFunction() || lit(c.Target())
			for _, a := range c.Args() {
				all = all && lit(a)
			}
			found = all
		case celast.ListKind:
			all := true
			for _, a := range x.AsList().Elements() {
				all = all && lit(a)
			}
			found = all
		}
	}))
	return found
}

func hasIdent(e celast.Expr) bool {
	found := false
	celast.PreOrderVisit(e, celast.NewExprVisitor(func(x celast.Expr) {
		if x.Kind() == celast.IdentKind || x.Kind() == celast.ComprehensionKind {
			found = true
		}
	}))
	return found
}

func (s *state) loc(r source.Range) *ir.Loc {
	sp := s.file.Span(r)
	return &ir.Loc{File: s.file.Name, Line: sp.Start.Line, Col: sp.Start.Col, EndLine: sp.End.Line, EndCol: sp.End.Col}
}

func (s *state) irExpr(e *ast.Expr) ir.Expr {
	out := ir.Expr{CEL: e.Text, Loc: s.loc(e.Range)}
	if f := s.folded[e]; f != nil {
		if txt, err := cel.AstToString(f); err == nil {
			out.CEL = txt
		}
	}
	if in := s.info.Exprs[e]; in != nil && in.Type != nil {
		t := *in.Type
		out.Type = &t
	}
	return out
}

func (s *state) irExprPtr(e *ast.Expr) *ir.Expr {
	if e == nil {
		return nil
	}
	x := s.irExpr(e)
	return &x
}

func (s *state) value(e *ast.Expr) ir.Value {
	if e.Str != nil && e.Str.Template != nil {
		return ir.Value{Template: s.template(e.Str)}
	}
	if c, ok := s.consts[e]; ok {
		b, _ := json.Marshal(c)
		return ir.Value{Const: b}
	}
	if e.Str != nil {
		b, _ := json.Marshal(e.Str.Value)
		return ir.Value{Const: b}
	}
	x := s.irExpr(e)
	return ir.Value{Expr: &x}
}

func (s *state) template(str *ast.String) []ir.TemplatePart {
	var parts []ir.TemplatePart
	for _, p := range str.Template {
		if p.Expr != nil {
			x := s.irExpr(p.Expr)
			parts = append(parts, ir.TemplatePart{Expr: &x})
		} else if p.Text != "" {
			parts = append(parts, ir.TemplatePart{Text: p.Text})
		}
	}
	return parts
}

// templateCEL writes a template as one CEL string expression: text parts
// quoted, string parts as they are, other values through string().
func (s *state) templateCEL(str *ast.String) string {
	var parts []string
	for _, p := range str.Template {
		switch {
		case p.Expr != nil:
			x := s.irExpr(p.Expr)
			if x.Type != nil && x.Type.Kind == ir.KindString {
				parts = append(parts, "("+x.CEL+")")
			} else {
				parts = append(parts, "string("+x.CEL+")")
			}
		case p.Text != "":
			parts = append(parts, strconv.Quote(p.Text))
		}
	}
	if len(parts) == 0 {
		return `""`
	}
	return strings.Join(parts, " + ")
}

func (s *state) params(pb *ast.ParamBlock) []ir.Param {
	if pb == nil {
		return nil
	}
	out := make([]ir.Param, 0, len(pb.Params))
	for _, p := range pb.Params {
		out = append(out, ir.Param{Name: p.Name.Name, Value: s.value(p.Value)})
	}
	return out
}

func names(ids []*ast.Ident) []string {
	if len(ids) == 0 {
		return nil
	}
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id.Name
	}
	return out
}

// lower builds the IR from the checked declarations.
func (s *state) lower() {
	if s.wf == nil {
		return
	}
	w := &ir.Workflow{
		IRVersion:   ir.Version,
		Name:        s.name,
		Version:     s.version,
		Description: s.desc,
		Source:      s.file.Name,
		Settings:    s.settings,
		Inputs:      []ir.Input{},
		Outputs:     []ir.Output{},
		Handlers:    []ir.Handler{},
		Edges:       make([]ir.Edge, 0, len(s.edges)),
	}
	if len(s.nodes) > 0 { // (nil, not empty, when there are none)
		w.Nodes = make([]ir.Node, 0, len(s.nodes))
	}
	for _, in := range s.inputs {
		w.Inputs = append(w.Inputs, ir.Input{Name: in.Name, Type: *in.Type, Default: s.defaults[in.Name], Required: in.Required, Loc: s.loc(in.Decl.Range)})
	}
	for _, p := range s.outputs {
		x := s.irExpr(p.Value)
		if p.Value.Str != nil && p.Value.Str.Template != nil {
			// An output is an expression, not a value: a template would be
			// kept as a plain string literal, braces and all.
			x.CEL = s.templateCEL(p.Value.Str)
		}
		w.Outputs = append(w.Outputs, ir.Output{Name: p.Name.Name, Expr: x, Loc: s.loc(p.Range)})
	}
	used := make([]string, 0, len(s.usedH))
	for h := range s.usedH {
		used = append(used, h)
	}
	sort.Strings(used)
	for _, name := range used {
		h := s.handlers[name]
		ih := ir.Handler{Name: name, Builtin: h.Builtin, Config: ir.Type{Kind: ir.KindAny}, Output: ir.Type{Kind: ir.KindAny}}
		if !h.Open {
			ih.Config, ih.Output = *h.Config, *h.Output
		}
		if h.Decl != nil && h.File == s.file.Name {
			ih.Loc = s.loc(h.Decl.Name.Range)
		}
		w.Handlers = append(w.Handlers, ih)
	}
	embedded := map[string]*ir.Workflow{}
	for _, n := range s.nodes {
		w.Nodes = append(w.Nodes, s.lowerNode(n, embedded))
	}
	w.Children = sortedChildren(embedded)
	if f := s.finally; f != nil {
		w.Finally = &ir.Finally{Handler: f.handler, With: s.params(f.with), Retry: f.retry, Loc: s.loc(f.block.Range)}
	}
	for _, e := range s.edges {
		w.Edges = append(w.Edges, ir.Edge{From: s.nodes[e.from].id, To: s.nodes[e.to].id, Kind: e.kind})
	}
	if w.Edges == nil {
		w.Edges = []ir.Edge{}
	}
	if err := ir.Analyze(w); err != nil {
		s.errorf(diag.Internal, s.wf.Name.Range, "internal error: the lowered graph does not analyse: %v", err)
		return
	}
	s.ir, s.irFresh = w, true
}

func (s *state) lowerNode(n *node, embedded map[string]*ir.Workflow) ir.Node {
	in := ir.Node{ID: n.id, Type: n.kind, Handler: n.handler, Join: n.join, Loc: s.loc(n.decl.Range)}
	if n.dispatch != nil && len(n.runSet) > 0 {
		in.Dispatch = &ir.Dispatch{Expr: s.irExpr(n.dispatch)}
		for _, h := range n.runSet {
			in.Dispatch.Handlers = append(in.Dispatch.Handlers, h.Value)
		}
	}
	if n.kind != "agent" {
		in.With = s.params(n.with)
	}
	if n.outType != nil {
		t := *n.outType
		in.OutputType = &t
	}
	in.When = s.irExprPtr(n.when)
	if fe := n.forEach; fe != nil {
		in.ForEach = &ir.ForEach{Var: fe.Var.Name, Items: s.irExpr(fe.Items), Parallel: n.parallel, Tolerate: n.tolerate}
		if fe.Index != nil {
			in.ForEach.Index = fe.Index.Name
		}
	}
	in.Retry = n.retry
	if n.kind != "human" {
		in.TimeoutMS = n.timeoutMS
	}
	if b := n.branch; b != nil {
		in.Branch = &ir.Branch{Rules: []ir.Rule{}}
		for _, r := range b.Rules {
			if r.Else {
				in.Branch.Default = names(r.Targets)
				continue
			}
			in.Branch.Rules = append(in.Branch.Rules, ir.Rule{When: s.irExpr(r.Cond), Targets: names(r.Targets)})
		}
	}
	if l := n.loop; l != nil {
		in.Loop = &ir.Loop{Max: l.max, BackTo: l.backTo.Name, Exhausted: names(l.exhausted)}
		if l.while != nil {
			in.Loop.While = s.irExpr(l.while)
		}
	}
	in.OnError = names(n.onError)
	in.ErrorRoutes = n.irErrorRoutes()
	if c := n.compensate; c != nil {
		in.Compensate = &ir.Compensate{Handler: c.handler, With: s.params(c.with)}
	}
	switch n.kind {
	case "agent":
		a := &ir.Agent{Model: n.model, Temperature: n.temperature, Routes: names(n.routes), Default: names(n.dflt),
			Tools: n.tools, MaxToolCalls: n.maxToolCalls, MaxTokens: n.maxTokens}
		if n.maxRoutes > 1 {
			a.MaxRoutes = n.maxRoutes
		}
		if n.prompt != nil {
			a.Prompt = s.promptValue(n.prompt)
		}
		in.Agent = a
		in.With = s.params(n.with)
	case "human":
		in.Human = &ir.Human{Approvers: n.approvers, TimeoutMS: n.timeoutMS, OnTimeout: n.onTimeout, OnReject: names(n.onReject)}
		if n.approversExpr != nil {
			x := s.irExpr(n.approversExpr)
			in.Human.ApproversExpr = &x
		}
		in.Human.EscalateTo, in.Human.EscalateAfterMS = n.escalateTo, n.escalateAfterMS
		if n.escalateExpr != nil {
			x := s.irExpr(n.escalateExpr)
			in.Human.EscalateToExpr = &x
		}
		if n.prompt != nil {
			p := s.promptValue(n.prompt)
			in.Human.Prompt = &p
		}
	case "flow":
		if n.uses != nil {
			in.Flow = &ir.Flow{Uses: n.uses.Value, With: in.With}
			in.With = nil
			if n.child != nil && n.child.IR != nil {
				in.Flow.Hash = s.embed(n, n.child.IR, embedded)
			}
		}
	}
	return in
}

// embed adds the compiled child c and its own children to embedded (by
// hash) and returns c's hash. The children are flattened: a child's flow
// nodes reference its children by hash, and the root holds them all, each
// once however many nodes and levels run it. c is the child's Result.IR,
// shared, not modified.
func (s *state) embed(n *node, c *ir.Workflow, embedded map[string]*ir.Workflow) string {
	h, err := ir.Hash(c)
	if err != nil {
		s.errorf(diag.Internal, n.uses.Range, "internal error: hashing child workflow %q: %v", n.uses.Value, err)
		return ""
	}
	if embedded[h] == nil {
		flat := *c
		flat.Children = nil
		embedded[h] = &flat
		for i := range c.Children {
			if embedded[c.Children[i].Hash] == nil {
				embedded[c.Children[i].Hash] = &c.Children[i].Workflow
			}
		}
	}
	return h
}

// sortedChildren lists embedded children in hash order, as ir.Validate
// wants them.
func sortedChildren(embedded map[string]*ir.Workflow) []ir.Child {
	if len(embedded) == 0 {
		return nil
	}
	out := make([]ir.Child, 0, len(embedded))
	for h, c := range embedded {
		out = append(out, ir.Child{Hash: h, Workflow: *c})
	}
	slices.SortFunc(out, func(a, b ir.Child) int { return strings.Compare(a.Hash, b.Hash) })
	return out
}

// trimChildren drops the embedded children no remaining flow node runs,
// directly or through other children (after nodes were removed).
func trimChildren(w *ir.Workflow) {
	if len(w.Children) == 0 {
		return
	}
	byHash := make(map[string]*ir.Workflow, len(w.Children))
	for i := range w.Children {
		byHash[w.Children[i].Hash] = &w.Children[i].Workflow
	}
	keep := map[string]bool{}
	var visit func(x *ir.Workflow)
	visit = func(x *ir.Workflow) {
		for i := range x.Nodes {
			if f := x.Nodes[i].Flow; f != nil && !keep[f.Hash] && byHash[f.Hash] != nil {
				keep[f.Hash] = true
				visit(byHash[f.Hash])
			}
		}
	}
	visit(w)
	w.Children = slices.DeleteFunc(w.Children, func(c ir.Child) bool { return !keep[c.Hash] })
	if len(w.Children) == 0 {
		w.Children = nil
	}
}

// promptValue lowers a prompt string: a template, or a constant.
func (s *state) promptValue(str *ast.String) ir.Value {
	if str.Template != nil {
		return ir.Value{Template: s.template(str)}
	}
	b, _ := json.Marshal(str.Value)
	return ir.Value{Const: b}
}

// validate re-analyses the final IR and checks it the way a runtime or the
// live-patch applier would: any problem here is a compiler bug.
func (s *state) validate() {
	if s.ir == nil {
		return
	}
	// Analyze is a pure function of what the passes set: an IR analysed
	// after its last change (s.irFresh) would come out the same again.
	if !s.irFresh {
		if err := ir.Analyze(s.ir); err != nil {
			s.errorf(diag.Internal, s.wf.Name.Range, "internal error: %v", err)
			return
		}
	}
	for _, p := range ir.Validate(s.ir) {
		s.errorf(diag.Internal, s.wf.Name.Range, "internal error: invalid IR at %s: %s", p.Path, p.Message)
	}
	if len(s.ir.Children) > 0 {
		// Embedded children can make the document larger than a reader
		// accepts (ir.Decode): say so now rather than when it is run.
		if b, err := ir.Marshal(s.ir); err == nil && len(b) > maxIRSize {
			s.errorf(diag.TooMany, s.wf.Name.Range, "the IR with its %d embedded child workflows is %d bytes; the limit of an IR document is %d (%d MiB)",
				len(s.ir.Children), len(b), maxIRSize, maxIRSize>>20).
				WithHint("run fewer distinct child workflows, or smaller ones")
		}
	}
}

// maxIRSize is ir.MaxSize; a variable so that a test can lower it.
var maxIRSize = ir.MaxSize

// removeNodes deletes nodes (by id) from the IR with their edges and every
// mention in target lists.
func removeNodes(w *ir.Workflow, dead map[string]bool) {
	if len(dead) == 0 {
		return
	}
	keep := func(ids []string) []string {
		out := slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return dead[id] })
		if len(out) == 0 {
			return nil
		}
		return out
	}
	nodes := w.Nodes[:0]
	for _, n := range w.Nodes {
		if dead[n.ID] {
			continue
		}
		if n.Branch != nil {
			for i := range n.Branch.Rules {
				n.Branch.Rules[i].Targets = keep(n.Branch.Rules[i].Targets)
				if n.Branch.Rules[i].Targets == nil {
					n.Branch.Rules[i].Targets = []string{}
				}
			}
			n.Branch.Default = keep(n.Branch.Default)
		}
		if n.Loop != nil {
			n.Loop.Exhausted = keep(n.Loop.Exhausted)
		}
		if n.Agent != nil {
			n.Agent.Routes = keep(n.Agent.Routes)
			n.Agent.Default = keep(n.Agent.Default)
		}
		if n.Human != nil {
			n.Human.OnReject = keep(n.Human.OnReject)
		}
		n.OnError = keep(n.OnError)
		// A route whose targets are all gone still takes its codes (the
		// failure is handled, nothing runs after it); without any error
		// target left the node has no on_error at all.
		if n.OnError == nil {
			n.ErrorRoutes = nil
		}
		for i := range n.ErrorRoutes {
			if n.ErrorRoutes[i].Targets = keep(n.ErrorRoutes[i].Targets); n.ErrorRoutes[i].Targets == nil {
				n.ErrorRoutes[i].Targets = []string{}
			}
		}
		nodes = append(nodes, n)
	}
	w.Nodes = nodes
	w.Edges = slices.DeleteFunc(w.Edges, func(e ir.Edge) bool { return dead[e.From] || dead[e.To] })
	// w.Handlers lists the handlers the nodes use: drop those only removed
	// nodes used.
	used := map[string]bool{}
	for _, n := range w.Nodes {
		used[n.Handler] = true
		if n.Dispatch != nil {
			for _, h := range n.Dispatch.Handlers {
				used[h] = true
			}
		}
		if n.Compensate != nil {
			used[n.Compensate.Handler] = true
		}
	}
	if w.Finally != nil {
		used[w.Finally.Handler] = true
	}
	w.Handlers = slices.DeleteFunc(w.Handlers, func(h ir.Handler) bool { return !used[h.Name] })
	trimChildren(w)
}

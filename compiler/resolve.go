package compiler

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/lang/ast"
	"github.com/wfc-lang/wfc/lang/diag"
)

// resolve binds every name reference: node ids in after and routing
// targets, handler names in run, and child workflows in uses.
func (s *state) resolve() {
	ids := make([]string, len(s.nodes))
	for i, n := range s.nodes {
		ids[i] = n.id
	}
	s.refSugg = map[*ast.Ident]string{}
	// self is the node whose items are resolved: never suggested for its
	// own references, as it cannot depend on or route to itself (except
	// by back_to, which passes "").
	ref := func(id *ast.Ident, self string) {
		if id == nil {
			return
		}
		if s.byID[id.Name] == nil {
			d := s.errorf(diag.UnknownNode, id.Range, "unknown node `%s`", id.Name)
			sug := s.suggestExcept(id.Name, ids, self)
			s.refSugg[id] = sug
			s.hint(d, id.Range, sug)
			return
		}
		s.info.Refs = append(s.info.Refs, Ref{Range: id.Range, Kind: RefNode, Name: id.Name})
	}
	for _, n := range s.nodes {
		if n.decl == nil {
			continue
		}
		refs := func(xs []*ast.Ident) {
			for _, x := range xs {
				ref(x, n.id)
			}
		}
		refs(n.after)
		if n.branch != nil {
			for _, r := range n.branch.Rules {
				refs(r.Targets)
			}
		}
		refs(n.routes)
		refs(n.dflt)
		refs(n.onError)
		refs(n.onReject)
		if n.loop != nil {
			if n.loop.backTo.Name != n.id || n.loop.backTo.Range != n.ident.Range {
				ref(n.loop.backTo, "")
			}
			refs(n.loop.exhausted)
		}
		if n.run != nil && n.run.Template == nil { // a template was reported
			s.handlerRef(n.run)
		}
		for _, h := range n.runSet {
			s.handlerRef(h)
		}
		if n.compensate != nil && n.compensate.run != nil && n.compensate.run.Template == nil {
			s.handlerRef(n.compensate.run)
		}
		if n.uses != nil && n.uses.Template == nil {
			s.compileChild(n)
		}
		s.outputType(n)
	}
	if f := s.finally; f != nil && f.run != nil && f.run.Template == nil {
		s.handlerRef(f.run)
	}
}

// afterTypo reports whether x is, or is an ancestor of, the node that
// WF1001 suggests ("did you mean") for an unknown name in n's `after`: with
// the typo fixed, x would be an ancestor of n. The dataflow pass then does
// not report n's reads of x as missing an `after` (WF4003), which would
// contradict the fix WF1001 offers.
func (s *state) afterTypo(n, x *node) bool {
	for _, a := range n.after {
		if a == nil || s.byID[a.Name] != nil {
			continue
		}
		// resolve computed the suggestion (none past its budget).
		if sug := s.byID[s.refSugg[a]]; sug != nil && (sug == x || s.anc[sug.idx].has(x.idx)) {
			return true
		}
	}
	return false
}

func (s *state) handlerRef(str *ast.String) {
	h := s.handlers[str.Value]
	if h == nil && s.lexErrorIn(str.Range) {
		return // a bad literal (WF0002, WF0003, WF0004) was reported; its value is debris
	}
	if h == nil {
		if s.handlerNames == nil { // once: handlers are all declared by now
			s.handlerNames = make([]string, 0, len(s.handlers))
			for k := range s.handlers {
				s.handlerNames = append(s.handlerNames, k)
			}
		}
		d := s.errorf(diag.UnknownHandler, str.Range, "unknown handler %q", str.Value)
		if sug := s.suggest(str.Value, s.handlerNames); sug != "" {
			d.WithHint(fmt.Sprintf("did you mean %q?", sug))
			d.WithFix(fmt.Sprintf("Change to %q", sug), s.span(str.Range), fmt.Sprintf("%q", sug))
		} else {
			d.WithHint("declare it with `handler \"" + str.Value + "\" { config { ... } output { ... } }`")
		}
		return
	}
	s.usedH[h.Name] = true
	s.info.Handlers[h.Name] = h
	s.info.Refs = append(s.info.Refs, Ref{Range: str.Range, Kind: RefHandler, Name: h.Name})
}

// compileChild compiles the workflow a flow node uses, for its input and
// output types.
func (s *state) compileChild(n *node) {
	if s.cfg.depth >= MaxImportDepth {
		s.errorf(diag.ImportError, n.uses.Range, "flows nested deeper than %d (a flow cycle?)", MaxImportDepth)
		return
	}
	path := s.cfg.resolve(s.file.Name, n.uses.Value)
	chain := append(append([]string{}, s.cfg.flows...), s.file.Name)
	for _, p := range chain {
		if filepath.Clean(p) == filepath.Clean(path) {
			s.errorf(diag.ImportError, n.uses.Range, "flow cycle: %s → %s", strings.Join(chain, " → "), path).
				WithHint("a workflow cannot run itself as a child, directly or through other flows")
			return
		}
	}
	src, err := s.cfg.ReadFile(path)
	if err != nil {
		s.errorf(diag.ImportError, n.uses.Range, "cannot read %q: %v", n.uses.Value, unwrapPathErr(err))
		return
	}
	cfg := s.cfg
	cfg.depth++
	cfg.flows = chain
	cfg.Goals = nil
	cfg.StopAfter = ""
	res := Compile(path, src, cfg)
	for k, v := range res.Files {
		s.files[k] = v
	}
	if res.Diags.HasErrors() {
		first := res.Diags[0]
		for _, d := range res.Diags {
			if d.Severity == diag.Error {
				first = d
				break
			}
		}
		if first.Code == diag.ImportError && strings.HasPrefix(first.Message, "flow cycle: ") {
			// Deeper down the same cycle: say it once, not once per level.
			s.errorf(diag.ImportError, n.uses.Range, "%s", first.Message).WithRelated(first.Span, "the cycle continues here")
			return
		}
		s.errorf(diag.ImportError, n.uses.Range, "child workflow %q does not compile: %s", n.uses.Value, first.Message).
			WithRelated(first.Span, first.Message)
		return
	}
	n.child = res
	if ni := s.info.Nodes[n.id]; ni != nil && res.IR != nil {
		ni.ChildInputs = childConfig(res) // for the editor's completion in `with`
	}
}

// childConfig is the "config" a flow node's with block is checked against:
// the child's inputs.
func childConfig(res *Result) *ir.Type {
	t := obj()
	for _, in := range res.IR.Inputs {
		t.Fields = append(t.Fields, ir.Field{Name: in.Name, Type: in.Type, Optional: !in.Required})
	}
	return t
}

func childOutput(res *Result) *ir.Type {
	t := obj()
	for _, o := range res.IR.Outputs {
		ft := ir.Type{Kind: ir.KindAny}
		if o.Expr.Type != nil {
			ft = *o.Expr.Type
		}
		t.Fields = append(t.Fields, ir.Field{Name: o.Name, Type: ft})
	}
	return t
}

// outputType decides the type of n.output (before expressions are checked;
// open handlers get theirs in the types pass).
func (s *state) outputType(n *node) {
	var t *ir.Type
	switch {
	case n.outDecl != nil:
		t = s.objectType(n.outDecl.Fields)
	case n.kind == "task" && len(n.runSet) > 0:
		t = s.dispatchOutput(n)
	case n.kind == "task":
		if h := s.handlers[n.handler]; h != nil && !h.Open {
			t = h.Output
		}
	case n.kind == "agent":
		t = agentOutput
	case n.kind == "human":
		t = humanOutput
	case n.kind == "flow":
		if n.child != nil {
			t = childOutput(n.child)
		}
	}
	if t == nil {
		t = &ir.Type{Kind: ir.KindAny}
	}
	s.setOutput(n, t)
}

// dispatchOutput is the output of a task that dispatches: the handlers of
// its set must give the same one (else the node declares its output), and
// must declare their config and output (an open handler's output follows
// its with block, so cel and echo cannot be in a set).
func (s *state) dispatchOutput(n *node) *ir.Type {
	var t *ir.Type
	var first *HandlerInfo
	for _, str := range n.runSet {
		h := s.handlers[str.Value]
		if h == nil {
			continue // reported by handlerRef
		}
		if h.Open {
			s.errorf(diag.ConfigType, str.Range, "handler %q takes any config, so it cannot be in a dispatch set: the handlers of a set must declare the config they accept", h.Name)
			continue
		}
		if first == nil {
			first, t = h, h.Output
			continue
		}
		if h.Output.String() != t.String() {
			s.errorf(diag.TypeError, str.Range, "handler %q outputs %s but %q outputs %s: the handlers of a dispatch set must give the same output", h.Name, h.Output.String(), first.Name, t.String()).
				WithHint("or declare the node's `output { ... }`, which every handler's output is checked against")
		}
	}
	return t
}

// setOutput records the type of n.output: a for_each node outputs the list
// of its per-item outputs.
func (s *state) setOutput(n *node, t *ir.Type) {
	if n.forEach != nil && n.tolerate != nil {
		// Items may fail: each result says which.
		t = &ir.Type{Kind: ir.KindObject, Fields: []ir.Field{
			{Name: "index", Type: ir.Type{Kind: ir.KindInt}},
			{Name: "output", Type: *t, Optional: true},
			{Name: "error", Type: *errorType, Optional: true},
		}}
	}
	if n.forEach != nil {
		t = &ir.Type{Kind: ir.KindList, Elem: t}
	}
	n.outType = t
	s.info.Nodes[n.id].Output = t
	s.info.Nodes[n.id].Handler = n.handler
}

package runtime

import (
	"encoding/json"
	"sort"
	"testing"

	"github.com/wfc-lang/wfc/ir"
)

// A small builder of IR documents for tests: nodes with their options, the
// implied edges derived as the compiler derives them, then Analyze and
// Validate.

type nodeOpt func(*nodeSpec)

type nodeSpec struct {
	n     ir.Node
	after []string
}

func task(id, handler string, opts ...nodeOpt) *nodeSpec {
	s := &nodeSpec{n: ir.Node{ID: id, Type: ir.NodeTask, Handler: handler, Join: ir.JoinAll}}
	for _, o := range opts {
		o(s)
	}
	return s
}

func after(ids ...string) nodeOpt { return func(s *nodeSpec) { s.after = append(s.after, ids...) } }
func joinAny() nodeOpt            { return joinMode(ir.JoinAny) }
func joinMode(m string) nodeOpt   { return func(s *nodeSpec) { s.n.Join = m } }
func when(cel string) nodeOpt     { return func(s *nodeSpec) { s.n.When = &ir.Expr{CEL: cel} } }
func timeout(ms int64) nodeOpt    { return func(s *nodeSpec) { s.n.TimeoutMS = ms } }
func onError(ids ...string) nodeOpt {
	return func(s *nodeSpec) { s.n.OnError = append(s.n.OnError, ids...) }
}
func outType(t *ir.Type) nodeOpt { return func(s *nodeSpec) { s.n.OutputType = t } }

func with(name string, v ir.Value) nodeOpt {
	return func(s *nodeSpec) { s.n.With = append(s.n.With, ir.Param{Name: name, Value: v}) }
}

func cexpr(cel string) ir.Value { return ir.Value{Expr: &ir.Expr{CEL: cel}} }
func konst(js string) ir.Value  { return ir.Value{Const: json.RawMessage(js)} }

// tmpl builds a template: strings are text, exprs (written as "{{x}}" by
// the caller passing ir.Expr pointers) are expressions.
func tmpl(parts ...any) ir.Value {
	var ps []ir.TemplatePart
	for _, p := range parts {
		switch x := p.(type) {
		case string:
			ps = append(ps, ir.TemplatePart{Text: x})
		case *ir.Expr:
			ps = append(ps, ir.TemplatePart{Expr: x})
		}
	}
	return ir.Value{Template: ps}
}

type ruleSpec struct {
	when    string
	targets []string
}

func rule(when string, targets ...string) ruleSpec { return ruleSpec{when, targets} }

func branch(def []string, rules ...ruleSpec) nodeOpt {
	return func(s *nodeSpec) {
		b := &ir.Branch{Default: def}
		for _, r := range rules {
			b.Rules = append(b.Rules, ir.Rule{When: ir.Expr{CEL: r.when}, Targets: r.targets})
		}
		s.n.Branch = b
	}
}

func loop(while string, max int, backTo string, exhausted ...string) nodeOpt {
	return func(s *nodeSpec) {
		if backTo == "" {
			backTo = s.n.ID
		}
		s.n.Loop = &ir.Loop{While: ir.Expr{CEL: while}, Max: max, BackTo: backTo, Exhausted: exhausted}
	}
}

func retry(attempts int, backoff string, delayMS int64) nodeOpt {
	return func(s *nodeSpec) { s.n.Retry = &ir.Retry{Attempts: attempts, Backoff: backoff, DelayMS: delayMS} }
}

func forEach(v, items string, parallel int) nodeOpt {
	return func(s *nodeSpec) { s.n.ForEach = &ir.ForEach{Var: v, Items: ir.Expr{CEL: items}, Parallel: parallel} }
}

func compensate(handler string, params ...ir.Param) nodeOpt {
	return func(s *nodeSpec) { s.n.Compensate = &ir.Compensate{Handler: handler, With: params} }
}

type wfSpec struct {
	name    string
	inputs  []ir.Input
	outputs []ir.Output
	set     ir.Settings
	nodes   []*nodeSpec
	goals   []string
	finally *ir.Finally
	// children: the workflows its flow nodes run (flow_test.go), built;
	// their own children join the root's flat list.
	children []*ir.Workflow
}

func input(name, kind string, def ...string) ir.Input {
	in := ir.Input{Name: name, Type: ir.Type{Kind: kind}, Required: len(def) == 0}
	if len(def) > 0 {
		in.Default = json.RawMessage(def[0])
	}
	return in
}

func output(name, cel string) ir.Output { return ir.Output{Name: name, Expr: ir.Expr{CEL: cel}} }

// build returns the analyzed, validated workflow; it fails the test on
// any problem.
func build(t testing.TB, s wfSpec) *ir.Workflow {
	t.Helper()
	w := &ir.Workflow{IRVersion: ir.Version, Name: s.name, Settings: s.set, Inputs: s.inputs, Outputs: s.outputs, Goals: s.goals, Finally: s.finally}
	if w.Name == "" {
		w.Name = "test"
	}
	if w.Inputs == nil {
		w.Inputs = []ir.Input{}
	}
	if w.Outputs == nil {
		w.Outputs = []ir.Output{}
	}
	handlers := map[string]bool{}
	if s.finally != nil {
		handlers[s.finally.Handler] = true
	}
	for _, ns := range s.nodes {
		n := ns.n
		if n.Dispatch != nil {
			n.Handler = ""
			for _, h := range n.Dispatch.Handlers {
				handlers[h] = true
			}
		} else if n.Handler != "" {
			handlers[n.Handler] = true
		}
		if n.Compensate != nil {
			handlers[n.Compensate.Handler] = true
		}
		for _, a := range ns.after {
			w.Edges = append(w.Edges, ir.Edge{From: a, To: n.ID, Kind: ir.EdgeAfter})
		}
		if b := n.Branch; b != nil {
			seen := map[string]bool{}
			for _, r := range b.Rules {
				for _, tg := range r.Targets {
					if !seen[tg] {
						seen[tg] = true
						w.Edges = append(w.Edges, ir.Edge{From: n.ID, To: tg, Kind: ir.EdgeBranch})
					}
				}
			}
			for _, tg := range b.Default {
				w.Edges = append(w.Edges, ir.Edge{From: n.ID, To: tg, Kind: ir.EdgeDefault})
			}
		}
		if l := n.Loop; l != nil {
			w.Edges = append(w.Edges, ir.Edge{From: n.ID, To: l.BackTo, Kind: ir.EdgeLoop})
			for _, tg := range l.Exhausted {
				w.Edges = append(w.Edges, ir.Edge{From: n.ID, To: tg, Kind: ir.EdgeExhausted})
			}
		}
		for _, tg := range n.OnError {
			w.Edges = append(w.Edges, ir.Edge{From: n.ID, To: tg, Kind: ir.EdgeError})
		}
		if a := n.Agent; a != nil {
			for _, tg := range a.Routes {
				w.Edges = append(w.Edges, ir.Edge{From: n.ID, To: tg, Kind: ir.EdgeRoute})
			}
			for _, tg := range a.Default {
				w.Edges = append(w.Edges, ir.Edge{From: n.ID, To: tg, Kind: ir.EdgeDefault})
			}
		}
		if n.Human != nil {
			for _, tg := range n.Human.OnReject {
				w.Edges = append(w.Edges, ir.Edge{From: n.ID, To: tg, Kind: ir.EdgeReject})
			}
		}
		w.Nodes = append(w.Nodes, n)
	}
	var names []string
	for h := range handlers {
		names = append(names, h)
	}
	sort.Strings(names)
	for _, h := range names {
		w.Handlers = append(w.Handlers, ir.Handler{Name: h, Config: ir.Type{Kind: ir.KindAny}, Output: ir.Type{Kind: ir.KindAny}})
	}
	w.Children = embedChildren(t, s.children)
	if err := ir.Analyze(w); err != nil {
		t.Fatalf("analyze: %v", err)
	}
	if ps := ir.Validate(w); len(ps) > 0 {
		t.Fatalf("validate: %v", ir.Problems(ps))
	}
	return w
}

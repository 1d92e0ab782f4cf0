package compiler

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/lang/ast"
	"github.com/wfc-lang/wfc/lang/diag"
)

// itemKinds says which node kinds accept each item.
var itemKinds = map[string][]string{
	"when": {"task", "agent", "human", "flow"}, "retry": {"task", "agent", "human", "flow"},
	"timeout": {"task", "agent", "human", "flow"}, "on_error": {"task", "agent", "human", "flow"},
	"description": {"task", "agent", "human", "flow"}, "output": {"task", "agent", "human", "flow"},
	"run": {"task"}, "dispatch": {"task"}, "with": {"task", "agent", "flow"}, "for_each": {"task", "flow"},
	"branch": {"task", "flow"}, "loop": {"task", "flow"}, "compensate": {"task", "flow"},
	"model": {"agent"}, "temperature": {"agent"}, "prompt": {"agent", "human"},
	"routes": {"agent"}, "default": {"agent"}, "max_routes": {"agent"},
	"tools": {"agent"}, "max_tool_calls": {"agent"}, "max_tokens": {"agent"},
	"approvers": {"human"}, "on_timeout": {"human"}, "on_reject": {"human"},
	"escalate_to": {"human"}, "escalate_after": {"human"},
	"uses": {"flow"},
}

func allowedFor(kind string) []string {
	var out []string
	for k, kinds := range itemKinds {
		for _, x := range kinds {
			if x == kind {
				out = append(out, k)
			}
		}
	}
	return out
}

// items reads every node's items, checking that each is allowed for the
// node's kind, has the right shape and value, and that required items are
// present.
func (s *state) items() {
	for _, n := range s.nodes {
		if n.decl == nil {
			continue
		}
		s.nodeItems(n)
	}
}

// errRoute records one on_error line: codes route a failure with one of
// those codes; a line without codes catches every other failure and must
// come last, once. A code is routed by one line only.
func (s *state) errRoute(n *node, g *ast.Goto) {
	if len(n.errRoutes) > 0 {
		if last := n.errRoutes[len(n.errRoutes)-1]; len(last.codes) == 0 {
			if len(g.Codes) == 0 {
				s.errorf(diag.Duplicate, g.Key.Range, "`on_error` without codes appears twice in %s %s", n.kind, n.id).
					WithRelated(s.span(last.key.Range), "first given here")
			} else {
				s.errorf(diag.BadValue, g.Key.Range, "`on_error` without codes catches every failure, so it must come after the lines with codes").
					WithRelated(s.span(last.key.Range), "the catch-all")
			}
			return
		}
	}
	for _, c := range g.Codes {
		switch {
		case c.Template != nil:
			s.errorf(diag.BadValue, c.Range, "an error code is a plain string, not a template")
		case !ir.ValidCode(c.Value):
			s.errorf(diag.BadValue, c.Range, "error code %q: use letters, digits and . _ - (a trailing * matches any code with that prefix)", c.Value)
		}
		for _, r := range n.errRoutes {
			for _, d := range r.codes {
				if d.Value == c.Value {
					s.errorf(diag.Duplicate, c.Range, "error code %q is routed twice", c.Value).WithRelated(s.span(d.Range), "first routed here")
				}
			}
		}
	}
	// Every target once (one error edge each); a name repeated within one
	// line stays, for the graph pass's WF1005.
	prev := len(n.onError)
	for _, t := range g.Targets {
		if !slices.ContainsFunc(n.onError[:prev], func(x *ast.Ident) bool { return x.Name == t.Name }) {
			n.onError = append(n.onError, t)
		}
	}
	n.errRoutes = append(n.errRoutes, errRoute{key: g.Key, codes: g.Codes, targets: g.Targets})
}

func (s *state) nodeItems(n *node) {
	d := n.decl
	n.after = d.After
	if d.Join != nil {
		switch d.Join.Name {
		case ir.JoinAll, ir.JoinAny, ir.JoinSettled, ir.JoinFirst:
			n.join = d.Join.Name
		default:
			bad := s.errorf(diag.BadValue, d.Join.Range, "join mode must be `all`, `any`, `settled` or `first`, found `%s`", d.Join.Name)
			s.didYouMean(bad, d.Join.Range, d.Join.Name, []string{ir.JoinAll, ir.JoinAny, ir.JoinSettled, ir.JoinFirst})
		}
	}
	seen := map[string]ast.Item{}
	for _, it := range d.Items {
		k := ast.KeyOf(it)
		if k == nil {
			continue // *ast.Bad: already reported
		}
		kinds, known := itemKinds[k.Name]
		if !known {
			s.unknownItem(k, n.kind+" "+n.id, allowedFor(n.kind)) // (built only when needed)
			continue
		}
		if !contains(kinds, n.kind) {
			s.errorf(diag.UnknownItem, k.Range, "`%s` is not allowed in %s %s node (only in %s nodes)", k.Name, article(n.kind), n.kind, strings.Join(kinds, ", "))
			continue
		}
		if prev := seen[k.Name]; prev != nil && k.Name != "on_error" {
			s.errorf(diag.Duplicate, k.Range, "`%s` appears twice in %s %s", k.Name, n.kind, n.id).
				WithRelated(s.span(prev.Rng()), "first given here")
			continue
		}
		seen[k.Name] = it
		s.nodeItem(n, k, it)
	}
	switch n.kind {
	case "task":
		if n.run == nil && seen["run"] == nil { // a malformed `run` was reported
			s.missing(n, "run \"handler\"", "a task needs a handler to run")
		}
		switch {
		case n.dispatch != nil && n.run != nil:
			s.errorf(diag.BadValue, seen["dispatch"].Rng(), "`dispatch` chooses among handlers: give them as a list, `run [\"%s\", ...]`", n.handler)
		case n.dispatch == nil && len(n.runSet) > 0:
			s.errorf(diag.MissingItem, seen["run"].Rng(), "`run [...]` needs `dispatch EXPR` to choose the handler at run time")
		}
	case "agent":
		if n.model == "" && seen["model"] == nil {
			s.missing(n, "model \"name\"", "an agent needs a model")
		}
		if n.prompt == nil && seen["prompt"] == nil {
			s.missing(n, "prompt \"...\"", "an agent needs a prompt")
		}
		if len(n.dflt) > 0 && len(n.routes) == 0 {
			s.errorf(diag.MissingItem, seen["default"].Rng(), "`default` needs `routes`: it is taken when the agent picks none of them")
		}
		if it := seen["max_routes"]; it != nil && n.maxRoutes > 0 {
			if len(n.routes) == 0 {
				s.errorf(diag.MissingItem, it.Rng(), "`max_routes` needs `routes`: it says how many of them the agent may pick")
			} else if n.maxRoutes > len(n.routes) {
				s.errorf(diag.BadValue, it.Rng(), "`max_routes %d` is more than the %d routes the agent has", n.maxRoutes, len(n.routes))
			}
		}
		if seen["max_tool_calls"] != nil && len(n.tools) == 0 {
			s.errorf(diag.MissingItem, seen["max_tool_calls"].Rng(), "`max_tool_calls` needs `tools`: it bounds the calls of the agent's tools")
		}
	case "human":
		if seen["approvers"] == nil {
			s.missing(n, "approvers [\"...\"]", "a human node needs approvers")
		}
		s.checkEscalation(n, seen)
	case "flow":
		if n.uses == nil && seen["uses"] == nil {
			s.missing(n, "uses \"child.wf\"", "a flow node needs the child workflow to run")
		}
	}
}

// article returns "an" before a vowel, else "a".
func article(word string) string {
	if word != "" && strings.ContainsRune("aeiou", rune(word[0])) {
		return "an"
	}
	return "a"
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func (s *state) missing(n *node, item, why string) {
	if slices.ContainsFunc(n.decl.Items, func(it ast.Item) bool { _, bad := it.(*ast.Bad); return bad }) {
		return // the item may be the one that did not parse
	}
	d := s.errorf(diag.MissingItem, n.ident.Range, "%s %s has no `%s`", n.kind, n.id, strings.Fields(item)[0]).
		WithHint(fmt.Sprintf("%s: add `%s`", why, item))
	if strings.HasPrefix(item, "run ") {
		s.runFix(d, n)
	}
}

// shapeError reports an item whose form does not match its keyword.
func (s *state) shapeError(k *ast.Ident, it ast.Item, want string) {
	s.errorf(diag.BadValue, it.Rng(), "`%s` expects %s", k.Name, want)
}

func (s *state) nodeItem(n *node, k *ast.Ident, it ast.Item) {
	switch k.Name {
	case "run":
		if st, ok := it.(*ast.Setting); ok && st.Value.Kind == ast.StringValue {
			n.run, n.handler = st.Value.Str, st.Value.Str.Value
			s.noTemplate("run", st.Value.Str)
			return
		}
		if st, ok := it.(*ast.Setting); ok && st.Value.Kind == ast.ListValue {
			// The closed set a dispatch chooses from.
			seen := map[string]bool{}
			for _, v := range st.Value.List {
				switch {
				case v.Kind != ast.StringValue:
					s.errorf(diag.BadValue, v.Range, "`run [...]` lists handler names (strings)")
				case v.Str.Template != nil:
					s.noTemplate("run", v.Str)
				case seen[v.Str.Value]:
					s.errorf(diag.Duplicate, v.Range, "handler %q is listed twice", v.Str.Value)
				default:
					seen[v.Str.Value] = true
					n.runSet = append(n.runSet, v.Str)
				}
			}
			if len(st.Value.List) == 0 {
				s.errorf(diag.BadValue, st.Value.Range, "`run [...]` needs at least one handler")
			}
			return
		}
		s.shapeError(k, it, "a handler name string: run \"http\", or a list of them with dispatch")
	case "dispatch":
		if c, ok := it.(*ast.Cond); ok {
			n.dispatch = c.Expr
			return
		}
		s.shapeError(k, it, "an expression naming the handler: dispatch input.kind + \".convert\"")
	case "with":
		if pb, ok := it.(*ast.ParamBlock); ok {
			n.with = pb
			s.checkParamNames(pb)
			return
		}
		s.shapeError(k, it, "a block: with { field = expr }")
	case "output":
		if tb, ok := it.(*ast.TypeBlock); ok {
			n.outDecl = tb
			return
		}
		s.shapeError(k, it, "a block of typed fields: output { name: type }")
	case "when":
		if c, ok := it.(*ast.Cond); ok {
			n.when = c.Expr
			return
		}
		s.shapeError(k, it, "a condition: when expr")
	case "for_each":
		if fe, ok := it.(*ast.ForEach); ok {
			n.forEach = fe
			for _, v := range []*ast.Ident{fe.Index, fe.Var} {
				switch {
				case v == nil:
				case reserved[v.Name]:
					s.errorf(diag.ReservedName, v.Range, "`%s` is a reserved word and cannot name a variable", v.Name)
				case s.byID[v.Name] != nil:
					s.errorf(diag.Duplicate, v.Range, "for_each variable `%s` hides node `%s`", v.Name, v.Name)
				}
			}
			if fe.Index != nil && fe.Index.Name == fe.Var.Name {
				s.errorf(diag.Duplicate, fe.Var.Range, "the index and the item of a for_each need different names")
			}
			if t := fe.Tolerate; t != nil {
				switch {
				case t.Kind != ast.IntValue:
					s.errorf(diag.BadValue, t.Range, "`tolerate` expects an integer or a percentage (10%%), found %s", t.Kind)
				case fe.Percent:
					n.tolerate = &ir.Tolerance{Percent: s.parseInt("tolerate", t, 0, 100)}
				default:
					n.tolerate = &ir.Tolerance{Count: s.parseInt("tolerate", t, 0, 1<<31-1)}
				}
			}
			if fe.Parallel != nil {
				if fe.Parallel.Kind != ast.IntValue {
					s.errorf(diag.BadValue, fe.Parallel.Range, "`parallel` expects an integer, found %s", fe.Parallel.Kind)
				} else {
					n.parallel = s.parseInt("parallel", fe.Parallel, 0, 1<<31-1) // 0 = unlimited
				}
			}
			return
		}
		s.shapeError(k, it, "for_each [i,] name in expr [parallel N] [tolerate N[%]]")
	case "retry":
		if b, ok := it.(*ast.Block); ok {
			n.retry = s.retryBlock(b)
			return
		}
		s.shapeError(k, it, "a block: retry { attempts 3 backoff exponential delay 1s }")
	case "timeout":
		if st, ok := it.(*ast.Setting); ok {
			// A human's timeout is its approval deadline (lower puts it in
			// ir.Human); a task's is per attempt.
			n.timeoutMS = s.durationValue(st)
			return
		}
		s.shapeError(k, it, "a duration: timeout 30s")
	case "branch":
		if b, ok := it.(*ast.Branch); ok {
			n.branch = b
			for i, r := range b.Rules {
				if r.Else && i != len(b.Rules)-1 {
					s.errorf(diag.BadValue, r.Range, "`else` must be the last rule of a branch")
				}
			}
			if !slices.ContainsFunc(b.Rules, func(r *ast.Rule) bool { return !r.Else }) {
				d := s.errorf(diag.MissingItem, b.Key.Range, "branch has no `when` rule")
				if len(b.Rules) > 0 {
					d.WithHint("a branch with only `else` always routes there: use `after` on its targets instead")
				}
			}
			return
		}
		s.shapeError(k, it, "a block of rules: branch { when cond => node ... else => node }")
	case "loop":
		if b, ok := it.(*ast.Block); ok {
			n.loop = s.loopBlock(n, b)
			return
		}
		s.shapeError(k, it, "a block: loop { while cond max 5 back_to node exhausted => node }")
	case "on_error", "on_reject", "default":
		if g, ok := it.(*ast.Goto); ok && g.Arrow {
			switch k.Name {
			case "on_error":
				s.errRoute(n, g)
			case "on_reject":
				n.onReject = g.Targets
			default:
				n.dflt = g.Targets
			}
			return
		}
		s.shapeError(k, it, fmt.Sprintf("targets: %s => node, ...", k.Name))
	case "routes":
		if g, ok := it.(*ast.Goto); ok && !g.Arrow && len(g.Codes) == 0 {
			n.routes = g.Targets
			return
		}
		s.shapeError(k, it, "node names: routes a, b")
	case "compensate":
		if b, ok := it.(*ast.Block); ok {
			n.compensate = s.compensateBlock(b)
			return
		}
		s.shapeError(k, it, "a block: compensate { run \"handler\" with { ... } }")
	case "description":
		if st, ok := it.(*ast.Setting); ok {
			n.description = s.stringValue(st)
			s.info.Nodes[n.id].Doc = n.description
			return
		}
		s.shapeError(k, it, "a string")
	case "max_routes", "max_tool_calls", "max_tokens":
		if st, ok := it.(*ast.Setting); ok {
			hi := int64(1000)
			if k.Name == "max_tokens" {
				hi = 10_000_000
			}
			v := s.intValue(st, 1, hi)
			switch k.Name {
			case "max_routes":
				n.maxRoutes = v
			case "max_tool_calls":
				n.maxToolCalls = v
			default:
				n.maxTokens = v
			}
			return
		}
		s.shapeError(k, it, "a positive integer")
	case "tools":
		if st, ok := it.(*ast.Setting); ok && st.Value.Kind == ast.ListValue {
			seen := map[string]bool{}
			for _, v := range st.Value.List {
				switch {
				case v.Kind != ast.IdentValue:
					s.errorf(diag.BadValue, v.Range, "`tools [...]` lists tool names: tools [execute_pipeline, search_tools]")
				case seen[v.Raw]:
					s.errorf(diag.Duplicate, v.Range, "tool %s is listed twice", v.Raw)
				default:
					seen[v.Raw] = true
					n.tools = append(n.tools, v.Raw)
				}
			}
			return
		}
		s.shapeError(k, it, "a list of tool names: tools [execute_pipeline, search_tools]")
	case "model":
		if st, ok := it.(*ast.Setting); ok {
			n.model = s.stringValue(st)
			if n.model == "" && st.Value.Kind == ast.StringValue {
				s.errorf(diag.BadValue, st.Value.Range, "model name must not be empty")
			}
			return
		}
		s.shapeError(k, it, "a model name string")
	case "temperature":
		if st, ok := it.(*ast.Setting); ok && (st.Value.Kind == ast.FloatValue || st.Value.Kind == ast.IntValue) {
			f, err := strconv.ParseFloat(st.Value.Raw, 64)
			if err != nil || f < 0 || f > 2 {
				s.errorf(diag.BadValue, st.Value.Range, "temperature must be a number between 0 and 2, found `%s`", st.Value.Raw)
				return
			}
			n.temperature = &f
			return
		}
		s.shapeError(k, it, "a number between 0 and 2")
	case "prompt":
		if st, ok := it.(*ast.Setting); ok && st.Value.Kind == ast.StringValue {
			n.prompt = st.Value.Str
			return
		}
		s.shapeError(k, it, "a string (it may contain {{ }} templates)")
	case "approvers":
		s.approverList(k, it, &n.approvers, &n.approversExpr)
	case "escalate_to":
		s.approverList(k, it, &n.escalateTo, &n.escalateExpr)
	case "escalate_after":
		if st, ok := it.(*ast.Setting); ok {
			n.escalateAfterMS = s.durationValue(st)
			return
		}
		s.shapeError(k, it, "a duration: escalate_after 24h")
	case "on_timeout":
		if st, ok := it.(*ast.Setting); ok && st.Value.Kind == ast.IdentValue {
			switch st.Value.Raw {
			case ir.TimeoutApprove, ir.TimeoutReject, ir.TimeoutFail:
				n.onTimeout = st.Value.Raw
				return
			}
			d := s.errorf(diag.BadValue, st.Value.Range, "on_timeout must be approve, reject or fail, found `%s`", st.Value.Raw)
			s.didYouMean(d, st.Value.Range, st.Value.Raw, []string{"approve", "reject", "fail"})
			return
		}
		s.shapeError(k, it, "approve, reject or fail")
	case "uses":
		if st, ok := it.(*ast.Setting); ok && st.Value.Kind == ast.StringValue {
			n.uses = st.Value.Str
			s.noTemplate("uses", st.Value.Str)
			return
		}
		s.shapeError(k, it, "a file path string: uses \"child.wf\"")
	}
}

// approverList reads `approvers` or `escalate_to`: a list of non-empty
// string literals into lits, or an expression (a list(string); a literal
// list is kept as a list by the type pass) into expr.
func (s *state) approverList(k *ast.Ident, it ast.Item, lits *[]string, expr **ast.Expr) {
	if c, ok := it.(*ast.Cond); ok {
		*expr = c.Expr
		return
	}
	if st, ok := it.(*ast.Setting); ok && st.Value.Kind == ast.ListValue {
		for _, v := range st.Value.List {
			if v.Kind != ast.StringValue || v.Str.Value == "" {
				s.errorf(diag.BadValue, v.Range, "%s must be non-empty strings", k.Name)
				continue
			}
			s.noTemplate(k.Name, v.Str)
			*lits = append(*lits, v.Str.Value)
		}
		if len(st.Value.List) == 0 {
			s.errorf(diag.BadValue, st.Value.Range, "%s must not be empty", k.Name)
		}
		return
	}
	s.shapeError(k, it, fmt.Sprintf("a list of strings: %s [\"a@example.com\"], or an expression of type list(string)", k.Name))
}

// checkEscalation checks that a human node's escalate_to and
// escalate_after come together (one is meaningless without the other)
// and that the escalation comes before the timeout, which would otherwise
// close the approval first.
func (s *state) checkEscalation(n *node, seen map[string]ast.Item) {
	to, after := seen["escalate_to"], seen["escalate_after"]
	switch {
	case to != nil && after == nil:
		s.errorf(diag.MissingItem, to.Rng(), "`escalate_to` needs `escalate_after DURATION`: how long the approval waits before they may decide")
	case after != nil && to == nil:
		s.errorf(diag.MissingItem, after.Rng(), "`escalate_after` needs `escalate_to [\"...\"]`: who may decide once it has passed")
	case after != nil && n.timeoutMS > 0 && n.escalateAfterMS >= n.timeoutMS:
		st, ok := after.(*ast.Setting)
		if !ok {
			return
		}
		s.errorf(diag.BadValue, st.Value.Range, "`escalate_after %s` must be shorter than the node's `timeout` (%s): the approval would time out before it escalates",
			st.Value.Raw, time.Duration(n.timeoutMS)*time.Millisecond).WithRelated(s.span(seen["timeout"].Rng()), "the timeout")
	}
}

func (s *state) checkParamNames(pb *ast.ParamBlock) {
	seen := map[string]*ast.Param{}
	for _, p := range pb.Params {
		if prev := seen[p.Name.Name]; prev != nil {
			s.errorf(diag.Duplicate, p.Name.Range, "`%s` is set twice", p.Name.Name).
				WithRelated(s.span(prev.Name.Range), "first set here")
		}
		seen[p.Name.Name] = p
	}
}

func (s *state) retryBlock(b *ast.Block) *ir.Retry {
	r := &ir.Retry{Attempts: 0, Backoff: ir.BackoffFixed, DelayMS: 1000}
	allowed := []string{"attempts", "backoff", "delay", "max_delay", "on", "except"}
	seen := map[string]bool{}
	for _, it := range b.Items {
		k := ast.KeyOf(it)
		if k == nil {
			continue
		}
		st, ok := it.(*ast.Setting)
		if !ok || !contains(allowed, k.Name) {
			s.unknownItem(k, "retry", allowed)
			continue
		}
		if seen[k.Name] {
			s.errorf(diag.Duplicate, k.Range, "`%s` is set twice", k.Name)
			continue
		}
		seen[k.Name] = true
		switch k.Name {
		case "attempts":
			r.Attempts = s.intValue(st, 1, ir.MaxAttempts)
		case "backoff":
			if st.Value.Kind != ast.IdentValue {
				s.wrongValue(st, "fixed, linear or exponential")
				continue
			}
			switch st.Value.Raw {
			case ir.BackoffFixed, ir.BackoffLinear, ir.BackoffExponential:
				r.Backoff = st.Value.Raw
			default:
				d := s.errorf(diag.BadValue, st.Value.Range, "backoff must be fixed, linear or exponential, found `%s`", st.Value.Raw)
				s.didYouMean(d, st.Value.Range, st.Value.Raw, []string{"fixed", "linear", "exponential"})
			}
		case "delay":
			r.DelayMS = s.durationValue(st)
		case "max_delay":
			r.MaxDelayMS = s.durationValue(st)
		case "on", "except":
			codes := s.codeList(st)
			if k.Name == "on" {
				r.On = codes
			} else {
				r.Except = codes
			}
		}
	}
	if seen["on"] && seen["except"] {
		s.errorf(diag.BadValue, b.Range, "retry takes `on` or `except`, not both").
			WithHint("`on [codes]` retries only those codes; `except [codes]` retries every other code")
	}
	if !seen["attempts"] {
		s.errorf(diag.MissingItem, b.Key.Range, "retry has no `attempts`").WithHint("add `attempts N` (total tries, including the first)")
	}
	if r.MaxDelayMS > 0 && r.MaxDelayMS < r.DelayMS {
		s.errorf(diag.BadValue, b.Range, "max_delay is shorter than delay")
	}
	return r
}

// codeList reads a list of error codes: ["http.503", "timeout", "http.5*"].
func (s *state) codeList(st *ast.Setting) []string {
	if st.Value.Kind != ast.ListValue || len(st.Value.List) == 0 {
		s.wrongValue(st, `a non-empty list of error codes: ["timeout", "http.5*"]`)
		return nil
	}
	var codes []string
	for _, v := range st.Value.List {
		if v.Kind != ast.StringValue || v.Str.Template != nil || !ir.ValidCode(v.Str.Value) {
			s.errorf(diag.BadValue, v.Range, "an error code is a string of letters, digits and . _ - (a trailing * matches any code with that prefix)")
			continue
		}
		if slices.Contains(codes, v.Str.Value) {
			s.errorf(diag.Duplicate, v.Range, "error code %q is listed twice", v.Str.Value)
			continue
		}
		codes = append(codes, v.Str.Value)
	}
	return codes
}

func (s *state) loopBlock(n *node, b *ast.Block) *loopDef {
	l := &loopDef{block: b}
	allowed := []string{"while", "max", "back_to", "exhausted"}
	seen := map[string]bool{}
	for _, it := range b.Items {
		k := ast.KeyOf(it)
		if k == nil {
			continue
		}
		if !contains(allowed, k.Name) {
			s.unknownItem(k, "loop", allowed)
			continue
		}
		if seen[k.Name] {
			s.errorf(diag.Duplicate, k.Range, "`%s` is set twice", k.Name)
			continue
		}
		seen[k.Name] = true
		switch it := it.(type) {
		case *ast.Cond:
			if k.Name == "while" {
				l.while = it.Expr
				continue
			}
		case *ast.Setting:
			switch k.Name {
			case "max":
				l.max = s.intValue(it, 1, ir.MaxLoop)
				continue
			case "back_to":
				if it.Value.Kind == ast.IdentValue {
					l.backTo = &ast.Ident{Range: it.Value.Range, Name: it.Value.Raw}
				} else {
					s.wrongValue(it, "a node name")
				}
				continue
			}
		case *ast.Goto:
			if k.Name == "exhausted" && it.Arrow {
				l.exhausted = it.Targets
				continue
			}
		}
		s.shapeError(k, it, map[string]string{"while": "a condition", "max": "an integer", "back_to": "a node name", "exhausted": "targets: exhausted => node"}[k.Name])
	}
	if !seen["while"] {
		s.errorf(diag.MissingItem, b.Key.Range, "loop has no `while` condition")
	}
	if !seen["max"] {
		s.errorf(diag.MissingItem, b.Key.Range, "loop has no `max`").WithHint("every loop needs `max N` so it always ends")
	}
	if l.backTo == nil {
		l.backTo = &ast.Ident{Range: n.ident.Range, Name: n.id}
	}
	return l
}

// finallyBlock reads the workflow's finally block: run (required), with
// and retry.
func (s *state) finallyBlock(b *ast.Block) *finallyDef {
	f := &finallyDef{block: b}
	seen := map[string]bool{}
	for _, it := range b.Items {
		k := ast.KeyOf(it)
		if k == nil {
			continue
		}
		if seen[k.Name] {
			s.errorf(diag.Duplicate, k.Range, "`%s` appears twice in finally", k.Name)
			continue
		}
		seen[k.Name] = true
		switch it := it.(type) {
		case *ast.Setting:
			if k.Name == "run" && it.Value.Kind == ast.StringValue {
				f.run, f.handler = it.Value.Str, it.Value.Str.Value
				s.noTemplate("run", it.Value.Str)
				continue
			}
		case *ast.ParamBlock:
			if k.Name == "with" {
				f.with = it
				s.checkParamNames(it)
				continue
			}
		case *ast.Block:
			if k.Name == "retry" {
				f.retry = s.retryBlock(it)
				continue
			}
		}
		s.unknownItem(k, "finally", []string{"run", "with", "retry"})
	}
	if f.run == nil {
		s.errorf(diag.MissingItem, b.Key.Range, "finally has no `run`")
	}
	return f
}

func (s *state) compensateBlock(b *ast.Block) *compDef {
	c := &compDef{block: b}
	for _, it := range b.Items {
		k := ast.KeyOf(it)
		if k == nil {
			continue
		}
		switch it := it.(type) {
		case *ast.Setting:
			if k.Name == "run" && it.Value.Kind == ast.StringValue && c.run == nil {
				c.run, c.handler = it.Value.Str, it.Value.Str.Value
				s.noTemplate("run", it.Value.Str)
				continue
			}
		case *ast.ParamBlock:
			if k.Name == "with" && c.with == nil {
				c.with = it
				s.checkParamNames(it)
				continue
			}
		}
		s.unknownItem(k, "compensate", []string{"run", "with"})
	}
	if c.run == nil {
		s.errorf(diag.MissingItem, b.Key.Range, "compensate has no `run`")
	}
	return c
}

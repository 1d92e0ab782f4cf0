package ir

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A Problem is one reason an IR document is invalid.
type Problem struct {
	Path    string `json:"path"` // JSON pointer of the offending value, e.g. /nodes/3/branch/rules/0/targets/1
	Message string `json:"message"`
}

func (p Problem) String() string {
	if p.Path == "" {
		return p.Message
	}
	return p.Path + ": " + p.Message
}

// Problems is a list of problems usable as an error.
type Problems []Problem

func (ps Problems) Error() string {
	switch len(ps) {
	case 0:
		return "ir: no problems"
	case 1:
		return "ir: " + ps[0].String()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "ir: %d problems:", len(ps))
	for _, p := range ps {
		b.WriteString("\n\t")
		b.WriteString(p.String())
	}
	return b.String()
}

// Validate checks an IR document on its own, without its source, and
// returns every problem it finds, in document order; none means valid. It
// checks the version, names and identifiers, that each node's type matches
// the options it carries, option values, types and values, edges, that the
// non-after edges are exactly the ones the node options imply, loop
// targets, the acyclicity of the forward graph, and the limits.
//
// Validate ignores derived fields and does not modify w. It never panics.
func Validate(w *Workflow) []Problem {
	if w == nil {
		return []Problem{{Message: "nil workflow"}}
	}
	table := make(map[string]int, len(w.Children))
	for i := range w.Children {
		if _, dup := table[w.Children[i].Hash]; !dup {
			table[w.Children[i].Hash] = i
		}
	}
	ps := validateOne(w, table)
	return append(ps, validateChildren(w, table)...)
}

// validateOne checks one workflow, the root or an embedded child; children
// maps the hashes of the root's children to their index.
func validateOne(w *Workflow, children map[string]int) []Problem {
	v := &validator{w: w, g: buildGraph(w), handlers: map[string]bool{}, children: children}
	v.header()
	v.inputs()
	v.outputs()
	v.goals()
	v.handlerDecls()
	v.finally()
	v.nodes()
	v.edges()
	v.graph()
	return v.ps
}

type validator struct {
	w        *Workflow
	g        *graph
	handlers map[string]bool
	children map[string]int // the root's children by hash
	ps       []Problem
}

func (v *validator) addf(p *path, format string, args ...any) {
	v.ps = append(v.ps, Problem{Path: p.String(), Message: fmt.Sprintf(format, args...)})
}

// A path is the JSON pointer of a value, spelt out only when a problem is
// reported there: building a string for every value checked cost more than
// the checks. Paths live on the stack of the checks that extend them.
type path struct {
	up  *path
	seg string // "/name"; unused when num >= 0
	num int    // an array index, or -1
}

// at returns the top-level path seg ("/nodes").
func at(seg string) *path { return &path{seg: seg, num: -1} }

// at returns p extended by seg ("/with").
func (p *path) at(seg string) *path { return &path{up: p, seg: seg, num: -1} }

// idx returns p extended by an array index.
func (p *path) idx(k int) *path { return &path{up: p, num: k} }

func (p *path) String() string {
	if p == nil {
		return ""
	}
	if p.num >= 0 {
		return p.up.String() + "/" + strconv.Itoa(p.num)
	}
	return p.up.String() + p.seg
}

func (v *validator) header() {
	w := v.w
	switch w.IRVersion {
	case Version:
	case "":
		v.addf(at("/ir_version"), "missing ir_version")
	default:
		v.addf(at("/ir_version"), "unsupported ir_version %q (want %q)", w.IRVersion, Version)
	}
	if w.Name == "" {
		v.addf(at("/name"), "missing workflow name")
	}
	if w.Settings.DeadlineMS < 0 {
		v.addf(at("/settings/deadline_ms"), "must not be negative")
	}
	if w.Settings.MaxHops < 0 {
		v.addf(at("/settings/max_hops"), "must not be negative")
	}
	if w.Settings.MaxFanout < 0 {
		v.addf(at("/settings/max_fanout"), "must not be negative")
	}
	for _, s := range []struct {
		name string
		n    int
	}{{"max_input_bytes", w.Settings.MaxInputBytes}, {"max_output_bytes", w.Settings.MaxOutputBytes}, {"max_state_bytes", w.Settings.MaxStateBytes}} {
		if s.n < 0 || s.n > MaxSettingBytes {
			v.addf(at("/settings/"+s.name), "must be 1 to %d (0: not set)", MaxSettingBytes)
		}
	}
}

func (v *validator) inputs() {
	seen := map[string]bool{}
	for i, in := range v.w.Inputs {
		p := at("/inputs").idx(i)
		v.name(p.at("/name"), in.Name, "input", seen)
		if in.Type.Kind == KindSecret {
			v.secretInput(p, &in)
		} else {
			v.typ(p.at("/type"), &in.Type, 1)
		}
		if in.Default != nil {
			v.json(p.at("/default"), in.Default)
		}
		if in.Required && in.Default != nil {
			v.addf(p.at("/required"), "an input with a default cannot be required")
		}
		v.loc(p.at("/loc"), in.Loc)
	}
}

// secretInput checks a secret input: a plain type, and a default (if any)
// that is a secret name.
func (v *validator) secretInput(p *path, in *Input) {
	if in.Type.Elem != nil || len(in.Type.Fields) > 0 {
		v.addf(p.at("/type"), "a secret type has no elem or fields")
	}
	if in.Default == nil {
		return
	}
	var name string
	if json.Unmarshal(in.Default, &name) != nil || !ValidSecretName(name) {
		v.addf(p.at("/default"), "the default of a secret input must be a secret name ([A-Za-z_][A-Za-z0-9_]*, at most 128 bytes)")
	}
}

func (v *validator) retry(p *path, r *Retry) {
	if r != nil {
		if r.Attempts < 1 || r.Attempts > MaxAttempts {
			v.addf(p.at("/retry/attempts"), "must be 1 to %d", MaxAttempts)
		}
		if r.Backoff != BackoffFixed && r.Backoff != BackoffLinear && r.Backoff != BackoffExponential {
			v.addf(p.at("/retry/backoff"), "invalid backoff %q (want fixed, linear or exponential)", r.Backoff)
		}
		if r.DelayMS < 0 {
			v.addf(p.at("/retry/delay_ms"), "must not be negative")
		}
		if r.MaxDelayMS < 0 {
			v.addf(p.at("/retry/max_delay_ms"), "must not be negative")
		} else if r.MaxDelayMS > 0 && r.MaxDelayMS < r.DelayMS {
			v.addf(p.at("/retry/max_delay_ms"), "max delay %dms is less than the delay %dms", r.MaxDelayMS, r.DelayMS)
		}
		if len(r.On) > 0 && len(r.Except) > 0 {
			v.addf(p.at("/retry/except"), "retry takes on or except, not both")
		}
		v.codes(p.at("/retry/on"), r.On)
		v.codes(p.at("/retry/except"), r.Except)
	}
}

// finally: its handler is declared, its with and retry valid.
func (v *validator) finally() {
	f := v.w.Finally
	if f == nil {
		return
	}
	p := at("/finally")
	if f.Handler == "" {
		v.addf(p.at("/handler"), "missing handler")
	} else if !v.handlers[f.Handler] {
		v.addf(p.at("/handler"), "handler %q is not declared in /handlers", f.Handler)
	}
	v.params(p.at("/with"), f.With)
	v.retry(p, f.Retry)
	v.loc(p.at("/loc"), f.Loc)
}

// goals: each names a node, once.
func (v *validator) goals() {
	seen := map[string]bool{}
	for i, g := range v.w.Goals {
		p := at("/goals").idx(i)
		switch {
		case v.w.Node(g) == nil:
			v.addf(p, "goal %q names no node", g)
		case seen[g]:
			v.addf(p, "goal %q listed twice", g)
		}
		seen[g] = true
	}
}

// codes: error codes are [A-Za-z0-9._-]+, optionally ending in *.
func (v *validator) codes(p *path, cs []string) {
	for i, c := range cs {
		if !ValidCode(c) {
			v.addf(p.idx(i), "invalid error code %q", c)
		}
	}
}

// ValidCode reports whether c is an error code or code pattern:
// [A-Za-z0-9._-]+, optionally ending in * (a prefix).
func ValidCode(c string) bool {
	c = strings.TrimSuffix(c, "*")
	if c == "" || len(c) > 200 {
		return false
	}
	for _, r := range c {
		if !(r == '.' || r == '_' || r == '-' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9') {
			return false
		}
	}
	return true
}

// errorRoutes: each route's targets are on_error targets, every on_error
// target is in a route, only the last route lacks codes, and a code is
// routed once.
func (v *validator) errorRoutes(p *path, n *Node) {
	if len(n.ErrorRoutes) == 0 {
		return
	}
	in := map[string]bool{}
	seen := map[string]bool{}
	for i, r := range n.ErrorRoutes {
		rp := p.at("/error_routes").idx(i)
		if len(r.Codes) == 0 && i != len(n.ErrorRoutes)-1 {
			v.addf(rp, "only the last error route may lack codes")
		}
		v.codes(rp.at("/codes"), r.Codes)
		for _, c := range r.Codes {
			if seen[c] {
				v.addf(rp.at("/codes"), "code %q routed twice", c)
			}
			seen[c] = true
		}
		for _, t := range r.Targets {
			if !slices.Contains(n.OnError, t) {
				v.addf(rp.at("/targets"), "target %q is not in on_error", t)
			}
			in[t] = true
		}
	}
	for _, t := range n.OnError {
		if !in[t] {
			v.addf(p.at("/on_error"), "target %q is in no error route", t)
		}
	}
}

func (v *validator) outputs() {
	seen := map[string]bool{}
	for i, out := range v.w.Outputs {
		p := at("/outputs").idx(i)
		v.name(p.at("/name"), out.Name, "output", seen)
		v.expr(p.at("/expr"), &out.Expr)
		v.loc(p.at("/loc"), out.Loc)
	}
}

func (v *validator) handlerDecls() {
	for i, h := range v.w.Handlers {
		p := at("/handlers").idx(i)
		switch {
		case h.Name == "":
			v.addf(p.at("/name"), "missing handler name")
		case v.handlers[h.Name]:
			v.addf(p.at("/name"), "duplicate handler %q", h.Name)
		case i > 0 && h.Name < v.w.Handlers[i-1].Name:
			v.addf(p.at("/name"), "handlers must be sorted by name: %q comes after %q", h.Name, v.w.Handlers[i-1].Name)
		}
		v.handlers[h.Name] = true
		v.typ(p.at("/config"), &h.Config, 1)
		v.typ(p.at("/output"), &h.Output, 1)
		v.loc(p.at("/loc"), h.Loc)
	}
}

func (v *validator) nodes() {
	if len(v.w.Nodes) > MaxNodes {
		v.addf(at("/nodes"), "%d nodes, over the limit of %d", len(v.w.Nodes), MaxNodes)
	}
	seen := map[string]bool{}
	for i := range v.w.Nodes {
		v.node(i, seen)
	}
}

func (v *validator) node(i int, seen map[string]bool) {
	n := &v.w.Nodes[i]
	p := at("/nodes").idx(i)
	v.name(p.at("/id"), n.ID, "node", seen)

	// Each type carries exactly its own option.
	has := map[string]bool{"handler": n.Handler != "" || n.Dispatch != nil, "agent": n.Agent != nil, "human": n.Human != nil, "flow": n.Flow != nil}
	own := map[string]string{NodeTask: "handler", NodeAgent: "agent", NodeHuman: "human", NodeFlow: "flow"}
	if want, ok := own[n.Type]; ok {
		if !has[want] {
			v.addf(p.at("/"+want), "%s %s node needs %s", article(n.Type), n.Type, want)
		}
		for _, opt := range []string{"handler", "agent", "human", "flow"} {
			if has[opt] && opt != want {
				v.addf(p.at("/"+opt), "%s %s node cannot have %s", article(n.Type), n.Type, opt)
			}
		}
	} else {
		v.addf(p.at("/type"), "invalid node type %q (want task, agent, human or flow)", n.Type)
	}
	if n.Agent != nil && n.Branch != nil {
		v.addf(p.at("/branch"), "an agent node routes with agent.routes; it cannot also have a branch")
	}
	if n.Handler != "" && !v.handlers[n.Handler] {
		v.addf(p.at("/handler"), "handler %q is not declared in /handlers", n.Handler)
	}
	if d := n.Dispatch; d != nil {
		if n.Handler != "" {
			v.addf(p.at("/dispatch"), "a task has a handler or a dispatch, not both")
		}
		v.expr(p.at("/dispatch/expr"), &d.Expr)
		if len(d.Handlers) == 0 {
			v.addf(p.at("/dispatch/handlers"), "a dispatch needs handlers")
		}
		seenH := map[string]bool{}
		for k, h := range d.Handlers {
			if !v.handlers[h] {
				v.addf(p.at("/dispatch/handlers").idx(k), "handler %q is not declared in /handlers", h)
			}
			if seenH[h] {
				v.addf(p.at("/dispatch/handlers").idx(k), "handler %q listed twice", h)
			}
			seenH[h] = true
		}
	}
	v.loc(p.at("/loc"), n.Loc)

	v.params(p.at("/with"), n.With)
	if n.OutputType != nil {
		v.typ(p.at("/output_type"), n.OutputType, 1)
	}
	if n.Join != JoinAll && n.Join != JoinAny && n.Join != JoinSettled && n.Join != JoinFirst {
		v.addf(p.at("/join"), "invalid join %q (want all, any, settled or first)", n.Join)
	}
	if n.When != nil {
		v.expr(p.at("/when"), n.When)
	}
	if f := n.ForEach; f != nil {
		if !isIdent(f.Var) {
			v.addf(p.at("/for_each/var"), "invalid variable name %q", f.Var)
		}
		v.expr(p.at("/for_each/items"), &f.Items)
		if f.Parallel < 0 {
			v.addf(p.at("/for_each/parallel"), "must not be negative")
		}
		if f.Index != "" && (!isIdent(f.Index) || f.Index == f.Var) {
			v.addf(p.at("/for_each/index"), "invalid index variable %q (a name other than var)", f.Index)
		}
		if t := f.Tolerate; t != nil {
			switch {
			case t.Count < 0:
				v.addf(p.at("/for_each/tolerate/count"), "must not be negative")
			case t.Percent < 0 || t.Percent > 100:
				v.addf(p.at("/for_each/tolerate/percent"), "must be 0 to 100")
			case t.Count > 0 && t.Percent > 0:
				v.addf(p.at("/for_each/tolerate"), "count or percent, not both")
			}
		}
	}
	v.retry(p, n.Retry)
	if n.TimeoutMS < 0 {
		v.addf(p.at("/timeout_ms"), "must not be negative")
	}
	if b := n.Branch; b != nil {
		if len(b.Rules) == 0 {
			v.addf(p.at("/branch/rules"), "a branch needs at least one rule")
		}
		for r := range b.Rules {
			rp := p.at("/branch/rules").idx(r)
			v.expr(rp.at("/when"), &b.Rules[r].When)
			v.targets(rp.at("/targets"), n.ID, b.Rules[r].Targets)
		}
		v.targets(p.at("/branch/default"), n.ID, b.Default)
	}
	if l := n.Loop; l != nil {
		v.expr(p.at("/loop/while"), &l.While)
		if l.Max < 1 || l.Max > MaxLoop {
			v.addf(p.at("/loop/max"), "must be 1 to %d", MaxLoop)
		}
		if l.BackTo == "" {
			v.addf(p.at("/loop/back_to"), "missing back_to")
		} else if _, ok := v.g.index[l.BackTo]; !ok {
			v.addf(p.at("/loop/back_to"), "unknown node %q", l.BackTo)
		}
		v.targets(p.at("/loop/exhausted"), n.ID, l.Exhausted)
	}
	v.targets(p.at("/on_error"), n.ID, n.OnError)
	v.errorRoutes(p, n)
	if c := n.Compensate; c != nil {
		if c.Handler == "" {
			v.addf(p.at("/compensate/handler"), "missing handler")
		} else if !v.handlers[c.Handler] {
			v.addf(p.at("/compensate/handler"), "handler %q is not declared in /handlers", c.Handler)
		}
		v.params(p.at("/compensate/with"), c.With)
	}
	if a := n.Agent; a != nil {
		if a.Model == "" {
			v.addf(p.at("/agent/model"), "missing model")
		}
		if t := a.Temperature; t != nil && (math.IsNaN(*t) || math.IsInf(*t, 0) || *t < 0) {
			v.addf(p.at("/agent/temperature"), "must be a non-negative number")
		}
		v.value(p.at("/agent/prompt"), &a.Prompt)
		v.targets(p.at("/agent/routes"), n.ID, a.Routes)
		if a.MaxRoutes < 0 || a.MaxRoutes > max(len(a.Routes), 1) {
			v.addf(p.at("/agent/max_routes"), "must be between 1 and the number of routes (%d)", len(a.Routes))
		}
		if a.MaxToolCalls < 0 || a.MaxTokens < 0 {
			v.addf(p.at("/agent"), "max_tool_calls and max_tokens must not be negative")
		}
		for i, t := range a.Tools {
			if t == "" {
				v.addf(p.at(fmt.Sprintf("/agent/tools/%d", i)), "empty tool name")
			}
		}
		v.targets(p.at("/agent/default"), n.ID, a.Default)
	}
	if h := n.Human; h != nil {
		if h.ApproversExpr != nil {
			if len(h.Approvers) > 0 {
				v.addf(p.at("/human/approvers_expr"), "approvers or approvers_expr, not both")
			}
			v.expr(p.at("/human/approvers_expr"), h.ApproversExpr)
		}
		for k, a := range h.Approvers {
			if a == "" {
				v.addf(p.at("/human/approvers").idx(k), "empty approver")
			}
		}
		if h.TimeoutMS < 0 {
			v.addf(p.at("/human/timeout_ms"), "must not be negative")
		}
		if h.EscalateToExpr != nil {
			if len(h.EscalateTo) > 0 {
				v.addf(p.at("/human/escalate_to_expr"), "escalate_to or escalate_to_expr, not both")
			}
			v.expr(p.at("/human/escalate_to_expr"), h.EscalateToExpr)
		}
		for k, a := range h.EscalateTo {
			if a == "" {
				v.addf(p.at("/human/escalate_to").idx(k), "empty approver")
			}
		}
		escalates := len(h.EscalateTo) > 0 || h.EscalateToExpr != nil
		switch {
		case h.EscalateAfterMS < 0:
			v.addf(p.at("/human/escalate_after_ms"), "must not be negative")
		case h.EscalateAfterMS > 0 && !escalates:
			v.addf(p.at("/human/escalate_after_ms"), "escalate_after_ms without escalate_to: nobody to escalate to")
		case h.EscalateAfterMS == 0 && escalates:
			v.addf(p.at("/human/escalate_after_ms"), "escalate_to needs escalate_after_ms: when the escalation applies")
		case h.TimeoutMS > 0 && h.EscalateAfterMS >= h.TimeoutMS:
			v.addf(p.at("/human/escalate_after_ms"), "must be below timeout_ms (%d): the approval would time out first", h.TimeoutMS)
		}
		switch h.OnTimeout {
		case "", TimeoutApprove, TimeoutReject, TimeoutFail:
		default:
			v.addf(p.at("/human/on_timeout"), "invalid on_timeout %q (want approve, reject or fail)", h.OnTimeout)
		}
		v.targets(p.at("/human/on_reject"), n.ID, h.OnReject)
		if h.Prompt != nil {
			v.value(p.at("/human/prompt"), h.Prompt)
		}
	}
	if f := n.Flow; f != nil {
		if f.Uses == "" {
			v.addf(p.at("/flow/uses"), "missing uses")
		}
		switch _, ok := v.children[f.Hash]; {
		case f.Hash == "":
			v.addf(p.at("/flow/hash"), "missing hash (of the embedded child workflow)")
		case !validHash(f.Hash):
			v.addf(p.at("/flow/hash"), "invalid hash %q (want sha256: and 64 lowercase hex digits)", f.Hash)
		case !ok:
			v.addf(p.at("/flow/hash"), "no embedded child workflow has hash %s (children must hold every workflow a flow node runs)", f.Hash)
		}
		v.params(p.at("/flow/with"), f.With)
	}
}

// targets checks a list of node ids that a node routes to.
func (v *validator) targets(path *path, self string, ids []string) {
	seen := map[string]bool{}
	for k, id := range ids {
		tp := path.idx(k)
		_, known := v.g.index[id]
		switch {
		case !known:
			v.addf(tp, "unknown node %q", id)
		case id == self:
			v.addf(tp, "a node cannot route to itself")
		case seen[id]:
			v.addf(tp, "duplicate target %q", id)
		}
		seen[id] = true
	}
}

func (v *validator) name(path *path, name, what string, seen map[string]bool) {
	switch {
	case !isIdent(name):
		v.addf(path, "invalid %s name %q (want [A-Za-z_][A-Za-z0-9_]*)", what, name)
	case seen[name]:
		v.addf(path, "duplicate %s name %q", what, name)
	}
	seen[name] = true
}

func (v *validator) params(path *path, ps []Param) {
	seen := map[string]bool{}
	for k := range ps {
		pp := path.idx(k)
		v.name(pp.at("/name"), ps[k].Name, "parameter", seen)
		v.value(pp.at("/value"), &ps[k].Value)
	}
}

func (v *validator) value(path *path, val *Value) {
	set := 0
	if val.Const != nil {
		set++
		v.json(path.at("/const"), val.Const)
	}
	if val.Expr != nil {
		set++
		v.expr(path.at("/expr"), val.Expr)
	}
	if val.Template != nil {
		set++
		for k, part := range val.Template {
			pp := path.at("/template").idx(k)
			switch {
			case part.Text != "" && part.Expr != nil:
				v.addf(pp, "a template part has either text or expr, not both")
			case part.Expr != nil:
				v.expr(pp.at("/expr"), part.Expr)
			case part.Text == "":
				v.addf(pp, "a template part needs text or expr")
			}
		}
		if len(val.Template) == 0 {
			v.addf(path.at("/template"), "empty template")
		}
	}
	if set != 1 {
		v.addf(path, "a value has exactly one of const, expr or template (found %d)", set)
	}
}

// json checks an embedded JSON value: well-formed and not nested too deeply.
func (v *validator) json(path *path, raw json.RawMessage) {
	if !json.Valid(raw) {
		v.addf(path, "invalid JSON value")
		return
	}
	depth, deepest := 0, 0
	dec := json.NewDecoder(bytes.NewReader(raw))
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
			deepest = max(deepest, depth)
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
	if deepest > MaxValueDepth {
		v.addf(path, "value nested %d levels deep, over the limit of %d", deepest, MaxValueDepth)
	}
}

func (v *validator) expr(path *path, e *Expr) {
	if strings.TrimSpace(e.CEL) == "" {
		v.addf(path.at("/cel"), "empty expression")
	} else if n := utf8.RuneCountInString(e.CEL); n > MaxExprSize {
		v.addf(path.at("/cel"), "expression of %d code points, over the limit of %d", n, MaxExprSize)
	}
	if e.Type != nil {
		v.typ(path.at("/type"), e.Type, 1)
	}
	v.loc(path.at("/loc"), e.Loc)
}

func (v *validator) loc(path *path, l *Loc) {
	if l != nil && (l.Line < 0 || l.Col < 0 || l.EndLine < 0 || l.EndCol < 0) {
		v.addf(path, "negative line or column")
	}
}

var typeKinds = map[string]bool{
	KindString: true, KindInt: true, KindNumber: true, KindBool: true, KindDuration: true,
	KindAny: true, KindList: true, KindMap: true, KindObject: true, KindNull: true,
}

func (v *validator) typ(p *path, t *Type, depth int) {
	// Not recursive, so p stays on the caller's stack: typAt's recursion
	// would make every path passed here escape.
	if !typeOK(t, depth) {
		v.typAt(p.String(), t, depth)
	}
}

// typeOK reports whether typAt would find no problem in t.
func typeOK(t *Type, depth int) bool {
	if depth > MaxTypeDepth || !typeKinds[t.Kind] {
		return false
	}
	container := t.Kind == KindList || t.Kind == KindMap
	switch {
	case container && t.Elem == nil:
		return false
	case container:
		if !typeOK(t.Elem, depth+1) {
			return false
		}
	case t.Elem != nil:
		return false
	}
	if t.Kind != KindObject && len(t.Fields) > 0 {
		return false
	}
	var seen map[string]bool // for many fields; few are compared pairwise
	if len(t.Fields) > 16 {
		seen = make(map[string]bool, len(t.Fields))
	}
	for k := range t.Fields {
		name := t.Fields[k].Name
		if !isIdent(name) {
			return false
		}
		if seen != nil {
			if seen[name] {
				return false
			}
			seen[name] = true
		} else {
			for j := range k {
				if t.Fields[j].Name == name {
					return false
				}
			}
		}
		if !typeOK(&t.Fields[k].Type, depth+1) {
			return false
		}
	}
	return true
}

// typAt reports the problems of a type at path.
func (v *validator) typAt(path string, t *Type, depth int) {
	if depth > MaxTypeDepth {
		v.addf(at(path), "type nested more than %d levels deep", MaxTypeDepth)
		return
	}
	if !typeKinds[t.Kind] {
		v.addf(at(path+"/kind"), "invalid type kind %q", t.Kind)
	}
	container := t.Kind == KindList || t.Kind == KindMap
	switch {
	case container && t.Elem == nil:
		v.addf(at(path+"/elem"), "a %s type needs elem", t.Kind)
	case container:
		v.typAt(path+"/elem", t.Elem, depth+1)
	case t.Elem != nil:
		v.addf(at(path+"/elem"), "only list and map types have elem")
	}
	if t.Kind != KindObject && len(t.Fields) > 0 {
		v.addf(at(path+"/fields"), "only object types have fields")
		return
	}
	seen := map[string]bool{}
	for k := range t.Fields {
		fp := fmt.Sprintf("%s/fields/%d", path, k)
		v.name(at(fp+"/name"), t.Fields[k].Name, "field", seen)
		v.typAt(fp+"/type", &t.Fields[k].Type, depth+1)
	}
}

var edgeKinds = map[string]bool{
	EdgeAfter: true, EdgeBranch: true, EdgeDefault: true, EdgeRoute: true,
	EdgeLoop: true, EdgeExhausted: true, EdgeError: true, EdgeReject: true,
}

type edgeKey struct{ from, to, kind string }

func (v *validator) edges() {
	first := make(map[edgeKey]int, len(v.w.Edges))
	implied, order := v.implied()
	for k, e := range v.w.Edges {
		p := at("/edges").idx(k)
		ok := true
		if !edgeKinds[e.Kind] {
			v.addf(p.at("/kind"), "invalid edge kind %q", e.Kind)
			ok = false
		}
		for _, end := range [...]struct{ field, id string }{{"from", e.From}, {"to", e.To}} {
			if _, known := v.g.index[end.id]; !known {
				v.addf(p.at("/"+end.field), "unknown node %q", end.id)
				ok = false
			}
		}
		key := edgeKey{e.From, e.To, e.Kind}
		if j, dup := first[key]; dup {
			v.addf(p, "duplicate of /edges/%d", j)
			continue
		}
		first[key] = k
		if e.From == e.To && e.Kind != EdgeLoop {
			v.addf(p, "a %s edge cannot go from a node to itself", e.Kind)
		}
		if ok && e.Kind != EdgeAfter {
			if o, want := implied[key]; want {
				o.seen = true
				implied[key] = o
			} else {
				v.addf(p, "%s edge %s -> %s is not implied by the configuration of node %q", e.Kind, e.From, e.To, e.From)
			}
		}
	}
	for _, key := range order {
		if o := implied[key]; !o.seen {
			v.addf(o.path(), "missing %s edge %s -> %s in /edges", key.kind, key.from, key.to)
		}
	}
}

// An origin is the node option that calls for an edge: node's field (or
// its branch rule's targets), entry k of the list (k < 0: the field itself).
type origin struct {
	node, rule, k int // rule < 0: not a branch rule
	field         string
	seen          bool // the edge is in /edges
}

func (o origin) path() *path {
	p := at("/nodes").idx(o.node)
	if o.rule >= 0 {
		p = p.at("/branch/rules").idx(o.rule).at("/targets")
	} else {
		p = p.at(o.field)
	}
	if o.k >= 0 {
		p = p.idx(o.k)
	}
	return p
}

// implied returns the non-after edges that the node options call for,
// each with the path of the option that calls for it, and their order.
func (v *validator) implied() (map[edgeKey]origin, []edgeKey) {
	m := map[edgeKey]origin{}
	var order []edgeKey
	add := func(o origin, from string, tos []string, kind string) {
		for k, to := range tos {
			key := edgeKey{from, to, kind}
			if _, known := v.g.index[to]; !known {
				continue // unknown targets are reported with the node
			}
			if _, dup := m[key]; dup {
				continue
			}
			o.k = k
			m[key] = o
			order = append(order, key)
		}
	}
	for i := range v.w.Nodes {
		n := &v.w.Nodes[i]
		field := func(f string) origin { return origin{node: i, rule: -1, field: f} }
		if b := n.Branch; b != nil {
			for r := range b.Rules {
				add(origin{node: i, rule: r}, n.ID, b.Rules[r].Targets, EdgeBranch)
			}
			add(field("/branch/default"), n.ID, b.Default, EdgeDefault)
		}
		if a := n.Agent; a != nil {
			add(field("/agent/routes"), n.ID, a.Routes, EdgeRoute)
			add(field("/agent/default"), n.ID, a.Default, EdgeDefault)
		}
		if l := n.Loop; l != nil {
			if key := (edgeKey{n.ID, l.BackTo, EdgeLoop}); !hasKey(m, key) {
				if _, known := v.g.index[l.BackTo]; known {
					o := field("/loop/back_to")
					o.k = -1
					m[key] = o
					order = append(order, key)
				}
			}
			add(field("/loop/exhausted"), n.ID, l.Exhausted, EdgeExhausted)
		}
		add(field("/on_error"), n.ID, n.OnError, EdgeError)
		if h := n.Human; h != nil {
			add(field("/human/on_reject"), n.ID, h.OnReject, EdgeReject)
		}
	}
	return m, order
}

func hasKey(m map[edgeKey]origin, k edgeKey) bool { _, ok := m[k]; return ok }

// graph checks what needs the whole forward graph.
func (v *validator) graph() {
	g := v.g
	if len(v.w.Nodes) == 0 {
		v.addf(at("/nodes"), "a workflow needs at least one node")
		return
	}
	if g.cycle != nil {
		p := at("/edges")
		if k := g.cycleEdge(); k >= 0 {
			p = p.idx(k)
		}
		v.addf(p, "%s", g.cycleMessage())
	}
	terminals := 0
	for i := range v.w.Nodes {
		if len(g.out[i]) == 0 {
			terminals++
		}
		// A workflow may declare a larger static fan-out (max_fanout), up
		// to the node limit.
		limit := max(MaxOutEdges, min(v.w.Settings.MaxFanout, MaxNodes))
		if len(g.out[i]) > limit {
			v.addf(at("/nodes").idx(i), "%d forward out-edges, over the limit of %d", len(g.out[i]), limit)
		}
		n := &v.w.Nodes[i]
		if n.Loop == nil {
			continue
		}
		if b, ok := g.index[n.Loop.BackTo]; ok && b != i && !g.ancestor(b, i) {
			v.addf(at("/nodes").idx(i).at("/loop/back_to"), "back_to %q must be the node itself or one of its forward ancestors", n.Loop.BackTo)
		}
	}
	if terminals == 0 {
		v.addf(at("/nodes"), "no terminal node: every node has a forward successor")
	}
	v.firstJoins()
}

// firstJoins refuses the join first nodes the runtime cannot run
// (FirstJoinProblem), on an analyzed copy of the graph: Validate does not
// trust the derived fields it was given.
func (v *validator) firstJoins() {
	if v.g.cycle != nil || len(v.g.errs) > 0 || !slices.ContainsFunc(v.w.Nodes, func(n Node) bool { return n.Join == JoinFirst }) {
		return
	}
	c := &Workflow{Nodes: make([]Node, len(v.w.Nodes)), Edges: v.w.Edges, Goals: v.w.Goals}
	for i, n := range v.w.Nodes {
		c.Nodes[i] = Node{ID: n.ID, Join: n.Join, Loop: n.Loop, ForEach: n.ForEach}
	}
	if analyze(c) != nil {
		return
	}
	for i := range c.Nodes {
		if why := FirstJoinProblem(c, &c.Nodes[i]); why != "" {
			v.addf(at("/nodes").idx(i).at("/join"), "join first: %s", why)
		}
	}
}

func article(word string) string {
	if word != "" && strings.ContainsRune("aeiou", rune(word[0])) {
		return "an"
	}
	return "a"
}

// isIdent reports whether s matches [A-Za-z_][A-Za-z0-9_]*.
func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9' {
			continue
		}
		return false
	}
	return true
}

// validHash reports whether h has the form Hash returns.
func validHash(h string) bool {
	hex, ok := strings.CutPrefix(h, "sha256:")
	if !ok || len(hex) != 64 {
		return false
	}
	for i := 0; i < len(hex); i++ {
		if c := hex[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// validateChildren checks the embedded children of the root w: each is a
// valid workflow without children of its own, stored under its own hash,
// once, in hash order; each is run by some flow node (so the children are
// exactly what the flow nodes need, and the root's hash, which covers only
// their hashes, determines them); and flows nest at most MaxFlowDepth deep.
// A cycle among children would nest without end: it is reported as too
// deep (and the hashes cannot all match: each would cover the other).
func validateChildren(w *Workflow, table map[string]int) []Problem {
	var ps []Problem
	addf := func(path, format string, args ...any) {
		ps = append(ps, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
	}
	for i := range w.Children {
		c := &w.Children[i]
		p := "/children/" + strconv.Itoa(i)
		switch {
		case !validHash(c.Hash):
			addf(p+"/hash", "invalid hash %q (want sha256: and 64 lowercase hex digits)", c.Hash)
		case table[c.Hash] != i:
			addf(p+"/hash", "child %s embedded twice", c.Hash)
		case i > 0 && c.Hash < w.Children[i-1].Hash:
			addf(p+"/hash", "children are not sorted by hash")
		}
		if len(c.Workflow.Children) > 0 {
			addf(p+"/workflow/children", "an embedded child cannot have children of its own: every descendant belongs in the root's children")
		}
		for _, cp := range validateOne(&c.Workflow, table) {
			cp.Path = p + "/workflow" + cp.Path
			ps = append(ps, cp)
		}
		if h, err := Hash(&c.Workflow); err != nil {
			addf(p+"/workflow", "cannot hash the child: %v", err)
		} else if validHash(c.Hash) && h != c.Hash {
			addf(p+"/hash", "is not the hash of the embedded workflow, which is %s (edited by hand? rebuild the parent)", h)
		}
	}
	if len(w.Children) == 0 {
		return ps
	}
	// Walk the flow references level by level from the root: level k holds
	// the children k flows deep. Each level is a set, so this costs at most
	// MaxFlowDepth+1 passes over the flow nodes.
	refs := func(x *Workflow, yield func(int)) {
		for j := range x.Nodes {
			if f := x.Nodes[j].Flow; f != nil {
				if k, ok := table[f.Hash]; ok {
					yield(k)
				}
			}
		}
	}
	reached := make([]bool, len(w.Children))
	var level []int
	refs(w, func(k int) {
		if !reached[k] {
			reached[k] = true
			level = append(level, k)
		}
	})
	for depth := 1; len(level) > 0; depth++ {
		if depth > MaxFlowDepth {
			addf("/children/"+strconv.Itoa(level[0])+"/workflow", "flows nested deeper than %d (a cycle of children?)", MaxFlowDepth)
			break
		}
		in := map[int]bool{}
		var next []int
		for _, k := range level {
			refs(&w.Children[k].Workflow, func(j int) {
				reached[j] = true
				if !in[j] {
					in[j] = true
					next = append(next, j)
				}
			})
		}
		level = next
	}
	for i, r := range reached {
		if !r {
			addf("/children/"+strconv.Itoa(i), "no flow node runs child %s (children must be only the workflows flow nodes run)", w.Children[i].Hash)
		}
	}
	return ps
}

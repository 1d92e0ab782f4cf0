package ir

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
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
	v := &validator{w: w, g: buildGraph(w), handlers: map[string]bool{}}
	v.header()
	v.inputs()
	v.outputs()
	v.handlerDecls()
	v.nodes()
	v.edges()
	v.graph()
	return v.ps
}

type validator struct {
	w        *Workflow
	g        *graph
	handlers map[string]bool
	ps       []Problem
}

func (v *validator) addf(path, format string, args ...any) {
	v.ps = append(v.ps, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}

func (v *validator) header() {
	w := v.w
	switch w.IRVersion {
	case Version:
	case "":
		v.addf("/ir_version", "missing ir_version")
	default:
		v.addf("/ir_version", "unsupported ir_version %q (want %q)", w.IRVersion, Version)
	}
	if w.Name == "" {
		v.addf("/name", "missing workflow name")
	}
	if w.Settings.DeadlineMS < 0 {
		v.addf("/settings/deadline_ms", "must not be negative")
	}
	if w.Settings.MaxHops < 0 {
		v.addf("/settings/max_hops", "must not be negative")
	}
	if w.Settings.MaxFanout < 0 {
		v.addf("/settings/max_fanout", "must not be negative")
	}
}

func (v *validator) inputs() {
	seen := map[string]bool{}
	for i, in := range v.w.Inputs {
		p := fmt.Sprintf("/inputs/%d", i)
		v.name(p+"/name", in.Name, "input", seen)
		v.typ(p+"/type", &in.Type, 1)
		if in.Default != nil {
			v.json(p+"/default", in.Default)
		}
		if in.Required && in.Default != nil {
			v.addf(p+"/required", "an input with a default cannot be required")
		}
		v.loc(p+"/loc", in.Loc)
	}
}

func (v *validator) outputs() {
	seen := map[string]bool{}
	for i, out := range v.w.Outputs {
		p := fmt.Sprintf("/outputs/%d", i)
		v.name(p+"/name", out.Name, "output", seen)
		v.expr(p+"/expr", &out.Expr)
		v.loc(p+"/loc", out.Loc)
	}
}

func (v *validator) handlerDecls() {
	for i, h := range v.w.Handlers {
		p := fmt.Sprintf("/handlers/%d", i)
		switch {
		case h.Name == "":
			v.addf(p+"/name", "missing handler name")
		case v.handlers[h.Name]:
			v.addf(p+"/name", "duplicate handler %q", h.Name)
		case i > 0 && h.Name < v.w.Handlers[i-1].Name:
			v.addf(p+"/name", "handlers must be sorted by name: %q comes after %q", h.Name, v.w.Handlers[i-1].Name)
		}
		v.handlers[h.Name] = true
		v.typ(p+"/config", &h.Config, 1)
		v.typ(p+"/output", &h.Output, 1)
		v.loc(p+"/loc", h.Loc)
	}
}

func (v *validator) nodes() {
	if len(v.w.Nodes) > MaxNodes {
		v.addf("/nodes", "%d nodes, over the limit of %d", len(v.w.Nodes), MaxNodes)
	}
	seen := map[string]bool{}
	for i := range v.w.Nodes {
		v.node(i, seen)
	}
}

func (v *validator) node(i int, seen map[string]bool) {
	n := &v.w.Nodes[i]
	p := fmt.Sprintf("/nodes/%d", i)
	v.name(p+"/id", n.ID, "node", seen)

	// Each type carries exactly its own option.
	has := map[string]bool{"handler": n.Handler != "", "agent": n.Agent != nil, "human": n.Human != nil, "flow": n.Flow != nil}
	own := map[string]string{NodeTask: "handler", NodeAgent: "agent", NodeHuman: "human", NodeFlow: "flow"}
	if want, ok := own[n.Type]; ok {
		if !has[want] {
			v.addf(p+"/"+want, "%s %s node needs %s", article(n.Type), n.Type, want)
		}
		for _, opt := range []string{"handler", "agent", "human", "flow"} {
			if has[opt] && opt != want {
				v.addf(p+"/"+opt, "%s %s node cannot have %s", article(n.Type), n.Type, opt)
			}
		}
	} else {
		v.addf(p+"/type", "invalid node type %q (want task, agent, human or flow)", n.Type)
	}
	if n.Agent != nil && n.Branch != nil {
		v.addf(p+"/branch", "an agent node routes with agent.routes; it cannot also have a branch")
	}
	if n.Handler != "" && !v.handlers[n.Handler] {
		v.addf(p+"/handler", "handler %q is not declared in /handlers", n.Handler)
	}
	v.loc(p+"/loc", n.Loc)

	v.params(p+"/with", n.With)
	if n.OutputType != nil {
		v.typ(p+"/output_type", n.OutputType, 1)
	}
	if n.Join != JoinAll && n.Join != JoinAny {
		v.addf(p+"/join", "invalid join %q (want all or any)", n.Join)
	}
	if n.When != nil {
		v.expr(p+"/when", n.When)
	}
	if f := n.ForEach; f != nil {
		if !isIdent(f.Var) {
			v.addf(p+"/for_each/var", "invalid variable name %q", f.Var)
		}
		v.expr(p+"/for_each/items", &f.Items)
		if f.Parallel < 0 {
			v.addf(p+"/for_each/parallel", "must not be negative")
		}
	}
	if r := n.Retry; r != nil {
		if r.Attempts < 1 {
			v.addf(p+"/retry/attempts", "must be at least 1")
		}
		if r.Backoff != BackoffFixed && r.Backoff != BackoffLinear && r.Backoff != BackoffExponential {
			v.addf(p+"/retry/backoff", "invalid backoff %q (want fixed, linear or exponential)", r.Backoff)
		}
		if r.DelayMS < 0 {
			v.addf(p+"/retry/delay_ms", "must not be negative")
		}
		if r.MaxDelayMS < 0 {
			v.addf(p+"/retry/max_delay_ms", "must not be negative")
		} else if r.MaxDelayMS > 0 && r.MaxDelayMS < r.DelayMS {
			v.addf(p+"/retry/max_delay_ms", "max delay %dms is less than the delay %dms", r.MaxDelayMS, r.DelayMS)
		}
	}
	if n.TimeoutMS < 0 {
		v.addf(p+"/timeout_ms", "must not be negative")
	}
	if b := n.Branch; b != nil {
		if len(b.Rules) == 0 {
			v.addf(p+"/branch/rules", "a branch needs at least one rule")
		}
		for r := range b.Rules {
			rp := fmt.Sprintf("%s/branch/rules/%d", p, r)
			v.expr(rp+"/when", &b.Rules[r].When)
			v.targets(rp+"/targets", n.ID, b.Rules[r].Targets)
		}
		v.targets(p+"/branch/default", n.ID, b.Default)
	}
	if l := n.Loop; l != nil {
		v.expr(p+"/loop/while", &l.While)
		if l.Max < 1 {
			v.addf(p+"/loop/max", "must be at least 1")
		}
		if l.BackTo == "" {
			v.addf(p+"/loop/back_to", "missing back_to")
		} else if _, ok := v.g.index[l.BackTo]; !ok {
			v.addf(p+"/loop/back_to", "unknown node %q", l.BackTo)
		}
		v.targets(p+"/loop/exhausted", n.ID, l.Exhausted)
	}
	v.targets(p+"/on_error", n.ID, n.OnError)
	if c := n.Compensate; c != nil {
		if c.Handler == "" {
			v.addf(p+"/compensate/handler", "missing handler")
		} else if !v.handlers[c.Handler] {
			v.addf(p+"/compensate/handler", "handler %q is not declared in /handlers", c.Handler)
		}
		v.params(p+"/compensate/with", c.With)
	}
	if a := n.Agent; a != nil {
		if a.Model == "" {
			v.addf(p+"/agent/model", "missing model")
		}
		if t := a.Temperature; t != nil && (math.IsNaN(*t) || math.IsInf(*t, 0) || *t < 0) {
			v.addf(p+"/agent/temperature", "must be a non-negative number")
		}
		v.value(p+"/agent/prompt", &a.Prompt)
		v.targets(p+"/agent/routes", n.ID, a.Routes)
		v.targets(p+"/agent/default", n.ID, a.Default)
	}
	if h := n.Human; h != nil {
		for k, a := range h.Approvers {
			if a == "" {
				v.addf(fmt.Sprintf("%s/human/approvers/%d", p, k), "empty approver")
			}
		}
		if h.TimeoutMS < 0 {
			v.addf(p+"/human/timeout_ms", "must not be negative")
		}
		switch h.OnTimeout {
		case "", TimeoutApprove, TimeoutReject, TimeoutFail:
		default:
			v.addf(p+"/human/on_timeout", "invalid on_timeout %q (want approve, reject or fail)", h.OnTimeout)
		}
		v.targets(p+"/human/on_reject", n.ID, h.OnReject)
		if h.Prompt != nil {
			v.value(p+"/human/prompt", h.Prompt)
		}
	}
	if f := n.Flow; f != nil {
		if f.Uses == "" {
			v.addf(p+"/flow/uses", "missing uses")
		}
		v.params(p+"/flow/with", f.With)
	}
}

// targets checks a list of node ids that a node routes to.
func (v *validator) targets(path, self string, ids []string) {
	seen := map[string]bool{}
	for k, id := range ids {
		tp := fmt.Sprintf("%s/%d", path, k)
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

func (v *validator) name(path, name, what string, seen map[string]bool) {
	switch {
	case !isIdent(name):
		v.addf(path, "invalid %s name %q (want [A-Za-z_][A-Za-z0-9_]*)", what, name)
	case seen[name]:
		v.addf(path, "duplicate %s name %q", what, name)
	}
	seen[name] = true
}

func (v *validator) params(path string, ps []Param) {
	seen := map[string]bool{}
	for k := range ps {
		pp := fmt.Sprintf("%s/%d", path, k)
		v.name(pp+"/name", ps[k].Name, "parameter", seen)
		v.value(pp+"/value", &ps[k].Value)
	}
}

func (v *validator) value(path string, val *Value) {
	set := 0
	if val.Const != nil {
		set++
		v.json(path+"/const", val.Const)
	}
	if val.Expr != nil {
		set++
		v.expr(path+"/expr", val.Expr)
	}
	if val.Template != nil {
		set++
		for k, part := range val.Template {
			pp := fmt.Sprintf("%s/template/%d", path, k)
			switch {
			case part.Text != "" && part.Expr != nil:
				v.addf(pp, "a template part has either text or expr, not both")
			case part.Expr != nil:
				v.expr(pp+"/expr", part.Expr)
			case part.Text == "":
				v.addf(pp, "a template part needs text or expr")
			}
		}
		if len(val.Template) == 0 {
			v.addf(path+"/template", "empty template")
		}
	}
	if set != 1 {
		v.addf(path, "a value has exactly one of const, expr or template (found %d)", set)
	}
}

// json checks an embedded JSON value: well-formed and not nested too deeply.
func (v *validator) json(path string, raw json.RawMessage) {
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

func (v *validator) expr(path string, e *Expr) {
	if strings.TrimSpace(e.CEL) == "" {
		v.addf(path+"/cel", "empty expression")
	}
	if e.Type != nil {
		v.typ(path+"/type", e.Type, 1)
	}
	v.loc(path+"/loc", e.Loc)
}

func (v *validator) loc(path string, l *Loc) {
	if l != nil && (l.Line < 0 || l.Col < 0 || l.EndLine < 0 || l.EndCol < 0) {
		v.addf(path, "negative line or column")
	}
}

var typeKinds = map[string]bool{
	KindString: true, KindInt: true, KindNumber: true, KindBool: true, KindDuration: true,
	KindAny: true, KindList: true, KindMap: true, KindObject: true, KindNull: true,
}

func (v *validator) typ(path string, t *Type, depth int) {
	if depth > MaxTypeDepth {
		v.addf(path, "type nested more than %d levels deep", MaxTypeDepth)
		return
	}
	if !typeKinds[t.Kind] {
		v.addf(path+"/kind", "invalid type kind %q", t.Kind)
	}
	container := t.Kind == KindList || t.Kind == KindMap
	switch {
	case container && t.Elem == nil:
		v.addf(path+"/elem", "a %s type needs elem", t.Kind)
	case container:
		v.typ(path+"/elem", t.Elem, depth+1)
	case t.Elem != nil:
		v.addf(path+"/elem", "only list and map types have elem")
	}
	if t.Kind != KindObject && len(t.Fields) > 0 {
		v.addf(path+"/fields", "only object types have fields")
		return
	}
	seen := map[string]bool{}
	for k := range t.Fields {
		fp := fmt.Sprintf("%s/fields/%d", path, k)
		v.name(fp+"/name", t.Fields[k].Name, "field", seen)
		v.typ(fp+"/type", &t.Fields[k].Type, depth+1)
	}
}

var edgeKinds = map[string]bool{
	EdgeAfter: true, EdgeBranch: true, EdgeDefault: true, EdgeRoute: true,
	EdgeLoop: true, EdgeExhausted: true, EdgeError: true, EdgeReject: true,
}

type edgeKey struct{ from, to, kind string }

func (v *validator) edges() {
	first := map[edgeKey]int{}
	implied, order := v.implied()
	for k, e := range v.w.Edges {
		p := fmt.Sprintf("/edges/%d", k)
		ok := true
		if !edgeKinds[e.Kind] {
			v.addf(p+"/kind", "invalid edge kind %q", e.Kind)
			ok = false
		}
		for _, end := range [...]struct{ field, id string }{{"from", e.From}, {"to", e.To}} {
			if _, known := v.g.index[end.id]; !known {
				v.addf(p+"/"+end.field, "unknown node %q", end.id)
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
			if _, want := implied[key]; want {
				implied[key] = "" // seen
			} else {
				v.addf(p, "%s edge %s -> %s is not implied by the configuration of node %q", e.Kind, e.From, e.To, e.From)
			}
		}
	}
	for _, key := range order {
		if path := implied[key]; path != "" {
			v.addf(path, "missing %s edge %s -> %s in /edges", key.kind, key.from, key.to)
		}
	}
}

// implied returns the non-after edges that the node options call for,
// each with the path of the option that calls for it, and their order.
func (v *validator) implied() (map[edgeKey]string, []edgeKey) {
	m := map[edgeKey]string{}
	var order []edgeKey
	add := func(path, from string, tos []string, kind string) {
		for k, to := range tos {
			key := edgeKey{from, to, kind}
			if _, known := v.g.index[to]; !known || m[key] != "" {
				continue // unknown targets are reported with the node
			}
			m[key] = fmt.Sprintf("%s/%d", path, k)
			order = append(order, key)
		}
	}
	for i := range v.w.Nodes {
		n := &v.w.Nodes[i]
		p := fmt.Sprintf("/nodes/%d", i)
		if b := n.Branch; b != nil {
			for r := range b.Rules {
				add(fmt.Sprintf("%s/branch/rules/%d/targets", p, r), n.ID, b.Rules[r].Targets, EdgeBranch)
			}
			add(p+"/branch/default", n.ID, b.Default, EdgeDefault)
		}
		if a := n.Agent; a != nil {
			add(p+"/agent/routes", n.ID, a.Routes, EdgeRoute)
			add(p+"/agent/default", n.ID, a.Default, EdgeDefault)
		}
		if l := n.Loop; l != nil {
			if key := (edgeKey{n.ID, l.BackTo, EdgeLoop}); m[key] == "" {
				if _, known := v.g.index[l.BackTo]; known {
					m[key] = p + "/loop/back_to"
					order = append(order, key)
				}
			}
			add(p+"/loop/exhausted", n.ID, l.Exhausted, EdgeExhausted)
		}
		add(p+"/on_error", n.ID, n.OnError, EdgeError)
		if h := n.Human; h != nil {
			add(p+"/human/on_reject", n.ID, h.OnReject, EdgeReject)
		}
	}
	return m, order
}

// graph checks what needs the whole forward graph.
func (v *validator) graph() {
	g := v.g
	if len(v.w.Nodes) == 0 {
		v.addf("/nodes", "a workflow needs at least one node")
		return
	}
	if g.cycle != nil {
		path := "/edges"
		if k := g.cycleEdge(); k >= 0 {
			path = fmt.Sprintf("/edges/%d", k)
		}
		v.addf(path, "%s", g.cycleMessage())
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
			v.addf(fmt.Sprintf("/nodes/%d", i), "%d forward out-edges, over the limit of %d", len(g.out[i]), limit)
		}
		n := &v.w.Nodes[i]
		if n.Loop == nil {
			continue
		}
		if b, ok := g.index[n.Loop.BackTo]; ok && b != i && !g.ancestor(b, i) {
			v.addf(fmt.Sprintf("/nodes/%d/loop/back_to", i), "back_to %q must be the node itself or one of its forward ancestors", n.Loop.BackTo)
		}
	}
	if terminals == 0 {
		v.addf("/nodes", "no terminal node: every node has a forward successor")
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

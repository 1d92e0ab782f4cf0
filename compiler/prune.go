package compiler

import (
	"fmt"
	mathbits "math/bits"
	"slices"
	"sort"
	"strings"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/lang/ast"
	"github.com/wfc-lang/wfc/lang/diag"
	"github.com/wfc-lang/wfc/lang/source"
)

// prune removes what can never run — nodes behind constant-false
// predicates and branch rules — and `after` edges already implied by a path
// of unconditional edges.
func (s *state) prune() {
	if s.cfg.NoOptimize || s.ir == nil {
		return
	}
	s.routedAfters()
	w := s.ir
	idx := ir.Index(w)
	isFalse := func(e *ast.Expr) bool { v, ok := s.consts[e]; return ok && v == false }
	isTrue := func(e *ast.Expr) bool { v, ok := s.consts[e]; return ok && v == true }
	dead := map[string]bool{}
	removedEdge := map[ir.Edge]bool{}
	for _, n := range s.nodes {
		in := &w.Nodes[idx[n.id]]
		if n.when != nil {
			if isFalse(n.when) {
				dead[n.id] = true
				s.errorf(diag.DeadNode, n.ident.Range, "%s never runs: its `when` is always false", n.id).
					WithRelated(s.span(n.when.Range), "constant condition")
			} else if isTrue(n.when) {
				s.errorf(diag.ConstCondition, n.when.Range, "`when` is always true")
				in.When = nil
				s.irFresh = false
			}
		}
		if n.branch != nil && in.Branch != nil {
			s.pruneBranch(n, in, isFalse, isTrue, removedEdge)
		}
		if n.loop != nil && n.loop.while != nil && (isFalse(n.loop.while) || isTrue(n.loop.while)) {
			what := "never repeats"
			if isTrue(n.loop.while) {
				what = fmt.Sprintf("always runs %d times", n.loop.max)
			}
			s.errorf(diag.ConstCondition, n.loop.while.Range, "`while` is constant: the loop %s", what)
		}
	}
	// Propagate: a node all of whose incoming forward edges are gone or come
	// from dead nodes never runs, and so does a join all one of whose
	// incoming edges is gone.
	for _, i := range s.order {
		n := s.nodes[i]
		if dead[n.id] || len(s.inE[i]) == 0 {
			continue
		}
		alive, gone := 0, ""
		for _, ei := range s.inE[i] {
			e := s.edges[ei]
			ie := ir.Edge{From: s.nodes[e.from].id, To: n.id, Kind: e.kind}
			if !dead[ie.From] && !removedEdge[ie] {
				alive++
			} else if gone == "" {
				gone = ie.From
			}
		}
		if alive > 0 && (gone == "" || n.join != ir.JoinAll) {
			continue
		}
		dead[n.id] = true
		if alive > 0 {
			s.errorf(diag.JoinNever, n.ident.Range, "%s never runs: it joins with `all` and its input from %s can never deliver a real token", n.id, gone)
		} else if len(s.inE[i]) >= 2 {
			s.errorf(diag.JoinNever, n.ident.Range, "%s never runs: none of its %d inputs can deliver a real token", n.id, len(s.inE[i]))
		} else {
			s.errorf(diag.DeadNode, n.ident.Range, "%s never runs: the only path to it is dead", n.id)
		}
	}
	// A dead node that a surviving expression names (x.output or
	// has(x.output)) in the workflow output or in a node that still runs is
	// kept as a node that is always skipped, so the expression still
	// resolves; its own expressions then must resolve too.
	for _, i := range s.exprRefs(dead) {
		delete(dead, s.nodes[i].id)
		if in := &w.Nodes[idx[s.nodes[i].id]]; in.When == nil {
			in.When = &ir.Expr{CEL: "false", Type: &ir.Type{Kind: ir.KindBool}}
			s.irFresh = false
		}
	}
	if len(removedEdge) > 0 || len(dead) > 0 {
		w.Edges = filterEdges(w.Edges, removedEdge)
		removeNodes(w, dead)
		if s.irFresh = ir.Analyze(w) == nil; !s.irFresh {
			return
		}
	}
	if s.reduce(w) {
		s.irFresh = ir.Analyze(w) == nil
	}
}

// exprRefs returns the dead nodes that expressions of the workflow output
// or of live nodes name, transitively through the nodes it returns.
func (s *state) exprRefs(dead map[string]bool) []int {
	if len(dead) == 0 {
		return nil
	}
	// Node declarations are disjoint and in source order: find the one
	// containing a reference by binary search.
	var decls []*node
	for _, n := range s.nodes {
		if n.decl != nil {
			decls = append(decls, n)
		}
	}
	owner := func(r source.Range) *node {
		i := sort.Search(len(decls), func(i int) bool { return decls[i].decl.End >= r.End })
		if i < len(decls) && r.Start >= decls[i].decl.Start {
			return decls[i]
		}
		return nil
	}
	graphRef := map[source.Range]bool{} // after lists and targets are not expressions
	for _, e := range s.edges {
		graphRef[e.ref.Range] = true
	}
	for _, n := range s.nodes {
		for _, a := range n.after {
			graphRef[a.Range] = true
		}
	}
	// user[k]: the node whose declaration contains ref k, -1 for the output.
	type use struct{ user, node int }
	var uses []use
	for _, ref := range s.info.Refs {
		x := s.byID[ref.Name]
		if ref.Kind != RefNode || graphRef[ref.Range] || x == nil {
			continue
		}
		for _, p := range s.outputs {
			if ref.Range.Start >= p.Value.Start && ref.Range.End <= p.Value.End {
				uses = append(uses, use{-1, x.idx})
			}
		}
		if n := owner(ref.Range); n != nil {
			uses = append(uses, use{n.idx, x.idx})
		}
	}
	kept := map[int]bool{}
	for changed := true; changed; {
		changed = false
		for _, u := range uses {
			live := u.user < 0 || !dead[s.nodes[u.user].id] || kept[u.user]
			if live && dead[s.nodes[u.node].id] && !kept[u.node] {
				kept[u.node], changed = true, true
			}
		}
	}
	out := make([]int, 0, len(kept))
	for i := range s.nodes {
		if kept[i] {
			out = append(out, i)
		}
	}
	return out
}

func filterEdges(es []ir.Edge, drop map[ir.Edge]bool) []ir.Edge {
	if len(drop) == 0 {
		return es
	}
	out := es[:0]
	for _, e := range es {
		if !drop[e] {
			out = append(out, e)
		}
	}
	return out
}

func (s *state) pruneBranch(n *node, in *ir.Node, isFalse, isTrue func(*ast.Expr) bool, removed map[ir.Edge]bool) {
	var rules []ir.Rule
	alwaysAt := -1
	for i, r := range n.branch.Rules {
		if r.Else {
			continue
		}
		if alwaysAt >= 0 {
			s.errorf(diag.ConstCondition, r.Range, "rule is never tried: an earlier rule is always true").
				WithRelated(s.span(n.branch.Rules[alwaysAt].Cond.Range), "always true")
			continue
		}
		if isFalse(r.Cond) {
			s.errorf(diag.ConstCondition, r.Cond.Range, "branch rule is always false")
			continue
		}
		rules = append(rules, ir.Rule{When: s.irExpr(r.Cond), Targets: names(r.Targets)})
		if isTrue(r.Cond) {
			s.errorf(diag.ConstCondition, r.Cond.Range, "branch rule is always true")
			alwaysAt = i
		}
	}
	if alwaysAt >= 0 && len(in.Branch.Default) > 0 {
		for _, r := range n.branch.Rules {
			if r.Else {
				s.errorf(diag.ConstCondition, r.Range, "`else` is never taken: an earlier rule is always true")
			}
		}
		in.Branch.Default = nil
	}
	if rules == nil {
		rules = []ir.Rule{}
	}
	in.Branch.Rules = rules
	// Drop branch/default edges whose target no rule names any more.
	still := map[string]map[string]bool{ir.EdgeBranch: {}, ir.EdgeDefault: {}}
	for _, r := range rules {
		for _, t := range r.Targets {
			still[ir.EdgeBranch][t] = true
		}
	}
	for _, t := range in.Branch.Default {
		still[ir.EdgeDefault][t] = true
	}
	for _, r := range n.branch.Rules {
		kind := ir.EdgeBranch
		if r.Else {
			kind = ir.EdgeDefault
		}
		for _, t := range r.Targets {
			if !still[kind][t.Name] {
				removed[ir.Edge{From: n.id, To: t.Name, Kind: kind}] = true
			}
		}
	}
	if len(rules) == 0 {
		// No rule can ever fire: the node always routes to its `else`
		// targets (if any), which is what plain after edges do. An IR
		// branch needs a rule, so the branch goes.
		in.Branch = nil
		s.irFresh = false
		for i := range s.ir.Edges {
			if e := &s.ir.Edges[i]; e.From == n.id && e.Kind == ir.EdgeDefault {
				e.Kind = ir.EdgeAfter
			}
		}
	}
}

// strongEdge: an `after` edge that always delivers a real token when its
// source ran (its source has no predicate, no alternative path, and cannot
// itself be skipped).
func strongEdge(w *ir.Workflow, idx map[string]int, e ir.Edge) bool {
	if e.Kind != ir.EdgeAfter {
		return false
	}
	n := &w.Nodes[idx[e.From]]
	if n.MaySkip || n.Branch != nil || n.Agent != nil || len(n.OnError) > 0 {
		return false
	}
	if n.Human != nil && (len(n.Human.OnReject) > 0 || n.Human.OnTimeout == ir.TimeoutReject) {
		return false
	}
	if n.Loop != nil && len(n.Loop.Exhausted) > 0 {
		return false
	}
	return true
}

// reduce removes `after a` from a join-all node c when c also waits for a
// node p that a reaches through strong edges only: c then waits for a
// anyway, and a real token from a implies one from p.
func (s *state) reduce(w *ir.Workflow) bool {
	idx := ir.Index(w)
	n := len(w.Nodes)
	// reach[a]: the nodes a reaches through strong edges, stored from the
	// first word to the last that has one (a fan-out's leaves reach only
	// the join: whole bit sets of every node were nodes² bits).
	reach := make([]spanBits, n)
	// Forward edges by source and by target, as windows of two arrays
	// (counted first: appending per node made two slices a node).
	from, to := make([]int, len(w.Edges)), make([]int, len(w.Edges))
	nout, nin := make([]int, n), make([]int, n)
	fwd := 0
	for k, e := range w.Edges {
		if ir.Forward(e.Kind) {
			from[k], to[k] = idx[e.From], idx[e.To]
			nout[from[k]]++
			nin[to[k]]++
			fwd++
		}
	}
	out := make([][]ir.Edge, n)
	in := make([][]ir.Edge, n)
	outAll, inAll := make([]ir.Edge, 0, fwd), make([]ir.Edge, 0, fwd)
	for i := range n {
		out[i] = outAll[len(outAll) : len(outAll) : len(outAll)+nout[i]]
		outAll = outAll[:len(outAll)+nout[i]]
		in[i] = inAll[len(inAll) : len(inAll) : len(inAll)+nin[i]]
		inAll = inAll[:len(inAll)+nin[i]]
	}
	for k, e := range w.Edges {
		if ir.Forward(e.Kind) {
			out[from[k]] = append(out[from[k]], e)
			in[to[k]] = append(in[to[k]], e)
		}
	}
	joins := false
	for c := range w.Nodes {
		joins = joins || w.Nodes[c].Join == ir.JoinAll && len(in[c]) >= 2
	}
	if !joins {
		return false // nothing to reduce: skip the O(nodes²) reach sets
	}
	var succ []int
	for k := len(w.Order) - 1; k >= 0; k-- {
		a := idx[w.Order[k]]
		succ = succ[:0]
		lo, hi := n, -1 // words the set needs
		for _, e := range out[a] {
			t := idx[e.To]
			if strongEdge(w, idx, e) && (w.Nodes[t].Join == ir.JoinAll || len(in[t]) == 1) {
				succ = append(succ, t)
				lo, hi = min(lo, t/64), max(hi, t/64)
				if r := reach[t]; len(r.w) > 0 {
					lo, hi = min(lo, r.lo), max(hi, r.lo+len(r.w)-1)
				}
			}
		}
		if hi < 0 {
			continue // no strong successor: reaches nothing
		}
		b := spanBits{lo: lo, w: make([]uint64, hi-lo+1)}
		for _, t := range succ {
			b.w[t/64-lo] |= 1 << (uint(t) % 64)
			r := reach[t]
			for i, x := range r.w {
				b.w[r.lo+i-lo] |= x
			}
		}
		reach[a] = b
	}
	drop := map[ir.Edge]bool{}
	strong := newBits(n) // reused for every join, cleared after each
	for c := range w.Nodes {
		if w.Nodes[c].Join != ir.JoinAll || len(in[c]) < 2 {
			continue
		}
		// strong: the sources of c's strong incoming edges still kept. An
		// edge a→c is implied when a reaches one of them (a reaches only
		// later nodes, so never itself).
		for _, p := range in[c] {
			if strongEdge(w, idx, p) {
				strong.set(idx[p.From])
			}
		}
		for _, e := range in[c] {
			if e.Kind != ir.EdgeAfter {
				continue
			}
			a := idx[e.From]
			via := reach[a].firstAnd(strong)
			if via < 0 {
				continue
			}
			drop[e] = true
			s.redundant(e, w.Nodes[via].ID)
			// a no longer counts as a strong source: the edge that made it
			// one is gone (it cannot imply another edge any more).
			strong.clear(a)
		}
		for _, p := range in[c] {
			strong.clear(idx[p.From])
		}
	}
	w.Edges = filterEdges(w.Edges, drop)
	return len(drop) > 0
}

// spanBits is a bit set over node indexes stored from word lo on; the
// words outside w are zero.
type spanBits struct {
	lo int
	w  []uint64
}

// firstAnd returns the lowest index set in both b and o, or -1.
func (b spanBits) firstAnd(o bits) int {
	for i, x := range b.w {
		if k := b.lo + i; k < len(o) {
			if y := x & o[k]; y != 0 {
				return k*64 + mathbits.TrailingZeros64(y)
			}
		}
	}
	return -1
}

// routedAfters reports every `after a` on a node that a's branch or routes
// lead to: the graph pass did not add it, as the routing edge already
// carries a's token (docs/language.md §7.1). Like the after edges reduce
// drops, it is the optimiser's info (WF5003), not a checking diagnostic.
func (s *state) routedAfters() {
	routed := make(map[[2]int]bool, len(s.edges))
	for _, e := range s.edges {
		if e.kind != ir.EdgeAfter {
			routed[[2]int{e.from, e.to}] = true
		}
	}
	for _, n := range s.nodes {
		for _, a := range n.after {
			from := s.byID[a.Name]
			if from != nil && from != n && (from.branch != nil || len(from.routes) > 0) && routed[[2]int{from.idx, n.idx}] {
				s.errorf(diag.RedundantAfter, a.Range, "`after %s` is implied: %s routes to %s", a.Name, from.id, n.id)
			}
		}
	}
}

func (s *state) redundant(e ir.Edge, via string) {
	n := s.byID[e.To]
	if n == nil || n.decl == nil {
		return
	}
	for _, a := range n.after {
		if a.Name == e.From {
			s.errorf(diag.RedundantAfter, a.Range, "`after %s` is implied by `after %s` (%s runs after %s); the edge is dropped", e.From, via, via, e.From)
			return
		}
	}
}

// goals keeps only the goal nodes and their ancestors, and reports the
// inputs they need.
func (s *state) goals() {
	if len(s.cfg.Goals) == 0 || s.ir == nil {
		return
	}
	w := s.ir
	keep := map[string]bool{}
	ok := true
	for _, g := range s.cfg.Goals {
		if w.Node(g) == nil {
			ids := make([]string, len(w.Nodes))
			for i := range w.Nodes {
				ids[i] = w.Nodes[i].ID
			}
			// A command-line problem: the diagnostic names the file but no position.
			d := diag.Diagnostic{Code: diag.UnknownGoal, Severity: diag.UnknownGoal.Severity(), Span: source.Span{File: s.file.Name},
				Message: fmt.Sprintf("--goal %s: no such node", g)}
			if sug := suggest(g, ids); sug != "" {
				d.Hint = fmt.Sprintf("did you mean `%s`?", sug)
			}
			s.rp.Diags = append(s.rp.Diags, d)
			ok = false
			continue
		}
		if !slices.Contains(w.Goals, g) {
			w.Goals = append(w.Goals, g)
		}
		keep[g] = true
		for a := range ir.Ancestors(w, g) {
			keep[a] = true
		}
	}
	if !ok {
		return
	}
	dead := map[string]bool{}
	for _, n := range w.Nodes {
		if !keep[n.ID] {
			dead[n.ID] = true
		}
	}
	removeNodes(w, dead)
	s.irFresh = false
	// Outputs that read removed nodes cannot be computed.
	outs := w.Outputs[:0]
	keptOut := map[int]bool{}
	for i, o := range w.Outputs {
		uses := false
		for id := range dead {
			if strings.Contains(o.Expr.CEL, id) && s.outputReads(i, id) {
				uses = true
				break
			}
		}
		if !uses {
			outs = append(outs, o)
			keptOut[i] = true
		}
	}
	w.Outputs = outs
	need := map[string]bool{}
	for i, n := range s.nodes {
		if keep[n.id] {
			for in := range s.inputUses[i] {
				need[in] = true
			}
		}
	}
	for i := range s.outputs {
		if keptOut[i] {
			for in := range s.outputInputs[i] {
				need[in] = true
			}
		}
	}
	s.required = make([]string, 0, len(need))
	for in := range need {
		s.required = append(s.required, in)
	}
	sort.Strings(s.required)
}

// outputReads reports whether workflow output i reads node id.
func (s *state) outputReads(i int, id string) bool {
	if i >= len(s.outputs) {
		return false
	}
	e := s.outputs[i].Value
	for _, er := range s.reads {
		if er.expr == e {
			for _, r := range er.reads {
				if s.nodes[r.node].id == id {
					return true
				}
			}
		}
	}
	for _, r := range s.info.Refs {
		if r.Kind == RefNode && r.Name == id && r.Range.Start >= e.Start && r.Range.End <= e.End {
			return true
		}
	}
	return false
}

package compiler

import (
	"fmt"
	"slices"
	"strings"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/lang/ast"
	"github.com/wfc-lang/wfc/lang/diag"
)

// graph builds the edges and checks the graph: self edges, `after` a
// branching node, cycles (naming their nodes), back_to dominance,
// reachability and terminals. The derived facts (order, may-skip,
// terminals) come from ir.Analyze, the same function the live-patch
// applier uses, over a skeleton IR.
func (s *state) graph() {
	if s.wf == nil {
		return
	}
	type key struct {
		from, to int
		kind     string
	}
	seen := make(map[key]*ast.Ident, 2*len(s.nodes)) // about as many edges as after names
	s.edges = make([]edge, 0, 2*len(s.nodes))
	add := func(from, to *node, kind string, ref *ast.Ident) {
		k := key{from.idx, to.idx, kind}
		if prev := seen[k]; prev != nil {
			s.errorf(diag.Duplicate, ref.Range, "`%s` is listed twice", ref.Name).
				WithRelated(s.span(prev.Range), "first listed here")
			return
		}
		seen[k] = ref
		s.edges = append(s.edges, edge{from: from.idx, to: to.idx, kind: kind, ref: ref})
	}
	targets := func(from *node, ids []*ast.Ident, kind string) {
		for _, id := range ids {
			if to := s.byID[id.Name]; to != nil {
				if to == from {
					s.errorf(diag.SelfEdge, id.Range, "%s routes to itself", from.id).
						WithHint("use a loop to run a node again")
					continue
				}
				add(from, to, kind, id)
			}
		}
	}
	// Routing edges first, so that `after` edges duplicating them can be
	// recognised as redundant.
	routesTo := map[[2]int]bool{}
	for _, n := range s.nodes {
		if n.branch != nil {
			for _, r := range n.branch.Rules {
				kind := ir.EdgeBranch
				if r.Else {
					kind = ir.EdgeDefault
				}
				targets(n, r.Targets, kind)
			}
		}
		targets(n, n.routes, ir.EdgeRoute)
		targets(n, n.dflt, ir.EdgeDefault)
		targets(n, n.onError, ir.EdgeError)
		targets(n, n.onReject, ir.EdgeReject)
		if n.loop != nil {
			targets(n, n.loop.exhausted, ir.EdgeExhausted)
			if to := s.byID[n.loop.backTo.Name]; to != nil {
				add(n, to, ir.EdgeLoop, n.loop.backTo)
			}
		}
	}
	for _, e := range s.edges {
		routesTo[[2]int{e.from, e.to}] = true
	}
	for _, n := range s.nodes {
		for _, a := range n.after {
			from := s.byID[a.Name]
			if from == nil {
				continue
			}
			if from == n {
				s.errorf(diag.SelfEdge, a.Range, "%s is after itself", n.id)
				continue
			}
			if from.branch != nil || len(from.routes) > 0 {
				if routesTo[[2]int{from.idx, n.idx}] {
					// The routing edge carries the token: the after adds
					// nothing. The optimiser says so (WF5003, routedAfters),
					// so that checking stays quiet about it.
					continue
				}
				if from.branch != nil {
					s.errorf(diag.AfterBranch, a.Range, "%s is after %s, but %s's branch never routes to %s", n.id, from.id, from.id, n.id).
						WithHint(fmt.Sprintf("add %s as a target of a rule of %s's branch, or depend on another node", n.id, from.id))
				} else {
					s.errorf(diag.AfterBranch, a.Range, "%s is after %s, but %s is not one of %s's routes", n.id, from.id, n.id, from.id).
						WithHint(fmt.Sprintf("add %s to %s's `routes` or `default`, or depend on another node", n.id, from.id))
				}
				continue
			}
			add(from, n, ir.EdgeAfter, a)
		}
	}
	n := len(s.nodes)
	s.outE = make([][]int, n)
	s.inE = make([][]int, n)
	for i, e := range s.edges {
		if !ir.Forward(e.kind) {
			continue
		}
		s.outE[e.from] = append(s.outE[e.from], i)
		s.inE[e.to] = append(s.inE[e.to], i)
	}
	for _, nd := range s.nodes {
		// The workflow's max_fanout, when set, is its limit (it may raise
		// the default up to the node limit); otherwise the configured one.
		limit := s.cfg.MaxFanout
		if s.settings.MaxFanout > 0 {
			limit = min(s.settings.MaxFanout, s.cfg.MaxNodes)
		}
		if len(s.outE[nd.idx]) > limit {
			s.errorf(diag.TooMany, nd.ident.Range, "%s has %d outgoing edges; the limit is %d", nd.id, len(s.outE[nd.idx]), limit)
		}
		// (A bad mode was reported, and so was an unknown `after` name,
		// whose fix may add the second edge.)
		if nd.decl != nil && nd.decl.Join != nil && nd.decl.Join.Name == nd.join && len(s.inE[nd.idx]) < 2 &&
			!slices.ContainsFunc(nd.after, func(a *ast.Ident) bool { return a != nil && s.byID[a.Name] == nil }) {
			s.errorf(diag.JoinSingle, nd.decl.Join.Range, "`join %s` has no effect: %s has %s", nd.join, nd.id, edgesWord(len(s.inE[nd.idx])))
		}
	}
	if !s.topoOrder() {
		return
	}
	s.ancestors()
	s.dominators()
	s.checkBackTo()
	s.checkLoopBodies()
	s.analyze()
}

func edgesWord(n int) string {
	if n == 1 {
		return "one incoming edge"
	}
	return "no incoming edges"
}

// topoOrder computes s.order (Kahn, ties by declaration order) and reports
// every cycle. It returns false if there was one.
func (s *state) topoOrder() bool {
	n := len(s.nodes)
	indeg := make([]int, n)
	for i := range s.nodes {
		indeg[i] = len(s.inE[i])
	}
	queue := make([]int, 0, n)
	for i := 0; i < n; i++ {
		if indeg[i] == 0 {
			queue = append(queue, i)
		}
	}
	s.order = make([]int, 0, n)
	// A FIFO over an initially sorted queue keeps the order deterministic.
	for len(queue) > 0 {
		i := queue[0]
		queue = queue[1:]
		s.order = append(s.order, i)
		for _, ei := range s.outE[i] {
			t := s.edges[ei].to
			indeg[t]--
			if indeg[t] == 0 {
				queue = append(queue, t)
			}
		}
	}
	if len(s.order) == n {
		return true
	}
	s.cyclic = true
	// Report one cycle per strongly connected leftover region.
	inCycle := make([]bool, n)
	for i := 0; i < n; i++ {
		if indeg[i] > 0 && !inCycle[i] {
			cyc := s.findCycle(i, indeg)
			if cyc == nil || inCycle[s.edges[cyc[0]].from] {
				continue
			}
			// Start the cycle at its earliest-declared node, for stable messages.
			first := 0
			for k, ei := range cyc {
				if s.edges[ei].from < s.edges[cyc[first]].from {
					first = k
				}
			}
			cyc = append(cyc[first:], cyc[:first]...)
			for _, ei := range cyc {
				inCycle[s.edges[ei].from] = true
			}
			s.reportCycle(cyc)
		}
	}
	// Nodes downstream of a cycle can never run.
	for i := 0; i < n; i++ {
		if indeg[i] > 0 && !inCycle[i] {
			s.errorf(diag.Unreachable, s.nodes[i].ident.Range, "%s can never run: it depends on a cycle", s.nodes[i].id)
		}
	}
	return false
}

// findCycle walks back from start along incoming edges of nodes still
// blocked until it meets a node twice; it returns the cycle's edges in
// forward order.
func (s *state) findCycle(start int, indeg []int) []int {
	pos := map[int]int{}
	var path []int // edges, walking backwards
	cur := start
	for step := 0; step <= len(s.nodes); step++ {
		if p, ok := pos[cur]; ok {
			cyc := path[p:]
			// reverse to forward order
			out := make([]int, len(cyc))
			for i := range cyc {
				out[i] = cyc[len(cyc)-1-i]
			}
			return out
		}
		pos[cur] = len(path)
		next := -1
		for _, ei := range s.inE[cur] {
			if indeg[s.edges[ei].from] > 0 {
				next = ei
				break
			}
		}
		if next < 0 {
			return nil
		}
		path = append(path, next)
		cur = s.edges[next].from
	}
	return nil
}

func (s *state) reportCycle(cyc []int) {
	names := make([]string, 0, len(cyc)+1)
	for _, ei := range cyc {
		names = append(names, s.nodes[s.edges[ei].from].id)
	}
	names = append(names, names[0])
	// Anchor the diagnostic at the edge written last in the source.
	anchor := cyc[0]
	for _, ei := range cyc {
		if s.edges[ei].ref.Start > s.edges[anchor].ref.Start {
			anchor = ei
		}
	}
	d := s.errorf(diag.Cycle, s.edges[anchor].ref.Range, "cycle: %s", strings.Join(names, " → ")).
		WithHint("only loops may repeat nodes: use `loop { while ... max N back_to " + names[0] + " }`")
	for _, ei := range cyc {
		if ei == anchor {
			continue
		}
		e := s.edges[ei]
		d.WithRelated(s.span(e.ref.Range), fmt.Sprintf("%s → %s", s.nodes[e.from].id, s.nodes[e.to].id))
	}
}

func (s *state) ancestors() {
	n := len(s.nodes)
	s.anc = make([]bits, n)
	for _, i := range s.order {
		// Only as long as the highest ancestor needs (bits.has treats the
		// rest as unset): in a DAG written top-down the sets are a triangle,
		// half of nodes² bits.
		words := 0
		for _, ei := range s.inE[i] {
			p := s.edges[ei].from
			words = max(words, p/64+1, len(s.anc[p]))
		}
		b := make(bits, words)
		for _, ei := range s.inE[i] {
			p := s.edges[ei].from
			b.set(p)
			b.or(s.anc[p])
		}
		s.anc[i] = b
	}
}

// dominators computes immediate dominators over the forward graph with a
// virtual root above the entries (Cooper, Harvey and Kennedy).
func (s *state) dominators() {
	n := len(s.nodes)
	const root = -1
	rank := make([]int, n)
	for r, i := range s.order {
		rank[i] = r
	}
	s.idom = make([]int, n)
	done := make([]bool, n)
	intersect := func(a, b int) int {
		for a != b {
			for a != root && (b == root || rank[a] > rank[b]) {
				a = s.idom[a]
			}
			for b != root && (a == root || rank[b] > rank[a]) {
				b = s.idom[b]
			}
		}
		return a
	}
	// In a DAG one pass in topological order is exact.
	for _, i := range s.order {
		if len(s.inE[i]) == 0 {
			s.idom[i] = root
			done[i] = true
			continue
		}
		d, first := root, true
		for _, ei := range s.inE[i] {
			p := s.edges[ei].from
			if !done[p] {
				continue
			}
			if first {
				d, first = p, false
			} else {
				d = intersect(d, p)
			}
		}
		s.idom[i] = d
		done[i] = true
	}
}

// dominates reports whether a dominates b (every path from an entry to b
// passes through a). A node dominates itself.
func (s *state) dominates(a, b int) bool {
	if s.idom == nil {
		return false
	}
	for x := b; x != -1; x = s.idom[x] {
		if x == a {
			return true
		}
	}
	return false
}

func (s *state) checkBackTo() {
	for _, n := range s.nodes {
		if n.loop == nil {
			continue
		}
		t := s.byID[n.loop.backTo.Name]
		if t == nil || t == n {
			continue
		}
		if !s.anc[n.idx].has(t.idx) {
			s.errorf(diag.BadBackTo, n.loop.backTo.Range, "back_to `%s` is not an ancestor of %s", t.id, n.id).
				WithHint("a loop can only go back to a node that runs before it")
			continue
		}
		if !s.dominates(t.idx, n.idx) {
			s.errorf(diag.BadBackTo, n.loop.backTo.Range, "back_to `%s` does not dominate %s: %s can run without passing through %s", t.id, n.id, n.id, t.id)
		}
	}
}

// loopBody returns the nodes on forward paths from n's back_to target to n.
func (s *state) loopBody(n *node) bits {
	b := newBits(len(s.nodes))
	t := s.byID[n.loop.backTo.Name]
	if t == nil {
		return b
	}
	b.set(n.idx)
	if t == n {
		return b
	}
	// The body's other nodes are n's ancestors that are t or descend from t.
	s.anc[n.idx].each(func(i int) {
		if i == t.idx || s.anc[i].has(t.idx) {
			b.set(i)
		}
	})
	return b
}

// checkLoopBodies: tokens may leave a loop body only through the loop node
// (after the last iteration), and loops nest properly.
func (s *state) checkLoopBodies() {
	type lp struct {
		n      *node
		body   bits
		lo, hi int // the body's first and last non-zero words
	}
	var loops []lp
	for _, n := range s.nodes {
		if n.loop == nil || s.byID[n.loop.backTo.Name] == nil {
			continue
		}
		body := s.loopBody(n)
		lo, hi := body.span()
		loops = append(loops, lp{n, body, lo, hi})
		body.each(func(i int) {
			x := s.nodes[i]
			if x == n {
				return
			}
			for _, ei := range s.outE[i] {
				e := s.edges[ei]
				if !body.has(e.to) {
					s.errorf(diag.LoopBody, e.ref.Range, "%s → %s leaves the loop of %s (back_to %s) from inside its body", x.id, s.nodes[e.to].id, n.id, n.loop.backTo.Name).
						WithHint(fmt.Sprintf("make %s depend on %s, the loop node, so it runs once after the last iteration", s.nodes[e.to].id, n.id))
				}
			}
		})
	}
	// Words outside a body's [lo, hi] are zero: the comparisons skip them
	// (most bodies are small; whole bit sets made this O(loops² × nodes)).
	subset := func(a, b lp) bool {
		for k := a.lo; k <= a.hi; k++ {
			if a.body[k]&^b.body[k] != 0 {
				return false
			}
		}
		return true
	}
	for i := range loops {
		for j := i + 1; j < len(loops); j++ {
			a, b := loops[i], loops[j]
			overlap := false
			for k := max(a.lo, b.lo); k <= min(a.hi, b.hi); k++ {
				if a.body[k]&b.body[k] != 0 {
					overlap = true
					break
				}
			}
			if overlap && !subset(a, b) && !subset(b, a) {
				s.errorf(diag.LoopBody, loops[j].n.loop.block.Key.Range, "the loop of %s overlaps the loop of %s without containing it", loops[j].n.id, loops[i].n.id)
			}
		}
	}
}

// skeleton is the graph part of the IR, enough for ir.Analyze.
func (s *state) skeleton() *ir.Workflow {
	w := &ir.Workflow{IRVersion: ir.Version, Name: s.name}
	if len(s.nodes) > 0 { // (nil, not empty, when there are none)
		w.Nodes = make([]ir.Node, 0, len(s.nodes))
	}
	if len(s.edges) > 0 {
		w.Edges = make([]ir.Edge, 0, len(s.edges))
	}
	for _, n := range s.nodes {
		in := ir.Node{ID: n.id, Type: n.kind, Join: n.join}
		if n.forEach != nil {
			in.ForEach = &ir.ForEach{} // (for ir.FirstJoinProblem: only its presence)
		}
		if n.when != nil {
			in.When = &ir.Expr{CEL: n.when.Text}
		}
		if n.branch != nil {
			// Rule targets and the else, for the coverage of joins after
			// the branch (ir.Analyze); conditions are not needed.
			in.Branch = &ir.Branch{}
			for _, r := range n.branch.Rules {
				var ts []string
				for _, t := range r.Targets {
					if t != nil {
						ts = append(ts, t.Name)
					}
				}
				if r.Else {
					in.Branch.Default = append(in.Branch.Default, ts...)
				} else {
					in.Branch.Rules = append(in.Branch.Rules, ir.Rule{Targets: ts})
				}
			}
		}
		if len(n.routes) > 0 {
			in.Agent = &ir.Agent{}
			if n.maxRoutes > 1 {
				in.Agent.MaxRoutes = n.maxRoutes
			}
			for _, r := range n.routes {
				in.Agent.Routes = append(in.Agent.Routes, r.Name)
			}
		}
		if n.kind == "human" {
			in.Human = &ir.Human{OnTimeout: n.onTimeout}
			for _, r := range n.onReject {
				in.Human.OnReject = append(in.Human.OnReject, r.Name)
			}
		}
		for _, r := range n.onError {
			in.OnError = append(in.OnError, r.Name)
		}
		in.ErrorRoutes = n.irErrorRoutes()
		if n.loop != nil {
			in.Loop = &ir.Loop{BackTo: n.loop.backTo.Name}
			for _, r := range n.loop.exhausted {
				in.Loop.Exhausted = append(in.Loop.Exhausted, r.Name)
			}
		}
		w.Nodes = append(w.Nodes, in)
	}
	for _, e := range s.edges {
		w.Edges = append(w.Edges, ir.Edge{From: s.nodes[e.from].id, To: s.nodes[e.to].id, Kind: e.kind})
	}
	return w
}

// analyze runs ir.Analyze on the skeleton for may-skip and terminals.
func (s *state) analyze() {
	w := s.skeleton()
	if err := ir.Analyze(w); err != nil {
		return // cycles were reported with positions above
	}
	s.skel = w
	s.maySkip = make([]bool, len(s.nodes))
	for i := range w.Nodes {
		s.maySkip[i] = w.Nodes[i].MaySkip
	}
	for _, e := range w.Edges {
		if ni := s.info.Nodes[e.To]; ni != nil && ir.Forward(e.Kind) && !slices.Contains(ni.Sources, e.From) {
			ni.Sources = append(ni.Sources, e.From)
		}
	}
	for _, n := range s.nodes {
		if ni := s.info.Nodes[n.id]; ni != nil {
			ni.Join, ni.Loop, ni.OnError = n.join, n.loop != nil, len(n.onError) > 0
		}
	}
	s.info.Graph = true
	if len(s.nodes) == 0 {
		if !s.badNodeIDs { // else its nodes' ids were reported (WF1008)
			s.errorf(diag.NoTerminal, s.wf.Name.Range, "workflow %s has no nodes", s.name)
		}
		return
	}
	if len(w.Terminals) == 0 {
		s.errorf(diag.NoTerminal, s.wf.Name.Range, "workflow %s has no terminal node", s.name)
	}
}

package ir

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Analyze recomputes every derived field of w in place from w.Nodes and
// w.Edges: Entries, Terminals, Order, and each node's Dependencies,
// Dependents, JoinInfo, MaySkip, Entry, Terminal and LoopBody.
//
// It fails if node ids repeat, if an edge names an unknown node, or if the
// forward edges form a cycle; then every derived field is cleared, so stale
// values never pass for computed ones. Analyze checks nothing else: that is
// Validate's job. It never panics.
//
// It analyzes the embedded children too (w.Children, one level: children
// of children are Validate's to refuse), and reports the first that fails.
func Analyze(w *Workflow) error {
	if w == nil {
		return errors.New("ir: nil workflow")
	}
	err := analyze(w)
	for i := range w.Children {
		if cerr := analyze(&w.Children[i].Workflow); cerr != nil && err == nil {
			err = fmt.Errorf("ir: /children/%d/workflow: %s", i, strings.TrimPrefix(cerr.Error(), "ir: "))
		}
	}
	return err
}

func analyze(w *Workflow) error {
	g := buildGraph(w)
	if err := g.err(); err != nil {
		clearDerived(w)
		return err
	}

	n := len(w.Nodes)
	maySkip := make([]bool, n)
	covered := make([]bool, n) // see JoinInfo.Covered
	for _, i := range g.order {
		all, some := len(g.in[i]) > 0, false
		for _, ei := range g.in[i] {
			if g.conditional(ei, maySkip) {
				some = true
			} else {
				all = false
			}
		}
		if len(g.in[i]) > 1 && cmp.Or(w.Nodes[i].Join, JoinAll) == JoinAll {
			// join all runs only when every source delivered a real token:
			// one conditional edge may skip it, unless its source's edges
			// to the node cover every outcome of the source.
			sure := !some || g.sourcesSure(i, maySkip)
			covered[i] = all && sure
			maySkip[i] = w.Nodes[i].When != nil || !sure
			continue
		}
		// All conditional, yet one may always be real: the sources cover
		// every outcome of a branch.
		covered[i] = all && len(g.in[i]) > 1 && g.covered(i, maySkip)
		maySkip[i] = w.Nodes[i].When != nil || all && !covered[i]
	}

	w.Order = g.ids(g.order)
	w.Entries, w.Terminals = []string{}, []string{}
	// Every node's Dependencies and Dependents are windows of one array
	// (each capped, so appending to one cannot overwrite the next): two
	// small slices per node were a tenth of a compilation's allocations.
	slab := make([]string, 0, 2*len(g.edges))
	window := func(ns []int) []string {
		start := len(slab)
		for _, x := range ns {
			slab = append(slab, g.w.Nodes[x].ID)
		}
		return slab[start:len(slab):len(slab)]
	}
	for _, i := range g.order {
		node := &w.Nodes[i]
		node.Dependencies = window(g.neighbours(g.in[i], true))
		node.Dependents = window(g.neighbours(g.out[i], false))
		node.MaySkip = maySkip[i]
		node.Entry = len(g.in[i]) == 0
		node.Terminal = endsPath(node, g.outKinds(i))
		node.JoinInfo = nil
		if len(g.in[i]) > 1 {
			node.JoinInfo = g.joinInfo(i, maySkip, covered[i])
		}
		node.LoopBody = nil
		if node.Loop != nil {
			node.LoopBody = g.ids(g.loopBody(i))
		}
		if node.Entry {
			w.Entries = append(w.Entries, node.ID)
		}
		if node.Terminal {
			w.Terminals = append(w.Terminals, node.ID)
		}
	}
	return nil
}

// outKinds returns the kinds of node i's outgoing forward edges.
func (g *graph) outKinds(i int) outKindSet {
	var k outKindSet
	for _, ei := range g.out[i] {
		switch g.edges[ei].kind {
		case EdgeAfter:
			k.after = true
		case EdgeDefault:
			k.dflt = true
		case EdgeRoute:
			k.route = true
		}
		k.any = true
	}
	return k
}

// outKindSet records which kinds of forward edge leave a node, as far as
// endsPath asks.
type outKindSet struct{ any, after, dflt, route bool }

// endsPath reports whether some outcome of a node sends no real token on
// any forward edge, so the run may end with it: it has no outgoing forward
// edge; or its success path is empty — no `after` dependents (only error,
// reject or exhausted paths), or a branch without a default (no rule may
// match). An agent with routes always picks one of them or its default.
func endsPath(n *Node, kinds outKindSet) bool {
	switch {
	case !kinds.any:
		return true
	case n.Branch != nil:
		return !kinds.dflt
	case n.Agent != nil && (kinds.route || kinds.dflt):
		return false
	}
	return !kinds.after
}

// Ancestors returns the ids from which a path of forward edges leads to id.
// It reads w.Edges only, so it works on a workflow that was never analyzed;
// id itself is included only if it lies on a forward cycle.
func Ancestors(w *Workflow, id string) map[string]bool {
	anc := map[string]bool{}
	if w == nil {
		return anc
	}
	preds := map[string][]string{}
	for _, e := range w.Edges {
		if Forward(e.Kind) {
			preds[e.To] = append(preds[e.To], e.From)
		}
	}
	stack := []string{id}
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, p := range preds[x] {
			if !anc[p] {
				anc[p] = true
				stack = append(stack, p)
			}
		}
	}
	return anc
}

func clearDerived(w *Workflow) {
	w.Entries, w.Terminals, w.Order = nil, nil, nil
	for i := range w.Nodes {
		n := &w.Nodes[i]
		n.Dependencies, n.Dependents, n.JoinInfo, n.LoopBody = nil, nil, nil, nil
		n.MaySkip, n.Entry, n.Terminal = false, false, false
	}
}

// A graph is the resolved form of a workflow's edges that Analyze and
// Validate share. It never modifies the workflow.
type graph struct {
	w     *Workflow
	index map[string]int
	edges []gedge // edges with known endpoints, exact duplicates dropped
	in    [][]int // per node: indices into edges of incoming forward edges
	out   [][]int // per node: indices into edges of outgoing forward edges
	order []int   // topological order of the nodes that are not on or behind a cycle
	pos   []int   // pos[node] = position in order, -1 if not ordered
	cycle []int   // nodes on one forward cycle, in edge direction; nil if acyclic
	errs  []string

	mark  []int // scratch for neighbours
	stamp int
	nb    []int     // neighbours' result, reused
	seen  [2][]bool // scratch for reach, all false between calls
}

// A gedge is an edge resolved to node indices; src is its index in w.Edges.
type gedge struct {
	from, to int
	kind     string
	src      int
}

func buildGraph(w *Workflow) *graph {
	n := len(w.Nodes)
	g := &graph{
		w:     w,
		index: make(map[string]int, n),
		in:    make([][]int, n),
		out:   make([][]int, n),
		pos:   make([]int, n),
		edges: make([]gedge, 0, len(w.Edges)),
	}
	for i := range w.Nodes {
		id := w.Nodes[i].ID
		if j, dup := g.index[id]; dup {
			g.errs = append(g.errs, fmt.Sprintf("nodes %d and %d have the same id %q", j, i, id))
			continue
		}
		g.index[id] = i
	}
	// Exact duplicates are found through the first edge between the same
	// two nodes (an integer key, cheaper to hash than one with the kind) and
	// a chain of the later ones with other kinds.
	first := make(map[uint64]int32, len(w.Edges))
	next := make([]int32, 0, len(w.Edges)) // next[k]: next edge after g.edges[k] with the same ends, or -1
	indeg := make([]int, n)
	outdeg := make([]int, n)
	for k, e := range w.Edges {
		from, okFrom := g.index[e.From]
		to, okTo := g.index[e.To]
		if !okFrom || !okTo {
			bad := e.From
			if okFrom {
				bad = e.To
			}
			g.errs = append(g.errs, fmt.Sprintf("edge %d (%s -> %s, %s) names unknown node %q", k, e.From, e.To, e.Kind, bad))
			continue
		}
		pair := uint64(from)<<32 | uint64(to)
		ei := int32(len(g.edges))
		if h, ok := first[pair]; ok {
			dup, last := false, h
			for x := h; x >= 0; x = next[x] {
				if g.edges[x].kind == e.Kind {
					dup = true
					break
				}
				last = x
			}
			if dup {
				continue
			}
			next[last] = ei
		} else {
			first[pair] = ei
		}
		next = append(next, -1)
		g.edges = append(g.edges, gedge{from, to, e.Kind, k})
		if Forward(e.Kind) {
			outdeg[from]++
			indeg[to]++
		}
	}
	// The in and out lists share two arrays; each list is capped so that
	// it cannot grow into its neighbour's.
	inAll := make([]int, 0, len(g.edges))
	outAll := make([]int, 0, len(g.edges))
	for i := range n {
		g.in[i] = inAll[len(inAll) : len(inAll) : len(inAll)+indeg[i]]
		inAll = inAll[:len(inAll)+indeg[i]]
		g.out[i] = outAll[len(outAll) : len(outAll) : len(outAll)+outdeg[i]]
		outAll = outAll[:len(outAll)+outdeg[i]]
	}
	for ei, e := range g.edges {
		if Forward(e.kind) {
			g.out[e.from] = append(g.out[e.from], ei)
			g.in[e.to] = append(g.in[e.to], ei)
		}
	}

	// Kahn's algorithm; the heap hands out the ready node with the smallest
	// index, which makes the order deterministic and close to source order.
	for i := range n {
		g.pos[i] = -1
	}
	g.order = make([]int, 0, n)
	var ready minHeap
	for i := range n {
		if indeg[i] == 0 {
			ready.push(i)
		}
	}
	for len(ready) > 0 {
		i := ready.pop()
		g.pos[i] = len(g.order)
		g.order = append(g.order, i)
		for _, ei := range g.out[i] {
			t := g.edges[ei].to
			if indeg[t]--; indeg[t] == 0 {
				ready.push(t)
			}
		}
	}
	if len(g.order) < n {
		g.cycle = findCycle(g, indeg)
	}
	return g
}

// findCycle returns the nodes of one forward cycle among the nodes Kahn's
// algorithm could not order. Each such node still has a predecessor that was
// not ordered either, so walking predecessors must eventually repeat a node.
func findCycle(g *graph, indeg []int) []int {
	start := -1
	for i, d := range indeg {
		if d > 0 {
			start = i
			break
		}
	}
	if start < 0 {
		return nil
	}
	step := map[int]int{}
	var path []int
	for cur := start; ; {
		if s, ok := step[cur]; ok {
			cyc := slices.Clone(path[s:])
			slices.Reverse(cyc) // the walk went against the edges
			m := slices.Index(cyc, slices.Min(cyc))
			return append(cyc[m:], cyc[:m]...)
		}
		step[cur] = len(path)
		path = append(path, cur)
		pred := -1
		for _, ei := range g.in[cur] {
			if f := g.edges[ei].from; indeg[f] > 0 && (pred < 0 || f < pred) {
				pred = f
			}
		}
		if pred < 0 {
			return nil // cannot happen; stay safe rather than loop
		}
		cur = pred
	}
}

// err summarizes why the graph cannot be analyzed, or returns nil.
func (g *graph) err() error {
	if len(g.errs) > 0 {
		msg := g.errs[0]
		if len(g.errs) > 1 {
			msg += fmt.Sprintf(" (and %d more)", len(g.errs)-1)
		}
		return errors.New("ir: " + msg)
	}
	if g.cycle != nil {
		return errors.New("ir: " + g.cycleMessage())
	}
	return nil
}

func (g *graph) cycleMessage() string {
	names := make([]string, 0, len(g.cycle)+1)
	for _, i := range g.cycle {
		names = append(names, g.w.Nodes[i].ID)
	}
	names = append(names, names[0])
	return "forward edges form a cycle: " + strings.Join(names, " -> ")
}

// cycleEdge returns the index in w.Edges of the first edge on the cycle.
func (g *graph) cycleEdge() int {
	from, to := g.cycle[0], g.cycle[1%len(g.cycle)]
	for _, ei := range g.out[from] {
		if g.edges[ei].to == to {
			return g.edges[ei].src
		}
	}
	return -1
}

func (g *graph) ids(nodes []int) []string {
	ids := make([]string, len(nodes))
	for k, i := range nodes {
		ids[k] = g.w.Nodes[i].ID
	}
	return ids
}

// neighbours returns the distinct sources (or targets) of edges, in Order,
// in a scratch slice that the next call reuses.
func (g *graph) neighbours(edges []int, sources bool) []int {
	ns := g.nb[:0]
	// mark[x] == stamp: x is in ns already (a slice, not a map per call).
	if g.mark == nil {
		g.mark = make([]int, len(g.w.Nodes))
	}
	g.stamp++
	for _, ei := range edges {
		x := g.edges[ei].to
		if sources {
			x = g.edges[ei].from
		}
		if g.mark[x] != g.stamp {
			g.mark[x] = g.stamp
			ns = append(ns, x)
		}
	}
	slices.SortFunc(ns, func(a, b int) int { return cmp.Compare(g.pos[a], g.pos[b]) })
	g.nb = ns
	return ns
}

// conditional reports whether edge ei may deliver a skip token: every kind
// but after is taken only on some runs, a source that may be skipped passes
// its skip on, and a source with an alternative path sends its plain
// dependents a skip when it takes that path.
func (g *graph) conditional(ei int, maySkip []bool) bool {
	e := g.edges[ei]
	return e.kind != EdgeAfter || maySkip[e.from] || hasAlternative(&g.w.Nodes[e.from])
}

// hasAlternative reports whether n can route its token somewhere other than
// its after-dependents. An agent without routes or default has no choice to
// make, so its after-dependents always get a real token.
func hasAlternative(n *Node) bool {
	switch {
	case n.Branch != nil, len(n.OnError) > 0:
		return true
	case n.Agent != nil && (len(n.Agent.Routes) > 0 || len(n.Agent.Default) > 0):
		return true
	case n.Human != nil && (len(n.Human.OnReject) > 0 || n.Human.OnTimeout == TimeoutReject):
		return true
	case n.Loop != nil && len(n.Loop.Exhausted) > 0:
		return true
	}
	return false
}

// covered reports whether node i's incoming edges, all conditional, still
// always bring it a real token when some node before it runs. That node is
// either one of i's sources that sends it a real token whatever its outcome
// (sendsAlways), or a branch node b whose every outcome some edge of i
// carries on: whichever rule matches, or the else, a real token reaches i
// straight from b, or through a chain of plain tasks from a target of that
// outcome (see origin). Then i gets a real token whenever that node runs, so
// it must be a node that cannot be skipped and, for a branch, has no other
// way out (no on_error, no loop). The candidates for b are the sources of
// i's edges and of the first edges of their chains.
func (g *graph) covered(i int, maySkip []bool) bool {
	origins := make([]int, len(g.in[i]))
	for k, ei := range g.in[i] {
		origins[k] = g.origin(ei)
	}
	for k, ei := range g.in[i] {
		f := g.edges[ei].from
		if !maySkip[f] && g.sendsAlways(f, i) || g.coversBranch(i, f, origins, maySkip) {
			return true
		}
		if b := g.edges[origins[k]].from; b != f && g.coversBranch(i, b, origins, maySkip) {
			return true
		}
	}
	return false
}

// origin follows edge ei back through plain tasks — a task whose only
// incoming forward edge is the next one up, with no `when` and no
// alternative path, runs whenever that edge delivers a real token and
// passes it on along its after edges — and returns the first edge that
// does not start at one (ei itself if its source is not plain).
func (g *graph) origin(ei int) int {
	for range len(g.w.Nodes) { // a chain is acyclic: the bound only guards a bad graph
		e := g.edges[ei]
		t := &g.w.Nodes[e.from]
		if e.kind != EdgeAfter || t.When != nil || hasAlternative(t) || len(g.in[e.from]) != 1 {
			break
		}
		ei = g.in[e.from][0]
	}
	return ei
}

// coversBranch reports whether every outcome of branch node b reaches node
// i with a real token; origins[k] is origin(g.in[i][k]).
func (g *graph) coversBranch(i, b int, origins []int, maySkip []bool) bool {
	bn := &g.w.Nodes[b]
	if bn.Branch == nil || len(bn.Branch.Default) == 0 || maySkip[b] || len(bn.OnError) > 0 ||
		bn.Loop != nil || bn.Agent != nil || bn.Human != nil {
		return false
	}
	// real: some incoming edge of i is real when b sends real tokens on its
	// edges of this kind to these targets: it is one of them, or a chain of
	// plain tasks from one of them ends in it.
	real := func(kind string, targets []string) bool {
		for _, oi := range origins {
			if o := g.edges[oi]; o.from == b && o.kind == kind && slices.Contains(targets, g.w.Nodes[o.to].ID) {
				return true
			}
		}
		return false
	}
	for _, r := range bn.Branch.Rules {
		if !real(EdgeBranch, r.Targets) {
			return false
		}
	}
	return real(EdgeDefault, bn.Branch.Default)
}

// sourcesSure reports whether every source of a conditional incoming edge
// of join all i sends i a real token whenever it runs, and cannot be
// skipped: a join all then always gets a real token from every source.
func (g *graph) sourcesSure(i int, maySkip []bool) bool {
	for _, ei := range g.in[i] {
		if f := g.edges[ei].from; g.conditional(ei, maySkip) && (maySkip[f] || !g.sendsAlways(f, i)) {
			return false
		}
	}
	return true
}

// sendsAlways reports whether node f sends node i a real token on one of
// its edges whatever its outcome (or fails the run): on success an after
// edge, and on each alternative path it has — every error route of its
// on_error, the rejection of a human — an edge of that kind to i, such as
// `task n after x` with `on_error => n` on x. A node that routes (branch,
// agent routes) or loops does not count; coversBranch handles branches.
func (g *graph) sendsAlways(f, i int) bool {
	fn := &g.w.Nodes[f]
	if fn.Branch != nil || fn.Loop != nil || fn.Agent != nil && (len(fn.Agent.Routes) > 0 || len(fn.Agent.Default) > 0) {
		return false
	}
	id := g.w.Nodes[i].ID
	edge := func(kind string) bool {
		for _, ei := range g.in[i] {
			if e := g.edges[ei]; e.from == f && e.kind == kind {
				return true
			}
		}
		return false
	}
	if !edge(EdgeAfter) {
		return false
	}
	if len(fn.OnError) > 0 {
		if !edge(EdgeError) || len(fn.ErrorRoutes) == 0 && !slices.Contains(fn.OnError, id) {
			return false
		}
		for _, r := range fn.ErrorRoutes { // a failure no route takes fails the run
			if !slices.Contains(r.Targets, id) {
				return false
			}
		}
	}
	if h := fn.Human; h != nil && (len(h.OnReject) > 0 || h.OnTimeout == TimeoutReject) {
		if !edge(EdgeReject) || !slices.Contains(h.OnReject, id) {
			return false
		}
	}
	return true
}

func (g *graph) joinInfo(i int, maySkip []bool, covered bool) *JoinInfo {
	node := &g.w.Nodes[i]
	in := slices.Clone(g.in[i])
	slices.SortFunc(in, func(a, b int) int {
		ea, eb := g.edges[a], g.edges[b]
		return cmp.Or(cmp.Compare(g.pos[ea.from], g.pos[eb.from]), strings.Compare(ea.kind, eb.kind))
	})
	ji := &JoinInfo{Mode: cmp.Or(node.Join, JoinAll), Expect: len(in), Incoming: make([]EdgeRef, len(in))}
	for k, ei := range in {
		c := g.conditional(ei, maySkip)
		ji.Incoming[k] = EdgeRef{From: g.w.Nodes[g.edges[ei].from].ID, Kind: g.edges[ei].kind, Conditional: c}
		if c {
			ji.Conditional++
		}
	}
	ji.Covered = covered
	if ji.Mode == JoinFirst {
		ji.Cancels = g.ids(g.cancelSet(i))
	}
	return ji
}

// cancelSet returns the nodes whose every outgoing forward edge leads to
// join j or to another such node — the nodes that only feed j — in order.
// Once j fires, nothing they do matters to anyone else, so a join first
// cancels their pending work (JoinInfo.Cancels). A goal node is needed for
// itself and never belongs. Walking the order backwards sees each node's
// successors first.
func (g *graph) cancelSet(j int) []int {
	goal := map[string]bool{}
	for _, id := range g.w.Goals {
		goal[id] = true
	}
	in := make([]bool, len(g.w.Nodes))
	var out []int
	for k := len(g.order) - 1; k >= 0; k-- {
		a := g.order[k]
		if a == j || g.pos[a] >= g.pos[j] || len(g.out[a]) == 0 || goal[g.w.Nodes[a].ID] {
			continue
		}
		only := true
		for _, ei := range g.out[a] {
			if t := g.edges[ei].to; t != j && !in[t] {
				only = false
				break
			}
		}
		if only {
			in[a] = true
			out = append(out, a)
		}
	}
	slices.Reverse(out)
	return out
}

// loopBody returns the nodes on forward paths from loop node i's back_to
// target to i, inclusive, in Order; nil if back_to is not i or an ancestor.
func (g *graph) loopBody(i int) []int {
	b, ok := g.index[g.w.Nodes[i].Loop.BackTo]
	if !ok {
		return nil
	}
	if b == i {
		return []int{i}
	}
	lo, hi := g.window(b, i)
	desc, dt := g.reach(0, b, false, lo, hi)
	defer g.unreach(0, dt)
	if !desc[i] {
		return nil
	}
	anc, at := g.reach(1, i, true, lo, hi)
	defer g.unreach(1, at)
	body := []int{b, i}
	for _, x := range dt {
		if anc[x] && x != b && x != i && g.pos[x] >= 0 {
			body = append(body, x)
		}
	}
	slices.SortFunc(body, func(a, b int) int { return cmp.Compare(g.pos[a], g.pos[b]) })
	return body
}

// ancestor reports whether a is a forward ancestor of b.
func (g *graph) ancestor(a, b int) bool {
	lo, hi := g.window(a, b)
	if lo > hi {
		return false
	}
	anc, at := g.reach(0, b, true, lo, hi)
	defer g.unreach(0, at)
	return anc[a]
}

// window returns the range of Order positions that a node on a path from a
// to b can have. Positions grow along every forward path among ordered
// nodes, and an ordered node has only ordered ancestors, so walks between a
// and b can skip the ordered nodes outside the window; that keeps loop
// analysis local even in a large graph. Unordered nodes (on or behind a
// cycle) are never skipped.
func (g *graph) window(a, b int) (lo, hi int) {
	lo, hi = 0, len(g.w.Nodes)
	if g.pos[a] >= 0 {
		lo = g.pos[a]
	}
	if g.pos[b] >= 0 {
		hi = g.pos[b]
	}
	return lo, hi
}

// reach marks the nodes reachable from start over forward edges (against
// them if backward), not counting start unless it lies on a cycle, and
// skipping ordered nodes whose position is outside [lo, hi]. It marks them
// in scratch slot 0 or 1, which the caller clears with unreach when done
// (a loop's walk stays in its window: allocating and clearing a slice of
// every node per loop would cost O(loops × nodes)). The marked nodes are
// returned too, in the order found.
func (g *graph) reach(slot, start int, backward bool, lo, hi int) (seen []bool, marked []int) {
	if g.seen[slot] == nil {
		g.seen[slot] = make([]bool, len(g.w.Nodes))
	}
	seen = g.seen[slot]
	stack := []int{start}
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		adj := g.out[x]
		if backward {
			adj = g.in[x]
		}
		for _, ei := range adj {
			y := g.edges[ei].to
			if backward {
				y = g.edges[ei].from
			}
			if p := g.pos[y]; seen[y] || p >= 0 && (p < lo || p > hi) {
				continue
			}
			seen[y] = true
			marked = append(marked, y)
			stack = append(stack, y)
		}
	}
	return seen, marked
}

// unreach clears the marks reach left in a scratch slot.
func (g *graph) unreach(slot int, marked []int) {
	for _, x := range marked {
		g.seen[slot][x] = false
	}
}

// A minHeap of node indexes; typed, so pushing does not box each int as
// container/heap would.
type minHeap []int

func (h *minHeap) push(x int) {
	*h = append(*h, x)
	a := *h
	for i := len(a) - 1; i > 0; {
		p := (i - 1) / 2
		if a[p] <= a[i] {
			break
		}
		a[p], a[i] = a[i], a[p]
		i = p
	}
}

func (h *minHeap) pop() int {
	a := *h
	x := a[0]
	last := len(a) - 1
	a[0] = a[last]
	a = a[:last]
	for i := 0; ; {
		l, m := 2*i+1, i
		if l < len(a) && a[l] < a[m] {
			m = l
		}
		if r := l + 1; r < len(a) && a[r] < a[m] {
			m = r
		}
		if m == i {
			break
		}
		a[i], a[m] = a[m], a[i]
		i = m
	}
	*h = a
	return x
}

// FirstJoinProblem says why the runtime cannot run node n of the analyzed
// workflow w as a join first, or returns "": it does not cancel work
// inside loops (the join in a loop body, or a loop node or a loop body
// node among those it cancels) nor a for_each node's items (a for_each
// node among them). The compiler reports it (WF4007) and Validate refuses
// it.
func FirstJoinProblem(w *Workflow, n *Node) string {
	if n == nil || n.Join != JoinFirst || n.JoinInfo == nil {
		return ""
	}
	body := map[string]string{}
	for i := range w.Nodes {
		for _, b := range w.Nodes[i].LoopBody {
			if _, ok := body[b]; !ok {
				body[b] = w.Nodes[i].ID
			}
		}
	}
	if l, ok := body[n.ID]; ok {
		return fmt.Sprintf("%s is in the body of loop %s: a join first cannot run inside a loop body", n.ID, l)
	}
	for _, c := range n.JoinInfo.Cancels {
		cn := w.Node(c)
		switch {
		case cn == nil:
			return fmt.Sprintf("it would cancel %s, which is not a node", c)
		case cn.Loop != nil:
			return fmt.Sprintf("it would cancel %s, a loop: a join first cannot cancel a loop", c)
		case body[c] != "":
			return fmt.Sprintf("it would cancel %s, in the body of loop %s: a join first cannot cancel a loop", c, body[c])
		case cn.ForEach != nil:
			return fmt.Sprintf("it would cancel %s, a for_each node: a join first cannot cancel a for_each node's items", c)
		}
	}
	return ""
}

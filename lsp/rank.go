package lsp

import (
	"fmt"

	"github.com/wfc-lang/wfc/compiler"
)

// Which node ids completion offers, and in what order. They follow the
// compiler's rules (docs/language.md §7.5): an expression of node n may
// read only n's forward ancestors (else WF4003), and an edge must not
// close a cycle (WF2003): `after x` needs x not to descend from n, a target
// t of n (`=>`, routes, on_error, …) needs t not to be an ancestor of n,
// and back_to names an ancestor. The graph is the last compilation's
// (compiler.Info: NodeInfo.Sources), with n's own `after` list as typed
// now; when that compilation found a cycle (Info.Graph unset), every node
// is offered, as the compiler then checks no reads either.

// nodeGraph is the forward graph of the last compilation, indexed once per
// completion request.
type nodeGraph struct {
	pos      map[string]int      // source order
	uses     map[string]int      // references to the node in the file
	children map[string][]string // forward edges, from source to node
}

func (c *cursor) nodeGraph() *nodeGraph {
	if c.g != nil {
		return c.g
	}
	g := &nodeGraph{pos: map[string]int{}, uses: map[string]int{}}
	for i, id := range c.nodeIDs() {
		g.pos[id] = i
	}
	for _, r := range c.info.Refs {
		if r.Kind == compiler.RefNode {
			g.uses[r.Name]++
		}
	}
	c.g = g
	return g
}

// childrenOf returns the forward edges by source (built on first use:
// only `after` needs them).
func (g *nodeGraph) childrenOf(info *compiler.Info) map[string][]string {
	if g.children == nil {
		g.children = map[string][]string{}
		for id, n := range info.Nodes {
			for _, s := range n.Sources {
				g.children[s] = append(g.children[s], id)
			}
		}
	}
	return g.children
}

// selfSources returns the nodes with a forward edge to self: its `after`
// list as written now, and the nodes that route to it in the last
// compilation (its sources there that its `after` list then did not name).
func (c *cursor) selfSources(self string) []string {
	var out []string
	seen := map[string]bool{}
	add := func(id string) {
		if id != "" && id != self && !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	if c.node != nil && c.node.Name != nil && c.node.Name.Name == self {
		for _, a := range c.node.After {
			if a != nil {
				add(a.Name)
			}
		}
	} else {
		for _, f := range c.frames {
			if f.head == "node" && f.nodeID == self {
				for _, a := range f.after {
					add(a)
				}
			}
		}
		if c.header {
			for _, a := range afterNames(c.toks) {
				add(a)
			}
		}
	}
	if n := c.info.Nodes[self]; n != nil {
		old := map[string]bool{}
		if n.Decl != nil {
			for _, a := range n.Decl.After {
				if a != nil {
					old[a.Name] = true
				}
			}
		}
		for _, s := range n.Sources {
			if !old[s] {
				add(s)
			}
		}
	}
	return out
}

// afterNames reads the `after a, b` list of node header tokens.
func afterNames(toks []ltok) []string {
	var out []string
	for i, t := range toks {
		if t.kind != lWord || t.text != "after" {
			continue
		}
		for j := i + 1; j < len(toks); j++ {
			switch {
			case toks[j].kind == lWord && toks[j].text != "join":
				out = append(out, toks[j].text)
			case toks[j].text == ",":
			default:
				return out
			}
		}
		return out
	}
	return out
}

// ancestors returns self's forward ancestors with their distance (1 for a
// direct source), breadth first.
func (c *cursor) ancestors(self string) map[string]int {
	dist := map[string]int{}
	queue := c.selfSources(self)
	for _, s := range queue {
		dist[s] = 1
	}
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		if n := c.info.Nodes[id]; n != nil {
			for _, s := range n.Sources {
				if _, ok := dist[s]; !ok && s != self {
					dist[s] = dist[id] + 1
					queue = append(queue, s)
				}
			}
		}
	}
	return dist
}

// descendants returns the nodes a forward path from self reaches.
func (c *cursor) descendants(self string) map[string]bool {
	children := c.nodeGraph().childrenOf(c.info)
	out := map[string]bool{}
	queue := []string{self}
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		for _, ch := range children[id] {
			if !out[ch] {
				out[ch] = true
				queue = append(queue, ch)
			}
		}
	}
	return out
}

// rankKey orders candidates: by group, then by a distance, then the more
// used first. The label follows it in SortText.
func (c *cursor) rankKey(group string, dist int, id string) string {
	u := c.nodeGraph().uses[id]
	return fmt.Sprintf("%s%04d%06d", group, min(dist, 9999), max(0, 999999-u))
}

// completeReadable offers the nodes an expression at the cursor may read:
// in a node, its ancestors, nearest first; in the workflow's output and
// finally, every node (guarded reads), the most used first.
func (c *cursor) completeReadable(group string) {
	_, self := c.nodeScope()
	if self == "" || !c.info.Graph {
		for _, id := range c.nodeIDs() {
			if id != self {
				c.addNode(id, c.rankKey(group, 0, id))
			}
		}
		return
	}
	anc := c.ancestors(self)
	for _, id := range c.nodeIDs() {
		if d, ok := anc[id]; ok {
			c.addNode(id, c.rankKey(group, d, id))
		}
	}
}

// completeNodeIDs offers node ids where one is named: key is "after",
// "back_to", or "" for a forward target (=>, routes, on_error, …). Nodes in
// skip are already listed.
func (c *cursor) completeNodeIDs(skip map[string]bool, key string) {
	c.allowed = c.trigger != "\""
	_, self := c.nodeScope()
	ids := c.nodeIDs()
	g := c.nodeGraph()
	here, known := g.pos[self]
	if !known {
		here = len(ids) // a new node: after the others
	}
	// distance in source order: above the node first for after and
	// back_to, below it first for targets.
	order := func(id string, below bool) (string, int) {
		p := g.pos[id]
		if below == (p > here) {
			return "0", abs(p - here)
		}
		return "1", abs(p - here)
	}
	graph := c.info.Graph && self != ""
	switch key {
	case "after":
		var desc map[string]bool
		if graph && known {
			desc = c.descendants(self)
		}
		for _, id := range ids {
			if id == self || skip[id] || desc[id] {
				continue
			}
			grp, d := order(id, false)
			c.addNode(id, c.rankKey("0"+grp, d, id))
		}
	case "back_to":
		var anc map[string]int
		if graph {
			anc = c.ancestors(self)
		}
		for _, id := range ids {
			d, ok := anc[id]
			if graph && !ok || id == self || skip[id] {
				continue
			}
			c.addNode(id, c.rankKey("0", d, id))
		}
	default:
		var anc map[string]int
		if graph {
			anc = c.ancestors(self)
		}
		for _, id := range ids {
			if _, up := anc[id]; up || id == self || skip[id] {
				continue
			}
			grp, d := order(id, true)
			c.addNode(id, c.rankKey("0"+grp, d, id))
		}
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

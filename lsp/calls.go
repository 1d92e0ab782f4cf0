package lsp

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"

	protocol "github.com/tliron/glsp/protocol_3_16"

	"github.com/wfc-lang/wfc/compiler"
	"github.com/wfc-lang/wfc/lang"
	"github.com/wfc-lang/wfc/lang/ast"
	"github.com/wfc-lang/wfc/lang/source"
)

// Call hierarchy, mapped onto the workflow graph: a node "calls" the nodes
// that run after it. Incoming calls of a node are its sources (the nodes
// it is `after`, and those that route to it: branch rules, routes,
// default, on_error, on_reject, exhausted, a loop's back_to), outgoing
// calls its successors. A flow node calls its child workflow (in another
// file), and a workflow calls its entry nodes (those without a source), so
// the tree can be followed from one file into the next; incoming calls of
// a workflow are the flow nodes of the open documents that run it.
//
// The edges are read from the syntax tree, not from the compilation, so the
// hierarchy works on a file that does not compile yet, and every edge-making
// item (a Goto of any key, a branch rule, back_to) is picked up without a
// list of keys to keep in step with the language. Each call's fromRanges
// are the names that make the edge: the target in the source's `routes` or
// branch, or the source in the target's `after` list. The item's detail
// names the edge kinds (`after`, `routes`, `on_error`, `loop`, …).

// A callEdge is one edge of the graph as written.
type callEdge struct {
	from, to string
	kind     string       // after, branch, default, routes, on_error, …, loop
	ref      source.Range // the name that makes the edge
}

// callGraph is the graph of the first workflow of a file, from its syntax.
type callGraph struct {
	file  string // the file's path, or the URI of an unsaved document
	wf    *ast.Workflow
	nodes map[string]*ast.NodeDecl
	order []string
	edges []callEdge
}

func newCallGraph(name string, f *ast.File) *callGraph {
	g := &callGraph{file: name, nodes: map[string]*ast.NodeDecl{}}
	if f == nil {
		return g
	}
	g.wf = f.Workflow()
	if g.wf == nil {
		return g
	}
	for _, it := range g.wf.Items {
		if n, ok := it.(*ast.NodeDecl); ok && n.Kind != nil && n.Name != nil && n.Name.Name != "" {
			if _, dup := g.nodes[n.Name.Name]; !dup {
				g.nodes[n.Name.Name] = n
				g.order = append(g.order, n.Name.Name)
			}
		}
	}
	for _, id := range g.order {
		n := g.nodes[id]
		for _, a := range n.After {
			if a != nil && g.nodes[a.Name] != nil {
				g.edges = append(g.edges, callEdge{from: a.Name, to: id, kind: "after", ref: a.Range})
			}
		}
		g.walk(id, n.Items)
	}
	return g
}

// walk adds the edges that items of node id (and its nested blocks) make.
func (g *callGraph) walk(id string, items []ast.Item) {
	add := func(t *ast.Ident, kind string) {
		if t != nil && t.Name != id && g.nodes[t.Name] != nil {
			g.edges = append(g.edges, callEdge{from: id, to: t.Name, kind: kind, ref: t.Range})
		}
	}
	for _, it := range items {
		switch it := it.(type) {
		case *ast.Goto:
			if it.Key != nil {
				for _, t := range it.Targets {
					add(t, it.Key.Name)
				}
			}
		case *ast.Branch:
			for _, r := range it.Rules {
				kind := "branch"
				if r.Else {
					kind = "default"
				}
				for _, t := range r.Targets {
					add(t, kind)
				}
			}
		case *ast.Setting:
			if it.Key != nil && it.Key.Name == "back_to" && it.Value != nil && it.Value.Kind == ast.IdentValue {
				add(&ast.Ident{Range: it.Value.Range, Name: it.Value.Raw}, "loop")
			}
		case *ast.Block:
			g.walk(id, it.Items)
		}
	}
}

// callData is the data of a call hierarchy item: which file, and which
// node of it (or its workflow).
type callData struct {
	URI      string `json:"uri"`
	Node     string `json:"node,omitempty"`
	Workflow string `json:"workflow,omitempty"`
}

// callFile is a file the hierarchy reads: an open document or a file on disk.
type callFile struct {
	uri string
	m   *Mapper
	g   *callGraph
}

// callFileFor returns the graph of the document at uri: the latest text
// when it is open, else the file on disk (read as the compiler reads
// imports: bounded); nil when it cannot be read.
func (s *server) callFileFor(uri string) *callFile {
	if snap := s.snapshotFor(uri); snap != nil {
		return &callFile{uri: snap.uri, m: snap.m, g: newCallGraph(snap.name, snap.ast())}
	}
	path := uriToPath(uri)
	if !filepath.IsAbs(path) || filepath.Ext(path) != ".wf" {
		return nil // the item's data comes from the client: read workflows only
	}
	src, err := s.readFile(path)
	if err != nil {
		return nil
	}
	f := source.NewFile(path, src)
	parsed, _ := lang.ParseFile(f)
	return &callFile{uri: pathToURI(path), m: NewMapper(f), g: newCallGraph(path, parsed)}
}

func (cf *callFile) nodeItem(id, edgeKinds string) protocol.CallHierarchyItem {
	n := cf.g.nodes[id]
	detail := nodeDetail(n)
	if edgeKinds != "" {
		detail += " · " + edgeKinds
	}
	return protocol.CallHierarchyItem{
		Name: id, Kind: nodeSymbolKind(n.Kind.Name), Detail: &detail, URI: cf.uri,
		Range: cf.m.Range(n.Range), SelectionRange: cf.m.Range(n.Name.Range),
		Data: callData{URI: cf.uri, Node: id},
	}
}

func (cf *callFile) workflowItem() (protocol.CallHierarchyItem, bool) {
	w := cf.g.wf
	if w == nil || w.Name == nil || w.Name.Name == "" {
		return protocol.CallHierarchyItem{}, false
	}
	detail := "workflow · " + filepath.Base(uriToPath(cf.uri))
	return protocol.CallHierarchyItem{
		Name: w.Name.Name, Kind: protocol.SymbolKindModule, Detail: &detail, URI: cf.uri,
		Range: cf.m.Range(w.Range), SelectionRange: cf.m.Range(w.Name.Range),
		Data: callData{URI: cf.uri, Workflow: w.Name.Name},
	}, true
}

// prepareCallHierarchy finds the node under the cursor (its declaration,
// a name in an `after` list or a target, a use in an expression), the
// workflow under the cursor (its name), or the child workflow of a flow's
// `uses` path.
func (s *server) prepareCallHierarchy(p *protocol.CallHierarchyPrepareParams) ([]protocol.CallHierarchyItem, error) {
	snap := s.snapshotFor(p.TextDocument.URI)
	if snap == nil {
		return nil, nil
	}
	off := snap.m.Offset(p.Position)
	touches := func(r source.Range) bool { return r.Contains(off) || r.End == off && r.Len() > 0 }
	cf := &callFile{uri: snap.uri, m: snap.m, g: newCallGraph(snap.name, snap.ast())}
	for _, r := range fileRefs(snap.name, snap.ast()) {
		if r.uses && touches(r.str.Range) {
			if child := s.callFileFor(pathToURI(r.path)); child != nil {
				if it, ok := child.workflowItem(); ok {
					return []protocol.CallHierarchyItem{it}, nil
				}
			}
			return nil, nil
		}
	}
	if w := cf.g.wf; w != nil && w.Name != nil && touches(w.Name.Range) {
		it, _ := cf.workflowItem()
		return []protocol.CallHierarchyItem{it}, nil
	}
	for _, id := range cf.g.order {
		if touches(cf.g.nodes[id].Name.Range) {
			return []protocol.CallHierarchyItem{cf.nodeItem(id, "")}, nil
		}
	}
	for _, e := range cf.g.edges {
		if touches(e.ref) {
			id := e.to
			if e.kind == "after" {
				id = e.from
			}
			return []protocol.CallHierarchyItem{cf.nodeItem(id, "")}, nil
		}
	}
	// A node named in an expression or a template: the compiler's refs.
	if sym, ok := symbolAt(snap.result(), off); ok && sym.kind == compiler.RefNode && cf.g.nodes[sym.name] != nil {
		return []protocol.CallHierarchyItem{cf.nodeItem(sym.name, "")}, nil
	}
	return nil, nil
}

// callTarget reads an item's data back.
func (s *server) callTarget(item protocol.CallHierarchyItem) (*callFile, callData, bool) {
	var d callData
	raw, err := json.Marshal(item.Data)
	if err != nil || json.Unmarshal(raw, &d) != nil || d.URI == "" {
		return nil, d, false
	}
	cf := s.callFileFor(d.URI)
	if cf == nil {
		return nil, d, false
	}
	if d.Node != "" && cf.g.nodes[d.Node] == nil {
		return nil, d, false // renamed or deleted since
	}
	return cf, d, true
}

// callGroup gathers the edges to or from one other node.
type callGroup struct {
	id     string
	kinds  []string
	ranges []protocol.Range
}

func groupCalls(cf *callFile, edges []callEdge, other func(callEdge) string) []*callGroup {
	var out []*callGroup
	by := map[string]*callGroup{}
	for _, e := range edges {
		id := other(e)
		g := by[id]
		if g == nil {
			g = &callGroup{id: id}
			by[id] = g
			out = append(out, g)
		}
		if !slices.Contains(g.kinds, e.kind) {
			g.kinds = append(g.kinds, e.kind)
		}
		g.ranges = append(g.ranges, cf.m.Range(e.ref))
	}
	return out
}

// incomingCalls lists a node's sources, or the flow nodes of the open
// documents that run a workflow.
func (s *server) incomingCalls(p *protocol.CallHierarchyIncomingCallsParams) ([]protocol.CallHierarchyIncomingCall, error) {
	out := []protocol.CallHierarchyIncomingCall{}
	cf, d, ok := s.callTarget(p.Item)
	if !ok {
		return out, nil
	}
	if d.Node == "" {
		return s.flowCallers(cf), nil
	}
	var in []callEdge
	for _, e := range cf.g.edges {
		if e.to == d.Node {
			in = append(in, e)
		}
	}
	for _, g := range groupCalls(cf, in, func(e callEdge) string { return e.from }) {
		out = append(out, protocol.CallHierarchyIncomingCall{From: cf.nodeItem(g.id, strings.Join(g.kinds, ", ")), FromRanges: g.ranges})
	}
	return out, nil
}

// flowCallers lists the flow nodes, in the open documents, whose `uses`
// names the file of cf.
func (s *server) flowCallers(cf *callFile) []protocol.CallHierarchyIncomingCall {
	out := []protocol.CallHierarchyIncomingCall{}
	target := filepath.Clean(uriToPath(cf.uri))
	docs := s.openDocs()
	slices.SortFunc(docs, func(a, b *document) int { return strings.Compare(a.uri, b.uri) })
	for _, doc := range docs {
		snap := doc.latest()
		if snap == nil {
			continue
		}
		f := snap.ast()
		caller := &callFile{uri: snap.uri, m: snap.m, g: newCallGraph(snap.name, f)}
		for _, id := range caller.g.order {
			n := caller.g.nodes[id]
			for _, r := range fileRefs(snap.name, &ast.File{Items: []ast.Item{&ast.Workflow{Items: []ast.Item{n}}}}) {
				if r.uses && filepath.Clean(r.path) == target {
					out = append(out, protocol.CallHierarchyIncomingCall{
						From:       caller.nodeItem(id, "uses"),
						FromRanges: []protocol.Range{snap.m.Range(pathRange(r.str))},
					})
				}
			}
		}
	}
	return out
}

// outgoingCalls lists a node's successors (and a flow node's child
// workflow), or a workflow's entry nodes.
func (s *server) outgoingCalls(p *protocol.CallHierarchyOutgoingCallsParams) ([]protocol.CallHierarchyOutgoingCall, error) {
	out := []protocol.CallHierarchyOutgoingCall{}
	cf, d, ok := s.callTarget(p.Item)
	if !ok {
		return out, nil
	}
	if d.Node == "" {
		// Entry nodes: no source other than a loop's back edge.
		hasSource := map[string]bool{}
		for _, e := range cf.g.edges {
			if e.kind != "loop" {
				hasSource[e.to] = true
			}
		}
		for _, id := range cf.g.order {
			if !hasSource[id] {
				n := cf.g.nodes[id]
				out = append(out, protocol.CallHierarchyOutgoingCall{To: cf.nodeItem(id, "entry"), FromRanges: []protocol.Range{cf.m.Range(n.Name.Range)}})
			}
		}
		return out, nil
	}
	var outs []callEdge
	for _, e := range cf.g.edges {
		if e.from == d.Node {
			outs = append(outs, e)
		}
	}
	for _, g := range groupCalls(cf, outs, func(e callEdge) string { return e.to }) {
		out = append(out, protocol.CallHierarchyOutgoingCall{To: cf.nodeItem(g.id, strings.Join(g.kinds, ", ")), FromRanges: g.ranges})
	}
	n := cf.g.nodes[d.Node]
	name := uriToPath(cf.uri)
	for _, r := range fileRefs(name, &ast.File{Items: []ast.Item{&ast.Workflow{Items: []ast.Item{n}}}}) {
		if !r.uses || !filepath.IsAbs(name) {
			continue
		}
		if child := s.callFileFor(pathToURI(r.path)); child != nil {
			if it, ok := child.workflowItem(); ok {
				out = append(out, protocol.CallHierarchyOutgoingCall{To: it, FromRanges: []protocol.Range{cf.m.Range(pathRange(r.str))}})
			}
		}
	}
	return out, nil
}

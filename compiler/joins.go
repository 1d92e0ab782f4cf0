package compiler

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/lang/diag"
	"github.com/wfc-lang/wfc/lang/source"
)

// Two facts about the forward graph that the join and data-safety checks
// share, computed once on the analysed skeleton in topological order:
//
//   - needs[n]: for each routing node d, the outcomes of d under which n can
//     run (absent: any). An edge's real token requires its source's outcome
//     to be one that sends real tokens on that edge; a join all needs every
//     edge, so the requirements meet; a join any or settled needs one, so
//     they join. An empty set means n can never run.
//   - sure[n]: the nodes that have surely succeeded (and so have an
//     output) whenever n runs.
//
// Loop edges are not forward edges and are ignored: within one iteration a
// body node's tokens come from that iteration, and an edge entering the
// body keeps what it delivered in iteration 1, so both facts hold per
// iteration.

// An outcome names one way a routing node sends its tokens: "ok" (success,
// or approval), "rule N", "else", "route X", "default", "error", "reject",
// "exhausted".
type outcomeSet map[string]bool

// needMap maps a routing node's index to the outcomes a node requires of it.
type needMap map[int]outcomeSet

// maxNeeds bounds the routing nodes tracked per node: past it, the
// requirements are dropped, which only makes the never-runs check miss
// cases (it never reports a join that can run).
const maxNeeds = 64

type joinFacts struct {
	needs []needMap
	never []bool // the node can never run
	// conflict[n]: for a join all that can never run although each of its
	// inputs can, the routing node whose outcomes its inputs disagree on.
	conflict []int
	sure     []bits
	failed   []bits // failed[n]: nodes that surely failed (x.error exists) whenever n runs
}

// edgeOutcomes returns the outcomes of e's source under which e delivers a
// real token, or nil when e adds no requirement.
func edgeOutcomes(w *ir.Workflow, src *ir.Node, e ir.Edge) outcomeSet {
	switch e.Kind {
	case ir.EdgeAfter:
		if src.Branch != nil || src.Agent != nil && len(src.Agent.Routes) > 0 {
			return nil // an after on a routing node's target adds nothing (WF5003)
		}
		return outcomeSet{"ok": true}
	case ir.EdgeBranch:
		set := outcomeSet{}
		if src.Branch != nil {
			for i, r := range src.Branch.Rules {
				if slices.Contains(r.Targets, e.To) {
					set["rule "+strconv.Itoa(i+1)] = true
				}
			}
		}
		if len(set) == 0 {
			return nil
		}
		return set
	case ir.EdgeDefault:
		if src.Branch != nil {
			return outcomeSet{"else": true}
		}
		return outcomeSet{"default": true}
	case ir.EdgeRoute:
		if src.Agent != nil && src.Agent.MaxRoutes > 1 {
			// Several routes may get real tokens together: the routes are
			// not exclusive outcomes, and an edge to one tells nothing sure.
			return nil
		}
		return outcomeSet{"route " + e.To: true}
	case ir.EdgeError:
		if len(src.ErrorRoutes) == 0 {
			return outcomeSet{"error": true}
		}
		set := outcomeSet{}
		for _, r := range src.ErrorRoutes {
			if slices.Contains(r.Targets, e.To) {
				if len(r.Codes) == 0 {
					set["error"] = true
				} else {
					set["error "+strings.Join(r.Codes, ", ")] = true
				}
			}
		}
		return set
	case ir.EdgeReject:
		return outcomeSet{"reject": true}
	case ir.EdgeExhausted:
		return outcomeSet{"exhausted": true}
	}
	return nil
}

// surelyRan reports whether a real token on an edge of this kind means its
// source succeeded and has an output.
func surelyRan(kind string) bool {
	switch kind {
	case ir.EdgeAfter, ir.EdgeBranch, ir.EdgeDefault, ir.EdgeRoute:
		return true
	}
	return false
}

// computeJoinFacts fills s.jf from the analysed skeleton.
func (s *state) computeJoinFacts() *joinFacts {
	if s.jf != nil || s.skel == nil {
		return s.jf
	}
	w := s.skel
	n := len(w.Nodes)
	idx := make(map[string]int, n)
	for i := range w.Nodes {
		idx[w.Nodes[i].ID] = i
	}
	in := make([][]ir.Edge, n)
	for _, e := range w.Edges {
		if ir.Forward(e.Kind) {
			if t, ok := idx[e.To]; ok {
				in[t] = append(in[t], e)
			}
		}
	}
	jf := &joinFacts{needs: make([]needMap, n), never: make([]bool, n), conflict: make([]int, n), sure: make([]bits, n), failed: make([]bits, n)}
	for _, id := range w.Order {
		i := idx[id]
		jf.conflict[i] = -1
		node := &w.Nodes[i]
		all := cmp.Or(node.Join, ir.JoinAll) == ir.JoinAll || len(in[i]) == 1
		var needs needMap
		var sure, failed bits
		first, neverIn, live := true, false, 0
		// A source with several edges to the node (a routing node's
		// alternatives) sends a real token on at most one of them: its
		// edges are one input, which needs one of their outcomes.
		for _, grp := range bySource(in[i]) {
			p, ok := idx[grp[0].From]
			if !ok {
				continue
			}
			if jf.never[p] {
				neverIn = true
				continue
			}
			live++
			en := jf.needs[p]
			var oc outcomeSet
			for _, e := range grp {
				eo := edgeOutcomes(w, &w.Nodes[p], e)
				if eo == nil {
					oc = nil // one edge without a requirement: none for the group
					break
				}
				if oc == nil {
					oc = outcomeSet{}
				}
				maps.Copy(oc, eo)
			}
			if oc != nil {
				en = withNeed(en, p, oc)
			}
			es := jf.sure[p]
			if grp.allRan() {
				es = withBit(es, p, n)
			}
			ef := jf.failed[p]
			if grp.allError() {
				ef = withBit(ef, p, n)
			}
			switch {
			case first:
				needs, sure, failed = en, es, ef
			case all:
				needs = meet(needs, en)
				sure = union(sure, es)
				failed = union(failed, ef)
			default:
				needs = joinNeeds(needs, en)
				sure = intersect(sure, es)
				failed = intersect(failed, ef)
			}
			first = false
		}
		if len(in[i]) > 0 && (live == 0 || all && neverIn) {
			// Every input can never deliver a real token (or, for a join
			// all, one of them): the cause is reported upstream.
			jf.never[i] = true
			continue
		}
		for d, set := range needs {
			if len(set) == 0 {
				jf.never[i] = true
				jf.conflict[i] = d
				break
			}
		}
		if len(needs) > maxNeeds {
			needs = nil
		}
		jf.needs[i], jf.sure[i], jf.failed[i] = needs, sure, failed
	}
	s.jf = jf
	return jf
}

// edgeGroup is the incoming edges of a node from one source.
type edgeGroup []ir.Edge

// withBit returns a copy of b (nil: empty, of n bits) with bit i set.
func withBit(b bits, i, n int) bits {
	b = slices.Clone(b)
	if b == nil {
		b = newBits(n)
	}
	b.set(i)
	return b
}

func (g edgeGroup) allError() bool {
	for _, e := range g {
		if e.Kind != ir.EdgeError {
			return false
		}
	}
	return true
}

func (g edgeGroup) allRan() bool {
	for _, e := range g {
		if !surelyRan(e.Kind) {
			return false
		}
	}
	return true
}

// bySource groups edges by source, in order of first appearance.
func bySource(es []ir.Edge) []edgeGroup {
	var out []edgeGroup
	at := map[string]int{}
	for _, e := range es {
		if k, ok := at[e.From]; ok {
			out[k] = append(out[k], e)
			continue
		}
		at[e.From] = len(out)
		out = append(out, edgeGroup{e})
	}
	return out
}

func withNeed(m needMap, d int, oc outcomeSet) needMap {
	out := make(needMap, len(m)+1)
	maps.Copy(out, m)
	out[d] = oc
	return out
}

// meet: both requirements hold (join all).
func meet(a, b needMap) needMap {
	if len(a) == 0 {
		return b
	}
	if len(b) == 0 {
		return a
	}
	out := maps.Clone(a)
	for d, sb := range b {
		sa, ok := out[d]
		if !ok {
			out[d] = sb
			continue
		}
		both := outcomeSet{}
		for o := range sa {
			if sb[o] {
				both[o] = true
			}
		}
		out[d] = both
	}
	return out
}

// joinNeeds: one of the requirements holds (join any, settled).
func joinNeeds(a, b needMap) needMap {
	out := needMap{}
	for d, sa := range a {
		if sb, ok := b[d]; ok {
			either := maps.Clone(sa)
			maps.Copy(either, sb)
			out[d] = either
		}
	}
	return out
}

func union(a, b bits) bits {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	out := slices.Clone(a)
	out.or(b)
	return out
}

func intersect(a, b bits) bits {
	if a == nil || b == nil {
		return nil
	}
	out := slices.Clone(a)
	for k := range out {
		out[k] &= b[k]
	}
	return out
}

// exclusiveOf returns a routing node on whose outcomes x and n disagree:
// each needs outcomes of it the other does not, so they never both run in
// one run, and `after x` on n would make a join that never runs.
func (s *state) exclusiveOf(x, n *node) (string, bool) {
	jf := s.computeJoinFacts()
	if jf == nil || x.idx >= len(jf.needs) || n.idx >= len(jf.needs) {
		return "", false
	}
	for d, a := range jf.needs[x.idx] {
		b := jf.needs[n.idx][d]
		if a == nil || b == nil {
			continue
		}
		shared := false
		for o := range a {
			if b[o] {
				shared = true
				break
			}
		}
		if !shared {
			return s.skel.Nodes[d].ID, true
		}
	}
	return "", false
}

// neverRuns reports every join all whose inputs come from exclusive
// outcomes of one routing node (branch rules, agent routes, approval and
// rejection, success and on_error): it can never run.
func (s *state) neverRuns() {
	jf := s.computeJoinFacts()
	if jf == nil {
		return
	}
	w := s.skel
	for i, d := range jf.conflict {
		if d < 0 || !jf.never[i] {
			continue
		}
		nd := s.nodes[i]
		dn := &w.Nodes[d]
		var ins []ir.Edge
		for _, e := range w.Edges {
			if e.To == nd.id && ir.Forward(e.Kind) {
				ins = append(ins, e)
			}
		}
		var parts []string
		for _, grp := range bySource(ins) {
			p := s.byID[grp[0].From]
			if p == nil {
				continue
			}
			set := jf.needs[p.idx][d]
			if p.idx == d {
				set = outcomeSet{}
				for _, e := range grp {
					maps.Copy(set, edgeOutcomes(w, dn, e))
				}
			}
			switch {
			case set == nil:
			case p.idx == d:
				parts = append(parts, fmt.Sprintf("%s's own edge needs %s", p.id, outcomeWords(dn, set)))
			default:
				parts = append(parts, fmt.Sprintf("%s needs %s", p.id, outcomeWords(dn, set)))
			}
		}
		dg := s.errorf(diag.JoinExclusive, nd.ident.Range,
			"%s joins with `all`: it runs only when every node it waits for sends it a real token, which never happens in one run: %s",
			nd.id, strings.Join(parts, ", "))
		dg.WithHint("to run after whichever path was taken, use `join settled` (waits for every path) or `join any` (runs at the first)")
		for _, mode := range []string{ir.JoinSettled, ir.JoinAny} {
			if sp, text, ok := s.joinFix(nd, mode); ok {
				dg.WithFix(fmt.Sprintf("Change to `join %s`", mode), sp, text)
			}
		}
	}
}

// joinFix returns the edit that gives nd the join mode; none for a node
// whose declaration did not parse (recovered text has no node to edit).
func (s *state) joinFix(nd *node, mode string) (source.Span, string, bool) {
	if nd.decl == nil || nd.ident == nil {
		return source.Span{}, "", false
	}
	if nd.decl.Join != nil {
		return s.span(nd.decl.Join.Range), mode, true
	}
	end := nd.ident.Range.End
	if k := len(nd.decl.After); k > 0 && nd.decl.After[k-1] != nil {
		end = nd.decl.After[k-1].Range.End
	}
	return s.span(source.Range{Start: end, End: end}), " join " + mode, true
}

// outcomeWords says which outcomes of d a set holds.
func outcomeWords(dn *ir.Node, set outcomeSet) string {
	d := dn.ID
	var ws []string
	for _, o := range slices.Sorted(maps.Keys(set)) {
		switch {
		case o == "ok" && dn.Human != nil:
			ws = append(ws, d+" to be approved")
		case o == "ok":
			ws = append(ws, d+" to succeed")
		case o == "else":
			ws = append(ws, d+"'s `else`")
		case o == "default":
			ws = append(ws, d+"'s `default`")
		case o == "error":
			ws = append(ws, d+" to fail (`on_error`)")
		case strings.HasPrefix(o, "error "):
			ws = append(ws, d+" to fail with "+strings.TrimPrefix(o, "error "))
		case o == "reject":
			ws = append(ws, d+" to be rejected")
		case o == "exhausted":
			ws = append(ws, d+"'s loop to be exhausted")
		case strings.HasPrefix(o, "rule "):
			ws = append(ws, d+"'s branch "+o)
		case strings.HasPrefix(o, "route "):
			ws = append(ws, d+" to route to "+strings.TrimPrefix(o, "route "))
		}
	}
	if len(ws) == 0 {
		return "an outcome of " + d + " that never comes"
	}
	return strings.Join(ws, " or ")
}

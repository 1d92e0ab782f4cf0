package compiler

import (
	"strings"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/lang/diag"
)

// firstJoin checks a `join first` (docs/language.md §7.3) on the analysed
// skeleton: the runtime must be able to cancel what it would cancel
// (ir.FirstJoinProblem: WF4007), and there should be something to cancel
// (WF4008: else it is a `join any`). join_info.cancels, the nodes that
// only feed the join, is ir.Analyze's.
func (s *state) firstJoin(nd *node, n *ir.Node) {
	rng := nd.ident.Range
	if nd.decl != nil && nd.decl.Join != nil {
		rng = nd.decl.Join.Range
	}
	if why := ir.FirstJoinProblem(s.skel, n); why != "" {
		s.errorf(diag.JoinFirstLoop, rng, "`join first` on %s: %s", nd.id, why).
			WithHint("use `join any`, which runs at the first real token and cancels nothing")
		return
	}
	if len(n.JoinInfo.Cancels) == 0 {
		var srcs []string
		for _, e := range n.JoinInfo.Incoming {
			if len(srcs) == 0 || srcs[len(srcs)-1] != e.From {
				srcs = append(srcs, e.From)
			}
		}
		dg := s.errorf(diag.JoinFirstNothing, rng, "`join first` on %s cancels nothing: each of %s also leads to another node, so their work is needed anyway",
			nd.id, strings.Join(srcs, ", "))
		dg.WithHint("a node that only leads to " + nd.id + " is cancelled when " + nd.id + " runs; here it behaves as `join any`")
		if nd.decl != nil && nd.decl.Join != nil {
			dg.WithFix("Change to `join any`", s.span(nd.decl.Join.Range), ir.JoinAny)
		}
	}
}

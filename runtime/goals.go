package runtime

import (
	"fmt"
	"strings"

	"github.com/wfc-lang/wfc/ir"
)

// goals checks, at a run's end, that every goal node of a goal build
// completed (docs/language.md §8): pruning to the goals' ancestors may
// have dropped a check that would have failed the run, so a goal that did
// not run fails it. It returns the run's error ("" when every goal ran),
// or an error of Redis.
func (j *job) goals() (string, error) {
	outs, err := j.outputs(j.p.w.Goals)
	if err != nil {
		return "", redisErr{err}
	}
	var missing []string
	for _, g := range j.p.w.Goals {
		if _, ok := outs[g]; !ok {
			missing = append(missing, g)
		}
	}
	if len(missing) == 0 {
		return "", nil
	}
	state, err := j.w.st.rdb.HGetAll(j.ctx, j.w.ks.state(j.tok.Run)).Result()
	if err != nil {
		return "", redisErr{err}
	}
	var msgs []string
	for _, g := range missing {
		msgs = append(msgs, fmt.Sprintf("goal %s did not run: %s", g, whyNotRun(j.p.w, g, state)))
	}
	return strings.Join(msgs, "; "), nil
}

// whyNotRun explains from the run's state hash why node id has no output:
// it failed, its `when` was false, or — following the edges back — which
// node skipped it, failed or routed elsewhere. It reads executions outside
// loops by their exec key (the node id); a node in a loop body is judged
// by its last iteration's output only.
func whyNotRun(w *ir.Workflow, id string, state map[string]string) string {
	in := map[string][]ir.Edge{}
	for _, e := range w.Edges {
		if ir.Forward(e.Kind) {
			in[e.To] = append(in[e.To], e)
		}
	}
	seen := map[string]bool{}
	var why func(id string, depth int) string
	why = func(id string, depth int) string {
		n := w.Node(id)
		if n == nil || seen[id] || depth > 64 {
			return "it did not run"
		}
		seen[id] = true
		switch st := state[id]; st {
		case NodeFailed:
			return "it failed: " + state["err|"+id]
		case NodeSkipped:
		case "":
			return "it was never reached"
		case NodeCompleted:
			return "it completed" // (not for a missing goal: its output exists)
		default:
			return "it was still " + st
		}
		// Dispatched (its hop is written) and skipped: its `when` was false.
		if _, ok := state["hop|"+id]; ok {
			if n.When != nil {
				return fmt.Sprintf("its `when` (%s) was false", n.When.CEL)
			}
			return "it was skipped"
		}
		// Skipped by a skip token: a join records each arrival (1 real,
		// 0 skip); a node with one incoming edge had a skip on it.
		for _, e := range in[id] {
			if len(in[id]) > 1 && state[id+"|"+e.From+"|"+e.Kind] != "0" {
				continue
			}
			reason := skipReason(w, e, state)
			if reason == "" {
				reason = "was skipped: " + why(e.From, depth+1)
			}
			return e.From + " " + reason
		}
		return "it was skipped"
	}
	return why(id, 0)
}

// skipReason says why edge e, which carried a skip, did: in words after
// its source's name, or "" when the source was itself skipped.
func skipReason(w *ir.Workflow, e ir.Edge, state map[string]string) string {
	switch st := state[e.From]; st {
	case NodeSkipped:
		return ""
	case NodeFailed:
		return "failed: " + state["err|"+e.From]
	case NodeCompleted:
	default:
		return "did not finish"
	}
	switch e.Kind {
	case ir.EdgeError:
		return "succeeded (this is its on_error path)"
	case ir.EdgeBranch, ir.EdgeDefault:
		return "took another branch"
	case ir.EdgeRoute:
		return "routed elsewhere"
	case ir.EdgeReject:
		return "was approved (this is its on_reject path)"
	case ir.EdgeExhausted:
		return "ended its loop normally (this is its exhausted path)"
	}
	if src := w.Node(e.From); src != nil && src.Human != nil {
		return "was rejected"
	}
	return "did not send a real token"
}

package runtime

// The result ahead: a workflow whose outputs read only one node's output
// (output { v = last.output.v }, the common case) can be given its result
// by that node's completion. The worker evaluates the outputs before it
// calls advance.lua with the output it is completing, and when that
// completion ends the run, the script ends it with the result at once, as
// finish.lua would have: no finish token, no second work item, no second
// read of the outputs. When the completion does not end the run, the
// script ignores the result, and the run ends as before, through a finish
// token. The result cannot be stale: the only value it reads is the
// output the same script writes.

// aheadNode reports whether the workflow's outputs can be evaluated ahead
// at node id's completion: the workflow has outputs, and neither goals
// nor a finally (they need the whole run's state, or run after the end);
// the outputs' expressions name no variable but id (not input, run or
// another node), and name id, or id has no successor (outputs of
// constants: evaluated only where the run may end). Cached per node.
func (p *plan) aheadNode(id string) bool {
	p.ancMu.Lock()
	defer p.ancMu.Unlock()
	if ok, seen := p.ahead[id]; seen {
		return ok
	}
	if p.ahead == nil {
		p.ahead = map[string]bool{}
	}
	ok := len(p.w.Outputs) > 0 && len(p.w.Goals) == 0 && p.w.Finally == nil && p.nodes[id] != nil
	if ok {
		srcs := make([]string, len(p.w.Outputs))
		for i := range p.w.Outputs {
			srcs[i] = p.w.Outputs[i].Expr.CEL
		}
		names, all := p.exprNames(srcs)
		switch {
		case all:
			ok = false
		case len(names) == 0:
			g := p.graph[id]
			ok = g != nil && len(g.Out) == 0
		default:
			ok = len(names) == 1 && names[id]
		}
	}
	p.ahead[id] = ok
	return ok
}

// resultAhead evaluates the workflow's outputs from the output this job
// completes its node with, as finish would (the same limits, secrets
// redacted); ok is false when they cannot be evaluated ahead, or their
// evaluation fails: the finish token then evaluates them again and
// reports the error.
func (j *job) resultAhead(output string) (string, bool) {
	id := j.tok.Node
	if !j.p.aheadNode(id) {
		return "", false
	}
	act, err := j.p.activation("", []string{id}, map[string]string{id: output})
	if err != nil {
		return "", false
	}
	res, err := j.evalOutputs(act)
	if err != nil {
		return "", false
	}
	return string(j.w.opts.Secrets.JSON([]byte(res))), true
}

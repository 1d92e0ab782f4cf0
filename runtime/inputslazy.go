package runtime

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/wfc-lang/wfc/ir"
)

// A run's inputs may be large (up to Options.MaxInputBytes), and most
// nodes do not read them: a for_each of 100,000 items over input.xs read
// and decoded the whole list for each item (its expressions read x, not
// input), and never finished. So a worker reads a run's inputs with its
// meta only when a message of the batch may need them (prefetch), and an
// activation decodes them only when an evaluation reads input.

// exprsOf returns the CEL sources a token of the kind evaluates for node
// n: an exec token its when, for_each, with, dispatch, loop and branch; an
// item its with and dispatch; a fin token (a for_each's collect) its loop
// and branch; a comp token its compensate block's with. ok is false for
// the other kinds (finish, final: the workflow's outputs, goals, finally),
// which may read anything.
func exprsOf(n *nodeExprSet, kind string) (srcs []string, ok bool) {
	switch kind {
	case "exec":
		return n.exec, true
	case "item":
		return n.item, true
	case "fin":
		return n.fin, true
	case "comp":
		return n.comp, true
	}
	return nil, false
}

// nodeExprSet: a node's expressions by the token kinds that evaluate them.
type nodeExprSet struct{ exec, item, fin, comp []string }

func nodeExprSets(p *plan, id string) *nodeExprSet {
	n := p.nodes[id]
	s := &nodeExprSet{}
	if n == nil {
		return s
	}
	var cur *[]string
	add := func(e *ir.Expr) {
		if e != nil {
			*cur = append(*cur, e.CEL)
		}
	}
	params := func(ps []ir.Param) { paramExprs(ps, add) }
	cur = &s.item
	params(n.With)
	if n.Dispatch != nil {
		add(&n.Dispatch.Expr)
	}
	cur = &s.fin
	if n.Loop != nil {
		add(&n.Loop.While)
	}
	if n.Branch != nil {
		for i := range n.Branch.Rules {
			add(&n.Branch.Rules[i].When)
		}
	}
	cur = &s.comp
	if n.Compensate != nil {
		params(n.Compensate.With)
	}
	cur = &s.exec
	add(n.When)
	if n.ForEach != nil {
		add(&n.ForEach.Items)
	}
	s.exec = append(append(s.exec, s.item...), s.fin...)
	return s
}

// readsInput reports whether a token of the kind for node id may evaluate
// an expression that reads input (true when it cannot tell).
func (p *plan) readsInput(id, kind string) bool {
	key := kind + " " + id
	p.ancMu.Lock()
	if v, ok := p.inputReads[key]; ok {
		p.ancMu.Unlock()
		return v
	}
	p.ancMu.Unlock()
	v := false
	srcs, ok := exprsOf(nodeExprSets(p, id), kind)
	if !ok || p.nodes[id] == nil {
		v = true
	}
	for _, src := range srcs {
		names, err := p.cel.names(src)
		if err != nil {
			v = true
			break
		}
		for _, name := range names {
			if name == "input" {
				v = true
			}
		}
	}
	p.ancMu.Lock()
	if p.inputReads == nil {
		p.inputReads = map[string]bool{}
	}
	p.inputReads[key] = v
	p.ancMu.Unlock()
	return v
}

// needsInputs reports whether handling the token may read its run's
// inputs: false only for a for_each's item and collect tokens — the
// messages a run may have by the thousand — when the worker knows the
// run's plan (from the meta it keeps) and the token's expressions do not
// read input. (The other tokens read the inputs with the meta, as they
// always did, so that a run's meta the worker keeps has them mostly.)
func (w *Worker) needsInputs(tok *Token) bool {
	if tok.Kind != "item" && tok.Kind != "fin" {
		return true
	}
	m := w.fresh.kept(tok.Run)
	if m == nil {
		return true
	}
	p := w.st.plan(m.IR)
	if p == nil {
		return true
	}
	return p.readsInput(tok.Node, tok.Kind)
}

// runInputs returns the run's inputs for this job's activation: those read
// with its meta, else (a meta read without them) read now when the token's
// expressions read input — and kept with the run's meta from then on;
// else "" (an expression reading input then fails to decode it, which
// readsInput rules out).
func (j *job) runInputs() (string, error) {
	if j.m.inputsRead || !j.p.readsInput(j.tok.Node, j.tok.Kind) {
		return j.m.Inputs, nil
	}
	s, err := j.w.st.rdb.HGet(j.ctx, j.w.ks.state(j.tok.Run), runField("inputs")).Result()
	if err != nil && err != redis.Nil {
		return "", err
	}
	m := *j.m
	m.Inputs, m.inputsRead = s, true
	j.m = &m
	if m.Status == RunRunning && m.Created != 0 { // (not a meta a token told)
		j.w.fresh.remember(j.tok.Run, &m)
	}
	return s, nil
}

// readMetaLean reads the run's own fields but its inputs.
func (k keyspace) readMetaLean(ctx context.Context, c redis.Cmdable, run string) *redis.SliceCmd {
	return c.HMGet(ctx, k.state(run), metaFieldsLean...)
}

// metaNamesLean and metaFieldsLean are metaNames and metaFields without
// the inputs.
var metaNamesLean, metaFieldsLean = func() ([]string, []string) {
	var n, f []string
	for i, name := range metaNames {
		if name != "inputs" {
			n, f = append(n, name), append(f, metaFields[i])
		}
	}
	return n, f
}()

// metaMapLean is metaMap for readMetaLean's reply.
func metaMapLean(vals []any) map[string]string {
	h := map[string]string{}
	for i, v := range vals {
		if s, ok := v.(string); ok && i < len(metaNamesLean) {
			h[metaNamesLean[i]] = s
		}
	}
	return h
}

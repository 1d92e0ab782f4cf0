package runtime

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Outputs travel with the work. A node whose expressions read its parents'
// outputs (a.output.x) read them from the run's state hash before it ran:
// one more round trip per execution, after the read that brought its
// token. Instead, the script that queues an exec token (lib.lua's
// dispatch, advance.lua) copies into it the state fields the node's
// activation reads (its graph field rd, outFields), as they are at that
// moment — after the completion that queues it wrote its own output, and
// every parent of a join had written theirs — unless together they are
// larger than carryMax bytes. And a worker pre-reads those fields for the
// other messages of a batch (for_each items and collects, a token that
// carries none) in the pipelined round trip of prefetch.
//
// What a token carries is what a read would have returned: the fields it
// names do not change between the queueing of an execution and its run
// (they are outputs of nodes that ran before it; a later write to one of
// them is a new generation's, whose tokens are new too). A redelivered
// token carries the same. A token that does not carry every field the
// worker's plan reads (a patch changed what the node reads, a retry's
// token, a graph stored by an older runtime, values over carryMax) is read
// for as before. Only stored values are copied: outputs are masked before
// they are stored, and inputs (where secret values are resolved) are never
// carried. Replay reads events, which do not hold tokens.

// carryMax bounds the bytes of the values an exec token carries; lib.lua
// and advance.lua use the same bound (CARRYMAX).
const carryMax = 4096

// carryMaxFields bounds the fields a node's token may carry: a node whose
// expression does not compile here reads every ancestor (plan.reads), and
// its dispatch would read them all.
const carryMaxFields = 64

// outFields returns the state fields the activation of a token of node
// reads for the nodes ids (job.outputs): their outputs, in the order of
// ids, then the iteration count of each loop node among them whose body
// does not hold node, and x.error of each node with an error path.
func (p *plan) outFields(node string, ids []string) []string {
	fields := make([]string, len(ids), len(ids)+1)
	for i, id := range ids {
		fields[i] = outField(id)
	}
	var loops []string
	if g := p.graph[node]; g != nil {
		loops = g.Loops
	}
	for _, id := range ids {
		n := p.nodes[id]
		if n == nil {
			continue
		}
		if n.Loop != nil && !contains(loops, id) {
			fields = append(fields, iterField(id))
		}
		if len(n.OnError) > 0 {
			fields = append(fields, errField(id))
		}
	}
	return fields
}

// carryFields returns the fields an exec token of node id carries (gnode
// rd): what its activation reads, or none when it has no expressions or
// they would be too many.
func (p *plan) carryFields(id string) []string {
	if !p.hasExprs(id) {
		return nil
	}
	ids := p.reads(id)
	if len(ids) == 0 {
		return nil
	}
	f := p.outFields(id, ids)
	if len(f) > carryMaxFields {
		return nil
	}
	return f
}

// nodeFields returns the fields the activation of a token of node id
// reads (exec, item, fin and comp tokens all bind p.reads(id)), or nil.
func (p *plan) nodeFields(id string) []string {
	if p.nodes[id] == nil || !p.hasExprs(id) {
		return nil
	}
	ids := p.reads(id)
	if len(ids) == 0 {
		return nil
	}
	return p.outFields(id, ids)
}

// itemFields are the fields an item token's activation reads (itemReads:
// not the for_each list's source, which its exec token read once).
func (p *plan) itemFields(id string) []string {
	if p.nodes[id] == nil {
		return nil
	}
	ids := p.itemReads(id)
	if len(ids) == 0 {
		return nil
	}
	return p.outFields(id, ids)
}

// finishIDs are the nodes whose outputs the evaluation of a run's outputs
// and goals binds (job.finish): all of them.
func (p *plan) finishIDs() []string {
	ids := make([]string, len(p.w.Nodes))
	for i := range p.w.Nodes {
		ids[i] = p.w.Nodes[i].ID
	}
	return ids
}

// finishFields are the fields a finish token's activation reads.
func (p *plan) finishFields() []string { return p.outFields("", p.finishIDs()) }

// carriesAll reports whether an exec token brings all that its node's
// evaluation reads but the meta the token tells (Worker.tokenMeta): a task
// without for_each (a for_each, a human, agent or flow node reads more of
// the run's meta), whose expressions do not read input, and whose token
// carries every field they read.
func (p *plan) carriesAll(tok *Token) bool {
	n := p.nodes[tok.Node]
	if n == nil || n.Human != nil || n.Agent != nil || n.Flow != nil || n.ForEach != nil || p.readsInput(tok.Node, "exec") {
		return false
	}
	f := p.nodeFields(tok.Node)
	if len(f) == 0 {
		return true
	}
	_, ok := lookupFields(tok.Outs, f)
	return ok
}

// knownOutputs returns the values of fields (as HMGET replies them: a
// string, or nil for an absent field) when the token carries them all or
// the worker pre-read them all; ok is false otherwise.
func (j *job) knownOutputs(fields []string) (vals []any, ok bool) {
	if j.tok.Kind == "exec" {
		if vals, ok = lookupFields(j.tok.Outs, fields); ok {
			return vals, true
		}
	}
	if j.pre != nil {
		if vals, ok = lookupFields(j.pre.outs, fields); ok {
			return vals, true
		}
	}
	return nil, false
}

func lookupFields(m map[string]*string, fields []string) ([]any, bool) {
	if m == nil {
		return nil, false
	}
	vals := make([]any, len(fields))
	for i, f := range fields {
		v, ok := m[f]
		if !ok {
			return nil, false
		}
		if v != nil {
			vals[i] = *v
		}
	}
	return vals, true
}

// prefetchOuts adds to a prefetch's pipeline the read of the fields the
// activation of p's token reads, when the worker knows the run's plan (it
// keeps its meta, or the plan of the graph the token names) and the token
// does not carry them; reads holds one read
// per run and node, shared by the batch's messages.
func (w *Worker) prefetchOuts(ctx context.Context, pipe redis.Pipeliner, p *prefetched, reads map[string]*outsRead) {
	switch p.tok.Kind {
	case "exec", "item", "fin", "comp":
		if p.tok.Node == "" {
			return
		}
	case "finish":
	default:
		return
	}
	// The run's plan: of the meta the worker keeps, else of the graph the
	// token names (exec and finish tokens).
	var pl *plan
	if m := w.fresh.kept(p.tok.Run); m != nil {
		pl = w.st.plan(m.IR)
	} else if dot := strings.LastIndexByte(p.tok.Graph, '.'); dot > 0 {
		pl, _ = w.st.cached(p.tok.Graph[:dot], w.ks.graph(w.ks.shard(p.tok.Run), p.tok.Graph))
	}
	if pl == nil {
		return
	}
	var fields []string
	switch p.tok.Kind {
	case "finish":
		fields = pl.finishFields()
	case "item":
		fields = pl.itemFields(p.tok.Node)
	default:
		fields = pl.nodeFields(p.tok.Node)
	}
	if len(fields) == 0 {
		return
	}
	if p.tok.Kind == "exec" {
		if _, ok := lookupFields(p.tok.Outs, fields); ok {
			return
		}
	}
	key := p.tok.Run + " " + p.tok.Node
	r := reads[key]
	if r == nil {
		r = &outsRead{fields: fields, cmd: pipe.HMGet(ctx, w.ks.state(p.tok.Run), fields...)}
		reads[key] = r
	}
	r.msgs = append(r.msgs, p)
}

// An outsRead is prefetchOuts' read of one run's fields for one node.
type outsRead struct {
	fields []string
	cmd    *redis.SliceCmd
	msgs   []*prefetched
}

// done hands the read's values to its messages.
func (r *outsRead) done() {
	vals, err := r.cmd.Result()
	if err != nil || len(vals) != len(r.fields) {
		return
	}
	m := make(map[string]*string, len(r.fields))
	for i, f := range r.fields {
		if s, ok := vals[i].(string); ok {
			m[f] = &s
		} else {
			m[f] = nil
		}
	}
	for _, p := range r.msgs {
		p.outs = m
	}
}

// joinFields is a gnode's rd as advance.lua takes it: comma-separated
// (ids and field names hold no comma).
func joinFields(f []string) string { return strings.Join(f, ",") }

// An itemRead is the first read of an item token: its for_each
// execution's state and the item's value and state.
type itemRead struct {
	state *redis.StringCmd
	item  *redis.SliceCmd
}

// readItem adds an item token's first read to pipe.
func (w *Worker) readItem(ctx context.Context, pipe redis.Pipeliner, tok *Token) *itemRead {
	x := execKey(tok.Node, tok.Iter)
	return &itemRead{
		state: pipe.HGet(ctx, w.ks.state(tok.Run), x),
		item:  pipe.HMGet(ctx, w.ks.items(tok.Run), fmt.Sprintf("%s|i|%d", x, tok.Item), fmt.Sprintf("%s|s|%d", x, tok.Item)),
	}
}

// itemRead returns what prefetch read for an item token, or nil.
func (p *prefetched) itemRead() *itemRead {
	if p == nil || p.item == nil || p.item.item.Err() != nil || len(p.item.item.Val()) != 2 {
		return nil
	}
	if err := p.item.state.Err(); err != nil && err != redis.Nil {
		return nil
	}
	return p.item
}

package runtime

import (
	"fmt"
	"strconv"
)

// The for_each items: a for_each of n items is n item executions, each a
// handler call and a completion (itemdone), so that what an item costs
// beyond its handler is most of what such a node costs.

// itemReads returns the nodes whose outputs an item's expressions read:
// those of its with blocks (the node's, a flow node's) and dispatch — not
// the for_each list and the when predicate, which the node's exec token
// evaluated once. plan.reads binds them all: an item read and decoded the
// list's source again, every time (a 100-item for_each over a list output
// spent a third of its worker's time decoding it). Cached in the plan's
// reads cache under a key no node id has.
func (p *plan) itemReads(id string) []string {
	key := "\x00item " + id
	p.ancMu.Lock()
	if a, ok := p.anc[key]; ok {
		p.ancMu.Unlock()
		return a
	}
	p.ancMu.Unlock()
	n := p.nodes[id]
	if n == nil || n.ForEach == nil {
		return p.reads(id)
	}
	c := *n
	c.ForEach, c.When = nil, nil
	set := map[string]bool{}
	all := false
	for _, src := range nodeExprs(&c) {
		names, err := p.cel.names(src)
		if err != nil {
			all = true
			break
		}
		for _, name := range names {
			set[name] = true
		}
	}
	var list []string
	if all {
		list = p.reads(id) // as plan.reads: evaluating reports the error
	} else {
		list = []string{}
		for _, r := range p.w.Order {
			// A for_each node in a loop body may read its own output
			// (plan.reads).
			if set[r] && (r != id || n.Loop != nil || len(p.graph[id].Loops) > 0) {
				list = append(list, r)
			}
		}
	}
	p.ancMu.Lock()
	if p.anc == nil {
		p.anc = map[string][]string{}
	}
	p.anc[key] = list
	p.ancMu.Unlock()
	return list
}

// itemDone records the output of item k (itemdone), through the fast
// path when it applies (itemNext).
func (j *job) itemDone(k int, out string) (string, error) {
	if !j.w.opts.generalOnly {
		if res, ok, err := j.itemNext(k, out); ok || err != nil {
			return res, err
		}
	}
	return j.scriptReply("itemdone", itemArgs{j.base(), j.tok.Node, j.tok.Iter, j.tok.Gen, k, out, false, 0, 0, j.maxState()})
}

// itemNext is itemdone's fast path (scripts/itemnext.lua) for an item that
// succeeded: ok is false when it does not apply (a queue that is not the
// run's) or the script declined ("slow", nothing written), and itemdone
// runs.
func (j *job) itemNext(k int, out string) (res string, ok bool, err error) {
	mq := j.ref.queueIndex(j.msg.Q)
	if mq == 0 {
		return "", false, nil
	}
	queues, err := j.w.st.nodeQueues(j.ctx, j.tok.Run, j.m.Graph)
	if err != nil {
		return "", false, err
	}
	nq := j.ref.queueIndex(queues[j.tok.Node])
	if nq == 0 {
		return "", false, nil
	}
	ks := j.w.ks
	keys := append(make([]string, 0, 4+len(j.ref.queues)), ks.state(j.tok.Run), ks.events(j.tok.Run), ks.items(j.tok.Run), ks.runKey(j.tok.Run, "applied"))
	keys = ks.appendStreams(keys, ks.shard(j.tok.Run), j.ref.queues)
	reply, err := j.batched(j.w.st.scripts["itemnext"], keys, j.tok.Node, j.tok.Iter, strconv.Itoa(k), out, strconv.Itoa(j.tok.Gen),
		strconv.FormatInt(nowMS(), 10), mq, j.msg.ID, j.tok.Run, nq, j.maxState(), j.m.Graph)
	if err != nil {
		return "", false, fmt.Errorf("itemnext %s: %w", j.x, err)
	}
	res, _ = reply.(string)
	if res == "slow" {
		return "", false, nil
	}
	j.counted("itemdone", res)
	return res, true, nil
}

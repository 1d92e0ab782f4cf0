package runtime

import (
	"fmt"
	"strconv"
	"sync"
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
	set, all := p.exprNames(nodeExprs(&c))
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
// run's) or the script declined ("slow", nothing written for the item),
// and itemdone runs.
//
// The items of one for_each execution that complete while the worker's
// batcher is busy go in one call: an item joins the open group of its
// execution, if there is one, and waits for its reply; else it opens one
// and calls the script, whose items argument (the group) is written when
// the batcher sends the call, and takes every item that joined until then.
// One call reads and writes the run's hashes once for them all, and
// acknowledges their messages with one command.
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
	maxState := j.maxState()
	key := itemGroupKey{b: j.w.batch, run: j.tok.Run, x: j.x, graph: j.m.Graph, nq: nq, maxState: maxState}
	g, idx := joinItemGroup(key, itemCall{item: k, gen: j.tok.Gen, mq: mq, id: j.msg.ID, out: out}, j.give)
	if idx == 0 {
		// It opened the group: it calls the script for all, offering
		// their slots to the messages the batch reads (as a call each
		// would).
		ks := j.w.ks
		keys := append(make([]string, 0, 4+len(j.ref.queues)), ks.state(j.tok.Run), ks.events(j.tok.Run), ks.items(j.tok.Run), ks.runKey(j.tok.Run, "applied"))
		keys = ks.appendStreams(keys, ks.shard(j.tok.Run), j.ref.queues)
		reply, err := j.w.batch.runOffer(j.ctx, j.w.st.scripts["itemnext"], keys, g, ks.shard(j.tok.Run), j.tok.Node, j.tok.Iter, strconv.FormatInt(nowMS(), 10), j.tok.Run, nq, maxState, j.m.Graph, g)
		g.finish(reply, err)
	}
	<-g.done
	if g.err != nil {
		return "", false, fmt.Errorf("itemnext %s: %w", j.x, g.err)
	}
	res = g.res[idx]
	if res == "slow" {
		return "", false, nil
	}
	j.counted("itemdone", res)
	return res, true, nil
}

// An itemCall is one item's part of an itemnext call.
type itemCall struct {
	item, gen, mq int
	id, out       string
}

// itemGroupKey: the items of a group share the call's other arguments,
// and its batcher (its worker).
type itemGroupKey struct {
	b        *batcher
	run, x   string
	graph    string
	nq       int
	maxState int
}

// An itemGroup is the items of one itemnext call. It is open, taking
// items, until the call's arguments are written (MarshalBinary) or its
// batch offers its slots (seal), or the call returned without writing
// them (an error).
type itemGroup struct {
	key   itemGroupKey
	items []itemCall
	// gives: each item's job.give (nil: its slot is not to be offered),
	// set to true when the item's slot went to a message the call's
	// batch read.
	gives  []*bool
	packed []byte // once written
	done   chan struct{}
	res    []string
	err    error
}

// itemGroups are the open groups, by execution (and worker).
var itemGroups = struct {
	sync.Mutex
	open map[itemGroupKey]*itemGroup
}{open: map[itemGroupKey]*itemGroup{}}

// joinItemGroup adds the call to the open group of key, or opens one;
// idx is its place in the group (0: it opened it).
// give is the item's job.give.
func joinItemGroup(key itemGroupKey, c itemCall, give *bool) (*itemGroup, int) {
	itemGroups.Lock()
	defer itemGroups.Unlock()
	if g := itemGroups.open[key]; g != nil {
		g.items = append(g.items, c)
		g.gives = append(g.gives, give)
		return g, len(g.items) - 1
	}
	g := &itemGroup{key: key, items: []itemCall{c}, gives: []*bool{give}, done: make(chan struct{})}
	itemGroups.open[key] = g
	return g, 0
}

// close ends the group's taking of items; the caller holds itemGroups.
func (g *itemGroup) close() {
	if itemGroups.open[g.key] == g {
		delete(itemGroups.open, g.key)
	}
}

// MarshalBinary writes the group's items as itemnext's last argument,
// closing it: the items that joined until now are the call's. Again (the
// call repeated after NOSCRIPT), it writes the same.
func (g *itemGroup) MarshalBinary() ([]byte, error) {
	itemGroups.Lock()
	defer itemGroups.Unlock()
	g.pack()
	return g.packed, nil
}

// seal closes the group (slotOffer): the items that joined until now are
// the call's. It returns how many of their slots it offers: those of the
// items whose slots may go (job.give), each once.
func (g *itemGroup) seal() int {
	itemGroups.Lock()
	defer itemGroups.Unlock()
	g.pack()
	n := 0
	for _, give := range g.gives {
		if give != nil && !*give {
			n++
		}
	}
	return n
}

// took marks n of the slots seal offered as gone (slotOffer): their items
// must not release them. The items wait for the call's reply (finish)
// and read their marks after it.
func (g *itemGroup) took(n int) {
	itemGroups.Lock()
	defer itemGroups.Unlock()
	for _, give := range g.gives {
		if n == 0 {
			break
		}
		if give != nil && !*give {
			*give = true
			n--
		}
	}
}

// pack closes the group and writes its items as itemnext's argument,
// once; the caller holds itemGroups.
func (g *itemGroup) pack() {
	if g.packed == nil {
		g.close()
		var b []byte
		for _, c := range g.items {
			b = strconv.AppendInt(b, int64(c.item), 10)
			b = append(b, ' ')
			b = strconv.AppendInt(b, int64(c.gen), 10)
			b = append(b, ' ')
			b = strconv.AppendInt(b, int64(c.mq), 10)
			b = append(b, ' ')
			b = append(b, c.id...)
			b = append(b, ' ')
			b = strconv.AppendInt(b, int64(len(c.out)), 10)
			b = append(b, '\n')
			b = append(b, c.out...)
		}
		g.packed = b
	}
}

// finish hands the call's reply to the group's items: one status each,
// for the items it was written with; the others (none, unless the call
// failed before it was written) get the error.
func (g *itemGroup) finish(reply any, err error) {
	itemGroups.Lock()
	g.close()
	n := len(g.items)
	itemGroups.Unlock()
	if err == nil {
		list, _ := reply.([]any)
		if len(list) != n {
			err = fmt.Errorf("itemnext replied %v for %d items", reply, n)
		}
		g.res = make([]string, len(list))
		for i, v := range list {
			s, ok := v.(string)
			if !ok {
				err = fmt.Errorf("itemnext replied %v", reply)
			}
			g.res[i] = s
		}
	}
	g.err = err
	close(g.done)
}

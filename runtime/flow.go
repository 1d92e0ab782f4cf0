package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/runtime/handlers"
)

// Child flows (docs/waiting.md, "Child flows"): a flow node runs its
// embedded child workflow as a run of its own. The worker that takes the
// node's exec token (or a for_each item's token) evaluates `with` (the
// child's inputs), records the child (scripts/flow.lua: the execution
// waits, field fl|x names the child; ch|<child> lists it for cancel and
// status), submits the child run and acknowledges: the parent holds the
// execution's counter unit but no worker. The child run's id is derived
// from the parent run, the execution, the generation, the attempt and the
// item, so a redelivered token submits the same run again, which is a
// no-op; and it is chosen in the parent's shard, so that the script that
// ends the child (lib.lua's endrun) can queue a child token on the
// parent's control queue. The worker taking that token completes the
// execution with the child's result, or fails the attempt (retry starts a
// new child) when the child failed or was cancelled.
//
// Between the record and the submit the child is pending (field
// cp|<child>): Status does not name it, since it may never start. It
// starts only while its parent records it (start.lua checks ch|<child>,
// in the same slot, and deletes cp|), and a parent that gives it up first
// (its end, a join first, the attempt's timeout) closes the record
// (dropChild): either the child started first and is cancelled, or it
// never starts and no run names it. What the submit would refuse (the
// child's inputs) is checked before the record, so that a record only
// waits on the submit going through.

// A parentLink is what a child run records of the execution that runs it
// (run|parent), and what its end's child token names.
type parentLink struct {
	Run     string `json:"run"`
	Node    string `json:"node"`
	Iter    string `json:"iter"`
	Hop     int    `json:"hop"`
	Attempt int    `json:"attempt"`
	Item    int    `json:"item"`
	Gen     int    `json:"gen"`
}

func withParent(l *parentLink) SubmitOption { return func(c *submitConfig) { c.parent = l } }

// childRunID returns the id of the child run of execution x of run parent
// (generation gen, attempt, for_each item or -1): readable in part, unique
// by a hash of all of them, at most 128 bytes, and in the parent's shard.
func childRunID(ks keyspace, parent, x string, gen, attempt, item int) string {
	h := sha256.Sum256([]byte(fmt.Sprintf("%s\x00%s\x00%d\x00%d\x00%d", parent, x, gen, attempt, item)))
	node, _ := splitExecKey(x)
	base := fmt.Sprintf("%s.%s.%x", clipID(parent, 40), clipID(node, 40), h[:8])
	want := ks.shard(parent)
	for s := 0; ; s++ {
		id := base
		if s > 0 {
			id += "-" + strconv.Itoa(s)
		}
		if ks.shard(id) == want {
			return id
		}
	}
}

func clipID(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// child returns the document of the embedded child workflow hash, with the
// children its own flow nodes run (at any depth; the root's list is flat),
// so that it stands on its own as a run's IR.
func (p *plan) child(hash string) (*ir.Workflow, error) {
	if v, ok := p.kids.Load(hash); ok {
		return v.(*ir.Workflow), nil
	}
	idx := make(map[string]int, len(p.w.Children))
	for i := range p.w.Children {
		idx[p.w.Children[i].Hash] = i
	}
	k, ok := idx[hash]
	if !ok {
		return nil, fmt.Errorf("no embedded child workflow has hash %s", hash)
	}
	reach := map[string]bool{}
	var walk func(w *ir.Workflow)
	walk = func(w *ir.Workflow) {
		for i := range w.Nodes {
			if f := w.Nodes[i].Flow; f != nil && !reach[f.Hash] {
				if j, ok := idx[f.Hash]; ok {
					reach[f.Hash] = true
					walk(&p.w.Children[j].Workflow)
				}
			}
		}
	}
	c := p.w.Children[k].Workflow // Submit plans a copy: sharing is safe
	walk(&c)
	c.Children = nil
	for _, ch := range p.w.Children {
		if reach[ch.Hash] {
			c.Children = append(c.Children, ch)
		}
	}
	p.kids.Store(hash, &c)
	return &c, nil
}

// flow starts the child run of a flow node's execution (item -1) or of one
// of its for_each items.
func (j *job) flow(act vars, item int) error {
	n := j.n
	attempt := max(j.tok.Attempt, 1)
	what := func(err error) error {
		if item >= 0 {
			return fmt.Errorf("item %d: %w", item, err)
		}
		return err
	}
	cw, err := j.p.child(n.Flow.Hash)
	if err != nil {
		return j.failNode(what(handlers.Errorf(CodeFlow, false, "flow %s: %v", n.Flow.Uses, err)), item)
	}
	cfg, err := j.p.params(j.ctx, n.Flow.With, n.ID, act, j.maxOutput())
	if err != nil {
		return j.evalFailed(what(err), item)
	}
	// The child's inputs are stored with it: a secret value the parent
	// resolved must not be (a child takes a secret by its name).
	cfg = j.w.opts.Secrets.JSON(cfg)
	in := map[string]any{}
	if err := json.Unmarshal(cfg, &in); err != nil {
		return j.failNode(what(handlers.Errorf(CodeFlow, false, "flow %s: inputs: %v", n.Flow.Uses, err)), item)
	}
	// What the submit would refuse is refused before the record: a child
	// that cannot start is never recorded (the parent would name a run
	// that does not exist). The submit below starts it from this plan.
	cp, _, err := j.w.eng.prepare(cw, in)
	if err != nil {
		return j.failNode(what(handlers.Errorf(CodeFlow, false, "flow %s: %v", n.Flow.Uses, err)), item)
	}
	id := childRunID(j.w.ks, j.tok.Run, j.x, j.tok.Gen, attempt, item)
	b := j.base()
	b.Msg = nil // acknowledged below, once the child is submitted
	// The node's timeout bounds each attempt's child: a flowtimeout
	// token, due then, cancels it (flowTimeout).
	var due int64
	if n.TimeoutMS > 0 {
		due = nowMS() + n.TimeoutMS
	}
	reply, err := j.w.st.call(j.ctx, "flow", j.ref, struct {
		base
		Node    string `json:"node"`
		Iter    string `json:"iter"`
		Gen     int    `json:"gen"`
		Item    int    `json:"item"`
		Child   string `json:"child"`
		Hop     int    `json:"hop"`
		Attempt int    `json:"attempt"`
		Due     int64  `json:"due"`
	}{b, j.tok.Node, j.tok.Iter, j.tok.Gen, item, id, j.tok.Hop, attempt, due})
	if err != nil {
		return fmt.Errorf("flow %s: %w", j.x, err)
	}
	if reply != "ok" {
		j.counted("flow", reply)
		return j.ack()
	}
	if h := j.w.eng.opts.flowHook; h != nil {
		h(j.ctx, "recorded", id)
	}
	link := &parentLink{Run: j.tok.Run, Node: j.tok.Node, Iter: j.tok.Iter, Hop: j.tok.Hop, Attempt: attempt, Item: item, Gen: j.tok.Gen}
	if _, err := j.w.eng.submit(j.ctx, cp, in, []SubmitOption{WithRunID(id), withParent(link)}); err != nil {
		if errors.Is(err, errChildUnrecorded) {
			// The parent gave the child up (it ended, the execution was
			// cancelled or timed out) before it started: it never will.
			j.counted("flow", "inactive")
			return j.ack()
		}
		if errors.Is(err, ErrRunExists) {
			return j.failNode(what(handlers.Errorf(CodeFlow, false, "flow %s: %v", n.Flow.Uses, err)), item)
		}
		return err // the message stays pending and is handled again
	}
	if h := j.w.eng.opts.flowHook; h != nil {
		h(j.ctx, "submitted", id)
	}
	// A parent cancelled while the child was being submitted: its cancel
	// may not have seen the child. Nor may a join first that cancelled the
	// execution meanwhile (its unchild token may have come first).
	if v, err := j.w.st.rdb.HMGet(j.ctx, j.w.ks.state(j.tok.Run), runField("status"), j.x).Result(); err == nil {
		st, _ := v[0].(string)
		xs, _ := v[1].(string)
		switch {
		case st != RunRunning:
			j.w.eng.cancelRun(j.ctx, id, "parent run "+j.tok.Run+" is "+st)
		case item < 0 && xs == NodeCancelled:
			j.w.eng.cancelRun(j.ctx, id, "a join first of parent run "+j.tok.Run+" ran first")
		}
	}
	j.w.applied.Add(1)
	return j.ack()
}

// childDone handles a child token: the child run of an execution (or
// for_each item) ended. The execution completes with the child's result or
// its attempt fails; a token of a child the execution no longer waits for
// (a duplicate, an older attempt) is dropped.
func (j *job) childDone() error {
	item := j.tok.Item
	attempt := max(j.tok.Attempt, 1)
	id := childRunID(j.w.ks, j.tok.Run, j.x, j.tok.Gen, attempt, item)
	if j.n.Flow == nil {
		return j.ack()
	}
	if ok, err := j.waitsOn(id, item, attempt); err != nil || !ok {
		if err == nil {
			j.w.dups.Add(1)
			err = j.ack()
		}
		return err
	}
	m, err := j.w.st.meta(j.ctx, id)
	if errors.Is(err, ErrUnknownRun) {
		return j.handlerFailed(j.childErr(handlers.Errorf(CodeFlow, true, "child run %s is unknown (expired?)", id), item), item)
	}
	if err != nil {
		return err
	}
	switch m.Status {
	case RunCompleted:
	case RunFailed, RunCancelled:
		msg := fmt.Sprintf("child run %s %s", id, m.Status)
		if m.Error != "" {
			msg += ": " + m.Error
		}
		return j.handlerFailed(j.childErr(handlers.Errorf(CodeFlow, true, "%s", msg), item), item)
	default: // running again (a partial retry of the child): it ends again
		return j.ack()
	}
	out := json.RawMessage(m.Result)
	if len(out) == 0 {
		out = json.RawMessage("{}")
	}
	if err := j.checkOutput(out); err != nil {
		return j.handlerFailed(j.childErr(err, item), item)
	}
	if item >= 0 {
		reply, err := j.scriptReply("itemdone", itemArgs{j.base(), j.tok.Node, j.tok.Iter, j.tok.Gen, item, string(out), false, 0, 0, j.maxState()})
		if err == nil && reply == "state" {
			return j.failNode(fmt.Errorf("item %d: %w", item, j.stateErr("output", len(out))), item)
		}
		return err
	}
	return j.resumed(out)
}

// waitsOn reports whether the execution (item -1) or the for_each item
// still waits on child run id, of this attempt.
func (j *job) waitsOn(id string, item, attempt int) (bool, error) {
	if item < 0 {
		vals, err := j.w.st.rdb.HMGet(j.ctx, j.w.ks.state(j.tok.Run), j.x, "fl|"+j.x).Result()
		if err != nil && err != redis.Nil {
			return false, err
		}
		st, _ := vals[0].(string)
		return st == NodeWaiting && vals[1] == id, nil
	}
	pipe := j.w.st.rdb.Pipeline()
	stc := pipe.HGet(j.ctx, j.w.ks.state(j.tok.Run), j.x)
	itc := pipe.HMGet(j.ctx, j.w.ks.items(j.tok.Run), fmt.Sprintf("%s|s|%d", j.x, item), fmt.Sprintf("%s|a|%d", j.x, item))
	if _, err := pipe.Exec(j.ctx); err != nil && err != redis.Nil {
		return false, err
	}
	vals := itc.Val()
	ist, _ := vals[0].(string)
	ia, _ := vals[1].(string)
	if ia == "" {
		ia = "1"
	}
	return stc.Val() == NodeRunning && (ist == "queued" || ist == "retrying") && ia == strconv.Itoa(attempt), nil
}

// resumed routes a parked execution (a child flow's, a signal task's, a
// wait task's) that ends with out: loop and branch see the node's
// activation, bound only when it has expressions.
func (j *job) resumed(out json.RawMessage) error {
	var act vars
	if j.p.hasExprs(j.n.ID) {
		var err error
		if act, err = j.activation(j.p.reads(j.n.ID)); err != nil {
			return j.evalFailed(err, -1)
		}
	}
	return j.succeed(out, act)
}

func (j *job) childErr(err error, item int) error {
	if item >= 0 {
		return fmt.Errorf("item %d: %w", item, err)
	}
	return err
}

// flowTimeout handles a flowtimeout token: the node's timeout passed while
// its attempt (or an item's) waited on its child run. If the execution (or
// item) still waits on that child, the child run is cancelled with its
// children and the attempt fails with code timeout, so retry starts a new
// child; else (the child ended first, a duplicate) it is acknowledged. The
// cancelled child's end then finds the attempt over and changes nothing.
func (j *job) flowTimeout() error {
	item := j.tok.Item
	attempt := max(j.tok.Attempt, 1)
	if j.n.Flow == nil {
		return j.ack()
	}
	id := childRunID(j.w.ks, j.tok.Run, j.x, j.tok.Gen, attempt, item)
	d := time.Duration(j.n.TimeoutMS) * time.Millisecond
	ok, err := j.waitsOn(id, item, attempt)
	if err != nil {
		return err
	}
	if ok {
		// The attempt fails first, so that the child token of the
		// cancelled child finds it over (a child token taken in between
		// fails it with code flow instead: one of the two applies).
		// A child not started yet (its worker died or is late) never
		// will: the error does not name a run that does not exist.
		what := fmt.Sprintf("child run %s cancelled", id)
		if n, err := j.w.st.rdb.Exists(j.ctx, j.w.ks.state(id)).Result(); err == nil && n == 0 {
			what = "its child run had not started"
		}
		ferr := handlers.Errorf(handlers.CodeTimeout, true, "attempt timed out after %s: %s", d, what)
		if err := j.handlerFailed(j.childErr(ferr, item), item); err != nil {
			return err
		}
	} else {
		j.w.dups.Add(1)
		if err := j.ack(); err != nil {
			return err
		}
	}
	// Also when the attempt was over already (a redelivery after a crash
	// before this cancel): a child that ended is left as it is; one that
	// never started never will.
	j.w.eng.dropChild(j.ctx, j.tok.Run, id, fmt.Sprintf("the timeout of %s of flow node %s of parent run %s passed", d, j.x, j.tok.Run))
	return nil
}

// unchild handles an unchild token: a join first cancelled a flow node's
// execution while it waited on its child run (lib.lua's cancellosers),
// and the child run goes too, with its own children, as a cancelled
// parent's would. The child's end then queues a child token that finds
// the execution cancelled and changes nothing.
func (j *job) unchild() error {
	x := execKey(j.tok.Node, j.tok.Iter)
	v, err := j.w.st.rdb.HMGet(j.ctx, j.w.ks.state(j.tok.Run), x, "fl|"+x).Result()
	if err != nil {
		return err
	}
	st, _ := v[0].(string)
	child, _ := v[1].(string)
	if st == NodeCancelled && child != "" {
		j.w.eng.dropChild(j.ctx, j.tok.Run, child, "a join first of parent run "+j.tok.Run+" ran first")
	}
	return j.ack()
}

// cancelRun cancels a running run and its children, logging what fails
// (a run that ended meanwhile is not an error).
func (e *Engine) cancelRun(ctx context.Context, run, reason string) {
	m, err := e.meta(ctx, run)
	if err != nil || m.Status != RunRunning {
		return
	}
	if _, err := e.st.call(ctx, "cancel", m.ref(), struct {
		base
		Reason string `json:"reason"`
	}{e.st.base(m.ref(), nil), reason}); err != nil {
		e.log.Warn("wfc: cancelling a child run", "run", run, "err", err)
		return
	}
	e.cancelChildren(ctx, run)
}

// errChildUnrecorded is Submit's refusal of a child run whose parent no
// longer records it (start.lua): the parent closed the record first.
var errChildUnrecorded = errors.New("runtime: the parent run no longer records this child run")

// closeChildScript closes the record of a child run that has not started
// (the parent gives it up: it ended, or the execution was cancelled or
// timed out) so that it never starts: start.lua starts a child only while
// its parent's ch|<child> is there. Closed, the record goes (ch|, cp|, and
// fl| when it names the child): the parent names no run that does not
// exist. Atomic with start.lua (the child's keys are in its parent's
// slot): either the child started first and is cancelled (reply
// started), or it never starts (closed). A record without cp| (a child
// that started, perhaps expired since) is kept.
// KEYS[1] the parent's state hash, KEYS[2] the child's; ARGV[1] the child.
var closeChildScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[2]) == 1 then return 'started' end
if redis.call('HEXISTS', KEYS[1], 'cp|' .. ARGV[1]) == 0 then return 'kept' end
local x = redis.call('HGET', KEYS[1], 'ch|' .. ARGV[1])
redis.call('HDEL', KEYS[1], 'ch|' .. ARGV[1], 'cp|' .. ARGV[1])
if x then
  x = string.match(x, '^[^#]*')
  if redis.call('HGET', KEYS[1], 'fl|' .. x) == ARGV[1] then redis.call('HDEL', KEYS[1], 'fl|' .. x) end
end
return 'closed'
`)

// dropChild ends child run child of run parent, which gives it up: one
// that started is cancelled with its own children (cancelRun); one that
// is recorded and has not started has its record closed, and never starts.
func (e *Engine) dropChild(ctx context.Context, parent, child, reason string) {
	res, err := closeChildScript.Run(ctx, e.st.rdb, []string{e.st.ks.state(parent), e.st.ks.state(child)}, child).Text()
	if err != nil {
		e.log.Warn("wfc: closing the record of a child run", "run", parent, "child", child, "err", err)
	}
	if res != "closed" {
		e.cancelRun(ctx, child, reason)
	}
}

// cancelChildren cancels the running children of a run that ended
// (Cancel, and the orphans token its end queues): the ch|<child> fields
// of its state hash list them. A child still pending (recorded, cp|) is
// closed instead when it has not started (dropChild), so that it never
// does.
func (e *Engine) cancelChildren(ctx context.Context, run string) {
	kids, pending, err := e.st.children(ctx, run)
	if err != nil {
		e.log.Warn("wfc: listing a run's children", "run", run, "err", err)
		return
	}
	if len(kids) == 0 {
		return
	}
	reason, ended, gen := "parent run "+run+" ended", true, 0
	if m, err := e.st.meta(ctx, run); err == nil {
		reason, ended, gen = "parent run "+run+" "+m.Status, m.Status != RunRunning, m.Gen
	}
	for child := range kids {
		switch {
		case !ended && e.childOfGen(ctx, child, gen):
			// A run retried since it ended (a late orphans token): a
			// child its new generation started runs for it.
		case pending[child] && ended:
			e.dropChild(ctx, run, child, reason)
		default:
			// A run retried since it ended may be starting a pending
			// child of its new generation: cancelRun leaves a run that
			// has not started.
			e.cancelRun(ctx, child, reason)
		}
	}
}

// childOfGen reports whether child is a flow node's child run of its
// parent's generation gen or later (run|parent names it); an agent's
// delegated run, or one that cannot be read, is not.
func (e *Engine) childOfGen(ctx context.Context, child string, gen int) bool {
	raw, err := e.st.rdb.HGet(ctx, e.st.ks.state(child), runField("parent")).Result()
	if err != nil {
		return false
	}
	var l parentLink
	return json.Unmarshal([]byte(raw), &l) == nil && l.Gen >= gen
}

// children returns a run's child runs (child run id -> the execution, with
// "#item" for a for_each item's), and those pending: recorded, perhaps
// not started (field cp|).
func (s *store) children(ctx context.Context, run string) (kids map[string]string, pending map[string]bool, err error) {
	kids, pending = map[string]string{}, map[string]bool{}
	iter := s.rdb.HScan(ctx, s.ks.state(run), 0, "c[hp]|*", 1000).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		if !iter.Next(ctx) {
			break
		}
		if c, ok := strings.CutPrefix(k, "ch|"); ok && c != "" {
			kids[c] = iter.Val()
		} else if c, ok := strings.CutPrefix(k, "cp|"); ok && c != "" {
			pending[c] = true
		}
	}
	return kids, pending, iter.Err()
}

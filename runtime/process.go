package runtime

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/traits"
	"github.com/redis/go-redis/v9"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/runtime/handlers"
)

// A Token is the message a queue stream carries (field "t"), as JSON.
type Token struct {
	// Kind: "exec" (run a node), "item" (run one for_each item), "fin"
	// (collect a for_each node's items and route), "comp" (run a
	// compensation), "finish" (evaluate the run's outputs), "deadline",
	// "timeout" and "escalate" (an approval's timeout and escalation:
	// docs/waiting.md), "wake" (a wait task's timer: wait.go), "child" (a
	// flow node's child run ended: flow.go), "orphans" (a run with child
	// runs ended: cancel those still running), "signal" and "sigtimeout" (a
	// signal task's signal and timeout: signal.go).
	Kind    string `json:"kind"`
	Run     string `json:"run"`
	Node    string `json:"node,omitempty"`
	Iter    string `json:"iter,omitempty"`
	Hop     int    `json:"hop,omitempty"`
	Attempt int    `json:"attempt,omitempty"`
	// Item is the for_each item index ("item"), the compensation index
	// ("comp"), else -1.
	Item int `json:"item"`
	Gen  int `json:"gen"`
	// Graph and MaxHops (exec tokens the scripts write) are the run's
	// graph key suffix and hop limit, copied from its meta: with them a
	// worker can run a fresh token of a run whose meta it has not read
	// (freshness).
	Graph   string `json:"g,omitempty"`
	MaxHops int    `json:"mh,omitempty"`
	// Outs (exec tokens the scripts write, when small enough) are the
	// state fields the node's activation reads — out|<id>, it|<id>,
	// er|<id> — as they were when the token was queued, nil for a field
	// that was absent: the node's inputs travel with it (carry.go).
	Outs map[string]*string `json:"o,omitempty"`
}

// A job is the handling of one message.
type job struct {
	w    *Worker
	ctx  context.Context
	tok  Token
	msg  *msgRef
	m    *runMeta
	p    *plan
	n    *ir.Node
	x    string // exec key
	ref  runRef
	strm string
	// poison is the delivery count of a message delivered more than
	// MaxDeliveries times: its execution fails instead of running again.
	poison int
	// pre is what the worker read for the message with its batch, or nil.
	pre *prefetched
	// give, when not nil, lets the completion's batch hand the message's
	// slot to a message it reads; it is set to true when it did.
	give *bool
	// remote, when set, runs every handler call (flight.remote).
	remote handlers.Func
}

// poisonErr is the failure of an execution whose message was delivered too
// often.
func (j *job) poisonErr() error {
	return handlers.Errorf(CodeLost, false, "gave up after %d deliveries: the workers handling it died or lost it every time", j.poison)
}

// process handles a message in flight; give is as for job.give. A job
// that met a graph a patch changed (errGraphChanged) is handled again on
// the run's current version (patch.go).
func (w *Worker) process(ctx context.Context, f *flight, give *bool) error {
	err := w.processOnce(ctx, f, give)
	for try := 0; try < 3 && errors.Is(err, errGraphChanged); try++ {
		w.fresh.forget(f.tok.Run)
		f.pre = nil
		err = w.processOnce(ctx, f, give)
	}
	return err
}

func (w *Worker) processOnce(ctx context.Context, f *flight, give *bool) error {
	stream, id, tok, pre := f.stream, f.m.ID, f.tok, f.pre
	if f.notToken {
		w.log.Error("wfc worker: dropping a message that is not a token", "stream", stream, "id", id, "token", f.raw)
		return w.st.rdb.XAck(ctx, stream, Group, id).Err()
	}
	j := &job{w: w, ctx: ctx, tok: tok, msg: &msgRef{Q: f.q, ID: id}, strm: stream, poison: f.poison, pre: pre, give: give, remote: f.remote}
	var m *runMeta
	var err error
	if pre != nil && pre.m != nil {
		m = pre.m
	} else if pre != nil {
		m, err = parseMeta(tok.Run, pre.meta)
		if err == nil && m.Status == RunRunning {
			w.fresh.remember(tok.Run, m)
		}
	} else {
		m, err = w.st.meta(ctx, tok.Run)
	}
	if errors.Is(err, ErrUnknownRun) {
		w.log.Warn("wfc worker: dropping a token of an unknown run", "run", tok.Run, "id", id)
		return j.ack()
	}
	if err != nil {
		return err
	}
	j.m, j.ref = m, m.ref()
	if tok.Kind == "unchild" {
		// A join first cancelled the execution (lib.lua's cancellosers):
		// its child run goes, whatever the parent's state now.
		return j.unchild()
	}
	if tok.Kind == "orphans" {
		// The run ended (lib.lua's endrun): its children still running
		// run for nothing.
		w.eng.cancelChildren(ctx, tok.Run)
		return j.ack()
	}
	if tok.Kind == "comp" {
		if m.Status != RunFailed || tok.Gen < m.Gen {
			return j.ack()
		}
	} else if tok.Kind == "final" {
		if m.Finally != "running" || tok.Gen < m.Gen {
			return j.ack()
		}
	} else if m.Status != RunRunning {
		w.inactive.Add(1)
		return j.ack() // the run ended
	} else if tok.Gen < m.Gen {
		w.stale.Add(1)
		return j.ack() // a token of an older generation (partial retry)
	}
	if j.p, err = w.st.planFor(ctx, m.IR); err != nil {
		return fmt.Errorf("run %s: %w", m.ID, err)
	}
	if tok.Node != "" {
		if j.n = j.p.nodes[tok.Node]; j.n == nil {
			return j.abort(fmt.Sprintf("token names unknown node %q", tok.Node), "")
		}
		j.x = execKey(tok.Node, tok.Iter)
	}
	switch tok.Kind {
	case "exec":
		return j.exec()
	case "item":
		return j.item()
	case "fin":
		return j.collect()
	case "comp":
		return j.compensate()
	case "finish":
		return j.finish()
	case "final":
		return j.final()
	case "timeout":
		return j.timeout()
	case "wake":
		return j.wake()
	case "child":
		return j.childDone()
	case "flowtimeout":
		return j.flowTimeout()
	case "escalate":
		return j.escalate()
	case "signal":
		return j.signalled()
	case "sigtimeout":
		return j.signalTimeout()
	case "deadline":
		if tok.Gen != m.Gen {
			return j.ack()
		}
		return j.abort(fmt.Sprintf("deadline of %s exceeded", time.Duration(m.DeadlineMS)*time.Millisecond), "")
	}
	w.log.Error("wfc worker: dropping a token of unknown kind", "kind", tok.Kind, "id", id)
	return j.ack()
}

func (j *job) ack() error { return j.w.st.rdb.XAck(j.ctx, j.strm, Group, j.msg.ID).Err() }

// script runs a run script and logs non-ok replies.
func (j *job) script(name string, args any) error {
	_, err := j.scriptReply(name, args)
	return err
}

// scriptReply is script, returning the script's status reply.
func (j *job) scriptReply(name string, args any) (string, error) {
	res, err := j.w.st.callWith(j.ctx, name, j.ref, args, func(sc *redis.Script, keys []string, arg string) (any, error) {
		return j.batched(sc, keys, arg)
	})
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", name, cmpOrStr(j.x, j.tok.Run), err)
	}
	j.counted(name, res)
	return res, nil
}

// batched runs a transition script of the message through the worker's
// batcher, offering the message's slot to a message the batch reads (the
// piggyback) once.
func (j *job) batched(sc *redis.Script, keys []string, args ...any) (any, error) {
	res, gave, err := j.w.batch.run(j.ctx, sc, keys, j.give != nil && !*j.give, j.w.ks.shard(j.tok.Run), args...)
	if gave {
		*j.give = true
	}
	return res, err
}

// counted counts a script's status reply in the worker's stats.
func (j *job) counted(script, res string) {
	switch res {
	case "ok":
		j.w.applied.Add(1)
		switch script {
		case "advance", "complete", "retry", "expand", "itemdone":
			// They apply only to a running run (else: inactive).
			j.w.fresh.confirm(j.tok.Run, j.tok.Gen)
		}
		return
	case "failed":
		j.w.applied.Add(1)
		return
	case "dup":
		j.w.dups.Add(1)
	case "stale":
		j.w.stale.Add(1)
	case "inactive":
		j.w.inactive.Add(1)
	}
	j.w.log.Debug("wfc worker: transition not applied", "script", script, "run", j.tok.Run, "x", j.x, "reply", res)
}

func cmpOrStr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func (j *job) base() base { return j.w.st.base(j.ref, j.msg) }

type completeArgs struct {
	base
	Node    string      `json:"node"`
	Iter    string      `json:"iter"`
	Hop     int         `json:"hop"`
	Gen     int         `json:"gen"`
	Mode    string      `json:"mode"`
	Output  string      `json:"output,omitempty"`
	Error   string      `json:"error,omitempty"`
	Code    string      `json:"code,omitempty"` // the error code, mode fail
	Real    [][2]string `json:"real,omitempty"`
	Loop    bool        `json:"loop"`
	Item    int         `json:"item"`
	FailRun bool        `json:"failrun"`
	// MaxState is the run's max_state_bytes: an output that would take
	// the run's stored values over it is not written (reply "state").
	MaxState int  `json:"maxstate"`
	Drop     bool `json:"drop,omitempty"`
}

// maxOutput and maxState are the run's bounds: the worker's, or the
// workflow's when lower.
func (j *job) maxOutput() int {
	return effectiveLimit(j.p.w.Settings.MaxOutputBytes, j.w.opts.MaxOutputBytes)
}

func (j *job) maxState() int {
	return effectiveLimit(j.p.w.Settings.MaxStateBytes, j.w.opts.MaxStateBytes)
}

// stateErr is the failure of a node whose value (of size bytes) does not
// fit in the run's max_state_bytes.
func (j *job) stateErr(what string, size int) error {
	return handlers.Errorf(CodeState, false, "%s of %d bytes would take the run's stored values over the limit of %d (max_state_bytes)", what, size, j.maxState())
}

func (j *job) complete(a completeArgs) error {
	if a.Mode == "ok" && !a.Loop && a.Item == -1 && j.tok.Iter == "" && !j.w.opts.generalOnly {
		if done, err := j.advance(a); done || err != nil {
			return err
		}
	}
	a.base, a.Node, a.Iter, a.Hop, a.Gen = j.base(), j.tok.Node, j.tok.Iter, j.tok.Hop, j.tok.Gen
	a.Drop = j.tok.Kind == "exec" && j.n != nil && j.n.ForEach != nil
	a.MaxState = j.maxState()
	res, err := j.scriptReply("complete", a)
	if err == nil && res == "state" {
		// Nothing was written (a failure that does not fit fails the run
		// in the script itself, so this does not recurse).
		return j.failNode(j.stateErr("output", len(a.Output)), a.Item)
	}
	return err
}

// advance is complete's fast path (scripts/advance.lua) for the common
// case: a node outside loops, without compensate, whose every outgoing edge
// is a plain after edge (so all get a real token) to a successor outside
// loops (or to none). It reports done=false when the case does not apply or
// the script declined ("slow"), and complete runs.
func (j *job) advance(a completeArgs) (done bool, err error) {
	succ, ok := j.p.simpleSuccessors(j.tok.Node)
	if !ok || len(a.Real) != len(succ) {
		return false, nil
	}
	mq, ctl := j.ref.queueIndex(j.msg.Q), min(len(j.ref.queues), 1) // the control queue is the run's first
	if mq == 0 || ctl == 0 {
		return false, nil
	}
	queues, err := j.w.st.nodeQueues(j.ctx, j.tok.Run, j.m.Graph)
	if err != nil {
		return false, err
	}
	args := make([]any, 0, 12+4*len(succ))
	outputs := "0"
	if len(j.p.w.Outputs) > 0 || len(j.p.w.Goals) > 0 || j.p.w.Finally != nil {
		outputs = "1"
	}
	args = append(args, j.tok.Node, a.Output, j.tok.Hop+1, j.tok.Gen, strconv.FormatInt(nowMS(), 10), mq, j.msg.ID, j.tok.Run, ctl, outputs, j.maxState())
	for _, s := range succ {
		q := j.ref.queueIndex(queues[s.id])
		if q == 0 {
			return false, nil
		}
		nin := s.nin
		if s.mode == ir.JoinAny {
			nin = -nin
		}
		args = append(args, s.id, q, nin, s.rd)
	}
	args = append(args, j.m.Graph) // the graph decided from (a patch may change it)
	if outputs == "1" {
		if res, ok := j.resultAhead(a.Output); ok {
			args = append(args, res) // ahead.go
		}
	}
	reply, err := j.batched(j.w.st.scripts["advance"], j.w.st.ks.advanceKeys(j.ref.id, j.ref.queues), args...)
	res, _ := reply.(string)
	if err != nil {
		return false, fmt.Errorf("advance %s: %w", j.x, err)
	}
	if res == "slow" {
		return false, nil
	}
	j.counted("advance", res)
	return true, nil
}

func (j *job) abort(reason, x string) error {
	return j.script("abort", struct {
		base
		Gen    int    `json:"gen"`
		Reason string `json:"reason"`
		X      string `json:"x"`
	}{j.base(), j.tok.Gen, j.w.opts.Secrets.Text(reason), x})
}

// outputs reads the latest outputs of the given nodes and, for the loop
// nodes among them that do not enclose this execution, the number of
// iterations they ran, under "it|<id>" (iterField). What the token carries
// or the worker pre-read with it is not read again (carry.go).
func (j *job) outputs(ids []string) (map[string]string, error) {
	out := map[string]string{}
	if len(ids) == 0 {
		return out, nil
	}
	fields := j.p.outFields(j.tok.Node, ids)
	vals, ok := j.knownOutputs(fields)
	if !ok {
		var err error
		if vals, err = j.w.st.rdb.HMGet(j.ctx, j.w.ks.state(j.tok.Run), fields...).Result(); err != nil {
			return nil, err
		}
	}
	for i, v := range vals {
		if s, ok := v.(string); ok {
			if i < len(ids) {
				out[ids[i]] = s
			} else {
				out[fields[i]] = s
			}
		}
	}
	return out, nil
}

// loopIndex returns the position of loop node id among the loops enclosing
// this execution (its component in the iteration vector), or -1.
func (j *job) loopIndex(id string) int {
	if g := j.p.graph[j.tok.Node]; g != nil {
		return slices.Index(g.Loops, id)
	}
	return -1
}

// iteration returns L.iteration for loop node id (docs/language.md §7.6):
// inside its body, this execution's iteration; elsewhere, how many
// iterations it ran (0 if none completed).
func (j *job) iteration(id string, outs map[string]string) int64 {
	if k := j.loopIndex(id); k >= 0 {
		comps := strings.Split(j.tok.Iter, ".")
		if k < len(comps) {
			n, _ := strconv.ParseInt(comps[k], 10, 64)
			return n
		}
		return 0
	}
	n, _ := strconv.ParseInt(outs[iterField(id)], 10, 64)
	return n
}

// activation binds input and the outputs of the nodes in ids.
func (j *job) activation(ids []string) (vars, error) {
	outs, err := j.outputs(ids)
	if err != nil {
		return nil, redisErr{err}
	}
	in, err := j.runInputs()
	if err != nil {
		return nil, redisErr{err}
	}
	act, err := j.p.activation(in, ids, outs)
	if err != nil {
		return nil, &evalError{what: "activation", err: err}
	}
	act["run"] = map[string]any{"id": j.tok.Run}
	j.secretInputs(act)
	for _, id := range ids {
		n := j.p.nodes[id]
		m, ok := act[id].(map[string]any)
		if n == nil || !ok {
			continue
		}
		if n.Loop != nil {
			m["iteration"] = j.iteration(id, outs)
		}
		// x.error on x's error path: {code, message}.
		if raw, ok := outs[errField(id)]; ok {
			var e struct{ Code, Message string }
			if json.Unmarshal([]byte(raw), &e) == nil {
				m["error"] = map[string]any{"code": e.Code, "message": e.Message}
			}
		}
	}
	return act, nil
}

// redisErr tells errors of Redis (the message stays pending and is handled
// again) from errors of the node.
type redisErr struct{ error }

func (j *job) exec() error {
	var st string
	if j.pre != nil && j.pre.state != nil {
		st = *j.pre.state
	} else {
		var err error
		st, err = j.w.st.rdb.HGet(j.ctx, j.w.ks.state(j.tok.Run), j.x).Result()
		if err != nil && err != redis.Nil {
			return err
		}
	}
	// (running: marked by started.lua, then the worker died or lost the
	// message; the execution runs again, at least once as always.)
	// (waiting, for a flow node: its child run was recorded, then the
	// worker died before submitting it; the submit is idempotent.)
	if st != NodeQueued && st != NodeRetrying && st != NodeRunning && (st != NodeWaiting || j.n.Flow == nil) {
		j.w.dups.Add(1)
		return j.ack() // done already, or an unknown execution
	}
	if j.poison > 0 {
		return j.failNode(j.poisonErr(), -1)
	}
	if max := j.m.MaxHops; max > 0 && j.tok.Hop > max {
		return j.abort(fmt.Sprintf("max_hops %d exceeded: %s would run at hop %d", max, j.x, j.tok.Hop), j.x)
	}
	n := j.n
	var act vars
	if j.p.hasExprs(n.ID) {
		var err error
		if act, err = j.activation(j.p.reads(n.ID)); err != nil {
			return j.evalFailed(err, -1)
		}
	}
	if n.When != nil {
		ok, err := j.p.evalBool(j.ctx, n.When, n.ID+".when", act)
		if err != nil {
			return j.evalFailed(err, -1)
		}
		if !ok {
			return j.complete(completeArgs{Mode: "skip", Item: -1})
		}
	}
	if n.Human != nil {
		return j.await(act)
	}
	if n.ForEach != nil {
		return j.expand(act)
	}
	if n.Flow != nil {
		return j.flow(act, -1) // a child run: parked, no handler runs
	}
	if n.Agent != nil {
		return j.agent(act) // the model decides (agentnode.go)
	}
	cfg, err := j.p.params(j.ctx, n.With, n.ID, act, j.maxOutput())
	if err != nil {
		return j.evalFailed(err, -1)
	}
	h, err := j.handlerOf(act)
	if err != nil {
		return j.evalFailed(err, -1)
	}
	if h == WaitHandler {
		return j.wait(cfg, act) // a durable timer: parked, no handler runs
	}
	if h == SignalHandler {
		return j.listen(cfg) // parked until its signal (signal.go)
	}
	stop := j.markRunning()
	out, err := j.call(h, cfg, -1, false)
	stop()
	out = j.w.opts.Secrets.JSON(out) // before the size check and any write
	if err == nil {
		err = j.checkOutput(out)
	}
	if err != nil {
		return j.handlerFailed(err, -1)
	}
	return j.succeed(out, act)
}

// checkOutput checks a handler output against the node's output type; a
// value that does not fit fails the attempt.
func (j *job) checkOutput(out json.RawMessage) error {
	if max := j.maxOutput(); len(out) > max {
		return handlers.Errorf(CodeOutput, false, "output of %d bytes, over the limit of %d (max_output_bytes)", len(out), max)
	}
	t := itemType(j.n)
	if t == nil {
		return nil
	}
	v, err := decodeJSON(out)
	if err != nil {
		return handlers.Errorf(CodeOutput, false, "output is not JSON: %v", err)
	}
	if err := checkType(v, t, "output"); err != nil {
		return handlers.Errorf(CodeOutput, true, "handler %s: %w", j.n.Handler, err)
	}
	return nil
}

// succeed routes a node that ran: loop, then branch, then plain edges.
func (j *job) succeed(out json.RawMessage, act vars) error {
	for try := 0; ; try++ {
		real, loop, err := j.decide(out, act)
		if err != nil {
			return j.evalFailed(err, -1)
		}
		err = j.complete(completeArgs{Mode: "ok", Output: string(out), Real: real, Loop: loop, Item: -1})
		// A patch changed the run's graph meanwhile: decide again on the
		// current version, without running the handler again.
		if try < 3 && errors.Is(err, errGraphChanged) && j.reload() == nil {
			continue
		}
		return err
	}
}

// decide evaluates a node's loop and branch on its output and returns the
// edges that get real tokens, or loop=true to run the next iteration.
func (j *job) decide(out json.RawMessage, act vars) (real [][2]string, loop bool, err error) {
	n, p := j.n, j.p
	if n.Loop == nil && n.Branch == nil {
		return p.edges(n.ID, ir.EdgeAfter, nil), false, nil
	}
	ov, err := jsonToCEL(out, outputType(n))
	if err != nil {
		return nil, false, fmt.Errorf("output: %w", err)
	}
	act = act.with("output", ov)
	if n.Loop != nil {
		more, err := p.evalBool(j.ctx, &n.Loop.While, n.ID+".loop.while", act)
		if err != nil {
			return nil, false, err
		}
		if more {
			if i := loopIteration(j.tok.Iter); i < n.Loop.Max {
				return nil, true, nil
			}
			if len(n.Loop.Exhausted) == 0 {
				return nil, false, handlers.Errorf(CodeLoopExhausted, false, "loop exhausted: while still true after %d iterations and no exhausted path", n.Loop.Max)
			}
			return p.edges(n.ID, ir.EdgeExhausted, nil), false, nil
		}
	}
	if n.Branch != nil {
		for i := range n.Branch.Rules {
			r := &n.Branch.Rules[i]
			ok, err := p.evalBool(j.ctx, &r.When, fmt.Sprintf("%s.branch[%d]", n.ID, i), act)
			if err != nil {
				return nil, false, err
			}
			if ok {
				return p.edges(n.ID, ir.EdgeBranch, r.Targets), false, nil
			}
		}
		return p.edges(n.ID, ir.EdgeDefault, n.Branch.Default), false, nil
	}
	return p.edges(n.ID, ir.EdgeAfter, nil), false, nil
}

// edges returns the outgoing forward edges of node id of the given kind,
// limited to targets when targets is not nil.
func (p *plan) edges(id, kind string, targets []string) [][2]string {
	var out [][2]string
	for _, e := range p.graph[id].Out {
		if e[1] != kind {
			continue
		}
		if targets != nil && !contains(targets, e[0]) {
			continue
		}
		out = append(out, e)
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// handlerFailed retries a failed attempt when the error is retryable and
// attempts are left, else fails the node.
func (j *job) handlerFailed(err error, item int) error {
	if j.ctx.Err() != nil {
		return errAbandon
	}
	var re redisErr
	if errors.As(err, &re) {
		return re.error
	}
	attempt := max(j.tok.Attempt, 1)
	if due, retry := retryDue(j.n.Retry, attempt, err); retry {
		msg := clipError(j.w.opts.Secrets.Text(err.Error()))
		reply, serr := j.scriptReply("retry", struct {
			base
			Node     string `json:"node"`
			Iter     string `json:"iter"`
			Hop      int    `json:"hop"`
			Gen      int    `json:"gen"`
			Item     int    `json:"item"`
			Attempt  int    `json:"attempt"`
			Due      int64  `json:"due"`
			Error    string `json:"error"`
			MaxState int    `json:"maxstate"`
		}{j.base(), j.tok.Node, j.tok.Iter, j.tok.Hop, j.tok.Gen, item, attempt, due, msg, j.maxState()})
		if serr == nil && reply == "state" {
			// The attempt's error (which its event keeps) does not fit: no
			// more attempts.
			return j.failNode(j.stateErr(fmt.Sprintf("the error of attempt %d", attempt), len(msg)), item)
		}
		return serr
	}
	return j.failNode(lastAttempt(j.n.Retry, attempt, err), item)
}

// retryDue tells whether a failed attempt of a handler under the retry
// policy r (a task's, which its compensation follows too) is retried, and
// when (ms): a retryable error with attempts left, whose code the policy's
// on list names (if it has one) and its except list does not.
func retryDue(r *ir.Retry, attempt int, err error) (int64, bool) {
	if handlers.IsPermanent(err) || attempt >= retryAttempts(r) || !retriesCode(r, errorCode(err)) {
		return 0, false
	}
	return time.Now().Add(backoffDelay(r, attempt)).UnixMilli(), true
}

// lastAttempt is the error recorded for a failed attempt that is not
// retried: with the attempt count when the policy allowed several.
func lastAttempt(r *ir.Retry, attempt int, err error) error {
	if n := retryAttempts(r); n > 1 && !handlers.IsPermanent(err) && retriesCode(r, errorCode(err)) {
		return fmt.Errorf("attempt %d of %d: %w", attempt, n, err)
	}
	return err
}

func retriesCode(r *ir.Retry, code string) bool {
	match := func(ps []string) bool {
		return slices.ContainsFunc(ps, func(p string) bool { return ir.MatchCode(p, code) })
	}
	switch {
	case r == nil:
		return true
	case len(r.On) > 0:
		return match(r.On)
	}
	return !match(r.Except)
}

func retryAttempts(r *ir.Retry) int {
	if r != nil && r.Attempts > 0 {
		return r.Attempts
	}
	return 1
}

// evalFailed fails the node for an expression that did not evaluate
// (no retry), unless the cause is Redis.
func (j *job) evalFailed(err error, item int) error {
	var re redisErr
	if errors.As(err, &re) {
		return re.error
	}
	if j.ctx.Err() != nil {
		return errAbandon
	}
	return j.failNode(err, item)
}

// failNode records a node failure: the on_error targets of the route its
// error code takes get real tokens, or, when no route takes it, the run
// fails.
func (j *job) failNode(err error, item int) error {
	msg, code := clipError(j.w.opts.Secrets.Text(err.Error())), errorCode(err)
	if item >= 0 && j.n.ForEach != nil && j.n.ForEach.Tolerate != nil {
		// The item's failure is tolerated while the node is within its
		// tolerance: itemdone records it as the item's result.
		res, _ := json.Marshal(map[string]any{"index": item, "error": map[string]string{"code": code, "message": msg}})
		reply, err := j.scriptReply("itemdone", itemArgs{j.base(), j.tok.Node, j.tok.Iter, j.tok.Gen, item, string(res),
			true, j.n.ForEach.Tolerate.Count, j.n.ForEach.Tolerate.Percent, j.maxState()})
		if err != nil || reply != "over" && reply != "state" {
			return err
		}
		if reply == "state" {
			// Its error result does not fit in the run's stored values:
			// the node fails.
			e := j.stateErr("the error result of item "+strconv.Itoa(item), len(res))
			msg, code = e.Error(), CodeState
		} else {
			msg = fmt.Sprintf("for_each: more items failed than the %s tolerated: item %d: %s", tolerance(j.n.ForEach.Tolerate), item, msg)
		}
	}
	if targets, ok := j.n.Route(code); ok {
		if targets == nil {
			targets = []string{}
		}
		return j.complete(completeArgs{Mode: "fail", Error: msg, Code: code, Real: j.p.edges(j.n.ID, ir.EdgeError, targets), Item: item})
	}
	return j.complete(completeArgs{Mode: "fail", Error: msg, Code: code, Item: item, FailRun: true})
}

// backoffDelay is the delay before retry k (k = 1 after the first attempt):
// delay (fixed), k×delay (linear) or delay×2^(k−1) (exponential), at most
// max_delay when set.
func backoffDelay(r *ir.Retry, k int) time.Duration {
	if r == nil {
		return 0
	}
	d := time.Duration(r.DelayMS) * time.Millisecond
	switch r.Backoff {
	case ir.BackoffLinear:
		d *= time.Duration(k)
	case ir.BackoffExponential:
		d <<= min(k-1, 40)
	}
	if r.MaxDelayMS > 0 && (d > time.Duration(r.MaxDelayMS)*time.Millisecond || d < 0) {
		d = time.Duration(r.MaxDelayMS) * time.Millisecond
	}
	return max(d, 0)
}

// call runs a handler for this execution with the node's attempt timeout.
func (j *job) call(name string, cfg json.RawMessage, item int, comp bool) (json.RawMessage, error) {
	var h handlers.Handler = j.remote
	ok := j.remote != nil
	if !ok {
		h, ok = j.w.opts.Handlers.Lookup(name)
	}
	if !ok {
		return nil, handlers.Errorf(CodeNoHandler, false, "no handler %q is registered on worker %s", name, j.w.opts.Consumer)
	}
	key := j.tok.Run + "/" + j.x
	if item >= 0 {
		key += "/" + strconv.Itoa(item)
	}
	if comp {
		key = "compensate/" + key
	}
	if j.tok.Kind == "final" {
		key = "finally/" + j.tok.Run
	}
	req := handlers.Request{
		RunID: j.tok.Run, Workflow: j.m.Workflow, Node: j.tok.Node, Iteration: j.tok.Iter, Item: item,
		Attempt: max(j.tok.Attempt, 1), Handler: name, Config: cfg, IdempotencyKey: key, Compensation: comp,
	}
	ctx := j.ctx
	var cancel context.CancelFunc = func() {}
	if j.n != nil && j.n.TimeoutMS > 0 {
		ctx, cancel = context.WithTimeout(ctx, time.Duration(j.n.TimeoutMS)*time.Millisecond)
	}
	defer cancel()
	out, err := handlers.Call(ctx, h, req)
	if err != nil && j.ctx.Err() == nil && ctx.Err() == context.DeadlineExceeded {
		err = handlers.Errorf(handlers.CodeTimeout, true, "attempt timed out after %s: %w", time.Duration(j.n.TimeoutMS)*time.Millisecond, err)
	}
	return out, err
}

// expand starts a for_each node.
func (j *job) expand(act vars) error {
	n := j.n
	v, err := j.p.eval(j.ctx, &n.ForEach.Items, n.ID+".for_each", act)
	if err != nil {
		return j.evalFailed(err, -1)
	}
	l, ok := v.(traits.Lister)
	if !ok {
		return j.failNode(handlers.Errorf(CodeForEach, false, "for_each: %s is %s, not a list", n.ForEach.Items.CEL, v.Type().TypeName()), -1)
	}
	// The items are stored with the run, as one value: together at most
	// max_output_bytes (the list as JSON).
	var items []string
	size, max := 2, j.maxOutput()
	for it := l.Iterator(); it.HasNext() == types.True; {
		data, err := celJSON(it.Next(), max-size)
		if err == nil && size+len(data)+1 > max+1 {
			err = errTooBig
		}
		if errors.Is(err, errTooBig) {
			return j.failNode(handlers.Errorf(CodeForEach, false, "for_each: the items are over the limit of %d bytes (max_output_bytes)", max), -1)
		}
		if err != nil {
			return j.failNode(fmt.Errorf("for_each item: %w", err), -1)
		}
		data = j.w.opts.Secrets.JSON(data)
		size += len(data) + 1
		items = append(items, string(data))
	}
	if max := j.m.MaxFanout; max > 0 && len(items) > max {
		return j.failNode(handlers.Errorf(CodeForEach, false, "for_each: %d items exceed max_fanout %d", len(items), max), -1)
	}
	if len(items) == 0 {
		return j.succeed(json.RawMessage("[]"), act)
	}
	return j.load(items, size-2-len(items))
}

// Expand's chunks: a call of the expand script carries at most
// expandChunkItems items and, past its first item, at most
// expandChunkBytes of item JSON, so that no call holds Redis for long
// (docs/performance.md, "Longest scripts").
const (
	expandChunkItems = 250
	expandChunkBytes = 64 << 10
)

type expandArgs struct {
	base
	Node     string   `json:"node"`
	Iter     string   `json:"iter"`
	Hop      int      `json:"hop"`
	Gen      int      `json:"gen"`
	Items    []string `json:"items"`
	Parallel int      `json:"parallel"`
	From     int      `json:"from,omitempty"`
	N        int      `json:"n,omitempty"`
	H        string   `json:"h,omitempty"`
	Size     int      `json:"size,omitempty"` // of all the items
	MaxState int      `json:"maxstate"`
}

// load calls expand with the items, in chunks (expandChunk): a list that
// fits one chunk takes one call, as it always did. A chunk that does not
// start where the stored load stopped (this message was delivered again
// after its worker died mid-load, or twice at once) changes nothing and
// tells where to continue ("at:<k>").
// The first chunk counts the whole list (size bytes) in the run's stored
// values: reply "state" when it does not fit, nothing written.
func (j *job) load(items []string, size int) error {
	a := expandArgs{base: j.base(), Node: j.tok.Node, Iter: j.tok.Iter, Hop: j.tok.Hop, Gen: j.tok.Gen, Parallel: j.n.ForEach.Parallel,
		Size: size, MaxState: j.maxState()}
	max := expandChunkItems
	if c := j.w.opts.expandChunk; c > 0 {
		max = c
	}
	end := expandChunk(items, 0, max)
	if end < len(items) {
		a.N, a.H = len(items), itemsHash(items)
	}
	for from := 0; from < len(items); {
		if from > 0 {
			if err := j.ctx.Err(); err != nil {
				return err // the worker stops: the message goes on elsewhere
			}
			end = expandChunk(items, from, max)
			a.base = j.base() // its time
		}
		a.From, a.Items = from, items[from:end]
		reply, err := j.loadChunk(a, end == len(items))
		if err != nil {
			return err
		}
		switch {
		case reply == "ok":
			if hook := j.w.opts.afterChunk; hook != nil {
				hook(j.ctx, from, end)
			}
			from = end
		case strings.HasPrefix(reply, "at:"):
			k, err := strconv.Atoi(reply[3:])
			if err != nil || k < 0 || k >= len(items) {
				return fmt.Errorf("expand %s: reply %q", j.x, reply)
			}
			from = k
		case reply == "state":
			return j.failNode(j.stateErr("the for_each items", size), -1)
		case reply == "changed":
			// The list is not the one the load started with (a
			// redelivery evaluated it differently): going on would lose
			// or repeat items.
			return j.abort(fmt.Sprintf("for_each %s: the item list evaluated differently when its message was delivered again", j.x), j.x)
		default:
			return nil // dup, stale, inactive: acknowledged
		}
	}
	return nil
}

// loadChunk calls expand with one chunk. Only the last one may hand the
// message's slot to a message its batch reads: the handling goes on after
// the others.
func (j *job) loadChunk(a expandArgs, last bool) (string, error) {
	if !last && j.give != nil {
		give := j.give
		j.give = nil
		defer func() { j.give = give }()
	}
	return j.scriptReply("expand", a)
}

// expandChunk returns the end of the chunk of items that starts at from,
// of at most max items.
func expandChunk(items []string, from, max int) int {
	end, size := from+1, len(items[from])
	for end < len(items) && end-from < max && size+len(items[end]) <= expandChunkBytes {
		size += len(items[end])
		end++
	}
	return end
}

// itemsHash identifies a for_each's item list across the chunks of its
// load.
func itemsHash(items []string) string {
	h := fnv.New64a()
	var n [8]byte
	for _, it := range items {
		binary.LittleEndian.PutUint64(n[:], uint64(len(it)))
		h.Write(n[:])
		h.Write([]byte(it))
	}
	return strconv.FormatUint(h.Sum64(), 36)
}

// item runs one for_each item.
func (j *job) item() error {
	k := j.tok.Item
	r := j.pre.itemRead()
	if r == nil {
		pipe := j.w.st.rdb.Pipeline()
		r = j.w.readItem(j.ctx, pipe, &j.tok)
		if _, err := pipe.Exec(j.ctx); err != nil && err != redis.Nil {
			return err
		}
	}
	vals := r.item.Val()
	raw, _ := vals[0].(string)
	ist, _ := vals[1].(string)
	if r.state.Val() != NodeRunning || (ist != "queued" && ist != "retrying") || raw == "" {
		return j.ack()
	}
	if j.poison > 0 {
		return j.failNode(j.poisonErr(), k)
	}
	n := j.n
	act, err := j.activation(j.p.itemReads(n.ID))
	if err != nil {
		return j.evalFailed(err, k)
	}
	var elem *ir.Type
	if t := n.ForEach.Items.Type; t != nil && t.Kind == ir.KindList {
		elem = t.Elem
	}
	iv, err := jsonToCEL([]byte(raw), elem)
	if err != nil {
		return j.failNode(fmt.Errorf("for_each item %d: %w", k, err), k)
	}
	act = act.with(n.ForEach.Var, iv)
	if n.ForEach.Index != "" {
		act = act.with(n.ForEach.Index, int64(k))
	}
	if n.Flow != nil {
		return j.flow(act, k)
	}
	cfg, err := j.p.params(j.ctx, n.With, n.ID, act, j.maxOutput())
	if err != nil {
		return j.evalFailed(err, k)
	}
	h, err := j.handlerOf(act)
	if err != nil {
		return j.evalFailed(err, k)
	}
	out, err := j.call(h, cfg, k, false)
	out = j.w.opts.Secrets.JSON(out)
	if err == nil {
		err = j.checkOutput(out)
	}
	if err != nil {
		return j.handlerFailed(fmt.Errorf("item %d: %w", k, err), k)
	}
	reply, err := j.itemDone(k, string(out))
	if err == nil && reply == "state" {
		return j.failNode(fmt.Errorf("item %d: %w", k, j.stateErr("output", len(out))), k)
	}
	return err
}

// markRunning marks the execution running once its handler has run for
// WorkerOptions.RunningAfter (started.lua); the returned func cancels the
// mark if it has not happened. The script guards against a late mark (the
// state must still be queued or retrying, at this attempt).
func (j *job) markRunning() (stop func()) {
	d := j.w.opts.RunningAfter
	if d < 0 {
		return func() {}
	}
	type args struct {
		base
		Node    string `json:"node"`
		Iter    string `json:"iter"`
		Gen     int    `json:"gen"`
		Attempt int    `json:"attempt"`
	}
	b := j.base()
	b.Msg = nil // not a transition of the message
	a := args{b, j.tok.Node, j.tok.Iter, j.tok.Gen, max(j.tok.Attempt, 1)}
	t := time.AfterFunc(d, func() {
		a.Now = strconv.FormatInt(nowMS(), 10)
		if _, err := j.w.st.call(j.ctx, "started", j.ref, a); err != nil && j.ctx.Err() == nil {
			j.w.log.Debug("wfc worker: marking an execution running", "run", j.tok.Run, "x", j.x, "err", err)
		}
	})
	return func() { t.Stop() }
}

// handlerOf returns the handler the task runs: its own, or the one its
// dispatch names — which must be in the dispatch's set (error code
// "dispatch" otherwise).
func (j *job) handlerOf(act vars) (string, error) {
	d := j.n.Dispatch
	if d == nil {
		return j.n.Handler, nil
	}
	v, err := j.p.eval(j.ctx, &d.Expr, j.n.ID+".dispatch", act)
	if err != nil {
		return "", err
	}
	name, ok := v.Value().(string)
	if !ok {
		return "", handlers.Errorf(CodeDispatch, false, "dispatch: %s is %s, not a handler name", d.Expr.CEL, v.Type().TypeName())
	}
	if !slices.Contains(d.Handlers, name) {
		return "", handlers.Errorf(CodeDispatch, false, "dispatch: %q is not one of the node's handlers (%s)", name, strings.Join(d.Handlers, ", "))
	}
	return name, nil
}

// itemArgs are itemdone's arguments: an item's output, or (Failed) its
// error result under the node's tolerance (Count, Percent).
type itemArgs struct {
	base
	Node    string `json:"node"`
	Iter    string `json:"iter"`
	Gen     int    `json:"gen"`
	Item    int    `json:"item"`
	Output  string `json:"output"`
	Failed  bool   `json:"failed,omitempty"`
	Count   int    `json:"count,omitempty"`
	Percent int    `json:"percent,omitempty"`
	// MaxState: as completeArgs.MaxState (reply "state", nothing written).
	MaxState int `json:"maxstate"`
}

// tolerance says a for_each's tolerance in words.
func tolerance(t *ir.Tolerance) string {
	if t.Percent > 0 {
		return fmt.Sprintf("%d%%", t.Percent)
	}
	return fmt.Sprintf("%d", t.Count)
}

// collect builds a for_each node's output from its items and routes it.
func (j *job) collect() error {
	ik := j.w.ks.items(j.tok.Run)
	pipe := j.w.st.rdb.Pipeline()
	stc := pipe.HGet(j.ctx, j.w.ks.state(j.tok.Run), j.x)
	nc := pipe.HGet(j.ctx, ik, j.x+"|n")
	if _, err := pipe.Exec(j.ctx); err != nil && err != redis.Nil {
		return err
	}
	if stc.Val() != NodeRunning {
		return j.ack()
	}
	if j.poison > 0 {
		return j.failNode(j.poisonErr(), -1)
	}
	count, _ := strconv.Atoi(nc.Val())
	tol := j.n.ForEach != nil && j.n.ForEach.Tolerate != nil
	fields := make([]string, count, 2*count)
	for i := range fields {
		fields[i] = fmt.Sprintf("%s|o|%d", j.x, i)
	}
	if tol {
		// Which items failed: their results are {index, error} already.
		for i := range count {
			fields = append(fields, fmt.Sprintf("%s|s|%d", j.x, i))
		}
	}
	var b strings.Builder
	b.WriteByte('[')
	if count > 0 {
		vals, err := j.hmgetChunked(ik, fields)
		if err != nil {
			return err
		}
		for i, v := range vals[:count] {
			s, ok := v.(string)
			if !ok {
				return fmt.Errorf("for_each %s: output of item %d is missing", j.x, i)
			}
			if i > 0 {
				b.WriteByte(',')
			}
			if st, _ := vals[min(count+i, len(vals)-1)].(string); tol && st != "failed" {
				fmt.Fprintf(&b, `{"index":%d,"output":%s}`, i, s)
				continue
			}
			b.WriteString(s)
		}
	}
	b.WriteByte(']')
	if max := j.maxOutput(); b.Len() > max {
		return j.failNode(handlers.Errorf(CodeOutput, false, "for_each output of %d bytes, over the limit of %d (max_output_bytes)", b.Len(), max), -1)
	}
	act, err := j.activation(j.p.reads(j.n.ID))
	if err != nil {
		return j.evalFailed(err, -1)
	}
	return j.succeed(json.RawMessage(b.String()), act)
}

// hmgetChunked is HMGET of many fields in pipelined commands of at most
// expandChunkItems fields each: one command for 100,000 items' outputs
// would hold Redis as long as the expand of old.
func (j *job) hmgetChunked(key string, fields []string) ([]any, error) {
	if len(fields) <= expandChunkItems {
		return j.w.st.rdb.HMGet(j.ctx, key, fields...).Result()
	}
	pipe := j.w.st.rdb.Pipeline()
	var cmds []*redis.SliceCmd
	for i := 0; i < len(fields); i += expandChunkItems {
		cmds = append(cmds, pipe.HMGet(j.ctx, key, fields[i:min(i+expandChunkItems, len(fields))]...))
	}
	if _, err := pipe.Exec(j.ctx); err != nil {
		return nil, err
	}
	vals := make([]any, 0, len(fields))
	for _, c := range cmds {
		vals = append(vals, c.Val()...)
	}
	return vals, nil
}

// compensate runs one compensation of a failed run.
func (j *job) compensate() error {
	n := j.n
	idx := j.tok.Item
	type args struct {
		base
		Gen    int    `json:"gen"`
		Idx    int    `json:"idx"`
		OK     bool   `json:"ok"`
		Output string `json:"output,omitempty"`
		Error  string `json:"error,omitempty"`
	}
	done := func(out json.RawMessage, err error) error {
		out = j.w.opts.Secrets.JSON(out)
		if max := j.maxOutput(); err == nil && len(out) > max {
			out, err = nil, fmt.Errorf("output of %d bytes, over the limit of %d (max_output_bytes)", len(out), max)
		}
		a := args{base: j.base(), Gen: j.tok.Gen, Idx: idx, OK: err == nil, Output: string(out)}
		if err != nil {
			a.Error = clipError(j.w.opts.Secrets.Text(err.Error()))
		}
		return j.script("compdone", a)
	}
	if n.Compensate == nil {
		return done(nil, fmt.Errorf("node %s has no compensate block", n.ID))
	}
	if j.poison > 0 {
		return done(nil, j.poisonErr())
	}
	own, err := j.w.st.rdb.HGet(j.ctx, j.w.ks.state(j.tok.Run), outField(j.x)).Result()
	if err != nil {
		if err != redis.Nil {
			return err
		}
		own = "null"
	}
	act, err := j.activation(j.p.reads(n.ID))
	if err != nil {
		var re redisErr
		if errors.As(err, &re) {
			return re.error
		}
		return done(nil, err)
	}
	ov, err := jsonToCEL([]byte(own), outputType(n))
	if err != nil {
		return done(nil, err)
	}
	cfg, err := j.p.params(j.ctx, n.Compensate.With, n.ID+".compensate", act.with("output", ov), j.maxOutput())
	if err != nil {
		return done(nil, err)
	}
	out, err := j.call(n.Compensate.Handler, cfg, -1, true)
	if err != nil && j.ctx.Err() != nil {
		return errAbandon
	}
	if err != nil {
		// A compensation is retried like its node: the node's retry
		// policy, through the timers (compretry), and recorded as failed
		// when no attempt is left or the error is permanent.
		attempt := max(j.tok.Attempt, 1)
		if due, retry := retryDue(n.Retry, attempt, err); retry {
			return j.script("compretry", struct {
				base
				Gen     int    `json:"gen"`
				Idx     int    `json:"idx"`
				Attempt int    `json:"attempt"`
				Due     int64  `json:"due"`
				Error   string `json:"error"`
			}{j.base(), j.tok.Gen, idx, attempt, due, clipError(j.w.opts.Secrets.Text(err.Error()))})
		}
		err = lastAttempt(n.Retry, attempt, err)
	}
	return done(out, err)
}

// finish evaluates the workflow outputs into the run's result.
func (j *job) finish() error {
	ids := j.p.finishIDs()
	type args struct {
		base
		Gen      int    `json:"gen"`
		Result   string `json:"result,omitempty"`
		Error    string `json:"error,omitempty"`
		MaxState int    `json:"maxstate"`
	}
	act, err := j.activation(ids)
	if err == nil && j.poison > 0 {
		err = j.poisonErr()
	}
	goalErr := ""
	if err == nil && len(j.p.w.Goals) > 0 {
		goalErr, err = j.goals()
	}
	result := ""
	if err == nil && goalErr == "" {
		result, err = j.evalOutputs(act)
	}
	var re redisErr
	if errors.As(err, &re) {
		return re.error
	}
	a := args{base: j.base(), Gen: j.tok.Gen, MaxState: j.maxState()}
	if goalErr != "" {
		a.Error = goalErr
	} else if err != nil {
		a.Error = "workflow outputs: " + j.w.opts.Secrets.Text(err.Error())
	} else {
		a.Result = string(j.w.opts.Secrets.JSON([]byte(result)))
	}
	return j.script("finish", a)
}

// evalOutputs evaluates the workflow's outputs in act: the run's result,
// a JSON object of at most max_output_bytes.
func (j *job) evalOutputs(act vars) (string, error) {
	var b strings.Builder
	b.WriteByte('{')
	for i := range j.p.w.Outputs {
		o := &j.p.w.Outputs[i]
		v, err := j.p.evalJSON(j.ctx, &o.Expr, "output "+o.Name, act, j.maxOutput())
		if err == nil && b.Len()+len(v) > j.maxOutput() {
			err = fmt.Errorf("the result is over the limit of %d bytes (max_output_bytes)", j.maxOutput())
		}
		if err != nil {
			return "", err
		}
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(o.Name)
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.String(), nil
}

// hasExprs reports whether a node has expressions: a node without needs no
// activation (nor the run's inputs decoded). Known from the plan's making:
// asked two or three times per execution, nodeExprs allocated each time.
func (p *plan) hasExprs(id string) bool { return p.exprs[id] }

// reads returns the nodes whose outputs a node's expressions (when,
// with, for_each, loop, branch, compensate) refer to: only those are read
// from Redis and bound. If an expression does not compile here, every
// ancestor is bound, and evaluating it reports the error.
func (p *plan) reads(id string) []string {
	p.ancMu.Lock()
	defer p.ancMu.Unlock()
	if a, ok := p.anc[id]; ok {
		return a
	}
	if p.anc == nil {
		p.anc = map[string][]string{}
	}
	set, all := p.exprNames(nodeExprs(p.nodes[id]))
	if all {
		set = ir.Ancestors(p.w, id)
	}
	list := []string{}
	for _, n := range p.w.Order {
		// A loop body node may read its own output: the previous
		// iteration's (docs/language.md §7.6).
		if set[n] && (n != id || p.nodes[id].Loop != nil || len(p.graph[id].Loops) > 0) {
			list = append(list, n)
		}
	}
	p.anc[id] = list
	return list
}

// exprNames returns the names the expressions srcs refer to; all is true
// when one does not compile (the caller then binds every ancestor, and
// evaluating it reports the error).
func (p *plan) exprNames(srcs []string) (set map[string]bool, all bool) {
	set = map[string]bool{}
	for _, src := range srcs {
		names, err := p.cel.names(src)
		if err != nil {
			return set, true
		}
		for _, name := range names {
			set[name] = true
		}
	}
	return set, false
}

// paramExprs calls add with the expressions of a with block's values
// (templates' parts included).
func paramExprs(ps []ir.Param, add func(*ir.Expr)) {
	for i := range ps {
		v := &ps[i].Value
		add(v.Expr)
		for j := range v.Template {
			add(v.Template[j].Expr)
		}
	}
}

// nodeExprs returns the CEL sources of a node's expressions.
func nodeExprs(n *ir.Node) []string {
	if n == nil {
		return nil
	}
	var out []string
	add := func(e *ir.Expr) {
		if e != nil {
			out = append(out, e.CEL)
		}
	}
	params := func(ps []ir.Param) { paramExprs(ps, add) }
	add(n.When)
	params(n.With)
	if n.Flow != nil {
		params(n.Flow.With)
	}
	if n.Dispatch != nil {
		add(&n.Dispatch.Expr)
	}
	if n.ForEach != nil {
		add(&n.ForEach.Items)
	}
	if n.Loop != nil {
		add(&n.Loop.While)
	}
	if n.Branch != nil {
		for i := range n.Branch.Rules {
			add(&n.Branch.Rules[i].When)
		}
	}
	if n.Compensate != nil {
		params(n.Compensate.With)
	}
	if n.Agent != nil {
		params([]ir.Param{{Value: n.Agent.Prompt}})
	}
	if h := n.Human; h != nil {
		add(h.ApproversExpr)
		add(h.EscalateToExpr)
		if h.Prompt != nil {
			params([]ir.Param{{Value: *h.Prompt}})
		}
	}
	return out
}

package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/redis/go-redis/v9"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/runtime/handlers"
)

// Signals (docs/waiting.md, "Signals"): a task whose handler is the
// built-in signal waits for a named signal sent to its run (Engine.Signal,
// wfc signal). The worker that takes its exec token parks the execution
// (scripts/listen.lua), like a wait: state waiting, no worker held. A
// signal that finds it waiting gives it its payload (field sd|x) and a
// token of kind signal, which any worker completes with the payload as the
// node's output (signalled). A signal sent before a node waits for it is
// kept in the run's state and taken when one does. The node's timeout is
// a timer token of kind sigtimeout that fails it with code timeout if no
// signal came first (scripts/signal.lua: sd|x is the claim, set once).

// SignalHandler is the name of the built-in wait for a signal.
const SignalHandler = "signal"

// Bounds of a signal's name and correlation, and of the signals a run
// keeps for nodes it has not reached.
const (
	maxSignalName        = 128
	maxSignalCorrelation = 256
	// MaxKeptSignals is how many signals a run keeps at most for nodes it
	// has not reached; more are refused (their bytes count in
	// max_state_bytes too).
	MaxKeptSignals = 1000
)

// signalTimeoutMarker is sd|x of an execution its timeout claimed.
const signalTimeoutMarker = "timeout"

// checkSignalKey checks a signal's name and correlation. A name holds no
// "|" (the state's fields join name and correlation with it).
func checkSignalKey(name, corr string) error {
	if name == "" || len(name) > maxSignalName {
		return fmt.Errorf("a signal's name is 1 to %d bytes, not %d", maxSignalName, len(name))
	}
	if i := strings.IndexFunc(name, func(r rune) bool { return r == '|' || unicode.IsControl(r) }); i >= 0 {
		return fmt.Errorf("signal name %q holds %q, which a name may not", name, name[i:i+1])
	}
	if len(corr) > maxSignalCorrelation {
		return fmt.Errorf("a signal's correlation is at most %d bytes, not %d", maxSignalCorrelation, len(corr))
	}
	return nil
}

// listen handles the exec token of a signal task: it parks the execution
// until its signal (scripts/listen.lua).
func (j *job) listen(cfg json.RawMessage) error {
	var c struct {
		Name        string `json:"name"`
		Correlation string `json:"correlation"`
	}
	if err := json.Unmarshal(cfg, &c); err != nil {
		return j.failNode(handlers.Errorf(handlers.CodeSignal, false, "signal: bad config: %v", err), -1)
	}
	if err := checkSignalKey(c.Name, c.Correlation); err != nil {
		return j.failNode(handlers.Errorf(handlers.CodeSignal, false, "signal: %v", err), -1)
	}
	now := nowMS()
	var due int64
	if j.n.TimeoutMS > 0 {
		due = now + j.n.TimeoutMS
	}
	a := struct {
		base
		Node    string `json:"node"`
		Iter    string `json:"iter"`
		Hop     int    `json:"hop"`
		Gen     int    `json:"gen"`
		Attempt int    `json:"attempt"`
		Name    string `json:"name"`
		Corr    string `json:"corr"`
		Due     int64  `json:"due"`
	}{j.base(), j.tok.Node, j.tok.Iter, j.tok.Hop, j.tok.Gen, max(j.tok.Attempt, 1), c.Name, c.Correlation, due}
	a.Now = strconv.FormatInt(now, 10)
	return j.script("listen", a)
}

// signalled handles a signal token: the execution it names completes with
// the signal's payload as its output, if it still waits with one.
func (j *job) signalled() error {
	vals, err := j.w.st.rdb.HMGet(j.ctx, j.w.ks.state(j.tok.Run), j.x, "sd|"+j.x).Result()
	if err != nil && err != redis.Nil {
		return err
	}
	st, _ := vals[0].(string)
	payload, _ := vals[1].(string)
	if st != NodeWaiting || payload == "" || payload == signalTimeoutMarker {
		j.w.dups.Add(1)
		return j.ack()
	}
	out := json.RawMessage(payload)
	if err := j.checkOutput(out); err != nil {
		return j.failNode(err, -1)
	}
	return j.resumed(out)
}

// signalTimeout handles a sigtimeout token: if the execution still waits
// for its signal, it fails with code timeout (its retry or on_error
// "timeout" route apply).
func (j *job) signalTimeout() error {
	a := struct {
		base
		Kind    string `json:"kind"`
		Node    string `json:"node"`
		Iter    string `json:"iter"`
		Gen     int    `json:"gen"`
		Attempt int    `json:"attempt"`
	}{j.base(), "timeout", j.tok.Node, j.tok.Iter, j.tok.Gen, j.tok.Attempt}
	res, err := j.scriptReply("signal", a)
	if err != nil || res != "timeout" {
		return err
	}
	d := time.Duration(j.n.TimeoutMS) * time.Millisecond
	return j.handlerFailed(handlers.Errorf(handlers.CodeTimeout, true, "signal: no signal came within %s", d), -1)
}

// signalOf fills in the signal a waiting execution x waits for, from its
// run's state hash.
func signalOf(ns *NodeStatus, states map[string]string, x string) {
	raw := states["sw|"+x]
	if raw == "" {
		return
	}
	var r struct {
		Name string `json:"name"`
		Corr string `json:"corr"`
		Due  int64  `json:"due"`
	}
	if json.Unmarshal([]byte(raw), &r) != nil {
		return
	}
	ns.Signal, ns.Correlation = r.Name, r.Corr
	if r.Due > 0 {
		ns.Due = msTime(r.Due)
	}
}

// isSignalTask reports whether n may run the built-in signal.
func isSignalTask(n *ir.Node) bool {
	if n.Type != ir.NodeTask {
		return false
	}
	return n.Handler == SignalHandler || n.Dispatch != nil && slices.Contains(n.Dispatch.Handlers, SignalHandler)
}

// staticSignalName returns the name a signal task waits for when its
// config gives it as a constant (ok), else "" and false (an expression).
func staticSignalName(n *ir.Node) (string, bool) {
	for _, p := range n.With {
		if p.Name != "name" {
			continue
		}
		switch {
		case p.Value.Const != nil:
			var s string
			if json.Unmarshal(p.Value.Const, &s) == nil {
				return s, true
			}
		case p.Value.Expr == nil && p.Value.Template != nil:
			var b strings.Builder
			for _, t := range p.Value.Template {
				if t.Expr != nil {
					return "", false
				}
				b.WriteString(t.Text)
			}
			return b.String(), true
		}
		return "", false
	}
	return "", false
}

// Signal sends the signal name (with correlation: "" for none) to run,
// with payload (a JSON object; empty: {}). It completes the execution of
// a signal task that waits for (name, correlation) — the one that began
// waiting first, if several do — with the payload as its output, and
// returns its exec key. When none waits, the run keeps the signal for
// the next execution that waits for it (first sent, first taken) and
// Signal returns "". It is refused, nothing changed, when the run is
// unknown or not running, no node of its workflow waits for a signal of
// that name, the payload is not a JSON object, is over max_output_bytes,
// or does not fit the declared output of a node that may take it, or the
// run keeps MaxKeptSignals signals already or would go over
// max_state_bytes.
func (e *Engine) Signal(ctx context.Context, run, name, correlation string, payload json.RawMessage) (string, error) {
	return retryGraph(func() (string, error) { return e.signalOnce(ctx, run, name, correlation, payload) })
}

func (e *Engine) signalOnce(ctx context.Context, run, name, correlation string, payload json.RawMessage) (string, error) {
	if !validRunID(run) {
		return "", fmt.Errorf("runtime: signal: invalid run id %q", run)
	}
	if err := checkSignalKey(name, correlation); err != nil {
		return "", fmt.Errorf("runtime: signal: %w", err)
	}
	if len(bytes.TrimSpace(payload)) == 0 {
		payload = json.RawMessage("{}")
	}
	v, err := decodeJSON(payload)
	if err != nil {
		return "", fmt.Errorf("runtime: signal: the payload is not JSON: %v", err)
	}
	if _, ok := v.(map[string]any); !ok {
		return "", fmt.Errorf("runtime: signal: the payload is a %s, not a JSON object", jsonKind(v))
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, payload); err != nil {
		return "", fmt.Errorf("runtime: signal: the payload is not JSON: %v", err)
	}
	m, err := e.meta(ctx, run)
	if err != nil {
		return "", fmt.Errorf("runtime: signal: %w", err)
	}
	if m.Status != RunRunning {
		return "", fmt.Errorf("runtime: signal: run %s is %s: it takes no more signals", run, m.Status)
	}
	p, err := e.st.planFor(ctx, m.IR)
	if err != nil {
		return "", fmt.Errorf("runtime: signal: run %s: %w", run, err)
	}
	if max := effectiveLimit(p.w.Settings.MaxOutputBytes, DefaultMaxValueBytes); buf.Len() > max {
		return "", fmt.Errorf("runtime: signal: the payload of %d bytes is over the limit of %d (max_output_bytes)", buf.Len(), max)
	}
	var takers, names []string
	for i := range p.w.Nodes {
		n := &p.w.Nodes[i]
		if !isSignalTask(n) {
			continue
		}
		if s, ok := staticSignalName(n); ok {
			names = append(names, strconv.Quote(s)+" ("+n.ID+")")
			if s != name {
				continue
			}
		} else {
			names = append(names, "a name set at run time ("+n.ID+")")
		}
		if err := checkType(v, outputType(n), "payload"); err != nil {
			return "", fmt.Errorf("runtime: signal: node %s of run %s takes signal %q: %w", n.ID, run, name, err)
		}
		takers = append(takers, n.ID)
	}
	if len(takers) == 0 {
		if len(names) == 0 {
			return "", fmt.Errorf("runtime: signal: no node of run %s (workflow %s) waits for a signal", run, p.w.Name)
		}
		return "", fmt.Errorf("runtime: signal: no node of run %s (workflow %s) waits for signal %q (its signals: %s)", run, p.w.Name, name, strings.Join(names, ", "))
	}
	a := struct {
		base
		Kind     string `json:"kind"`
		Name     string `json:"name"`
		Corr     string `json:"corr"`
		Payload  string `json:"payload"`
		MaxBuf   int    `json:"maxbuf"`
		MaxState int    `json:"maxstate"`
	}{e.st.base(m.ref(), nil), "send", name, correlation, buf.String(), MaxKeptSignals,
		effectiveLimit(p.w.Settings.MaxStateBytes, DefaultMaxStateBytes)}
	res, err := e.st.call(ctx, "signal", m.ref(), a)
	if err != nil {
		return "", fmt.Errorf("runtime: signal: %w", err)
	}
	x, _ := strings.CutPrefix(res, "x:")
	if res == "kept" {
		x = ""
	}
	return x, nil
}

// SignalNodes returns the ids of w's signal tasks, in order: a run of w
// waits for signals from outside (wfc run refuses them on an embedded
// Redis, which no other process reaches).
func SignalNodes(w *ir.Workflow) []string {
	var ids []string
	for i := range w.Nodes {
		if isSignalTask(&w.Nodes[i]) {
			ids = append(ids, w.Nodes[i].ID)
		}
	}
	return ids
}

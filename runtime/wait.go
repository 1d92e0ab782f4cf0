package runtime

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wfc-lang/wfc/runtime/handlers"
)

// Durable timers (docs/waiting.md, "Durable timers"): a task whose handler
// is the built-in wait does not run a handler. The worker that takes its
// exec token computes the time it waits until and parks the execution
// (scripts/wait.lua): state waiting, a wake token in the node queue's
// timers at that time, the message acknowledged. The run holds the
// execution's counter unit but no worker; when the timers promote the wake
// token, any worker completes the execution (wake).

// WaitHandler is the name of the built-in durable timer.
const WaitHandler = "wait"

// waitConfig is the wait handler's config: exactly one of For and Until.
type waitConfig struct {
	For   *string `json:"for"`
	Until *string `json:"until"`
}

// waitDue returns the time (ms) a wait with config cfg that starts at now
// (ms) waits until.
func waitDue(cfg json.RawMessage, now int64) (int64, error) {
	var c waitConfig
	if len(cfg) > 0 {
		if err := json.Unmarshal(cfg, &c); err != nil {
			return 0, handlers.Errorf(handlers.CodeWait, false, "wait: bad config: %v", err)
		}
	}
	switch {
	case c.For != nil && c.Until != nil:
		return 0, handlers.Errorf(handlers.CodeWait, false, "wait: set `for` or `until`, not both")
	case c.For != nil:
		d, err := time.ParseDuration(*c.For)
		if err != nil || d < 0 {
			return 0, handlers.Errorf(handlers.CodeWait, false, "wait: `for` is %q, not a duration of 0 or more (such as \"90s\" or \"336h\")", *c.For)
		}
		if d.Milliseconds() > (1<<53)-now { // beyond any time a timer's score holds exactly
			return 0, handlers.Errorf(handlers.CodeWait, false, "wait: `for` %s is too long", d)
		}
		return now + d.Milliseconds(), nil
	case c.Until != nil:
		t, err := time.Parse(time.RFC3339Nano, *c.Until)
		if err != nil {
			return 0, handlers.Errorf(handlers.CodeWait, false, "wait: `until` is %q, not an RFC 3339 time (such as \"2026-12-01T09:00:00Z\")", *c.Until)
		}
		if ms := t.UnixMilli(); ms < 1<<53 {
			return ms, nil
		}
		return 0, handlers.Errorf(handlers.CodeWait, false, "wait: `until` %s is too far ahead", *c.Until)
	}
	return 0, handlers.Errorf(handlers.CodeWait, false, "wait: set `for` (a duration) or `until` (a time)")
}

// waitOutput is a wait's output: the time it waited until.
func waitOutput(due int64) json.RawMessage {
	out, _ := json.Marshal(map[string]string{"until": time.UnixMilli(due).UTC().Format(time.RFC3339Nano)})
	return out
}

// wait handles the exec token of a wait task: a time already past
// completes it at once, else the script wait parks it.
func (j *job) wait(cfg json.RawMessage, act vars) error {
	now := nowMS()
	due, err := waitDue(cfg, now)
	if err != nil {
		return j.failNode(err, -1)
	}
	if due <= now {
		return j.waited(due, act)
	}
	a := struct {
		base
		Node string `json:"node"`
		Iter string `json:"iter"`
		Hop  int    `json:"hop"`
		Gen  int    `json:"gen"`
		Due  int64  `json:"due"`
	}{j.base(), j.tok.Node, j.tok.Iter, j.tok.Hop, j.tok.Gen, due}
	a.Now = strconv.FormatInt(now, 10)
	return j.script("wait", a)
}

// waited completes a wait task that waited until due.
func (j *job) waited(due int64, act vars) error {
	out := waitOutput(due)
	if err := j.checkOutput(out); err != nil {
		return j.failNode(err, -1)
	}
	return j.succeed(out, act)
}

// wake handles a wake token: the execution it names completes if it is
// still waiting (a duplicate wake, or one of an execution a partial retry
// queued again, finds it in another state: a dup).
func (j *job) wake() error {
	vals, err := j.w.st.rdb.HMGet(j.ctx, j.w.ks.state(j.tok.Run), j.x, "wt|"+j.x).Result()
	if err != nil && err != redis.Nil {
		return err
	}
	st, _ := vals[0].(string)
	raw, _ := vals[1].(string)
	due, perr := strconv.ParseInt(raw, 10, 64)
	if st != NodeWaiting || perr != nil {
		j.w.dups.Add(1)
		return j.ack()
	}
	out := waitOutput(due)
	if err := j.checkOutput(out); err != nil {
		return j.failNode(err, -1)
	}
	return j.resumed(out)
}

// waitDueOf returns the due time of a waiting wait execution x from its
// run's state hash, or zero.
func waitDueOf(states map[string]string, x string) time.Time {
	ms, err := strconv.ParseInt(states["wt|"+x], 10, 64)
	if err != nil {
		return time.Time{}
	}
	return msTime(ms)
}

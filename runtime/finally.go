package runtime

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// final runs the workflow's finally step once its run has ended
// (docs/language.md §7.10): its with block sees every node's output (when
// it has one) and `run`, the ended run's metadata; its handler is retried
// in place under the block's retry policy; finaldone records the outcome
// and lets the run's keys expire.
func (j *job) final() error {
	f := j.p.w.Finally
	type args struct {
		base
		Gen    int    `json:"gen"`
		OK     bool   `json:"ok"`
		Output string `json:"output,omitempty"`
		Error  string `json:"error,omitempty"`
	}
	done := func(out json.RawMessage, err error) error {
		out = j.w.opts.Secrets.JSON(out)
		if max := j.maxOutput(); err == nil && len(out) > max {
			out, err = nil, fmt.Errorf("output of %d bytes, over the limit of %d (max_output_bytes)", len(out), max)
		}
		a := args{base: j.base(), Gen: j.tok.Gen, OK: err == nil, Output: string(out)}
		if err != nil {
			a.Error = clipError(j.w.opts.Secrets.Text(err.Error()))
		}
		return j.script("finaldone", a)
	}
	if f == nil {
		return done(nil, errors.New("the workflow has no finally"))
	}
	if j.poison > 0 {
		return done(nil, j.poisonErr())
	}
	ids := make([]string, len(j.p.w.Nodes))
	for i := range j.p.w.Nodes {
		ids[i] = j.p.w.Nodes[i].ID
	}
	act, err := j.activation(ids)
	if err == nil {
		var rv map[string]any
		if rv, err = j.runEnd(); err == nil {
			act["run"] = rv
		}
	}
	var re redisErr
	if errors.As(err, &re) {
		return re.error
	}
	if err != nil {
		return done(nil, err)
	}
	cfg, err := j.p.params(j.ctx, f.With, "finally", act, j.maxOutput())
	if err != nil {
		return done(nil, err)
	}
	for attempt := 1; ; attempt++ {
		j.tok.Attempt = attempt
		out, err := j.call(f.Handler, cfg, -1, false)
		if err == nil {
			return done(out, nil)
		}
		if j.ctx.Err() != nil {
			return errAbandon
		}
		due, retry := retryDue(f.Retry, attempt, err)
		if !retry {
			return done(nil, lastAttempt(f.Retry, attempt, err))
		}
		t := time.NewTimer(time.Until(time.UnixMilli(due)))
		select {
		case <-t.C:
		case <-j.ctx.Done():
			t.Stop()
			return errAbandon
		}
	}
}

// runEnd returns `run` for the finally step: id, workflow, status, error,
// started_at and ended_at (RFC 3339), duration, failed_nodes (the failed
// executions' exec keys, sorted).
func (j *job) runEnd() (map[string]any, error) {
	state, err := j.w.st.rdb.HGetAll(j.ctx, j.w.ks.state(j.tok.Run)).Result()
	if err != nil {
		return nil, redisErr{err}
	}
	ms := func(k string) int64 { n, _ := strconv.ParseInt(state[k], 10, 64); return n }
	started, ended := time.UnixMilli(ms("run|created")).UTC(), time.UnixMilli(ms("run|ended")).UTC()
	failed := []any{}
	var keys []string
	for k, v := range state {
		if v == NodeFailed && !strings.Contains(k, "|") { // (fields with | are not executions)
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		failed = append(failed, k)
	}
	return map[string]any{
		"id":           j.tok.Run,
		"workflow":     state["run|workflow"],
		"status":       state["run|status"],
		"error":        state["run|error"],
		"started_at":   started.Format(time.RFC3339Nano),
		"ended_at":     ended.Format(time.RFC3339Nano),
		"duration":     ended.Sub(started),
		"failed_nodes": failed,
	}, nil
}

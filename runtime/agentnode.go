package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/runtime/agent"
	"github.com/wfc-lang/wfc/runtime/handlers"
)

// Agent nodes (docs/agents.md): the worker renders the prompt, holds the
// model conversation (runtime/agent), records the decision in the run's
// state hash (field ag|x, scripts/agentrecord.lua; counted in the run's
// max_state_bytes like any stored value) and only then routes on it. A redelivered execution — a duplicate, or the claim of a worker that
// died after the model answered — finds the record and routes on it without
// asking the model again: a model is not deterministic, and two deliveries
// must not route two ways.

// DefaultAgentWallTime bounds an agent execution's conversation when the
// node has no timeout.
const DefaultAgentWallTime = 5 * time.Minute

// agentField names the state field holding an execution's decision.
func agentField(x string) string { return "ag|" + x }

var agentRecordScript = func() *redis.Script {
	src, err := scriptFS.ReadFile("scripts/agentrecord.lua")
	if err != nil {
		panic(err)
	}
	return redis.NewScript(string(src))
}()

// agentRecorded, when set (tests), runs after a decision is recorded and
// before the node completes; an error stops the execution there, as a
// worker killed at that moment would.
var agentRecorded func(ctx context.Context, run, x string) error

// agent runs an agent node's execution.
func (j *job) agent(act vars) error {
	n, a := j.n, j.n.Agent
	field := agentField(j.x)
	rec, err := j.w.st.rdb.HGet(j.ctx, j.w.ks.state(j.tok.Run), field).Result()
	if err != nil && err != redis.Nil {
		return err
	}
	if err == redis.Nil {
		dec, err := j.askModel(act)
		if err != nil {
			return j.handlerFailed(err, -1)
		}
		data, err := json.Marshal(dec)
		if err != nil {
			return err
		}
		data = j.w.opts.Secrets.JSON(data) // the reasoning may quote the prompt
		if err := j.checkOutput(data); err != nil {
			return j.handlerFailed(err, -1)
		}
		res, err := agentRecordScript.Run(j.ctx, j.w.st.rdb, []string{j.w.ks.state(j.tok.Run)}, field, string(data), j.maxState()).Result()
		if err == redis.Nil {
			return j.ack() // the run ended meanwhile
		}
		if err != nil {
			return fmt.Errorf("record the decision of %s: %w", j.x, err)
		}
		if _, over := res.(int64); over {
			// The record would take the run's stored values over
			// max_state_bytes: nothing was written.
			return j.handlerFailed(j.stateErr("the decision of agent "+n.ID, len(data)), -1)
		}
		rec, _ = res.(string)
		if rec != string(data) {
			j.w.log.Info("wfc worker: another delivery decided first; routing on its decision", "run", j.tok.Run, "x", j.x)
		}
		if agentRecorded != nil {
			if err := agentRecorded(j.ctx, j.tok.Run, j.x); err != nil {
				return err
			}
		}
	}
	var dec agent.Decision
	if err := json.Unmarshal([]byte(rec), &dec); err != nil {
		return j.failNode(handlers.Errorf(CodeOutput, false, "the recorded decision of %s is not JSON: %v", j.x, err), -1)
	}
	var real [][2]string
	switch {
	case len(a.Routes) == 0:
		real = j.p.edges(n.ID, ir.EdgeAfter, nil)
	case dec.Defaulted:
		real = j.p.edges(n.ID, ir.EdgeDefault, a.Default)
	default:
		for _, r := range dec.Routes {
			if !contains(a.Routes, r) { // a record is trusted only within the allow-list
				return j.failNode(handlers.Errorf(agent.CodeAnswer, false, "the recorded decision of %s names %q, which is not one of its routes", j.x, r), -1)
			}
		}
		real = j.p.edges(n.ID, ir.EdgeRoute, dec.Routes)
	}
	return j.complete(completeArgs{Mode: "ok", Output: rec, Real: real, Item: -1})
}

// askModel renders the prompt and holds the conversation.
func (j *job) askModel(act vars) (*agent.Decision, error) {
	n, a := j.n, j.n.Agent
	client := j.w.opts.Model
	if client == nil {
		return nil, handlers.Errorf(agent.CodeNoModel, false,
			"worker %s has no model server: start it with --model-base-url (or OPENAI_BASE_URL) and --model-api-key-file (or OPENAI_API_KEY)", j.w.opts.Consumer)
	}
	prompt, err := j.agentPrompt(act)
	if err != nil {
		return nil, err
	}
	task := &agent.Task{Model: a.Model, Temperature: a.Temperature, Prompt: prompt, Routes: a.Routes,
		MaxRoutes: a.MaxRoutes, HasDefault: len(a.Default) > 0, MaxToolCalls: a.MaxToolCalls, MaxTokens: a.MaxTokens}
	if task.Tools, err = j.agentTools(); err != nil { // agenttools.go
		return nil, err
	}
	wall := DefaultAgentWallTime
	if j.w.opts.AgentWallTime > 0 {
		wall = j.w.opts.AgentWallTime
	}
	if n.TimeoutMS > 0 {
		wall = time.Duration(n.TimeoutMS) * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(j.ctx, wall)
	defer cancel()
	stop := j.markRunning()
	dec, err := client.Run(ctx, task)
	stop()
	if err != nil && j.ctx.Err() == nil && ctx.Err() == context.DeadlineExceeded {
		err = handlers.Errorf(handlers.CodeTimeout, true, "agent %s: no decision within %s: %w", n.ID, wall, err)
	}
	return dec, err
}

// agentPrompt renders the node's prompt, followed by its `with` values as
// JSON: what the prompt names and the with block binds is all the model
// sees of the run. Secret values are masked out of it.
func (j *job) agentPrompt(act vars) (string, error) {
	n := j.n
	raw, err := j.p.value(j.ctx, &n.Agent.Prompt, n.ID+".prompt", act, j.maxOutput())
	if err != nil {
		return "", exprErr(err)
	}
	var prompt string
	if json.Unmarshal(raw, &prompt) != nil {
		prompt = string(raw)
	}
	if len(n.With) > 0 {
		cfg, err := j.p.params(j.ctx, n.With, n.ID, act, j.maxOutput())
		if err != nil {
			return "", exprErr(err)
		}
		prompt += "\n\nContext (JSON):\n" + string(cfg)
	}
	return j.w.opts.Secrets.Text(prompt), nil
}

// exprErr gives an expression's failure the expr code (no retry helps).
func exprErr(err error) error {
	return handlers.Errorf(CodeExpr, false, "%v", err)
}

// agentTool returns the tool the worker offers under name, or nil.
func (w *Worker) agentTool(name string) agent.Tool {
	for _, t := range w.opts.AgentTools {
		if t != nil && t.Name() == name {
			return t
		}
	}
	return nil
}

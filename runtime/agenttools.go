package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/runtime/agent"
	"github.com/wfc-lang/wfc/runtime/agent/tools"
	"github.com/wfc-lang/wfc/runtime/handlers"
)

// An AgentPatchFunc applies the ops of an agent's patch_workflow call to
// its run: the live-patch applier restricted to additions downstream of the
// agent (livepatch.Downstream). The runtime cannot import the applier (it
// needs the compiler's checks): the program that starts the worker passes it.
type AgentPatchFunc func(ctx context.Context, run, agentNode string, patch []byte, by string) (json.RawMessage, error)

// agentTools returns the tools an agent node may call in this execution:
// each tool its `tools` item names, from the worker's own test tools
// (WorkerOptions.AgentTools) or else from its tool set
// (WorkerOptions.Tools), bound to this run: its blob store, the
// deployment's catalog, delegation to deployed workflows and live patches.
func (j *job) agentTools() ([]agent.Tool, error) {
	n, a := j.n, j.n.Agent
	var out []agent.Tool
	var fromSet []string
	for _, name := range a.Tools {
		if t := j.w.agentTool(name); t != nil {
			out = append(out, t)
			continue
		}
		if j.w.opts.Tools == nil || !slices.Contains(tools.Names, name) {
			return nil, handlers.Errorf(agent.CodeTool, false, "agent %s may use tool %q, which worker %s does not offer", n.ID, name, j.w.opts.Consumer)
		}
		fromSet = append(fromSet, name)
	}
	if len(fromSet) == 0 {
		return out, nil
	}
	env := tools.Env{
		Node:      n.ID,
		Blobs:     j.w.eng.Blobs(j.tok.Run, BlobOptions{}),
		Catalog:   workerCatalog{j.w},
		Delegator: delegator{w: j.w, run: j.tok.Run, node: n.ID, x: j.x},
	}
	if j.w.opts.AgentPatch != nil {
		env.Patcher = agentPatcher{f: j.w.opts.AgentPatch, run: j.tok.Run, by: "agent " + n.ID}
	}
	ts, err := j.w.opts.Tools.For(fromSet, env)
	if err != nil {
		return nil, handlers.Errorf(agent.CodeTool, false, "agent %s: %v", n.ID, err)
	}
	for _, t := range ts {
		out = append(out, t)
	}
	return out, nil
}

// workerCatalog is what search_tools searches: the handlers this worker
// runs and the workflows deployed under a tag.
type workerCatalog struct{ w *Worker }

func (c workerCatalog) Entries(ctx context.Context) ([]tools.CatalogEntry, error) {
	var out []tools.CatalogEntry
	if reg := c.w.opts.Handlers; reg != nil {
		for _, name := range reg.Names() {
			if reg.Can(name) {
				out = append(out, tools.CatalogEntry{Kind: "handler", Name: name})
			}
		}
	}
	tags, err := c.w.eng.Tags(ctx)
	if err != nil {
		return nil, err
	}
	for _, tag := range tags {
		w, _, err := c.w.eng.Tagged(ctx, tag)
		if err != nil {
			continue // a tag whose IR expired or never stored: not offered
		}
		out = append(out, tools.CatalogEntry{Kind: "workflow", Name: tag, Description: w.Description, Inputs: inputsSchema(w)})
	}
	return out, nil
}

// inputsSchema is a JSON Schema of a workflow's inputs, for the model to
// know what to pass.
func inputsSchema(w *ir.Workflow) json.RawMessage {
	props := map[string]any{}
	required := []string{}
	for _, in := range w.Inputs {
		props[in.Name] = map[string]any{"description": in.Type.String()}
		if in.Required {
			required = append(required, in.Name)
		}
	}
	b, _ := json.Marshal(map[string]any{"type": "object", "properties": props, "required": required})
	return b
}

// delegator starts runs of deployed workflows for delegate_to_agent: the
// target is a tag (wfc deploy --tag); an "agent" target must be a workflow
// with an agent node. The run is a child run of the delegating run, as a
// flow node's is: recorded in its state hash (ch|<child>, run|kids) before
// it is submitted, so that cancelling the delegating run, or its end
// (failed, cancelled, or completed while the child still runs: the orphans
// token), cancels it and its own children.
type delegator struct {
	w            *Worker
	run, node, x string
}

var agentDelegateScript = func() *redis.Script {
	src, err := scriptFS.ReadFile("scripts/agentdelegate.lua")
	if err != nil {
		panic(err)
	}
	return redis.NewScript(string(src))
}()

func (d delegator) Delegate(ctx context.Context, req tools.DelegateRequest) (tools.DelegateResult, error) {
	w, _, err := d.w.eng.Tagged(ctx, req.Target)
	if errors.Is(err, ErrUnknownTag) {
		return tools.DelegateResult{}, &tools.Error{Code: tools.CodeUnavailable, Message: fmt.Sprintf("no workflow is deployed under %q", req.Target)}
	}
	if err != nil {
		return tools.DelegateResult{}, err
	}
	if req.Kind == "agent" && !slices.ContainsFunc(w.Nodes, func(n ir.Node) bool { return n.Type == ir.NodeAgent }) {
		return tools.DelegateResult{}, &tools.Error{Code: tools.CodeBadArgs, Message: fmt.Sprintf("%q has no agent node: delegate to it as a workflow", req.Target)}
	}
	inputs := map[string]any{}
	if len(req.Inputs) > 0 && string(req.Inputs) != "null" {
		if err := json.Unmarshal(req.Inputs, &inputs); err != nil {
			return tools.DelegateResult{}, &tools.Error{Code: tools.CodeBadArgs, Message: "inputs must be a JSON object"}
		}
	}
	// Record the child first, pending, then submit it: it starts only
	// while the record stands (start.lua), and the run's end or cancel
	// closes a record whose child never started (cancelChildren). A worker
	// that dies between the two leaves a pending record, which status
	// does not show; a run that ends first leaves no child that runs. The
	// child's id is in the run's shard: start.lua reads the record in the
	// same slot.
	id := runIDInShard(d.w.ks, d.w.ks.shard(d.run))
	state := d.w.ks.state(d.run)
	ok, err := agentDelegateScript.Run(ctx, d.w.st.rdb, []string{state}, id, d.x).Int()
	if err != nil {
		return tools.DelegateResult{}, fmt.Errorf("record the delegated run: %w", err)
	}
	if ok == 0 {
		return tools.DelegateResult{}, errNotRunning(d.run)
	}
	if _, _, err := d.w.eng.SubmitTag(ctx, req.Target, inputs, WithRunID(id), recordedBy(d.run)); err != nil {
		if errors.Is(err, errChildUnrecorded) {
			return tools.DelegateResult{}, errNotRunning(d.run) // the run ended and closed the record
		}
		d.w.eng.dropChild(context.WithoutCancel(ctx), d.run, id, "the submit failed")
		return tools.DelegateResult{}, &tools.Error{Code: tools.CodeFailed, Message: d.w.opts.Secrets.Text(err.Error())}
	}
	d.w.log.Info("wfc worker: agent delegated a run", "run", d.run, "node", d.node, "delegated", id, "workflow", req.Target)
	res := tools.DelegateResult{ID: id, Status: "started"}
	if !req.Wait {
		return res, nil
	}
	st, err := d.w.eng.Wait(ctx, id)
	if err != nil {
		return res, nil // the call's time bound passed: started, not done
	}
	res.Status = string(st.State)
	res.Output = st.Result
	res.Error = st.Error
	return res, nil
}

func errNotRunning(run string) error {
	return &tools.Error{Code: tools.CodeFailed, Message: "run " + run + " is no longer running: nothing was delegated"}
}

// recordedBy submits a run that run recorded as its child (ch|, cp|)
// before the submit: it starts only while that record stands.
func recordedBy(run string) SubmitOption { return func(c *submitConfig) { c.recorder = run } }

// runIDInShard returns a new run id (newRunID) in shard: about as many
// draws as there are shards.
func runIDInShard(ks keyspace, shard int) string {
	for {
		if id := newRunID(); ks.shard(id) == shard {
			return id
		}
	}
}

// agentPatcher applies patch_workflow's ops to the agent's own run.
type agentPatcher struct {
	f       AgentPatchFunc
	run, by string
}

func (p agentPatcher) Patch(ctx context.Context, agentNode string, ops []tools.PatchOp, description string) (json.RawMessage, error) {
	b, err := json.Marshal(ops)
	if err != nil {
		return nil, err
	}
	by := p.by
	if description != "" {
		by += ": " + description
	}
	if len(by) > 200 {
		by = by[:200]
	}
	return p.f(ctx, p.run, agentNode, b, by)
}

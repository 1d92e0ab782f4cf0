package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/wfc-lang/wfc/runtime/handlers"
)

// A Tool is a function the model may call during an agent node's
// conversation. The worker holds the tools it offers; a node names those
// its agent may use (`tools [...]`), and only those are declared to the
// model.
type Tool interface {
	Name() string                // the function name the model calls
	Description() string         // told to the model
	Parameters() json.RawMessage // JSON Schema of the arguments
	Call(ctx context.Context, args json.RawMessage) (json.RawMessage, error)
}

// DecideTool is the name of the function through which a routing agent
// answers.
const DecideTool = "decide"

// Defaults of a Task's limits.
const (
	DefaultMaxToolCalls = 8
	// MaxToolResultBytes bounds what one tool call feeds back to the
	// model; a longer result is cut and marked so.
	MaxToolResultBytes = 64 << 10
)

// A Task is one execution of an agent node, as the model client sees it.
type Task struct {
	Model       string
	Temperature *float64
	Prompt      string // rendered: the user message
	// Routes is the allow-list (empty: the answer is free text);
	// MaxRoutes how many of them the answer may name (0 means 1).
	Routes    []string
	MaxRoutes int
	// HasDefault: a bad routing answer takes the default instead of
	// failing the attempt.
	HasDefault bool
	Tools      []Tool
	// MaxToolCalls bounds the tool calls of the conversation (0:
	// DefaultMaxToolCalls); MaxTokens its total tokens (0: unbounded).
	MaxToolCalls int
	MaxTokens    int
}

// systemPrompt frames the conversation; the node's prompt is the user
// message.
func systemPrompt(t *Task) string {
	var b strings.Builder
	b.WriteString("You are a step of an automated workflow.")
	if len(t.Tools) > 0 {
		b.WriteString(" You may call the tools you are given; their results come back to you.")
	}
	if len(t.Routes) > 0 {
		max := max(t.MaxRoutes, 1)
		fmt.Fprintf(&b, " Decide which path the workflow takes next: call the function %q with \"routes\", a list of ", DecideTool)
		if max == 1 {
			b.WriteString("exactly one")
		} else {
			fmt.Fprintf(&b, "one to %d", max)
		}
		fmt.Fprintf(&b, " of these names: %s, and \"reasoning\", one or two sentences saying why.", strings.Join(t.Routes, ", "))
		b.WriteString(" If you cannot call functions, answer with only the JSON object {\"routes\": [...], \"reasoning\": \"...\"}.")
	}
	return b.String()
}

// decideSpec is the function a routing agent answers through: its schema
// lists the allowed names so servers with constrained decoding keep to
// them (the answer is checked anyway).
func decideSpec(t *Task) ToolSpec {
	schema := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"routes": map[string]any{
				"type": "array", "items": map[string]any{"type": "string", "enum": t.Routes},
				"minItems": 1, "maxItems": max(t.MaxRoutes, 1),
			},
			"reasoning": map[string]any{"type": "string"},
		},
		"required":             []string{"routes", "reasoning"},
		"additionalProperties": false,
	}
	data, _ := json.Marshal(schema)
	return ToolSpec{Type: "function", Function: FunctionSpec{Name: DecideTool,
		Description: "Choose the workflow's next step(s) among the allowed routes, and say why.", Parameters: data}}
}

// PromptHash is the hash recorded for a rendered prompt.
func PromptHash(prompt string) string {
	sum := sha256.Sum256([]byte(prompt))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Run holds the conversation of one agent execution: it asks the model,
// runs the tools the model calls (within the task's tools and limits) and
// feeds their results back, until the model answers; it then reads the
// decision. The caller bounds the wall time through ctx.
//
// A routing answer outside the allow-list takes the default when the task
// has one (Decision.Defaulted), else fails with CodeAnswer. Exceeding
// MaxToolCalls or MaxTokens fails with CodeLimit.
func (c *Client) Run(ctx context.Context, t *Task) (*Decision, error) {
	d := &Decision{Model: t.Model, PromptHash: PromptHash(t.Prompt), Routes: []string{}}
	tools := map[string]Tool{}
	req := &Request{Model: t.Model, Temperature: t.Temperature}
	for _, tool := range t.Tools {
		tools[tool.Name()] = tool
		req.Tools = append(req.Tools, ToolSpec{Type: "function", Function: FunctionSpec{
			Name: tool.Name(), Description: tool.Description(), Parameters: tool.Parameters()}})
	}
	if len(t.Routes) > 0 {
		req.Tools = append(req.Tools, decideSpec(t))
		if len(t.Tools) == 0 {
			req.ToolChoice = map[string]any{"type": "function", "function": map[string]string{"name": DecideTool}}
		}
	}
	maxCalls := t.MaxToolCalls
	if maxCalls <= 0 {
		maxCalls = DefaultMaxToolCalls
	}
	req.Messages = []Message{{Role: "system", Content: systemPrompt(t)}, {Role: "user", Content: t.Prompt}}
	for {
		if t.MaxTokens > 0 {
			req.MaxTokens = max(t.MaxTokens-d.Usage.TotalTokens, 1)
		}
		resp, err := c.Chat(ctx, req)
		if err != nil {
			return nil, err
		}
		if resp.Model != "" {
			d.Model = resp.Model
		}
		d.Usage.add(resp.Usage)
		if t.MaxTokens > 0 && d.Usage.TotalTokens > t.MaxTokens {
			return nil, handlers.Errorf(CodeLimit, false, "agent used %d tokens, over max_tokens %d", d.Usage.TotalTokens, t.MaxTokens)
		}
		msg := resp.Choices[0].Message
		var decide *ToolCall
		var calls []ToolCall
		for i := range msg.ToolCalls {
			if msg.ToolCalls[i].Function.Name == DecideTool && len(t.Routes) > 0 {
				decide = &msg.ToolCalls[i]
				break
			}
			calls = append(calls, msg.ToolCalls[i])
		}
		if decide != nil {
			return c.finish(t, d, decide.Function.Arguments, msg.Content)
		}
		if len(calls) == 0 {
			return c.finish(t, d, msg.Content, msg.Content)
		}
		if d.ToolCalls+len(calls) > maxCalls {
			return nil, handlers.Errorf(CodeLimit, false, "agent asked for tool call %d, over max_tool_calls %d", d.ToolCalls+len(calls), maxCalls)
		}
		req.Messages = append(req.Messages, Message{Role: "assistant", Content: msg.Content, ToolCalls: calls})
		for _, call := range calls {
			d.ToolCalls++
			req.Messages = append(req.Messages, Message{Role: "tool", ToolCallID: call.ID, Content: runTool(ctx, tools, call)})
		}
		if err := ctx.Err(); err != nil {
			return nil, handlers.Errorf(CodeTimeout, true, "agent: %v after %d tool calls", err, d.ToolCalls)
		}
	}
}

// runTool runs one tool call and returns what goes back to the model: the
// result, or {"error": ...} (an unknown tool, bad arguments and a failing
// tool are the model's to handle, not the node's).
func runTool(ctx context.Context, tools map[string]Tool, call ToolCall) string {
	fail := func(msg string) string {
		data, _ := json.Marshal(map[string]string{"error": msg})
		return string(data)
	}
	tool := tools[call.Function.Name]
	if tool == nil {
		return fail(fmt.Sprintf("no tool %q: this agent may call only the tools it was given", clip(call.Function.Name, 80)))
	}
	args := json.RawMessage(strings.TrimSpace(call.Function.Arguments))
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	if !json.Valid(args) {
		return fail("the arguments are not JSON")
	}
	out, err := tool.Call(ctx, args)
	if err != nil {
		var he *handlers.Error
		if errors.As(err, &he) {
			return fail(he.Code + ": " + clip(he.Message, 4096))
		}
		return fail(clip(err.Error(), 4096))
	}
	if len(out) > MaxToolResultBytes {
		return fail(fmt.Sprintf("the result is %d bytes, over the limit of %d: ask for less", len(out), MaxToolResultBytes))
	}
	if !json.Valid(out) {
		return fail("the tool returned something that is not JSON")
	}
	return string(out)
}

// finish reads the final answer (the decide call's arguments, or the
// reply's text) into d.
func (c *Client) finish(t *Task, d *Decision, reply, text string) (*Decision, error) {
	d.Text = text
	if len(t.Routes) == 0 {
		d.Text = reply
		return d, nil
	}
	a, ok := parseAnswer(reply)
	d.Reasoning = a.reasoning
	if d.Text == "" {
		d.Text = a.reasoning
	}
	var err error
	if !ok {
		err = fmt.Errorf("the answer is not a routing decision: %q", clip(reply, 200))
	} else {
		var routes []string
		if routes, err = resolve(a.names, t.Routes, t.MaxRoutes); err == nil {
			d.Routes, d.Route = routes, routes[0]
			return d, nil
		}
	}
	if !t.HasDefault {
		return nil, handlers.Errorf(CodeAnswer, true, "agent: %v", err)
	}
	d.Defaulted, d.Problem = true, err.Error()
	return d, nil
}

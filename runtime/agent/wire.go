package agent

import "encoding/json"

// The wire shapes of POST {base}/chat/completions, reduced to the fields
// wfc sends and reads (docs/agents.md, "Request and response").

// A Message is one chat message.
type Message struct {
	Role       string     `json:"role"` // system, user, assistant or tool
	Content    string     `json:"content"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// A ToolCall is the model's request to call a function.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"` // "function"
	Function FunctionCall `json:"function"`
}

// A FunctionCall names the function and carries its arguments as a JSON
// string (as the API sends them: often, not always, valid JSON).
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// A ToolSpec declares a function the model may call.
type ToolSpec struct {
	Type     string       `json:"type"` // "function"
	Function FunctionSpec `json:"function"`
}

// A FunctionSpec is a function's name, description and JSON Schema.
type FunctionSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

// A Request is a chat completion request.
type Request struct {
	Model       string     `json:"model"`
	Messages    []Message  `json:"messages"`
	Temperature *float64   `json:"temperature,omitempty"`
	Tools       []ToolSpec `json:"tools,omitempty"`
	// ToolChoice is "auto", "none", "required" or
	// {"type":"function","function":{"name":...}}.
	ToolChoice any `json:"tool_choice,omitempty"`
	MaxTokens  int `json:"max_tokens,omitempty"`
}

// A Response is a chat completion response.
type Response struct {
	ID      string   `json:"id"`
	Model   string   `json:"model"`
	Choices []Choice `json:"choices"`
	Usage   Usage    `json:"usage"`
}

// A Choice is one of the response's answers (wfc asks for one).
type Choice struct {
	Index        int     `json:"index"`
	Message      Message `json:"message"`
	FinishReason string  `json:"finish_reason"`
}

// Usage counts the tokens of a call (or, summed, of a conversation).
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

func (u *Usage) add(v Usage) {
	u.PromptTokens += v.PromptTokens
	u.CompletionTokens += v.CompletionTokens
	if v.TotalTokens == 0 {
		v.TotalTokens = v.PromptTokens + v.CompletionTokens
	}
	u.TotalTokens += v.TotalTokens
}

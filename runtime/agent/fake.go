package agent

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// A Fake is an OpenAI-compatible chat completions server that plays the
// model with canned answers: `wfc fakemodel` serves one so that agents can
// be tried without a key, and the tests script models with it.
//
// For each request the first answer that matches (Match, Turn) and is not
// used up (Times) is given; with none, a routing request (one that
// declares the decide function) gets its first allowed route, and any
// other request an echo of its prompt.
type Fake struct {
	Answers []FakeAnswer
	// Key, when set, is the API key requests must carry (401 otherwise).
	Key string

	mu       sync.Mutex
	used     []int
	requests []Request
}

// A FakeAnswer is one canned reply (a JSON object in an answers file).
type FakeAnswer struct {
	// Match, when set, must occur in the request's user message.
	Match string `json:"match,omitempty"`
	// Turn, when set, is the model turn it answers (1: the first call of a
	// conversation, 2: the one after the first tool results, ...).
	Turn int `json:"turn,omitempty"`
	// Times, when set, is how often it may be given.
	Times int `json:"times,omitempty"`
	// The reply: routes (through the decide function, with reasoning),
	// tool calls, or text.
	Routes    []string       `json:"routes,omitempty"`
	Reasoning string         `json:"reasoning,omitempty"`
	ToolCalls []FakeToolCall `json:"tool_calls,omitempty"`
	Text      string         `json:"text,omitempty"`
	// Status, when set, answers with that HTTP status instead (and
	// RetryAfter as the Retry-After header).
	Status     int    `json:"status,omitempty"`
	RetryAfter string `json:"retry_after,omitempty"`
	// DelayMS delays the reply.
	DelayMS int `json:"delay_ms,omitempty"`
	// Tokens is the usage it reports (default 10 prompt + 5 completion).
	Tokens int `json:"tokens,omitempty"`
}

// A FakeToolCall is a canned tool call.
type FakeToolCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// LoadFakeAnswers reads an answers file: a JSON list of FakeAnswer.
func LoadFakeAnswers(data []byte) ([]FakeAnswer, error) {
	var out []FakeAnswer
	d := json.NewDecoder(strings.NewReader(string(data)))
	d.DisallowUnknownFields()
	if err := d.Decode(&out); err != nil {
		return nil, fmt.Errorf("answers: %w", err)
	}
	return out, nil
}

// maxFakeRequests bounds the requests a Fake keeps (wfc fakemodel may
// serve for a long time): the oldest go first.
const maxFakeRequests = 1000

// Requests returns the requests served so far (the last 1000).
func (f *Fake) Requests() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Request(nil), f.requests...)
}

func (f *Fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		http.Error(w, `{"error":{"message":"POST /v1/chat/completions only"}}`, http.StatusNotFound)
		return
	}
	if f.Key != "" && r.Header.Get("Authorization") != "Bearer "+f.Key {
		http.Error(w, `{"error":{"message":"invalid API key"}}`, http.StatusUnauthorized)
		return
	}
	var req Request
	if err := json.NewDecoder(io.LimitReader(r.Body, 8<<20)).Decode(&req); err != nil {
		http.Error(w, `{"error":{"message":"the body is not a chat completion request"}}`, http.StatusBadRequest)
		return
	}
	a := f.pick(&req)
	if a.DelayMS > 0 {
		select {
		case <-time.After(time.Duration(a.DelayMS) * time.Millisecond):
		case <-r.Context().Done():
			return
		}
	}
	if a.Status != 0 {
		if a.RetryAfter != "" {
			w.Header().Set("Retry-After", a.RetryAfter)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(a.Status)
		fmt.Fprintf(w, `{"error":{"message":"fake model: status %d","type":"fake"}}`, a.Status)
		return
	}
	msg := Message{Role: "assistant", Content: a.Text}
	finish := "stop"
	if a.Routes != nil {
		args, _ := json.Marshal(map[string]any{"routes": a.Routes, "reasoning": a.Reasoning})
		msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: "call_decide", Type: "function", Function: FunctionCall{Name: DecideTool, Arguments: string(args)}})
		finish = "tool_calls"
	}
	for i, c := range a.ToolCalls {
		args := string(c.Arguments)
		if args == "" {
			args = "{}"
		}
		msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: fmt.Sprintf("call_%d", i+1), Type: "function", Function: FunctionCall{Name: c.Name, Arguments: args}})
		finish = "tool_calls"
	}
	prompt, completion := 10, 5
	if a.Tokens > 0 {
		prompt, completion = a.Tokens-a.Tokens/3, a.Tokens/3
	}
	resp := Response{ID: "fake", Model: req.Model, Choices: []Choice{{Message: msg, FinishReason: finish}},
		Usage: Usage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion}}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(resp)
}

// pick chooses the answer of a request (and records the request).
func (f *Fake) pick(req *Request) FakeAnswer {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.requests) >= maxFakeRequests {
		f.requests = append(f.requests[:0], f.requests[1:]...)
	}
	f.requests = append(f.requests, *req)
	if len(f.used) < len(f.Answers) {
		f.used = append(f.used, make([]int, len(f.Answers)-len(f.used))...)
	}
	user, turn := "", 1
	for _, m := range req.Messages {
		switch m.Role {
		case "user":
			user = m.Content
		case "assistant":
			turn++
		}
	}
	for i, a := range f.Answers {
		if (a.Match != "" && !strings.Contains(user, a.Match)) || (a.Turn != 0 && a.Turn != turn) || (a.Times != 0 && f.used[i] >= a.Times) {
			continue
		}
		f.used[i]++
		return a
	}
	for _, t := range req.Tools {
		if t.Function.Name != DecideTool {
			continue
		}
		var schema struct {
			Properties struct {
				Routes struct {
					Items struct {
						Enum []string `json:"enum"`
					} `json:"items"`
				} `json:"routes"`
			} `json:"properties"`
		}
		if json.Unmarshal(t.Function.Parameters, &schema) == nil && len(schema.Properties.Routes.Items.Enum) > 0 {
			return FakeAnswer{Routes: schema.Properties.Routes.Items.Enum[:1], Reasoning: "fake model: no canned answer matched, so the first allowed route"}
		}
	}
	return FakeAnswer{Text: "fake model: " + clip(user, 2000)}
}

package agent

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wfc-lang/wfc/runtime/handlers"
)

func TestParseAnswer(t *testing.T) {
	for _, c := range []struct {
		reply string
		names []string
		ok    bool
	}{
		{`{"routes":["a"],"reasoning":"r"}`, []string{"a"}, true},
		{`{"route":"a"}`, []string{"a"}, true},
		{`{"next_nodes":["a","b"]}`, []string{"a", "b"}, true},
		{"Sure! Here it is:\n```json\n{\"routes\": [\"b\"], \"reasoning\": \"x\"}\n```\nHope it helps {.", []string{"b"}, true},
		{`  "Enterprise_Sales".  `, []string{"Enterprise_Sales"}, true},
		{"I think enterprise sales", nil, false},
		{"", nil, false},
		{`{"reasoning":"no field"}`, nil, false},
		{`{"routes": 7}`, nil, true},
		{"garbage {not json", nil, false},
	} {
		a, ok := parseAnswer(c.reply)
		if ok != c.ok || !reflect.DeepEqual(a.names, c.names) {
			t.Errorf("parseAnswer(%q) = %q, %v; want %q, %v", c.reply, a.names, ok, c.names, c.ok)
		}
	}
}

func TestResolve(t *testing.T) {
	allow := []string{"enterprise_sales", "standard_sales", "send_gift"}
	for _, c := range []struct {
		names []string
		max   int
		want  []string
		err   string
	}{
		{[]string{"standard_sales"}, 1, []string{"standard_sales"}, ""},
		{[]string{" ENTERPRISE_sales\n"}, 1, []string{"enterprise_sales"}, ""},
		{[]string{"enterprise_sales", "send_gift"}, 2, []string{"enterprise_sales", "send_gift"}, ""},
		{[]string{"enterprise_sales", "Enterprise_Sales"}, 1, []string{"enterprise_sales"}, ""},
		{[]string{"enterprise_sales", "send_gift"}, 1, nil, "at most 1"},
		{[]string{"delete_everything"}, 1, nil, "not one of the routes"},
		{nil, 1, nil, "names no route"},
	} {
		got, err := resolve(c.names, allow, c.max)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("resolve(%q): err %v, want %q", c.names, err, c.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("resolve(%q) = %q, %v; want %q", c.names, got, err, c.want)
		}
	}
	// Two routes that differ only in case: a name in a third case is not guessed.
	if got, err := resolve([]string{"AB"}, []string{"ab", "AB"}, 1); err != nil || got[0] != "AB" {
		t.Errorf("exact match among case variants: %v %v", got, err)
	}
	if _, err := resolve([]string{"Ab"}, []string{"ab", "AB"}, 1); err == nil {
		t.Errorf("ambiguous case match was guessed")
	}
}

// fakeServer serves f and returns a client for it with short waits.
func fakeServer(t *testing.T, f http.Handler, cfg Config) (*Client, *[]time.Duration) {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	cfg.BaseURL = srv.URL + "/v1"
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var waits []time.Duration
	c.sleep = func(ctx context.Context, d time.Duration) error { waits = append(waits, d); return ctx.Err() }
	return c, &waits
}

func code(err error) string { return handlers.CodeOf(err) }

func TestClientRetries(t *testing.T) {
	ctx := context.Background()
	task := &Task{Model: "m", Prompt: "p", Routes: []string{"a", "b"}}
	t.Run("429 Retry-After then answer", func(t *testing.T) {
		f := &Fake{Answers: []FakeAnswer{{Status: 429, RetryAfter: "2", Times: 1}, {Routes: []string{"b"}, Reasoning: "why"}}}
		c, waits := fakeServer(t, f, Config{})
		d, err := c.Run(ctx, task)
		if err != nil || d.Route != "b" || d.Reasoning != "why" {
			t.Fatalf("got %+v, %v", d, err)
		}
		if !reflect.DeepEqual(*waits, []time.Duration{2 * time.Second}) {
			t.Errorf("waits %v, want [2s]", *waits)
		}
	})
	t.Run("Retry-After bounded", func(t *testing.T) {
		f := &Fake{Answers: []FakeAnswer{{Status: 503, RetryAfter: "86400", Times: 1}, {Routes: []string{"a"}}}}
		c, waits := fakeServer(t, f, Config{MaxBackoff: 5 * time.Second})
		if _, err := c.Run(ctx, task); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(*waits, []time.Duration{5 * time.Second}) {
			t.Errorf("waits %v, want [5s]", *waits)
		}
	})
	t.Run("500 every time", func(t *testing.T) {
		f := &Fake{Answers: []FakeAnswer{{Status: 500}}}
		c, waits := fakeServer(t, f, Config{Retries: 2})
		_, err := c.Run(ctx, task)
		var he *handlers.Error
		if code(err) != CodeModel || !errors.As(err, &he) || !he.Retryable || !strings.Contains(err.Error(), "HTTP 500") {
			t.Fatalf("err %v (%s)", err, code(err))
		}
		if len(*waits) != 2 || len(f.Requests()) != 3 {
			t.Errorf("%d waits, %d requests; want 2, 3", len(*waits), len(f.Requests()))
		}
	})
	t.Run("400 not retried", func(t *testing.T) {
		f := &Fake{Answers: []FakeAnswer{{Status: 400}}}
		c, _ := fakeServer(t, f, Config{})
		_, err := c.Run(ctx, task)
		var he *handlers.Error
		if !errors.As(err, &he) || he.Retryable || len(f.Requests()) != 1 {
			t.Fatalf("err %v, %d requests", err, len(f.Requests()))
		}
	})
	t.Run("request timeout", func(t *testing.T) {
		f := &Fake{Answers: []FakeAnswer{{DelayMS: 2000}}}
		c, _ := fakeServer(t, f, Config{Timeout: 50 * time.Millisecond, Retries: -1})
		start := time.Now()
		_, err := c.Run(ctx, task)
		if code(err) != CodeModel || !strings.Contains(err.Error(), "no answer within") || time.Since(start) > time.Second {
			t.Fatalf("err %v after %s", err, time.Since(start))
		}
	})
	t.Run("response too big", func(t *testing.T) {
		f := &Fake{Answers: []FakeAnswer{{Text: strings.Repeat("x", 5000)}}}
		c, _ := fakeServer(t, f, Config{MaxResponseBytes: 1000})
		_, err := c.Run(ctx, &Task{Model: "m", Prompt: "p"})
		if code(err) != CodeModel || !strings.Contains(err.Error(), "over the limit") {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("key sent, never in errors", func(t *testing.T) {
		const key = "sk-test-0123456789"
		var got atomic.Value
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got.Store(r.Header.Get("Authorization"))
			http.Error(w, "echo: "+r.Header.Get("Authorization"), 401)
		})
		c, _ := fakeServer(t, h, Config{APIKey: key})
		_, err := c.Run(ctx, task)
		if got.Load() != "Bearer "+key {
			t.Errorf("Authorization %q", got.Load())
		}
		if err == nil || strings.Contains(err.Error(), key) {
			t.Fatalf("err %v leaks the key", err)
		}
	})
	t.Run("no redirect to another host", func(t *testing.T) {
		other := httptest.NewServer(&Fake{})
		defer other.Close()
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, strings.Replace(other.URL, "127.0.0.1", "localhost", 1)+"/v1/chat/completions", http.StatusTemporaryRedirect)
		})
		c, _ := fakeServer(t, h, Config{APIKey: "sk-abcdef", Retries: -1})
		_, err := c.Run(ctx, task)
		if err == nil || !strings.Contains(err.Error(), "another host") {
			t.Fatalf("err %v", err)
		}
	})
}

func TestConfig(t *testing.T) {
	env := map[string]string{"OPENAI_BASE_URL": "http://localhost:11434/v1", "OPENAI_API_KEY": " k \n"}
	cfg := ConfigFromEnv(func(k string) string { return env[k] })
	if cfg.BaseURL != env["OPENAI_BASE_URL"] || cfg.APIKey != "k" {
		t.Errorf("ConfigFromEnv = %+v", cfg)
	}
	for _, bad := range []string{"ftp://x", "localhost:8080", "http://user:pw@host/v1"} {
		if _, err := New(Config{BaseURL: bad}); err == nil {
			t.Errorf("New(%q) accepted", bad)
		}
	}
	if c, err := New(Config{}); err != nil || c.BaseURL() != DefaultBaseURL {
		t.Errorf("default base URL: %v %v", c, err)
	}
}

func TestRouting(t *testing.T) {
	ctx := context.Background()
	routes := []string{"enterprise_sales", "standard_sales", "send_gift"}
	for _, c := range []struct {
		name    string
		answer  FakeAnswer
		max     int
		dflt    bool
		want    []string
		deflt   bool
		errCode string
	}{
		{"one", FakeAnswer{Routes: []string{"standard_sales"}}, 1, false, []string{"standard_sales"}, false, ""},
		{"several", FakeAnswer{Routes: []string{"enterprise_sales", "send_gift"}}, 2, false, []string{"enterprise_sales", "send_gift"}, false, ""},
		{"too many, default", FakeAnswer{Routes: []string{"enterprise_sales", "send_gift"}}, 1, true, []string{}, true, ""},
		{"forbidden, default", FakeAnswer{Routes: []string{"drop_table"}}, 1, true, []string{}, true, ""},
		{"forbidden, no default", FakeAnswer{Routes: []string{"drop_table"}}, 1, false, nil, false, CodeAnswer},
		{"garbage, no default", FakeAnswer{Text: "%%% not an answer"}, 1, false, nil, false, CodeAnswer},
		{"text JSON, other case", FakeAnswer{Text: "ok: {\"routes\": [\" Standard_Sales \"], \"reasoning\": \"r\"}"}, 1, false, []string{"standard_sales"}, false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &Fake{Answers: []FakeAnswer{c.answer}}
			cl, _ := fakeServer(t, f, Config{})
			d, err := cl.Run(ctx, &Task{Model: "m", Prompt: "lead 42", Routes: routes, MaxRoutes: c.max, HasDefault: c.dflt})
			if c.errCode != "" {
				if code(err) != c.errCode {
					t.Fatalf("err %v (%s), want %s", err, code(err), c.errCode)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(d.Routes, c.want) || d.Defaulted != c.deflt {
				t.Fatalf("got %+v, %v", d, err)
			}
			if d.PromptHash != PromptHash("lead 42") || d.Usage.TotalTokens != 15 || d.Model != "m" {
				t.Errorf("record %+v", d)
			}
			req := f.Requests()[0]
			if req.Messages[1].Content != "lead 42" || len(req.Tools) != 1 || req.Tools[0].Function.Name != DecideTool {
				t.Errorf("request %+v", req)
			}
		})
	}
}

// echoTool is a test tool: it returns its arguments under "echo".
type echoTool struct{ calls atomic.Int32 }

func (*echoTool) Name() string                { return "echo" }
func (*echoTool) Description() string         { return "returns its arguments" }
func (*echoTool) Parameters() json.RawMessage { return json.RawMessage(`{"type":"object"}`) }
func (e *echoTool) Call(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
	e.calls.Add(1)
	return json.Marshal(map[string]json.RawMessage{"echo": args})
}

func TestToolLoop(t *testing.T) {
	ctx := context.Background()
	t.Run("calls then decides", func(t *testing.T) {
		f := &Fake{Answers: []FakeAnswer{
			{Turn: 1, ToolCalls: []FakeToolCall{{Name: "echo", Arguments: json.RawMessage(`{"q":1}`)}, {Name: "nope"}}},
			{Turn: 2, Routes: []string{"b"}, Reasoning: "after tools"},
		}}
		c, _ := fakeServer(t, f, Config{})
		tool := &echoTool{}
		d, err := c.Run(ctx, &Task{Model: "m", Prompt: "p", Routes: []string{"a", "b"}, Tools: []Tool{tool}})
		if err != nil || d.Route != "b" || d.ToolCalls != 2 || tool.calls.Load() != 1 || d.Usage.TotalTokens != 30 {
			t.Fatalf("got %+v, %v (echo calls %d)", d, err, tool.calls.Load())
		}
		msgs := f.Requests()[1].Messages
		if len(msgs) != 5 || msgs[3].Content != `{"echo":{"q":1}}` || !strings.Contains(msgs[4].Content, `no tool \"nope\"`) {
			t.Errorf("second request's messages: %+v", msgs)
		}
		if f.Requests()[0].ToolChoice != nil {
			t.Errorf("tool_choice forced although the agent has tools")
		}
	})
	t.Run("past max_tool_calls", func(t *testing.T) {
		f := &Fake{Answers: []FakeAnswer{{ToolCalls: []FakeToolCall{{Name: "echo"}}}}}
		c, _ := fakeServer(t, f, Config{})
		tool := &echoTool{}
		_, err := c.Run(ctx, &Task{Model: "m", Prompt: "p", Routes: []string{"a"}, Tools: []Tool{tool}, MaxToolCalls: 3})
		if code(err) != CodeLimit || !strings.Contains(err.Error(), "max_tool_calls 3") || tool.calls.Load() != 3 {
			t.Fatalf("err %v, %d calls", err, tool.calls.Load())
		}
	})
	t.Run("past max_tokens", func(t *testing.T) {
		f := &Fake{Answers: []FakeAnswer{{ToolCalls: []FakeToolCall{{Name: "echo"}}, Tokens: 400}}}
		c, _ := fakeServer(t, f, Config{})
		_, err := c.Run(ctx, &Task{Model: "m", Prompt: "p", Tools: []Tool{&echoTool{}}, MaxTokens: 1000})
		if code(err) != CodeLimit || !strings.Contains(err.Error(), "max_tokens 1000") {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("free text", func(t *testing.T) {
		f := &Fake{Answers: []FakeAnswer{{Text: "a haiku"}}}
		c, _ := fakeServer(t, f, Config{})
		d, err := c.Run(ctx, &Task{Model: "m", Prompt: "p"})
		if err != nil || d.Text != "a haiku" || d.Route != "" || len(f.Requests()[0].Tools) != 0 {
			t.Fatalf("got %+v, %v", d, err)
		}
	})
}

func TestLoadFakeAnswers(t *testing.T) {
	got, err := LoadFakeAnswers([]byte(`[{"match": "Acme", "routes": ["a"], "times": 2}, {"status": 429, "retry_after": "1"}]`))
	if err != nil || len(got) != 2 || got[0].Match != "Acme" || got[1].Status != 429 {
		t.Fatalf("got %+v, %v", got, err)
	}
	for _, bad := range []string{`{}`, `[{"rout": ["a"]}]`, `[`, ``} {
		if _, err := LoadFakeAnswers([]byte(bad)); err == nil {
			t.Errorf("LoadFakeAnswers(%q) accepted", bad)
		}
	}
}

func TestFakeKey(t *testing.T) {
	f := &Fake{Key: "k-123456"}
	c, _ := fakeServer(t, f, Config{APIKey: "wrong-key"})
	if _, err := c.Run(context.Background(), &Task{Model: "m", Prompt: "p"}); code(err) != CodeModel || !strings.Contains(err.Error(), "HTTP 401") {
		t.Fatalf("err %v", err)
	}
	c, _ = fakeServer(t, f, Config{APIKey: "k-123456"})
	if d, err := c.Run(context.Background(), &Task{Model: "m", Prompt: "p"}); err != nil || d.Text != "fake model: p" {
		t.Fatalf("got %+v, %v", d, err)
	}
}

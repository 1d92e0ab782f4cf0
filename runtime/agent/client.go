package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/wfc-lang/wfc/runtime/handlers"
)

// Error codes of an agent node's failures (docs/agents.md, "Errors"); a
// workflow routes them with on_error and retries them with retry.
const (
	CodeModel   = "agent.model"  // the model server failed or answered with an error, after the client's retries
	CodeAnswer  = "agent.answer" // the answer names no route of the allow-list (or too many), and the node has no default
	CodeLimit   = "agent.limit"  // the conversation went past max_tool_calls or max_tokens
	CodeTool    = "agent.tool"   // the node allows a tool this worker does not have
	CodeNoModel = "agent.config" // this worker has no model server configured
	CodeTimeout = handlers.CodeTimeout
)

// Defaults of a Config.
const (
	DefaultBaseURL          = "https://api.openai.com/v1"
	DefaultTimeout          = 60 * time.Second
	DefaultRetries          = 3
	DefaultMaxBackoff       = 30 * time.Second
	DefaultMaxResponseBytes = 4 << 20
)

// A Config configures a Client. The zero value of each field takes its
// default.
type Config struct {
	// BaseURL is the API's base, e.g. https://api.openai.com/v1 or
	// http://localhost:11434/v1 (Ollama); the client posts to
	// BaseURL + "/chat/completions".
	BaseURL string
	// APIKey is sent as "Authorization: Bearer <key>" when not empty.
	// It is never logged, and masked out of the client's errors.
	APIKey string
	// Timeout bounds one HTTP request (each retry gets its own).
	Timeout time.Duration
	// Retries is how many times a request that got 429, 5xx or a
	// transport error is sent again; negative means none.
	Retries int
	// MaxBackoff bounds the wait between attempts, Retry-After included.
	MaxBackoff time.Duration
	// MaxResponseBytes bounds a response body.
	MaxResponseBytes int64
	// HTTP is the transport's client; nil uses a client that follows
	// redirects only within the base URL's host.
	HTTP *http.Client
	// Log gets the retries (never the key, the prompt or the answer).
	Log *slog.Logger
}

// ConfigFromEnv returns the Config the OpenAI SDKs would use:
// OPENAI_BASE_URL and OPENAI_API_KEY.
func ConfigFromEnv(getenv func(string) string) Config {
	return Config{BaseURL: getenv("OPENAI_BASE_URL"), APIKey: strings.TrimSpace(getenv("OPENAI_API_KEY"))}
}

// A Client calls an OpenAI-compatible chat completions endpoint.
type Client struct {
	cfg      Config
	endpoint string
	host     string
	http     *http.Client
	log      *slog.Logger
	sleep    func(ctx context.Context, d time.Duration) error // tests shorten waits
}

// New returns a client for cfg.
func New(cfg Config) (*Client, error) {
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	u, err := url.Parse(strings.TrimRight(cfg.BaseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("agent: model base URL %q is not an http(s) URL", cfg.BaseURL)
	}
	if u.User != nil {
		return nil, fmt.Errorf("agent: model base URL must not carry credentials: pass the key with --model-api-key-file or OPENAI_API_KEY")
	}
	if strings.ContainsAny(cfg.APIKey, "\r\n") {
		return nil, fmt.Errorf("agent: the model API key contains a line break")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Retries == 0 {
		cfg.Retries = DefaultRetries
	} else if cfg.Retries < 0 {
		cfg.Retries = 0
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = DefaultMaxBackoff
	}
	if cfg.MaxResponseBytes <= 0 {
		cfg.MaxResponseBytes = DefaultMaxResponseBytes
	}
	c := &Client{cfg: cfg, endpoint: u.String() + "/chat/completions", host: u.Host, log: cfg.Log, sleep: sleepCtx}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if cfg.HTTP != nil {
		c.http = cfg.HTTP
	} else {
		c.http = &http.Client{CheckRedirect: c.checkRedirect}
	}
	return c, nil
}

// BaseURL returns the base URL the client posts to (for logs: it carries
// no key).
func (c *Client) BaseURL() string { return strings.TrimSuffix(c.endpoint, "/chat/completions") }

// checkRedirect follows a redirect only to the same host (the
// Authorization header must not go elsewhere), at most 3 times.
func (c *Client) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 3 {
		return errors.New("too many redirects")
	}
	if req.URL.Host != c.host {
		return fmt.Errorf("refusing a redirect from %s to another host (%s)", c.host, req.URL.Host)
	}
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Chat sends one chat completion request, retrying 429, 5xx and transport
// errors with exponential backoff (Retry-After honoured, both bounded by
// MaxBackoff). Its errors are *handlers.Error with code CodeModel
// (retryable: the node's retry may try again later) or CodeTimeout.
func (c *Client) Chat(ctx context.Context, req *Request) (*Response, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("agent: encoding the request: %w", err)
	}
	var last error
	for attempt := 0; ; attempt++ {
		resp, wait, err := c.post(ctx, body)
		if err == nil {
			return resp, nil
		}
		last = err
		if ctx.Err() != nil {
			return nil, handlers.Errorf(CodeTimeout, true, "model call: %v", c.mask(ctx.Err().Error()))
		}
		if wait < 0 || attempt >= c.cfg.Retries {
			return nil, last
		}
		if wait == 0 {
			wait = backoff(attempt, c.cfg.MaxBackoff)
		}
		c.log.Warn("wfc agent: model call failed, retrying", "url", c.BaseURL(), "attempt", attempt+1, "wait", wait, "error", last)
		if err := c.sleep(ctx, wait); err != nil {
			return nil, handlers.Errorf(CodeTimeout, true, "model call: %v (after: %v)", err, last)
		}
	}
}

// backoff is 500ms·2^attempt with full jitter in its upper half, capped.
func backoff(attempt int, max time.Duration) time.Duration {
	d := 500 * time.Millisecond << min(attempt, 10)
	d = d/2 + rand.N(d/2+1)
	return min(d, max)
}

// post sends one request. On failure wait is -1 when a retry cannot help,
// 0 for the default backoff, else the (bounded) Retry-After.
func (c *Client) post(ctx context.Context, body []byte) (_ *Response, wait time.Duration, _ error) {
	rctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	hr, err := http.NewRequestWithContext(rctx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, -1, handlers.Errorf(CodeModel, false, "model call: %v", err)
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "application/json")
	if c.cfg.APIKey != "" {
		hr.Header.Set("Authorization", "Bearer "+c.cfg.APIKey)
	}
	res, err := c.http.Do(hr)
	if err != nil {
		if ctx.Err() == nil && rctx.Err() != nil {
			return nil, 0, handlers.Errorf(CodeModel, true, "model call to %s: no answer within %s", c.BaseURL(), c.cfg.Timeout)
		}
		return nil, 0, handlers.Errorf(CodeModel, true, "model call to %s: %s", c.BaseURL(), c.mask(err.Error()))
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, c.cfg.MaxResponseBytes+1))
	if err != nil {
		return nil, 0, handlers.Errorf(CodeModel, true, "model call to %s: reading the response: %s", c.BaseURL(), c.mask(err.Error()))
	}
	if int64(len(data)) > c.cfg.MaxResponseBytes {
		return nil, -1, handlers.Errorf(CodeModel, false, "model call to %s: response over the limit of %d bytes", c.BaseURL(), c.cfg.MaxResponseBytes)
	}
	if res.StatusCode/100 != 2 {
		err := handlers.Errorf(CodeModel, true, "model call to %s: HTTP %d: %s", c.BaseURL(), res.StatusCode, c.mask(errorText(data)))
		switch {
		case res.StatusCode == http.StatusTooManyRequests || res.StatusCode >= 500:
			return nil, c.retryAfter(res.Header.Get("Retry-After")), err
		default: // 4xx: the request is wrong (model name, key); a retry cannot help
			return nil, -1, handlers.Errorf(CodeModel, false, "%s", err.Error())
		}
	}
	var resp Response
	if err := json.Unmarshal(data, &resp); err != nil {
		return nil, 0, handlers.Errorf(CodeModel, true, "model call to %s: the response is not a chat completion: %v", c.BaseURL(), err)
	}
	if len(resp.Choices) == 0 {
		return nil, 0, handlers.Errorf(CodeModel, true, "model call to %s: the response has no choices", c.BaseURL())
	}
	return &resp, 0, nil
}

// retryAfter reads a Retry-After header (seconds or an HTTP date), bounded
// by MaxBackoff; 0 when absent or unreadable.
func (c *Client) retryAfter(h string) time.Duration {
	h = strings.TrimSpace(h)
	if h == "" {
		return 0
	}
	var d time.Duration
	if s, err := strconv.ParseFloat(h, 64); err == nil {
		if s <= 0 || s != s {
			return 0
		}
		d = time.Duration(min(s, 1e6) * float64(time.Second))
	} else if t, err := http.ParseTime(h); err == nil {
		d = time.Until(t)
	}
	if d <= 0 {
		return 0
	}
	return min(d, c.cfg.MaxBackoff)
}

// errorText is an error response's message: the API's error.message when
// it has one, else the start of the body.
func errorText(data []byte) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &e) == nil && e.Error.Message != "" {
		return clip(e.Error.Message, 512)
	}
	return clip(strings.TrimSpace(string(data)), 512)
}

// mask removes the API key from a message (a server or a proxy may echo
// the request).
func (c *Client) mask(s string) string {
	if k := c.cfg.APIKey; len(k) >= 4 {
		s = strings.ReplaceAll(s, k, "[redacted]")
	}
	return s
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "..."
}

package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/wfc-lang/wfc/runtime/internal/netpolicy"
)

type httpHandler struct {
	client *http.Client
	// policyErr is a bad allow or deny list: every request fails with it.
	policyErr error
	tries     int
	// wait bounds a Retry-After wait; tests shorten it.
	maxWait time.Duration
}

func newHTTP(opts Options) *httpHandler {
	h := &httpHandler{client: opts.HTTPClient, tries: opts.HTTPTries, maxWait: 30 * time.Second}
	if h.client == nil {
		policy, err := parseNetPolicy(opts.HTTPAllow, opts.HTTPDeny)
		if err != nil {
			h.policyErr = Permanentf("http: the worker's network policy: %v", err)
			policy = &netPolicy{denyAll: true}
		}
		// Every connection goes through the policy's dialer, directly
		// (netpolicy.Transport).
		t := netpolicy.Transport(policy.dialer())
		h.client = &http.Client{Transport: t, CheckRedirect: checkRedirect}
	}
	if h.tries <= 0 {
		h.tries = 3
	}
	return h
}

type httpConfig struct {
	URL     string            `json:"url"`
	Method  string            `json:"method"`
	Headers map[string]string `json:"headers"`
	Body    json.RawMessage   `json:"body"`
	Timeout string            `json:"timeout"`
	Accept  []int             `json:"accept"`
	// KeepHeaders names sensitive response headers to keep in the output.
	KeepHeaders []string `json:"keep_headers"`
}

type httpOutput struct {
	Status  int               `json:"status"`
	Headers map[string]string `json:"headers"`
	Body    any               `json:"body"`
}

// Run sends one JSON request. Network errors and 5xx responses are sent
// again (up to tries times, waiting as Retry-After says, else 0.2 s, 0.4 s,
// ...); after that they are retryable errors for the node's retry policy.
// A 2xx or 3xx response, or one whose status is in `accept`, is the
// output. Error codes: http.<status> for other statuses (retryable: 408,
// 425, 429 and 5xx), http.network for a request that got no response,
// timeout for the request's own timeout, http.denied for an address the
// network policy refuses (Options.HTTPAllow).
func (h *httpHandler) Run(ctx context.Context, req Request) (json.RawMessage, error) {
	if h.policyErr != nil {
		return nil, h.policyErr
	}
	var c httpConfig
	if err := decodeConfig(req, &c); err != nil {
		return nil, err
	}
	if c.URL == "" {
		return nil, Permanentf("http: config has no url")
	}
	if c.Method == "" {
		c.Method = http.MethodGet
		if len(c.Body) > 0 && string(c.Body) != "null" {
			c.Method = http.MethodPost
		}
	}
	timeout, err := parseDuration(c.Timeout)
	if err != nil {
		return nil, Permanentf("http: %v", err)
	}
	o := &outbound{client: h.client, what: "http", method: strings.ToUpper(c.Method), url: c.URL,
		shown: redactURL(c.URL), idempotencyKey: req.IdempotencyKey, headers: c.Headers}
	if len(c.Body) > 0 && string(c.Body) != "null" {
		o.body = c.Body
	}
	return retrySend(ctx, h.tries, h.maxWait, func() (json.RawMessage, time.Duration, error) {
		return h.once(ctx, o, &c, timeout)
	})
}

// once sends the request once. It returns the output, or an error and how
// long the server asked to wait (Retry-After).
func (h *httpHandler) once(ctx context.Context, o *outbound, c *httpConfig, timeout time.Duration) (json.RawMessage, time.Duration, error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	resp, data, err := o.send(ctx)
	if err != nil {
		return nil, 0, err
	}
	if resp.StatusCode >= 400 && !slices.Contains(c.Accept, resp.StatusCode) {
		e := o.statusError(resp, data)
		return nil, retryWait(resp, e), e
	}
	out := httpOutput{Status: resp.StatusCode, Headers: map[string]string{}}
	for k, v := range resp.Header {
		if sensitiveHeader(k) && !slices.ContainsFunc(c.KeepHeaders, func(h string) bool { return strings.EqualFold(h, k) }) {
			continue
		}
		out.Headers[k] = strings.Join(v, ", ")
	}
	out.Body = string(data)
	if len(bytes.TrimSpace(data)) == 0 {
		out.Body = nil
	} else if strings.Contains(resp.Header.Get("Content-Type"), "json") || json.Valid(data) {
		var v any
		if json.Unmarshal(data, &v) == nil {
			out.Body = json.RawMessage(data)
		}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, 0, errors.New("http: encoding output: " + err.Error())
	}
	return b, 0, nil
}

// sensitiveWords mark a response header that may carry a credential or a
// session (Set-Cookie, WWW-Authenticate, X-Auth-Token, X-Session-Id ...):
// the output leaves it out unless keep_headers names it, because outputs
// are stored in clear and shown by wfc status and events.
var sensitiveWords = []string{"cookie", "auth", "token", "secret", "password", "session", "credential", "apikey", "api-key", "api_key"}

// sensitiveHeader reports whether a response header is left out of the
// output by default.
func sensitiveHeader(name string) bool {
	n := strings.ToLower(name)
	for _, w := range sensitiveWords {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// checkRedirect follows at most 10 redirects; one to another host (or
// scheme, or port) drops every header but the safe ones and the
// Idempotency-Key, so that a credential the workflow sends (X-Api-Key, a
// token) does not reach a host it was not written for.
func checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	netpolicy.DropCredentialsOnHostChange(req, via, "Idempotency-Key")
	return nil
}

// redactURL is raw with the password of its user info replaced by xxxxx
// (and, when it does not parse, a placeholder: it may hold anything).
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(an unparsable URL)"
	}
	return u.Redacted()
}

// clipText shortens s to at most n bytes (on a rune boundary), marking the cut.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

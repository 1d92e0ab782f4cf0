package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"time"
)

// A service handler runs a handler as an HTTP service (wfc worker
// --handler NAME=URL, docs/handlers.md): it posts the Request as JSON to
// the URL and takes the JSON response as the output.
//
// The URL is the operator's, not a workflow's, so the http built-in's
// network policy (which guards against workflows reaching internal
// addresses) does not apply: services commonly run on loopback or a
// private network. Redirects are not followed — the request goes where
// the operator said and nowhere else.
type serviceHandler struct {
	name    string
	url     string
	shown   string // url without its password
	client  *http.Client
	tries   int
	maxWait time.Duration
}

// ServiceOptions configure a service handler.
type ServiceOptions struct {
	// Client sends the requests (default: a client of its own that
	// follows no redirect).
	Client *http.Client
	// Tries is how many times a request that meets a network error or a
	// retryable status is sent before the attempt fails (default 3).
	Tries int
}

// NewService returns the handler that runs handler name as the HTTP
// service at rawURL (http or https).
//
// Each execution is one POST of the Request (run_id, workflow, node,
// iteration, item, attempt, handler, config, idempotency_key,
// compensation) with an Idempotency-Key header, the same on every attempt
// and redelivery. A 2xx response's JSON body is the output (an empty one
// is {}). Other statuses fail the attempt with error code http.<status>
// — retryable for 408, 425, 429 and 5xx, after the request was sent
// Tries times (waiting as Retry-After says) — unless the body is a
// problem document (RFC 9457) with a code member: then the code, its
// detail (or title) as the message, and a boolean retryable member, when
// present, decide. A 3xx is not followed and fails permanently. Network
// errors are retried like 5xx, then fail with code http.network.
// Responses are read up to 10 MiB.
func NewService(name, rawURL string, opts ServiceOptions) (Handler, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("handler %s: %q is not an http or https URL", name, redactURL(rawURL))
	}
	h := &serviceHandler{name: name, url: rawURL, shown: u.Redacted(), client: opts.Client, tries: opts.Tries, maxWait: 30 * time.Second}
	if h.client == nil {
		h.client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	if h.tries <= 0 {
		h.tries = 3
	}
	return h, nil
}

func (h *serviceHandler) Run(ctx context.Context, req Request) (json.RawMessage, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, Permanentf("%s: encoding the request: %v", h.name, err)
	}
	o := &outbound{client: h.client, what: h.name, method: http.MethodPost, url: h.url, shown: h.shown,
		body: body, idempotencyKey: req.IdempotencyKey}
	return retrySend(ctx, h.tries, h.maxWait, func() (json.RawMessage, time.Duration, error) {
		return h.once(ctx, o)
	})
}

func (h *serviceHandler) once(ctx context.Context, o *outbound) (json.RawMessage, time.Duration, error) {
	resp, data, err := o.send(ctx)
	if err != nil {
		return nil, 0, err
	}
	st := resp.StatusCode
	if st >= 200 && st < 300 {
		data = bytes.TrimSpace(data)
		if len(data) == 0 {
			return json.RawMessage("{}"), 0, nil
		}
		if !json.Valid(data) {
			return nil, 0, &Error{Code: "output", Message: fmt.Sprintf("%s: POST %s: %s: the response is not JSON: %s", h.name, h.shown, resp.Status, clipText(string(data), 200))}
		}
		return json.RawMessage(data), 0, nil
	}
	p, isProblem := problemOf(resp.Header.Get("Content-Type"), data)
	var e *Error
	if !isProblem {
		e = o.statusError(resp, data)
	} else {
		// The problem document decides, not the status, and says more
		// than its raw body would.
		e = o.statusError(resp, nil)
		if p.Code != "" {
			e.Code = p.Code
		}
		if p.Retryable != nil {
			e.Retryable = *p.Retryable
		}
		if msg := cmpStr(p.Detail, p.Title); msg != "" {
			e.Message += ": " + clipText(msg, 1000)
		}
	}
	return nil, retryWait(resp, e), e
}

// A problem is the part of an RFC 9457 problem document a service
// handler reads; code and retryable are extension members.
type problem struct {
	Title     string `json:"title"`
	Detail    string `json:"detail"`
	Code      string `json:"code"`
	Retryable *bool  `json:"retryable"`
}

// problemOf decodes a problem document (application/problem+json or
// JSON); a code that is not an error code ([A-Za-z0-9._-]+, at most 128
// bytes) is ignored.
func problemOf(contentType string, data []byte) (problem, bool) {
	var p problem
	mt, _, _ := mime.ParseMediaType(contentType)
	if mt != "application/problem+json" && mt != "application/json" {
		return p, false
	}
	if json.Unmarshal(data, &p) != nil {
		return p, false
	}
	if !validCode(p.Code) {
		p.Code = ""
	}
	return p, true
}

func validCode(c string) bool {
	if c == "" || len(c) > 128 {
		return false
	}
	for _, r := range c {
		if !(r == '.' || r == '_' || r == '-' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9') {
			return false
		}
	}
	return true
}

func cmpStr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

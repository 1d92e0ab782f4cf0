// Package client is a Go client of `wfc serve` (package server): the `wfc`
// commands given --server use it instead of Redis. It speaks only the
// documented HTTP API (server/openapi.json).
package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/runtime"
)

// A Client calls one server.
type Client struct {
	base  *url.URL
	token string
	http  *http.Client
}

// New returns a client of the server at base (http:// or https://) that
// sends token (may be "") as its bearer token. Redirects are not
// followed: the token must not go to another host.
func New(base, token string) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(base, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--server wants an http:// or https:// URL, not %q", base)
	}
	return &Client{base: u, token: token, http: &http.Client{
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}, nil
}

// A Problem is a server's error (RFC 9457).
type Problem struct {
	Status      int             `json:"status"`
	Title       string          `json:"title"`
	Detail      string          `json:"detail"`
	Errors      []string        `json:"errors"`
	Diagnostics json.RawMessage `json:"diagnostics"`
}

func (p *Problem) Error() string {
	msg := p.Detail
	if msg == "" {
		msg = p.Title
	}
	if len(p.Errors) > 0 {
		msg += ": " + strings.Join(p.Errors, "; ")
	}
	return fmt.Sprintf("server: %s (HTTP %d)", msg, p.Status)
}

func (c *Client) request(ctx context.Context, method, path string, body any, hdr http.Header) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base.String()+path, rd)
	if err != nil {
		return nil, err
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	return c.http.Do(req)
}

// call sends a request and decodes a 2xx JSON answer into out, or returns
// the problem.
func (c *Client) call(ctx context.Context, method, path string, body, out any, hdr http.Header) error {
	res, err := c.request(ctx, method, path, body, hdr)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	if err != nil {
		return err
	}
	if res.StatusCode >= 300 {
		p := &Problem{Status: res.StatusCode}
		if json.Unmarshal(data, p) != nil || p.Title == "" && p.Detail == "" {
			p.Detail = http.StatusText(res.StatusCode)
		}
		return p
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(data, out)
}

// SubmitRequest is the body of a submit.
type SubmitRequest struct {
	Workflow string          `json:"workflow,omitempty"`
	Source   string          `json:"source,omitempty"`
	File     string          `json:"file,omitempty"`
	IR       json.RawMessage `json:"ir,omitempty"`
	Inputs   map[string]any  `json:"inputs,omitempty"`
}

// Submit starts a run and returns its id; a non-empty idempotencyKey
// makes a retried submit start one run.
func (c *Client) Submit(ctx context.Context, req SubmitRequest, idempotencyKey string) (string, error) {
	hdr := http.Header{}
	if idempotencyKey != "" {
		hdr.Set("Idempotency-Key", idempotencyKey)
	}
	var out struct {
		RunID string `json:"run_id"`
	}
	err := c.call(ctx, "POST", "/v1/runs", req, &out, hdr)
	return out.RunID, err
}

// Status returns a run's status.
func (c *Client) Status(ctx context.Context, run string) (*runtime.Status, error) {
	var st runtime.Status
	if err := c.call(ctx, "GET", "/v1/runs/"+url.PathEscape(run), nil, &st, nil); err != nil {
		return nil, err
	}
	return &st, nil
}

// Cancel cancels a run.
func (c *Client) Cancel(ctx context.Context, run string) error {
	return c.call(ctx, "POST", "/v1/runs/"+url.PathEscape(run)+"/cancel", nil, nil, nil)
}

// Retry re-runs the failed part of a run.
func (c *Client) Retry(ctx context.Context, run string) error {
	return c.call(ctx, "POST", "/v1/runs/"+url.PathEscape(run)+"/retry", nil, nil, nil)
}

// Events returns a run's event log.
func (c *Client) Events(ctx context.Context, run string) ([]runtime.Event, error) {
	var out struct {
		Events []runtime.Event `json:"events"`
	}
	err := c.call(ctx, "GET", "/v1/runs/"+url.PathEscape(run)+"/events", nil, &out, nil)
	return out.Events, err
}

// Follow streams a run's events (Server-Sent Events) to fn until the run
// is done, reconnecting with Last-Event-ID when the stream breaks or the
// server shuts down.
func (c *Client) Follow(ctx context.Context, run string, fn func(runtime.Event) error) error {
	last := ""
	for attempt := 0; ; attempt++ {
		hdr := http.Header{"Accept": {"text/event-stream"}}
		if last != "" {
			hdr.Set("Last-Event-ID", last)
		}
		res, err := c.request(ctx, "GET", "/v1/runs/"+url.PathEscape(run)+"/events", nil, hdr)
		if err == nil && res.StatusCode != http.StatusOK {
			data, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
			res.Body.Close()
			p := &Problem{Status: res.StatusCode}
			json.Unmarshal(data, p)
			if res.StatusCode != http.StatusServiceUnavailable {
				return p
			}
			err = p
		}
		if err == nil {
			var done bool
			done, err = readStream(res.Body, func(id, typ string, data []byte) error {
				if typ == "end" || typ == "shutdown" {
					return nil
				}
				var ev runtime.Event
				if err := json.Unmarshal(data, &ev); err != nil {
					return err
				}
				last = id
				return fn(ev)
			})
			res.Body.Close()
			if done {
				return nil
			}
			var perr *fnError
			if errors.As(err, &perr) {
				return perr.err
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if attempt >= 30 {
			return fmt.Errorf("following run %s: %w", run, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

type fnError struct{ err error }

func (e *fnError) Error() string { return e.err.Error() }

// readStream reads Server-Sent Events; it reports done at an "end" event.
func readStream(r io.Reader, fn func(id, typ string, data []byte) error) (bool, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var id, typ string
	var data []byte
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if typ != "" || data != nil {
				if err := fn(id, typ, data); err != nil {
					return false, &fnError{err}
				}
				if typ == "end" {
					return true, nil
				}
			}
			id, typ, data = "", "", nil
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "id: "):
			id = line[4:]
		case strings.HasPrefix(line, "event: "):
			typ = line[7:]
		case strings.HasPrefix(line, "data: "):
			data = append(data, line[6:]...)
		}
	}
	if err := sc.Err(); err != nil {
		return false, err
	}
	return false, io.ErrUnexpectedEOF
}

// Decide approves or rejects an approval as the token's subject.
func (c *Client) Decide(ctx context.Context, run, x string, approve bool, comment string, fields map[string]any) (*runtime.Approval, error) {
	body := map[string]any{"approve": approve}
	if comment != "" {
		body["comment"] = comment
	}
	if len(fields) > 0 {
		body["fields"] = fields
	}
	var a runtime.Approval
	err := c.call(ctx, "POST", "/v1/runs/"+url.PathEscape(run)+"/approvals/"+url.PathEscape(x)+"/decision", body, &a, nil)
	return &a, err
}

// Signal sends a signal and returns the execution that took it ("" when
// the run keeps it).
func (c *Client) Signal(ctx context.Context, run, name, correlation string, payload json.RawMessage) (string, error) {
	body := map[string]any{"name": name}
	if correlation != "" {
		body["correlation"] = correlation
	}
	if len(payload) > 0 {
		body["payload"] = payload
	}
	var out struct {
		Taken string `json:"taken"`
	}
	err := c.call(ctx, "POST", "/v1/runs/"+url.PathEscape(run)+"/signals", body, &out, nil)
	return out.Taken, err
}

// Workflow returns a deployed workflow's IR by tag or hash.
func (c *Client) Workflow(ctx context.Context, ref string) (*ir.Workflow, error) {
	var out struct {
		IR json.RawMessage `json:"ir"`
	}
	if err := c.call(ctx, "GET", "/v1/workflows/"+url.PathEscape(ref), nil, &out, nil); err != nil {
		return nil, err
	}
	return ir.Decode(out.IR)
}

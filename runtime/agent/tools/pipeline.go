package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// The pipeline primitives.
var primitives = []string{"http_request", "table_sort", "table_filter", "table_select", "top_k",
	"groupby", "join", "jq_transform", "regex_extract", "parse_date"}

// pipeline is execute_pipeline for one agent execution.
type pipeline struct {
	w   *Worker
	env Env
}

type pipelineArgs struct {
	Input json.RawMessage   `json:"input"`
	Steps []json.RawMessage `json:"steps"`
}

// A stepReport says what a step made, for the model to follow the data.
type stepReport struct {
	Step  string `json:"step"`
	Rows  *int   `json:"rows,omitempty"` // when the step made an array
	Bytes int    `json:"bytes"`
}

type pipelineResult struct {
	Result  json.RawMessage `json:"result"`
	Steps   []stepReport    `json:"steps"`
	Omitted int             `json:"steps_omitted,omitempty"` // reports left out (the earlier steps')
}

// call runs the steps in order; each reads the previous step's result
// (or, with "from", the pipeline's input (0) or step N's result) and the
// last one's is the pipeline's result. A result larger than
// MaxResultBytes is stored in the BlobStore and returned as a reference.
func (p *pipeline) call(ctx context.Context, raw json.RawMessage) (any, error) {
	lim := p.w.limits
	var a pipelineArgs
	if err := strictDecode(raw, &a); err != nil {
		return nil, errorf(CodeBadArgs, "%v", err)
	}
	if len(a.Steps) > lim.MaxSteps {
		return nil, errorf(CodeBadArgs, "the pipeline has %d steps; at most %d are allowed", len(a.Steps), lim.MaxSteps)
	}
	var cur any
	if len(a.Input) > 0 {
		v, err := p.resolve(ctx, a.Input, nil, "input")
		if err != nil {
			return nil, err
		}
		cur = v
	}
	results := []any{cur} // results[0] is the input, results[i] step i's
	var reports []stepReport
	kept := 0
	for i, rawStep := range a.Steps {
		n := i + 1
		var head struct {
			Step string `json:"step"`
			From *int   `json:"from"`
		}
		if err := json.Unmarshal(rawStep, &head); err != nil {
			return nil, errorf(CodeBadArgs, "step %d: %v", n, err)
		}
		if !slices.Contains(primitives, head.Step) {
			return nil, errorf(CodeBadArgs, "step %d: unknown step %q; the steps are %s", n, head.Step, strings.Join(primitives, ", "))
		}
		in := cur
		if head.From != nil {
			if *head.From < 0 || *head.From >= n {
				return nil, errorf(CodeBadArgs, "step %d (%s): from is %d; it must name the input (0) or an earlier step (1..%d)", n, head.Step, *head.From, n-1)
			}
			in = results[*head.From]
		}
		if err := ctx.Err(); errors.Is(err, context.Canceled) {
			return nil, err
		} else if err != nil {
			return nil, errorf(CodeTimeout, "the pipeline did not finish within %s (stopped before step %d)", lim.CallTimeout, n)
		}
		out, err := p.step(ctx, head.Step, rawStep, in, results)
		if err != nil {
			if errors.Is(ctx.Err(), context.Canceled) {
				return nil, ctx.Err() // the execution was cancelled, see tool.Call
			}
			e := asToolError(err)
			return nil, &Error{Code: e.Code, Message: fmt.Sprintf("step %d (%s): %s", n, head.Step, e.Message)}
		}
		// Bound every intermediate value, not only the last: a step that
		// blows up its input (a join, a jq program) stops here.
		b, err := marshalBounded(out, lim.MaxBlobBytes)
		if err != nil {
			e := asToolError(err)
			return nil, &Error{Code: e.Code, Message: fmt.Sprintf("step %d (%s): its result: %s", n, head.Step, e.Message)}
		}
		// The results are kept for from and $step: bound them together.
		if kept += len(b); kept > 4*lim.MaxBlobBytes {
			return nil, errorf(CodeTooLarge, "step %d (%s): the pipeline's results so far are more than %d bytes; narrow the data earlier (table_select, top_k, table_filter)", n, head.Step, 4*lim.MaxBlobBytes)
		}
		rep := stepReport{Step: head.Step, Bytes: len(b)}
		if arr, ok := out.([]any); ok {
			k := len(arr)
			rep.Rows = &k
		}
		reports = append(reports, rep)
		results = append(results, out)
		cur = out
	}
	b, err := marshalBounded(cur, lim.MaxBlobBytes)
	if err != nil {
		return nil, err
	}
	res := pipelineResult{Result: b, Steps: reports}
	rb, _ := json.Marshal(reports)
	if len(rb) > lim.MaxResultBytes/4 {
		// Many steps: report the last one only, so that the reports never
		// push the result over the bound.
		res.Steps, res.Omitted = reports[len(reports)-1:], len(reports)-1
		rb, _ = json.Marshal(res.Steps)
	}
	// The result is stored when it and the step reports would not fit
	// inline together, so that the reference names the data itself.
	if len(b)+len(rb)+32 > lim.MaxResultBytes {
		ref, err := storeLarge(ctx, p.env.Blobs, b, lim)
		if err != nil {
			return nil, err
		}
		res.Result, _ = json.Marshal(ref)
	}
	return res, nil
}

// resolve decodes a value an argument gives: inline JSON, a BlobStore
// reference {"$ref": "sha256:..."}, or (where results is not nil) an
// earlier step's result {"$step": N}.
func (p *pipeline) resolve(ctx context.Context, raw json.RawMessage, results []any, what string) (any, error) {
	lim := p.w.limits
	v, err := decodeJSON(raw, lim.MaxDepth)
	if err != nil {
		return nil, errorf(CodeBadArgs, "%s: %v", what, err)
	}
	m, ok := v.(map[string]any)
	if !ok || len(m) != 1 {
		return v, nil
	}
	if r, ok := m["$ref"].(string); ok {
		if p.env.Blobs == nil {
			return nil, errorf(CodeUnavailable, "%s: this deployment stores no results, so $ref %q cannot be read", what, r)
		}
		if !validRef(r) {
			return nil, errorf(CodeBadArgs, "%s: %q is not a reference (sha256: and 64 hex digits)", what, r)
		}
		data, err := p.env.Blobs.Get(ctx, r)
		if err != nil {
			return nil, errorf(CodeFailed, "%s: reading %s: %v", what, r, err)
		}
		if len(data) > lim.MaxBlobBytes {
			return nil, errorf(CodeTooLarge, "%s: %s is %d bytes; at most %d are read", what, r, len(data), lim.MaxBlobBytes)
		}
		v, err := decodeJSON(data, lim.MaxDepth)
		if err != nil {
			return nil, errorf(CodeFailed, "%s: %s does not hold JSON: %v", what, r, err)
		}
		return v, nil
	}
	if s, ok := m["$step"]; ok && results != nil {
		i, ok := s.(int)
		if !ok || i < 0 || i >= len(results) {
			return nil, errorf(CodeBadArgs, "%s: $step must name the input (0) or an earlier step (1..%d)", what, len(results)-1)
		}
		return results[i], nil
	}
	return v, nil
}

// validRef reports whether r is "sha256:" and 64 lower-case hex digits.
func validRef(r string) bool {
	h, ok := strings.CutPrefix(r, "sha256:")
	if !ok || len(h) != 64 {
		return false
	}
	for _, c := range h {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// strictDecode decodes JSON into v refusing unknown fields, so that a
// misspelt parameter is an error the model sees, not a silent default.
func strictDecode(raw json.RawMessage, v any) error {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("%s", strings.TrimPrefix(err.Error(), "json: "))
	}
	return nil
}

// step runs one primitive on in.
func (p *pipeline) step(ctx context.Context, name string, raw json.RawMessage, in any, results []any) (any, error) {
	lim := p.w.limits
	switch name {
	case "http_request":
		return p.httpRequest(ctx, raw)
	case "table_sort":
		return tableSort(raw, in)
	case "table_filter":
		return tableFilter(raw, in, lim)
	case "table_select":
		return tableSelect(raw, in)
	case "top_k":
		return topK(raw, in)
	case "groupby":
		return groupBy(raw, in)
	case "join":
		return p.join(ctx, raw, in, results)
	case "jq_transform":
		return jqTransform(ctx, raw, in, lim)
	case "regex_extract":
		return regexExtract(raw, in, lim)
	case "parse_date":
		return parseDate(raw, in)
	}
	return nil, errorf(CodeBadArgs, "unknown step %q", name)
}

type httpArgs struct {
	Step    string            `json:"step"`
	From    *int              `json:"from"`
	URL     string            `json:"url"`
	Method  string            `json:"method"`
	Headers map[string]string `json:"headers"`
	Query   map[string]any    `json:"query"`
	Body    json.RawMessage   `json:"body"`
}

// httpRequest sends one request to an allow-listed host and returns the
// response body: decoded JSON when it is JSON, else the text.
func (p *pipeline) httpRequest(ctx context.Context, raw json.RawMessage) (any, error) {
	lim := p.w.limits
	var a httpArgs
	if err := strictDecode(raw, &a); err != nil {
		return nil, errorf(CodeBadArgs, "%v", err)
	}
	method := strings.ToUpper(a.Method)
	if method == "" {
		method = http.MethodGet
	}
	if !slices.Contains([]string{"GET", "POST", "PUT", "PATCH", "DELETE"}, method) {
		return nil, errorf(CodeBadArgs, "method %q: use GET, POST, PUT, PATCH or DELETE", a.Method)
	}
	u, err := url.Parse(a.URL)
	if err != nil || !u.IsAbs() {
		return nil, errorf(CodeBadArgs, "url %q is not an absolute http(s) URL", a.URL)
	}
	if len(a.Query) > 0 {
		q := u.Query()
		for k, v := range a.Query {
			switch x := v.(type) {
			case string:
				q.Add(k, x)
			case []any:
				for _, e := range x {
					q.Add(k, fmt.Sprint(e))
				}
			default:
				b, _ := json.Marshal(x)
				q.Add(k, strings.Trim(string(b), `"`))
			}
		}
		u.RawQuery = q.Encode()
	}
	var body io.Reader
	if len(a.Body) > 0 && string(a.Body) != "null" {
		body = bytes.NewReader(a.Body)
	}
	return doHTTP(ctx, p.w, method, u, a.Headers, body, "application/json", lim)
}

// doHTTP sends a request through the worker's policy-checked client and
// reads a bounded body.
func doHTTP(ctx context.Context, w *Worker, method string, u *url.URL, headers map[string]string, body io.Reader, contentType string, lim Limits) (any, error) {
	if err := w.policy.checkURL(u); err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, errorf(CodeBadArgs, "%v", err)
	}
	for k, v := range headers {
		if strings.EqualFold(k, "Host") || strings.EqualFold(k, "Content-Length") || strings.EqualFold(k, "Transfer-Encoding") {
			return nil, errorf(CodeBadArgs, "header %q cannot be set", k)
		}
		req.Header.Set(k, v)
	}
	if body != nil && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", contentType)
	}
	return sendHTTP(w, req, lim)
}

// sendHTTP sends a request through the worker's policy-checked client and
// returns the body (decoded JSON, else text), bounded; a status of 400
// or more is an error carrying the start of the body.
func sendHTTP(w *Worker, req *http.Request, lim Limits) (any, error) {
	u, method := req.URL, req.Method
	if err := w.policy.checkURL(u); err != nil {
		return nil, err
	}
	if req.Header.Get("Accept") == "" {
		req.Header.Set("Accept", "application/json, text/plain;q=0.9, */*;q=0.5")
	}
	req.Header.Set("User-Agent", "wfc-agent")
	resp, err := w.client.Do(req)
	if err != nil {
		if errors.Is(req.Context().Err(), context.Canceled) {
			return nil, req.Context().Err()
		}
		return nil, httpError(err, lim.HTTPTimeout)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, lim.MaxHTTPBytes+1))
	if err != nil {
		return nil, httpError(err, lim.HTTPTimeout)
	}
	if int64(len(data)) > lim.MaxHTTPBytes {
		return nil, errorf(CodeTooLarge, "the response body is larger than %d bytes", lim.MaxHTTPBytes)
	}
	if resp.StatusCode >= 400 {
		return nil, errorf(CodeFailed, "%s %s answered HTTP %d: %s", method, u.Redacted(), resp.StatusCode, clip(string(data), 500))
	}
	if v, err := decodeJSON(data, lim.MaxDepth); err == nil {
		return v, nil
	} else if isJSONType(resp.Header.Get("Content-Type")) && len(bytes.TrimSpace(data)) > 0 {
		return nil, errorf(CodeFailed, "the response says it is JSON but is not: %v", err)
	}
	return strings.ToValidUTF8(string(data), "\uFFFD"), nil
}

func isJSONType(ct string) bool {
	ct = strings.ToLower(ct)
	return strings.Contains(ct, "/json") || strings.Contains(ct, "+json")
}

// clip cuts s to n bytes on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
)

// An apiDoc is one allow-listed OpenAPI document, loaded and validated
// when the worker starts.
type apiDoc struct {
	file   string
	title  string
	doc    *openapi3.T
	server *openapi3.Server
	base   *url.URL // the server URL, variables at their defaults
	ops    map[string]*apiOp
	// headers the worker adds (credentials): set after validation, so the
	// model's parameters cannot replace them, and never in a result.
	headers [][2]string
}

type apiOp struct {
	path   string // the template, e.g. /pets/{petId}
	method string
	item   *openapi3.PathItem
	op     *openapi3.Operation
}

// loadAPI reads an OpenAPI 3 document from a file (external references
// are refused: a document may not make the worker read other files or
// URLs), validates it, and checks that its first server is an absolute
// http(s) URL the network policy allows.
func loadAPI(file string, p *netPolicy) (*apiDoc, error) {
	l := openapi3.NewLoader()
	l.IsExternalRefsAllowed = false
	doc, err := l.LoadFromFile(file)
	if err != nil {
		return nil, fmt.Errorf("--agent-openapi %s: %v", file, err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("--agent-openapi %s: not a valid OpenAPI 3 document: %v", file, err)
	}
	if len(doc.Servers) == 0 {
		return nil, fmt.Errorf("--agent-openapi %s: the document names no server (servers: [{url: https://...}])", file)
	}
	s := doc.Servers[0]
	raw := s.URL
	for name, v := range s.Variables {
		raw = strings.ReplaceAll(raw, "{"+name+"}", v.Default)
	}
	base, err := url.Parse(raw)
	if err != nil || !base.IsAbs() {
		return nil, fmt.Errorf("--agent-openapi %s: the server URL %q is not an absolute http(s) URL", file, s.URL)
	}
	if err := p.checkURL(base); err != nil {
		return nil, fmt.Errorf("--agent-openapi %s: its server %s: %s", file, base.Redacted(), asToolError(err).Message)
	}
	a := &apiDoc{file: file, doc: doc, server: s, base: base, ops: map[string]*apiOp{}}
	if doc.Info != nil {
		a.title = doc.Info.Title
	}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if op.OperationID == "" {
				continue
			}
			a.ops[op.OperationID] = &apiOp{path: path, method: method, item: item, op: op}
		}
	}
	return a, nil
}

// describeAPIs lists the APIs and their operations for the model.
func (w *Worker) describeAPIs() string {
	if len(w.apis) == 0 {
		return "This worker allows no APIs."
	}
	var b strings.Builder
	b.WriteString("APIs and operations:")
	for _, a := range w.apis {
		fmt.Fprintf(&b, "\n%s:", a.title)
		ids := make([]string, 0, len(a.ops))
		for id := range a.ops {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			o := a.ops[id]
			var ps []string
			for _, p := range params(o) {
				n := p.Value.Name + " (" + p.Value.In
				if p.Value.Required {
					n += ", required"
				}
				ps = append(ps, n+")")
			}
			fmt.Fprintf(&b, "\n- %s: %s %s", id, o.method, o.path)
			if o.op.Summary != "" {
				fmt.Fprintf(&b, " — %s", clip(o.op.Summary, 120))
			}
			if len(ps) > 0 {
				fmt.Fprintf(&b, "; params: %s", strings.Join(ps, ", "))
			}
			if o.op.RequestBody != nil {
				b.WriteString("; takes a JSON body")
			}
			if b.Len() > 8000 {
				b.WriteString("\n(more operations: call with an operation_id from the document)")
				return b.String()
			}
		}
	}
	return b.String()
}

// params are an operation's parameters, the path item's included (the
// operation's win on the same name and location).
func params(o *apiOp) openapi3.Parameters {
	ps := slices.Clone(o.op.Parameters)
	for _, p := range o.item.Parameters {
		if p.Value != nil && ps.GetByInAndName(p.Value.In, p.Value.Name) == nil {
			ps = append(ps, p)
		}
	}
	return ps
}

// openapiAction builds the operation's request from params and body,
// validates it against the operation (kin-openapi's openapi3filter), and
// sends it to the document's server.
func (w *Worker) openapiAction(ctx context.Context, raw json.RawMessage) (any, error) {
	var a struct {
		API         string          `json:"api"`
		OperationID string          `json:"operation_id"`
		Params      map[string]any  `json:"params"`
		Body        json.RawMessage `json:"body"`
	}
	if err := strictDecode(raw, &a); err != nil {
		return nil, errorf(CodeBadArgs, "%v", err)
	}
	var api *apiDoc
	var op *apiOp
	for _, d := range w.apis {
		if a.API != "" && d.title != a.API {
			continue
		}
		if o := d.ops[a.OperationID]; o != nil {
			if op != nil {
				return nil, errorf(CodeBadArgs, "several APIs have operation %q; give api (one of the titles)", a.OperationID)
			}
			api, op = d, o
		}
	}
	if op == nil {
		return nil, errorf(CodeDenied, "no allow-listed API has operation %q. %s", a.OperationID, w.describeAPIs())
	}
	req, pathParams, err := buildRequest(ctx, api, op, a.Params, a.Body)
	if err != nil {
		return nil, err
	}
	route := &routers.Route{Spec: api.doc, Server: api.server, Path: op.path, PathItem: op.item, Method: op.method, Operation: op.op}
	in := &openapi3filter.RequestValidationInput{
		Request: req, PathParams: pathParams, Route: route,
		Options: &openapi3filter.Options{
			MultiError:          true,
			SkipSettingDefaults: true,
			// Credentials are the worker's business, not the model's: the
			// document's security requirements are not checked here.
			AuthenticationFunc: openapi3filter.NoopAuthenticationFunc,
		},
	}
	if err := openapi3filter.ValidateRequest(ctx, in); err != nil {
		return nil, errorf(CodeBadArgs, "the request does not fit operation %s: %s", a.OperationID, validationMessage(err))
	}
	for _, h := range api.headers {
		req.Header.Set(h[0], h[1])
	}
	body, err := sendHTTP(w, req, w.limits)
	if err != nil {
		return nil, err
	}
	return map[string]any{"operation_id": a.OperationID, "body": body}, nil
}

// buildRequest places each parameter where the operation declares it
// (path, query or header) and refuses one it does not declare.
func buildRequest(ctx context.Context, api *apiDoc, op *apiOp, args map[string]any, body json.RawMessage) (*http.Request, map[string]string, error) {
	ps := params(op)
	pathParams := map[string]string{}
	q := url.Values{}
	h := http.Header{}
	var names []string
	for _, p := range ps {
		names = append(names, p.Value.Name)
	}
	for name, v := range args {
		var p *openapi3.Parameter
		for _, x := range ps {
			if x.Value.Name == name && x.Value.In != "cookie" {
				p = x.Value
			}
		}
		if p == nil {
			return nil, nil, errorf(CodeBadArgs, "operation %s has no parameter %q; its parameters are: %s", op.op.OperationID, name, strings.Join(names, ", "))
		}
		vals, err := paramStrings(name, v)
		if err != nil {
			return nil, nil, err
		}
		switch p.In {
		case "path":
			esc := make([]string, len(vals))
			for i, s := range vals {
				esc[i] = url.PathEscape(s)
			}
			pathParams[name] = strings.Join(esc, ",")
		case "query":
			for _, s := range vals {
				q.Add(name, s)
			}
		case "header":
			if strings.EqualFold(name, "Host") {
				return nil, nil, errorf(CodeBadArgs, "header Host cannot be set")
			}
			h.Set(name, strings.Join(vals, ","))
		}
	}
	path := op.path
	for name, v := range pathParams {
		path = strings.ReplaceAll(path, "{"+name+"}", v)
	}
	if strings.Contains(path, "{") {
		return nil, nil, errorf(CodeBadArgs, "operation %s needs its path parameters (%s); give them in params", op.op.OperationID, op.path)
	}
	u := *api.base
	u.Path = strings.TrimSuffix(u.Path, "/") + path
	u.RawPath = ""
	if strings.Contains(path, "%") {
		u.RawPath = strings.TrimSuffix(api.base.EscapedPath(), "/") + path
		if p, err := url.PathUnescape(u.RawPath); err == nil {
			u.Path = p
		}
	}
	u.RawQuery = q.Encode()
	var rb *bytes.Reader
	if len(body) > 0 && string(body) != "null" {
		if op.op.RequestBody == nil {
			return nil, nil, errorf(CodeBadArgs, "operation %s takes no body", op.op.OperationID)
		}
		rb = bytes.NewReader(body)
	}
	var req *http.Request
	var err error
	if rb != nil {
		req, err = http.NewRequestWithContext(ctx, strings.ToUpper(op.method), u.String(), rb)
		h.Set("Content-Type", "application/json")
	} else {
		req, err = http.NewRequestWithContext(ctx, strings.ToUpper(op.method), u.String(), nil)
	}
	if err != nil {
		return nil, nil, errorf(CodeBadArgs, "%v", err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "wfc-agent")
	// Unescaped path parameters for the validator.
	for k, v := range pathParams {
		if s, err := url.PathUnescape(v); err == nil {
			pathParams[k] = s
		}
	}
	return req, pathParams, nil
}

// paramStrings writes a parameter value as strings: a scalar as one, an
// array of scalars as one each (form/simple style).
func paramStrings(name string, v any) ([]string, error) {
	scalar := func(x any) (string, bool) {
		switch y := x.(type) {
		case string:
			return y, true
		case bool, float64, int, json.Number:
			return fmt.Sprint(y), true
		}
		return "", false
	}
	if s, ok := scalar(v); ok {
		return []string{s}, nil
	}
	if arr, ok := v.([]any); ok {
		out := make([]string, 0, len(arr))
		for _, e := range arr {
			s, ok := scalar(e)
			if !ok {
				return nil, errorf(CodeBadArgs, "parameter %q: an array of strings, numbers or booleans is expected", name)
			}
			out = append(out, s)
		}
		return out, nil
	}
	return nil, errorf(CodeBadArgs, "parameter %q: a string, number, boolean or an array of them is expected, not %s", name, kindOf(normalizeAny(v)))
}

// validationMessage shortens openapi3filter's errors, which repeat the
// schema, to what the model needs: which value is wrong and why.
func validationMessage(err error) string {
	var me openapi3.MultiError
	var parts []string
	if errors.As(err, &me) {
		for _, e := range me {
			parts = append(parts, oneValidation(e))
		}
	} else {
		parts = append(parts, oneValidation(err))
	}
	if len(parts) > 5 {
		parts = append(parts[:5], fmt.Sprintf("(and %d more)", len(parts)-5))
	}
	return strings.Join(parts, "; ")
}

func oneValidation(err error) string {
	var re *openapi3filter.RequestError
	if errors.As(err, &re) {
		var se *openapi3.SchemaError
		where := "the body"
		if re.Parameter != nil {
			where = fmt.Sprintf("%s parameter %q", re.Parameter.In, re.Parameter.Name)
		}
		if errors.As(re.Err, &se) {
			at := ""
			if p := se.JSONPointer(); len(p) > 0 {
				at = " at /" + strings.Join(p, "/")
			}
			return fmt.Sprintf("%s%s: %s", where, at, se.Reason)
		}
		if re.Err != nil {
			return fmt.Sprintf("%s: %s", where, firstLine(re.Err.Error()))
		}
		return fmt.Sprintf("%s: %s", where, re.Reason)
	}
	return firstLine(err.Error())
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return clip(s, 300)
}

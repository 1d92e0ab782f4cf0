package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// A Tool is one function the model may call. The agent loop offers each
// tool's Name, Description and Parameters to the model and calls Call
// with the arguments the model wrote.
type Tool interface {
	Name() string                // the function name the model calls
	Description() string         // what the tool does, for the model
	Parameters() json.RawMessage // JSON Schema of the arguments
	Call(ctx context.Context, args json.RawMessage) (json.RawMessage, error)
}

// The names of the tools.
const (
	ExecutePipeline = "execute_pipeline"
	SearchTools     = "search_tools"
	OpenAPIAction   = "openapi_action"
	DelegateToAgent = "delegate_to_agent"
	PatchWorkflow   = "patch_workflow"
)

// Names lists every tool this package provides, in the order For returns
// them.
var Names = []string{ExecutePipeline, SearchTools, OpenAPIAction, DelegateToAgent, PatchWorkflow}

// A BlobStore keeps large results by content hash so that a tool result
// can refer to them ({"$ref": "sha256:<hex>"}) instead of carrying them.
// The runtime's implementation is scoped to one run (runtime.Engine.Blobs).
type BlobStore interface {
	// Put stores data and returns its reference, "sha256:" and the hex
	// SHA-256 of data. Storing the same bytes twice is not an error.
	Put(ctx context.Context, data []byte) (string, error)
	// Get returns the bytes a reference names, or an error that says the
	// reference is unknown (never stored, or expired).
	Get(ctx context.Context, ref string) ([]byte, error)
}

// A CatalogEntry is one handler or workflow the deployment knows.
type CatalogEntry struct {
	Kind        string          `json:"kind"` // "handler" or "workflow"
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Inputs      json.RawMessage `json:"inputs,omitempty"` // JSON Schema of its inputs, when known
}

// A Catalog lists the handlers and workflows search_tools searches.
type Catalog interface {
	Entries(ctx context.Context) ([]CatalogEntry, error)
}

// A DelegateRequest asks the deployment to start a child flow (a workflow)
// or another agent node's job.
type DelegateRequest struct {
	Kind   string          `json:"kind"`   // "workflow" or "agent"
	Target string          `json:"target"` // the workflow's or the agent's name
	Inputs json.RawMessage `json:"inputs,omitempty"`
	Wait   bool            `json:"wait"` // wait for the child's result (within the call's time bound)
}

// A DelegateResult is what the Delegator reports about the child.
type DelegateResult struct {
	ID     string          `json:"id"`               // the child run's or job's id
	Status string          `json:"status"`           // e.g. "started", "succeeded", "failed"
	Output json.RawMessage `json:"output,omitempty"` // its result, when waited for and done
	Error  string          `json:"error,omitempty"`
}

// A Delegator starts child work for delegate_to_agent.
type Delegator interface {
	Delegate(ctx context.Context, req DelegateRequest) (DelegateResult, error)
}

// A PatchOp is one JSON Patch (RFC 6902) operation of patch_workflow.
type PatchOp struct {
	Op    string          `json:"op"`
	Path  string          `json:"path"`
	Value json.RawMessage `json:"value,omitempty"`
}

// A Patcher applies a live patch to the running workflow. patch_workflow
// checks the operations' shape (only additions downstream of the agent)
// before calling it; the Patcher does the full validation.
type Patcher interface {
	Patch(ctx context.Context, agentNode string, ops []PatchOp, description string) (json.RawMessage, error)
}

// Env is what one agent execution gives its tools: the agent node's id and
// the runtime's implementations of the interfaces above. A nil field makes
// the tools that need it answer that it is not available.
type Env struct {
	Node      string // the agent node's id (patch_workflow's anchor)
	Blobs     BlobStore
	Catalog   Catalog
	Delegator Delegator
	Patcher   Patcher
}

// Limits bound every tool call. A zero field takes its default
// (DefaultLimits).
type Limits struct {
	CallTimeout    time.Duration // wall time of one tool call
	MaxArgBytes    int           // the arguments' JSON
	MaxDepth       int           // nesting of any JSON value a tool reads or writes
	MaxResultBytes int           // a result returned inline; larger ones go to the BlobStore
	MaxBlobBytes   int           // one value stored in, or read from, the BlobStore
	MaxRows        int           // rows a join may make (other steps make at most as many rows as they read, which the byte bounds limit)
	MaxSteps       int           // steps of one pipeline
	MaxHTTPBytes   int64         // one http response body
	HTTPTimeout    time.Duration // one http request, redirects included
	JQTimeout      time.Duration // one jq program
	MaxJQOutputs   int           // values one jq program may emit
	MaxRegexLen    int           // a regular expression's source
	MaxMatches     int           // matches regex_extract collects
}

// DefaultLimits are the limits of a zero Limits field.
var DefaultLimits = Limits{
	CallTimeout:    60 * time.Second,
	MaxArgBytes:    256 << 10,
	MaxDepth:       64,
	MaxResultBytes: 16 << 10,
	MaxBlobBytes:   8 << 20,
	MaxRows:        100_000,
	MaxSteps:       32,
	MaxHTTPBytes:   4 << 20,
	HTTPTimeout:    20 * time.Second,
	JQTimeout:      2 * time.Second,
	MaxJQOutputs:   10_000,
	MaxRegexLen:    1000,
	MaxMatches:     10_000,
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	set := func(p *int, v int) {
		if *p <= 0 {
			*p = v
		}
	}
	setD := func(p *time.Duration, v time.Duration) {
		if *p <= 0 {
			*p = v
		}
	}
	setD(&l.CallTimeout, d.CallTimeout)
	set(&l.MaxArgBytes, d.MaxArgBytes)
	set(&l.MaxDepth, d.MaxDepth)
	set(&l.MaxResultBytes, d.MaxResultBytes)
	set(&l.MaxBlobBytes, d.MaxBlobBytes)
	set(&l.MaxRows, d.MaxRows)
	set(&l.MaxSteps, d.MaxSteps)
	if l.MaxHTTPBytes <= 0 {
		l.MaxHTTPBytes = d.MaxHTTPBytes
	}
	setD(&l.HTTPTimeout, d.HTTPTimeout)
	setD(&l.JQTimeout, d.JQTimeout)
	set(&l.MaxJQOutputs, d.MaxJQOutputs)
	set(&l.MaxRegexLen, d.MaxRegexLen)
	set(&l.MaxMatches, d.MaxMatches)
	return l
}

// Config is the worker's configuration of the tools.
type Config struct {
	// HTTPAllow lists what http_request and openapi_action may connect
	// to: host names, IP addresses or CIDR ranges, each optionally with
	// :port, or "*" for any public host (flag --agent-http-allow). Empty
	// allows nothing. A name admits the name, but only at public
	// addresses: a loopback, private, link-local (cloud metadata) or
	// other special address must be listed itself (as an address or a
	// range).
	HTTPAllow []string
	// OpenAPI lists the files of the OpenAPI 3 documents openapi_action
	// may call (flag --agent-openapi FILE). Their servers must also be
	// admitted by HTTPAllow.
	OpenAPI []string
	// OpenAPIHeaders are headers the worker adds to every request to the
	// API of a document, by its file as OpenAPI names it: credentials
	// (an API key, a bearer token) the model never sees nor sets (flag
	// --agent-openapi-header FILE:NAME=ENV, the value read from the
	// environment variable ENV).
	OpenAPIHeaders map[string]map[string]string
	// DelegateAllow lists the workflows and agents delegate_to_agent may
	// start, as "workflow:NAME" or "agent:NAME" (flag
	// --agent-delegate-allow); empty leaves the choice to the Delegator.
	DelegateAllow []string
	Limits        Limits
}

// A Worker holds what the tools of every agent execution of one worker
// share: the parsed network policy, the loaded OpenAPI documents, the
// compiled argument schemas and the http client.
type Worker struct {
	limits   Limits
	policy   *netPolicy
	client   *http.Client
	apis     []*apiDoc
	delegate []string
	schemas  map[string]*jsonschema.Schema
}

// NewWorker checks the configuration and loads the OpenAPI documents it
// names. Its errors name the bad entry, for a command line to print.
func NewWorker(cfg Config) (*Worker, error) {
	w := &Worker{limits: cfg.Limits.withDefaults(), delegate: slices.Clone(cfg.DelegateAllow)}
	p, err := parseNetPolicy(cfg.HTTPAllow)
	if err != nil {
		return nil, err
	}
	w.policy = p
	w.client = p.client(w.limits.HTTPTimeout)
	for _, d := range cfg.DelegateAllow {
		if k, n, ok := strings.Cut(d, ":"); !ok || (k != "workflow" && k != "agent") || n == "" {
			return nil, fmt.Errorf("--agent-delegate-allow: %q is not workflow:NAME or agent:NAME", d)
		}
	}
	for _, f := range cfg.OpenAPI {
		a, err := loadAPI(f, p)
		if err != nil {
			return nil, err
		}
		for k, v := range cfg.OpenAPIHeaders[f] {
			if k == "" || strings.ContainsAny(k+v, "\r\n") {
				return nil, fmt.Errorf("--agent-openapi-header %s: header %q is not a valid header", f, k)
			}
			a.headers = append(a.headers, [2]string{k, v})
		}
		w.apis = append(w.apis, a)
	}
	w.schemas = map[string]*jsonschema.Schema{}
	for _, name := range Names {
		s, err := compileSchema(name, schemaOf(name))
		if err != nil {
			return nil, fmt.Errorf("tools: schema of %s: %v", name, err)
		}
		w.schemas[name] = s
	}
	return w, nil
}

// New builds the tools of one agent execution: NewWorker then For.
// A worker that runs many agent executions calls NewWorker once.
func New(allowed []string, cfg Config, env Env) ([]Tool, error) {
	w, err := NewWorker(cfg)
	if err != nil {
		return nil, err
	}
	return w.For(allowed, env)
}

// For returns the tools an agent node declared (allowed, by name), in
// the order of Names. A name this package does not provide is an error
// (the compiler should have refused it).
func (w *Worker) For(allowed []string, env Env) ([]Tool, error) {
	for _, n := range allowed {
		if !slices.Contains(Names, n) {
			return nil, fmt.Errorf("tools: unknown tool %q (the tools are %s)", n, strings.Join(Names, ", "))
		}
	}
	var out []Tool
	for _, n := range Names {
		if !slices.Contains(allowed, n) {
			continue
		}
		var impl func(ctx context.Context, args json.RawMessage) (any, error)
		switch n {
		case ExecutePipeline:
			p := &pipeline{w: w, env: env}
			impl = p.call
		case SearchTools:
			impl = func(ctx context.Context, args json.RawMessage) (any, error) { return searchTools(ctx, env, args) }
		case OpenAPIAction:
			impl = func(ctx context.Context, args json.RawMessage) (any, error) { return w.openapiAction(ctx, args) }
		case DelegateToAgent:
			impl = func(ctx context.Context, args json.RawMessage) (any, error) { return w.delegateToAgent(ctx, env, args) }
		case PatchWorkflow:
			impl = func(ctx context.Context, args json.RawMessage) (any, error) { return patchWorkflow(ctx, env, args) }
		}
		out = append(out, &tool{name: n, desc: descriptionOf(n, w), params: schemaOf(n), schema: w.schemas[n], w: w, env: env, impl: impl})
	}
	return out, nil
}

// tool is every Tool: the bounds and checks around one implementation.
type tool struct {
	name, desc string
	params     json.RawMessage
	schema     *jsonschema.Schema
	w          *Worker
	env        Env
	impl       func(ctx context.Context, args json.RawMessage) (any, error)
}

func (t *tool) Name() string                { return t.name }
func (t *tool) Description() string         { return t.desc }
func (t *tool) Parameters() json.RawMessage { return t.params }

// Call checks the arguments (size, nesting, schema), runs the tool within
// the call's time bound, recovers a panic as an error, and bounds the
// result: one larger than MaxResultBytes is stored in the BlobStore and
// returned as a reference, or refused when there is none. Every failure
// is an *Error for the model, except the cancellation of ctx itself
// (the worker shutting down), which wraps ctx.Err() so that the agent
// loop stops instead of reporting it to the model.
func (t *tool) Call(ctx context.Context, args json.RawMessage) (out json.RawMessage, err error) {
	lim := t.w.limits
	args = bytes.TrimSpace(args)
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	if len(args) > lim.MaxArgBytes {
		return nil, errorf(CodeBadArgs, "the arguments are %d bytes; at most %d are accepted (store large data with a pipeline step and pass its $ref)", len(args), lim.MaxArgBytes)
	}
	v, err := decodeJSON(args, lim.MaxDepth)
	if err != nil {
		return nil, errorf(CodeBadArgs, "the arguments are not valid JSON: %v", err)
	}
	if err := t.schema.Validate(v); err != nil {
		return nil, errorf(CodeBadArgs, "the arguments do not match %s's parameters: %s", t.name, schemaMessage(err))
	}
	ctx, cancel := context.WithTimeout(ctx, lim.CallTimeout)
	defer cancel()
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, errorf(CodeInternal, "%s failed unexpectedly: %v", t.name, r)
		}
	}()
	res, err := t.impl(ctx, args)
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) && !isToolError(err) {
			return nil, errorf(CodeTimeout, "%s did not finish within %s", t.name, lim.CallTimeout)
		}
		if ctx.Err() != nil && !isToolError(err) {
			// The execution itself was cancelled (shutdown): not the
			// model's doing, and not a result it should act on.
			return nil, fmt.Errorf("%s: %w", t.name, ctx.Err())
		}
		return nil, asToolError(err)
	}
	b, err := marshalBounded(res, lim.MaxBlobBytes)
	if err != nil {
		return nil, err
	}
	if len(b) <= lim.MaxResultBytes {
		return b, nil
	}
	ref, err := storeLarge(ctx, t.env.Blobs, b, lim)
	if err != nil {
		return nil, err
	}
	return json.Marshal(ref)
}

// Error codes of tool errors.
const (
	CodeBadArgs     = "bad_arguments" // the arguments do not fit the tool
	CodeDenied      = "denied"        // an allow-list refused it
	CodeUnavailable = "unavailable"   // the deployment does not provide it
	CodeTooLarge    = "too_large"     // a value passed a size bound
	CodeTimeout     = "timeout"       // a time bound passed
	CodeFailed      = "failed"        // the work itself failed (an http status, a jq error, ...)
	CodeInternal    = "internal"
)

// An Error is a tool call's failure, written for the model: Message says
// what went wrong and, where it can, what to do instead.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

func errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

func isToolError(err error) bool {
	var e *Error
	return errors.As(err, &e)
}

func asToolError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: CodeFailed, Message: err.Error()}
}

// ErrorResult renders a Call's error as the tool result the model reads:
// {"error": {"code": ..., "message": ...}}.
func ErrorResult(err error) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"error": asToolError(err)})
	return b
}

// A blobRef is how a result stored in the BlobStore is returned.
type blobRef struct {
	Ref     string `json:"$ref"`
	Bytes   int    `json:"bytes"`
	Preview string `json:"preview,omitempty"`
	Note    string `json:"note,omitempty"`
}

// storeLarge puts b into the BlobStore and returns the reference a result
// carries instead, with the start of b as a preview.
func storeLarge(ctx context.Context, bs BlobStore, b []byte, lim Limits) (*blobRef, error) {
	if bs == nil {
		return nil, errorf(CodeTooLarge, "the result is %d bytes, more than the %d a result may carry, and this deployment stores no large results; narrow it (table_select, top_k, jq_transform)", len(b), lim.MaxResultBytes)
	}
	if len(b) > lim.MaxBlobBytes {
		return nil, errorf(CodeTooLarge, "the result is %d bytes, more than the %d bytes a stored result may have; narrow it (table_select, top_k, jq_transform)", len(b), lim.MaxBlobBytes)
	}
	ref, err := bs.Put(ctx, b)
	if err != nil {
		return nil, errorf(CodeFailed, "storing the %d-byte result: %v", len(b), err)
	}
	return &blobRef{Ref: ref, Bytes: len(b), Preview: preview(b, 200),
		Note: "the result was stored; pass {\"$ref\": \"" + ref + "\"} as a pipeline's input to use it"}, nil
}

// preview is the start of b, cut at n bytes on a rune boundary.
func preview(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	s := string(b[:n])
	return strings.ToValidUTF8(s, "") + "…"
}

// Package handlers is the Go SDK for wfc task handlers and holds the
// built-in handlers (noop, echo, cel, fail, sleep, http, exec, and wait,
// whose durable timer the runtime itself runs).
//
// A handler receives a Request — the node's rendered `with` config, the
// run, node, iteration and item it executes, and a stable IdempotencyKey —
// and returns the node's output as JSON. Handlers run at least once per
// attempt: a worker may die after a handler's side effect and before its
// completion is recorded, and the execution then runs again with the same
// IdempotencyKey. Pass the key on (the http handler sends it as an
// Idempotency-Key header) to make external effects exactly-once.
//
// Errors are retryable unless wrapped with Permanent: a retryable error
// uses the node's retry policy; a permanent one fails the node at once. An
// *Error (Errorf) carries an error code as well, by which workflows route
// and retry failures, and says itself whether it is retryable.
package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"sync"
)

// A Request is one execution of a handler.
type Request struct {
	RunID     string `json:"run_id"`
	Workflow  string `json:"workflow"`
	Node      string `json:"node"`
	Iteration string `json:"iteration,omitempty"` // iteration vector inside loops ("2", "3.1"); "" outside
	Item      int    `json:"item"`                // for_each item index, -1 when the node has no for_each
	Attempt   int    `json:"attempt"`             // 1 for the first attempt
	Handler   string `json:"handler"`
	// Config is the node's `with` block, evaluated: a JSON object.
	Config json.RawMessage `json:"config"`
	// IdempotencyKey is the same for every attempt and every redelivery of
	// this execution: run/node[@iteration][/item] (with a "compensate/"
	// prefix for a compensation).
	IdempotencyKey string `json:"idempotency_key"`
	// Compensation is true when the handler runs as a node's compensate
	// step; Config then was rendered with `output` bound to the node's output.
	Compensation bool `json:"compensation,omitempty"`
}

// A Handler executes task nodes. Run must honour ctx (it carries the
// attempt's timeout and the worker's shutdown) and return a JSON value.
type Handler interface {
	Run(ctx context.Context, req Request) (json.RawMessage, error)
}

// Func adapts a function to a Handler.
type Func func(ctx context.Context, req Request) (json.RawMessage, error)

// Run calls f.
func (f Func) Run(ctx context.Context, req Request) (json.RawMessage, error) { return f(ctx, req) }

type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() error { return p.err }

// Permanent marks err as not worth retrying: the node fails without using
// its remaining attempts.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanent{err}
}

// Permanentf is Permanent(fmt.Errorf(format, args...)).
func Permanentf(format string, args ...any) error { return Permanent(fmt.Errorf(format, args...)) }

// IsPermanent reports whether err was marked with Permanent, or is an
// *Error that is not retryable.
func IsPermanent(err error) bool {
	var p permanent
	if errors.As(err, &p) {
		return true
	}
	var e *Error
	return errors.As(err, &e) && !e.Retryable
}

// Options configure the built-in handlers.
type Options struct {
	// AllowExec enables the exec handler (wfc worker --allow-exec).
	// Without it exec fails every node permanently.
	AllowExec bool
	// HTTPClient is used by the http handler; nil means a client without
	// a global timeout (each request has its own) that applies the network
	// policy below. A client given here replaces the policy: its transport
	// connects wherever it does.
	HTTPClient *http.Client
	// HTTPAllow and HTTPDeny are the http handler's network policy
	// (wfc worker --http-allow, --http-deny). Entries are an IP address, a
	// CIDR range or a host name as the URL writes it, each optionally with
	// :port, or "*" for every address. By default the handler refuses to
	// connect to loopback, link-local (cloud metadata), private, shared
	// (CGNAT), unspecified, multicast and reserved addresses, checked on
	// the address dialled after DNS resolution and on every redirect;
	// HTTPAllow admits some of them, and HTTPDeny refuses addresses or
	// names whatever else says. A refused request fails with error code
	// http.denied (not retryable). An entry that means nothing makes every
	// http request fail (CheckHTTPPolicy reports it beforehand).
	HTTPAllow, HTTPDeny []string
	// HTTPTries is how many times the http handler sends a request that
	// meets a network error or a 5xx status; 0 means 3.
	HTTPTries int
}

// A Registry maps handler names to handlers. It is safe for concurrent use.
type Registry struct {
	mu sync.RWMutex
	m  map[string]Handler
}

// NewRegistry returns a registry holding the built-in handlers.
func NewRegistry(opts Options) *Registry {
	r := &Registry{m: map[string]Handler{}}
	for name, h := range builtins(opts) {
		r.m[name] = h
	}
	return r
}

// Register adds or replaces a handler.
func (r *Registry) Register(name string, h Handler) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.m[name] = h
}

// RegisterFunc registers a function as a handler.
func (r *Registry) RegisterFunc(name string, f func(ctx context.Context, req Request) (json.RawMessage, error)) {
	r.Register(name, Func(f))
}

// Lookup returns the handler registered under name.
func (r *Registry) Lookup(name string) (Handler, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	h, ok := r.m[name]
	return h, ok
}

// Core reports whether name is a built-in handler that every worker runs:
// noop, echo, cel, fail, sleep, http, wait and signal (which the runtime
// runs itself: a durable timer, a wait for an external signal). exec is not one (a worker runs it
// only with AllowExec), nor is any handler a program registers. The
// runtime leaves a core handler's tokens on the control queue and by
// default gives every other handler a queue of its own, which only workers
// that can run it serve.
func Core(name string) bool {
	switch name {
	case "noop", "echo", "cel", "fail", "sleep", "http", "wait", "signal":
		return true
	}
	return false
}

// Can reports whether r runs name: it is registered and, for the built-in
// exec, enabled (Options.AllowExec).
func (r *Registry) Can(name string) bool {
	h, ok := r.Lookup(name)
	if !ok {
		return false
	}
	if e, isExec := h.(*execHandler); isExec {
		return e.allow
	}
	return true
}

// Names returns the registered names, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.m))
	for n := range r.m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Call runs h, turning a panic into a permanent error and checking that
// the output is a JSON value (an empty output means {}).
func Call(ctx context.Context, h Handler, req Request) (out json.RawMessage, err error) {
	defer func() {
		if p := recover(); p != nil {
			out, err = nil, Permanentf("handler %s panicked: %v", req.Handler, p)
		}
	}()
	out, err = h.Run(ctx, req)
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return json.RawMessage("{}"), nil
	}
	if !json.Valid(out) {
		return nil, Permanentf("handler %s returned invalid JSON: %.200q", req.Handler, out)
	}
	return out, nil
}

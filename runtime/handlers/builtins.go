package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// The built-in handlers' schemas are the compiler's (compiler/builtins.go).
func builtins(opts Options) map[string]Handler {
	return map[string]Handler{
		"noop":   Func(noop),
		"echo":   Func(echo),
		"cel":    Func(echo), // its `with` values are CEL, evaluated before the call
		"fail":   Func(failHandler),
		"sleep":  Func(sleep),
		"http":   newHTTP(opts),
		"exec":   &execHandler{allow: opts.AllowExec},
		"wait":   Func(waitPlaceholder),
		"signal": Func(signalPlaceholder),
	}
}

// CodeWait is the error code of a wait the runtime cannot hold.
const CodeWait = "wait"

// waitPlaceholder stands for the durable timer, which the runtime itself
// runs when it is a task's handler (docs/waiting.md): registries list it,
// and a call — only as a for_each item, a compensation or a finally step,
// where the runtime cannot park the execution — fails clearly.
func waitPlaceholder(_ context.Context, req Request) (json.RawMessage, error) {
	return nil, Errorf(CodeWait, false, "wait: the durable timer runs only as a task's own handler, not as a for_each item, a compensation or a finally step (use sleep there)")
}

// CodeSignal is the error code of a signal task the runtime cannot hold
// (or whose name or correlation is not one).
const CodeSignal = "signal"

// signalPlaceholder stands for the wait for a signal, which the runtime
// itself runs when it is a task's handler (docs/waiting.md, "Signals").
func signalPlaceholder(_ context.Context, req Request) (json.RawMessage, error) {
	return nil, Errorf(CodeSignal, false, "signal: the wait for a signal runs only as a task's own handler, not as a for_each item, a compensation or a finally step")
}

func noop(context.Context, Request) (json.RawMessage, error) { return json.RawMessage("{}"), nil }

// echo outputs its config unchanged.
func echo(_ context.Context, req Request) (json.RawMessage, error) {
	if len(req.Config) == 0 {
		return json.RawMessage("{}"), nil
	}
	return req.Config, nil
}

// failHandler always fails: with error code `code` ("fail"), `message`
// and `retryable` (false).
func failHandler(_ context.Context, req Request) (json.RawMessage, error) {
	var c struct {
		Message   string `json:"message"`
		Code      string `json:"code"`
		Retryable bool   `json:"retryable"`
	}
	if err := decodeConfig(req, &c); err != nil {
		return nil, err
	}
	if c.Message == "" {
		c.Message = "fail: failed on purpose"
	}
	if c.Code == "" {
		c.Code = "fail"
	}
	return nil, &Error{Code: c.Code, Message: c.Message, Retryable: c.Retryable}
}

func sleep(ctx context.Context, req Request) (json.RawMessage, error) {
	var c struct {
		Duration string `json:"duration"`
	}
	if err := decodeConfig(req, &c); err != nil {
		return nil, err
	}
	d, err := time.ParseDuration(c.Duration)
	if err != nil || d < 0 {
		return nil, Permanentf("sleep: bad duration %q", c.Duration)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return json.RawMessage("{}"), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// decodeConfig decodes the request config; a config that does not decode
// is a permanent error (retrying cannot change it).
func decodeConfig(req Request, v any) error {
	if len(req.Config) == 0 {
		return nil
	}
	if err := json.Unmarshal(req.Config, v); err != nil {
		return Permanentf("%s: bad config: %v", req.Handler, err)
	}
	return nil
}

func parseDuration(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("bad duration %q", s)
	}
	return d, nil
}

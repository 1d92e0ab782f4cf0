package compiler

import "github.com/wfc-lang/wfc/ir"

func obj(fields ...ir.Field) *ir.Type { return &ir.Type{Kind: ir.KindObject, Fields: fields} }
func fld(name, kind string) ir.Field  { return ir.Field{Name: name, Type: ir.Type{Kind: kind}} }
func opt(name, kind string) ir.Field {
	return ir.Field{Name: name, Type: ir.Type{Kind: kind}, Optional: true}
}
func optT(name string, t ir.Type) ir.Field { return ir.Field{Name: name, Type: t, Optional: true} }
func mapOf(kind string) ir.Type            { return ir.Type{Kind: ir.KindMap, Elem: &ir.Type{Kind: kind}} }
func listOf(kind string) ir.Type           { return ir.Type{Kind: ir.KindList, Elem: &ir.Type{Kind: kind}} }

// Builtins returns the handlers every workflow can `run` without declaring
// them. Their schemas are the contract with the runtime's implementations
// (runtime/handlers); docs/language.md lists them.
func Builtins() map[string]*HandlerInfo {
	hs := []*HandlerInfo{
		{Name: "noop", Config: obj(), Output: obj(), Doc: "Does nothing and outputs {}."},
		{Name: "echo", Open: true, Doc: "Outputs its `with` values unchanged."},
		{Name: "cel", Open: true, Doc: "Outputs its `with` values: each field is a CEL expression evaluated at run time."},
		{Name: "fail", Config: obj(opt("message", ir.KindString), opt("code", ir.KindString), opt("retryable", ir.KindBool)), Output: obj(),
			Doc: "Always fails, with error `code` (default \"fail\"), `message`, and `retryable` (default false)."},
		{Name: "sleep", Config: obj(fld("duration", ir.KindDuration)), Output: obj(), Doc: "Waits for `duration`."},
		{Name: "wait", Config: obj(opt("for", ir.KindDuration), opt("until", ir.KindString)), Output: obj(fld("until", ir.KindString)),
			Doc: "A durable timer: waits `for` a duration or `until` a time (RFC 3339), exactly one of them, without holding a worker (docs/waiting.md). Outputs {until: the time it waited until}."},
		{Name: "signal", Config: obj(fld("name", ir.KindString), opt("correlation", ir.KindString)), Output: &ir.Type{Kind: ir.KindAny},
			Doc: "Waits for the signal `name` (with `correlation`, if set) sent to its run (wfc signal, Engine.Signal), without holding a worker; a signal sent before the node is reached is kept for it. Outputs the signal's payload (a JSON object, checked against the node's declared output when it is sent). With `timeout`, fails with error code timeout when no signal came (docs/waiting.md, \"Signals\")."},
		{Name: "http", Config: obj(
			fld("url", ir.KindString),
			opt("method", ir.KindString),
			optT("headers", mapOf(ir.KindString)),
			opt("body", ir.KindAny),
			opt("timeout", ir.KindDuration),
			optT("accept", listOf(ir.KindInt)),
			optT("keep_headers", listOf(ir.KindString)),
		), Output: obj(
			fld("status", ir.KindInt),
			ir.Field{Name: "headers", Type: mapOf(ir.KindString)},
			fld("body", ir.KindAny),
		), Doc: "Sends a JSON HTTP request; retries network errors and 5xx honouring Retry-After; sends an Idempotency-Key header. A status of 400 or more (not in `accept`) fails with error code http.STATUS; no response is http.network; an address the worker's network policy refuses (loopback, private, link-local ... unless --http-allow) is http.denied. Response headers that may carry a credential (Set-Cookie, *auth*, *token* ...) are left out of the output unless `keep_headers` names them."},
		{Name: "exec", Config: obj(
			ir.Field{Name: "argv", Type: listOf(ir.KindString)},
			optT("env", mapOf(ir.KindString)),
			opt("stdin", ir.KindString),
			opt("dir", ir.KindString),
			optT("ok_exit_codes", listOf(ir.KindInt)),
		), Output: obj(
			fld("exit_code", ir.KindInt),
			fld("stdout", ir.KindString),
			fld("stderr", ir.KindString),
		), Doc: "Runs a program (argv, no shell); only on workers started with --allow-exec. An exit status other than 0 (or one of `ok_exit_codes`) fails with error code exec.N (retryable)."},
	}
	m := make(map[string]*HandlerInfo, len(hs))
	for _, h := range hs {
		h.Builtin = true
		m[h.Name] = h
	}
	return m
}

// Default output types of the node kinds that run no handler.
var (
	// agentOutput is the decision runtime/agent records (docs/agents.md).
	agentOutput = obj(fld("route", ir.KindString), ir.Field{Name: "routes", Type: listOf(ir.KindString)},
		fld("defaulted", ir.KindBool), opt("problem", ir.KindString), fld("text", ir.KindString),
		fld("reasoning", ir.KindString), fld("model", ir.KindString), fld("prompt_hash", ir.KindString),
		ir.Field{Name: "usage", Type: *obj(fld("prompt_tokens", ir.KindInt), fld("completion_tokens", ir.KindInt), fld("total_tokens", ir.KindInt))},
		fld("tool_calls", ir.KindInt))
	humanOutput = obj(fld("approved", ir.KindBool), fld("approver", ir.KindString), opt("comment", ir.KindString))
)

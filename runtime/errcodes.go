package runtime

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/wfc-lang/wfc/runtime/handlers"
)

// DefaultMaxValueBytes is the default bound of a run's inputs and of a
// node's output, as JSON.
const DefaultMaxValueBytes = 1 << 20

// DefaultMaxStateBytes is the default bound of the values a run stores:
// the outputs, errors, for_each items and item results it has written,
// and its result (WorkerOptions.MaxStateBytes).
const DefaultMaxStateBytes = 64 << 20

// maxErrorBytes bounds the error message an execution records (a
// handler's error may carry a whole response or stderr): the rest is cut.
const maxErrorBytes = 64 << 10

// effectiveLimit is the bound a run gets: the workflow's setting when it
// sets one below the process's own, else the process's (a workflow may
// lower a bound, never raise it).
func effectiveLimit(workflow, own int) int {
	if workflow > 0 && workflow < own {
		return workflow
	}
	return own
}

// clipError cuts an error message to maxErrorBytes (at a UTF-8 boundary).
func clipError(msg string) string {
	if len(msg) <= maxErrorBytes {
		return msg
	}
	cut := maxErrorBytes
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return fmt.Sprintf("%s... (%d bytes cut)", msg[:cut], len(msg)-cut)
}

// Error codes the runtime gives the failures it causes itself
// (docs/language.md §7.8, docs/runtime.md §9); handlers give their own.
const (
	CodeExpr          = "expr"           // an expression of the node failed to evaluate
	CodeOutput        = "output"         // the handler's output is not JSON or does not fit the output type
	CodeNoHandler     = "no_handler"     // the worker has no such handler
	CodeLost          = "lost"           // the execution's message was delivered too often (its workers died)
	CodeLoopExhausted = "loop.exhausted" // a loop ran max times without an exhausted path
	CodeForEach       = "for_each"       // a for_each list is not a list or is too long
	CodeDispatch      = "dispatch"       // a dispatch named no handler of its set
	CodeState         = "state"          // the run's stored values would exceed max_state_bytes
	CodeFlow          = "flow"           // a flow node's child run failed, was cancelled, or could not start
)

// errorCode is the error code of a node failure.
func errorCode(err error) string {
	var ee *evalError
	var he *handlers.Error
	if errors.As(err, &ee) && !errors.As(err, &he) {
		return CodeExpr
	}
	return handlers.CodeOf(err)
}

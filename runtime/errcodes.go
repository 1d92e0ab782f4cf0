package runtime

import (
	"errors"

	"github.com/wfc-lang/wfc/runtime/handlers"
)

// DefaultMaxValueBytes is the default bound of a run's inputs and of a
// node's output, as JSON.
const DefaultMaxValueBytes = 1 << 20

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

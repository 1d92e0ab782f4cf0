package handlers

import (
	"context"
	"errors"
	"fmt"
)

// An Error is a handler failure with an error code (docs/language.md §7.8):
// workflows route failures by code (`on_error "code" => node`), retry only
// some codes (`retry { on [...] }`), and read x.error.code and
// x.error.message on the error path. Codes are [A-Za-z0-9._-]+; the
// built-in handlers' codes are documented in docs/runtime.md §9.
type Error struct {
	Code      string
	Message   string
	Retryable bool
	Err       error // the cause, if any (Unwrap)
}

func (e *Error) Error() string { return e.Message }
func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with the code, whether a retry may help, and a
// formatted message (%w wraps a cause).
func Errorf(code string, retryable bool, format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	return &Error{Code: code, Message: err.Error(), Retryable: retryable, Err: errors.Unwrap(err)}
}

// Codes the runtime itself gives failures that carry none.
const (
	CodeError   = "error"   // a handler error without a code
	CodeTimeout = "timeout" // the attempt's timeout, or a deadline, passed
)

// CodeOf returns err's error code: the code of the outermost *Error in its
// chain; "timeout" for a deadline; "error" otherwise.
func CodeOf(err error) string {
	var e *Error
	switch {
	case err == nil:
		return ""
	case errors.As(err, &e) && e.Code != "":
		return e.Code
	case errors.Is(err, context.DeadlineExceeded):
		return CodeTimeout
	}
	return CodeError
}

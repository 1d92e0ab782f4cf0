package lsp

import (
	"fmt"
	"runtime/debug"

	"github.com/wfc-lang/wfc/compiler"
	"github.com/wfc-lang/wfc/lang/diag"
)

// A quick fix must leave a file that compiles without the error it fixes
// and without a new one. The compiler's hints are local (they look at one
// diagnostic), so a fix can be wrong for the file as a whole: `after sales`
// for a node that reads sales.output makes it wait for sales, but when
// sales and that node are the two exclusive targets of one branch, the
// join can never fire (WF4006). Before a fix is offered, the server applies
// it to the snapshot's text and compiles the result (once per snapshot and
// fix); a fix that brings an error the file did not have is dropped.

// fixIsSafe reports whether applying fx to the snapshot adds no error to
// those of res (compared by code and message, as positions shift).
func (s *snapshot) fixIsSafe(res *compiler.Result, fx diag.Fix) (safe bool) {
	key := fmt.Sprintf("%d:%d:%s", fx.Span.Start.Offset, fx.Span.End.Offset, fx.NewText)
	if v, ok := s.fixChecks.Load(key); ok {
		return v.(bool)
	}
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("compiler panic checking a fix", "uri", s.uri, "panic", r, "stack", string(debug.Stack()))
			safe = false
		}
		s.fixChecks.Store(key, safe)
	}()
	src := s.src()
	start, end := fx.Span.Start.Offset, fx.Span.End.Offset
	if start < 0 || end < start || end > len(src) {
		return false
	}
	text := make([]byte, 0, len(src)+len(fx.NewText))
	text = append(append(append(text, src[:start]...), fx.NewText...), src[end:]...)
	before := map[string]int{}
	for _, d := range res.Diags {
		if d.Severity == diag.Error {
			before[string(d.Code)+" "+d.Message]++
		}
	}
	for _, d := range compiler.Compile(s.name, text, s.cfg).Diags {
		if d.Severity != diag.Error {
			continue
		}
		k := string(d.Code) + " " + d.Message
		if before[k] == 0 {
			return false
		}
		before[k]--
	}
	return true
}

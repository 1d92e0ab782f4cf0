package lsp

import (
	"fmt"
	"runtime/debug"

	"github.com/wfc-lang/wfc/compiler"
	"github.com/wfc-lang/wfc/lang/ast"
	"github.com/wfc-lang/wfc/lang/diag"
	"github.com/wfc-lang/wfc/lang/source"
)

// A quick fix must leave a file that compiles without the error it fixes
// and without a new one. The compiler's hints are local (they look at one
// diagnostic), so a fix can be wrong for the file as a whole: `after sales`
// for a node that reads sales.output makes it wait for sales, but when
// sales and that node are the two exclusive targets of one branch, the
// join can never fire (WF4006). Before a fix is offered, the server applies
// it to the snapshot's text and compiles the result (once per snapshot and
// fix); a fix that brings an error the file did not have, in the node it
// edits, is dropped. (An error elsewhere was there already, hidden: the
// compiler skips later passes while an earlier one reports errors.)
//
// "Fix all" is checked as one edit: one compilation for the whole file.
// Only when that brings a new error are its fixes checked one by one, at
// most maxFixChecks of them per request (each is a compilation of the
// file); the others wait for a later "Fix all". Quick fixes are checked
// for the diagnostics in the requested range (the cursor's, in editors),
// also at most maxFixChecks per request; beyond that they are offered
// unchecked, as the compiler spells them.

// maxFixChecks bounds the compilations one code action request runs.
const maxFixChecks = 16

// A byteEdit replaces src[start:end] with text.
type byteEdit struct {
	start, end int
	text       string
}

// fixIsSafe reports whether applying fx to the snapshot adds no error to
// those of res (compared by code and message, as positions shift).
func (s *snapshot) fixIsSafe(res *compiler.Result, fx diag.Fix) bool {
	key := fmt.Sprintf("%d:%d:%s", fx.Span.Start.Offset, fx.Span.End.Offset, fx.NewText)
	if v, ok := s.fixChecks.Load(key); ok {
		return v.(bool)
	}
	safe := s.editsAreSafe(res, []byteEdit{{fx.Span.Start.Offset, fx.Span.End.Offset, fx.NewText}})
	s.fixChecks.Store(key, safe)
	return safe
}

// editsAreSafe reports whether applying edits (sorted, not overlapping) to
// the snapshot adds no error to those of res.
func (s *snapshot) editsAreSafe(res *compiler.Result, edits []byteEdit) (safe bool) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("compiler panic checking a fix", "uri", s.uri, "panic", r, "stack", string(debug.Stack()))
			safe = false
		}
	}()
	src := s.src()
	text := make([]byte, 0, len(src)+64)
	at := 0
	for _, e := range edits {
		if e.start < at || e.end < e.start || e.end > len(src) {
			return false
		}
		text = append(append(text, src[at:e.start]...), e.text...)
		at = e.end
	}
	text = append(text, src[at:]...)
	before := map[string]int{}
	for _, d := range res.Diags {
		if d.Severity == diag.Error {
			before[string(d.Code)+" "+d.Message]++
		}
	}
	regions := s.fixRegions(edits)
	for _, d := range compiler.Compile(s.name, text, s.cfg).Diags {
		if d.Severity != diag.Error || !inFile(s, d.Span) {
			continue
		}
		k := string(d.Code) + " " + d.Message
		if before[k] > 0 {
			before[k]--
			continue
		}
		// A new error where the fix edits is the fix's; one elsewhere was
		// hidden before (a pass that the fixed error kept from running).
		old := oldOffset(edits, d.Span.Start.Offset)
		for _, r := range regions {
			if r.Start <= old && old <= r.End {
				return false
			}
		}
	}
	return true
}

// fixRegions are the node declarations the edits are in (the whole file
// for an edit outside any node).
func (s *snapshot) fixRegions(edits []byteEdit) []source.Range {
	var out []source.Range
	var w *ast.Workflow
	if f := s.ast(); f != nil {
		w = f.Workflow()
	}
	for _, e := range edits {
		r := source.Range{Start: 0, End: len(s.src())}
		if w != nil {
			for _, it := range w.Items {
				if n, ok := it.(*ast.NodeDecl); ok && n.Start <= e.start && e.end <= n.End {
					r = n.Range
				}
			}
		}
		out = append(out, r)
	}
	return out
}

// oldOffset maps an offset of the edited text back to the snapshot's text
// (an offset inside an edit's new text maps to the edit's start).
func oldOffset(edits []byteEdit, off int) int {
	shift := 0
	for _, e := range edits {
		start := e.start + shift
		if off < start {
			break
		}
		if off < start+len(e.text) {
			return e.start
		}
		shift += len(e.text) - (e.end - e.start)
	}
	return off - shift
}

package lsp

import (
	"slices"
	"strconv"
	"strings"

	protocol "github.com/tliron/glsp/protocol_3_16"

	"github.com/wfc-lang/wfc/compiler"
	"github.com/wfc-lang/wfc/lang/diag"
	"github.com/wfc-lang/wfc/lang/source"
)

// codeActionKindFixAll is LSP's "source.fixAll" (3.17; glsp knows 3.16).
const codeActionKindFixAll protocol.CodeActionKind = "source.fixAll"

// codeActions offers the fixes the compiler attached to the diagnostics in
// the requested range ("did you mean ...?", a has() guard, `after x`, a
// missing `run` or `with` field, the join mode) as quick fixes, and, when
// the client asks for source actions, "fix all": every unambiguous fix of
// the file in one edit.
func (s *server) codeActions(p *protocol.CodeActionParams) (any, error) {
	snap := s.snapshotFor(p.TextDocument.URI)
	if snap == nil {
		return nil, nil
	}
	quick, fixAll := true, false
	if len(p.Context.Only) > 0 {
		quick = false
		for _, k := range p.Context.Only {
			switch {
			case k == protocol.CodeActionKindQuickFix || k == "":
				quick = true
			case k == protocol.CodeActionKindSource || k == codeActionKindFixAll:
				fixAll = true
			}
		}
	}
	res := snap.result()
	out := []protocol.CodeAction{}
	checks := maxFixChecks // compilations left for this request (fixcheck.go)
	if quick {
		want := snap.m.ByteRange(p.Range)
		kind := protocol.CodeActionKindQuickFix
		for _, d := range res.Diags {
			if len(d.Fixes) == 0 || !inFile(snap, d.Span) {
				continue
			}
			dr := source.Range{Start: d.Span.Start.Offset, End: d.Span.End.Offset}
			if dr.Start > want.End || want.Start > dr.End {
				continue
			}
			pd := toProtocolDiagnostic(snap, res, d)
			for _, fx := range d.Fixes {
				if !inFile(snap, fx.Span) {
					continue
				}
				if checks > 0 {
					checks--
					if !snap.fixIsSafe(res, fx) {
						continue
					}
				}
				preferred := len(d.Fixes) == 1
				edit := protocol.TextEdit{Range: spanRange(snap.m, fx.Span), NewText: fx.NewText}
				out = append(out, protocol.CodeAction{
					Title:       fx.Title,
					Kind:        &kind,
					Diagnostics: []protocol.Diagnostic{pd},
					IsPreferred: &preferred,
					Edit:        &protocol.WorkspaceEdit{Changes: map[string][]protocol.TextEdit{snap.uri: {edit}}},
				})
			}
		}
	}
	if fixAll {
		if a := fixAllAction(snap, res, res.Diags, &checks); a != nil {
			out = append(out, *a)
		}
	}
	return out, nil
}

func isAfterFix(fx diag.Fix) bool {
	return strings.HasPrefix(fx.Title, "Add `after ") && (strings.HasPrefix(fx.NewText, " after ") || strings.HasPrefix(fx.NewText, ", "))
}

func isInsertAt(fx diag.Fix, at int) bool {
	return fx.Span.Start.Offset == at && fx.Span.End.Offset == at
}

func inFile(snap *snapshot, sp source.Span) bool {
	return sp.File == snap.name || sp.File == ""
}

// fixAllAction gathers the fix of every diagnostic of the file that has
// exactly one (two fixes, such as `join settled` or `join any`, are a
// choice for the user). A fix whose range overlaps one already taken is
// left for a second "fix all": the edits of one action must not overlap.
func fixAllAction(snap *snapshot, res *compiler.Result, diags []diag.Diagnostic, checks *int) *protocol.CodeAction {
	var fixes []diag.Fix
	for _, d := range diags {
		if len(d.Fixes) != 1 || !inFile(snap, d.Span) || !inFile(snap, d.Fixes[0].Span) {
			continue
		}
		fixes = append(fixes, d.Fixes[0])
	}
	edits, bytes, titles := mergeFixes(snap, fixes)
	if len(edits) == 0 {
		return nil
	}
	if !snap.editsAreSafe(res, bytes) {
		// One of them brings an error: keep those that do not, each
		// checked alone (a bounded number of compilations).
		var safe []diag.Fix
		for _, fx := range fixes {
			if *checks <= 0 {
				break
			}
			*checks--
			if snap.fixIsSafe(res, fx) {
				safe = append(safe, fx)
			}
		}
		edits, _, titles = mergeFixes(snap, safe)
		if len(edits) == 0 {
			return nil
		}
	}
	kind := codeActionKindFixAll
	title := "Fix all: " + titles[0]
	if len(titles) > 1 {
		title = "Fix all (" + strconv.Itoa(len(titles)) + " fixes)"
	}
	return &protocol.CodeAction{
		Title: title,
		Kind:  &kind,
		Edit:  &protocol.WorkspaceEdit{Changes: map[string][]protocol.TextEdit{snap.uri: edits}},
	}
}

// mergeFixes orders fixes and makes them one set of edits that do not
// overlap (as protocol edits and as byte edits), with their titles.
func mergeFixes(snap *snapshot, fixes []diag.Fix) ([]protocol.TextEdit, []byteEdit, []string) {
	slices.SortStableFunc(fixes, func(a, b diag.Fix) int {
		if c := a.Span.Start.Offset - b.Span.Start.Offset; c != 0 {
			return c
		}
		return a.Span.End.Offset - b.Span.End.Offset
	})
	var edits []protocol.TextEdit
	var bytes []byteEdit
	var titles []string
	end := -1
	var last *diag.Fix
	for i := range fixes {
		fx := &fixes[i]
		if last != nil && *fx == *last {
			continue // one edit for two diagnostics (two reads of one chain)
		}
		if fx.Span.Start.Offset < end {
			continue // overlaps: insertions at one point (two `after` names) do not
		}
		if last != nil && isInsertAt(*last, fx.Span.Start.Offset) && isInsertAt(*fx, fx.Span.Start.Offset) {
			// Two `after` fixes of one node become one edit, so that no
			// client can order them differently (the second joins the
			// list the first starts). Other insertions at one point (two
			// `with` blocks of a `run [...]` set) wait for the next round.
			if !isAfterFix(*last) || !isAfterFix(*fx) {
				continue
			}
			text := fx.NewText
			if strings.HasPrefix(last.NewText, " after ") && strings.HasPrefix(text, " after ") {
				text = ", " + strings.TrimPrefix(text, " after ")
			}
			edits[len(edits)-1].NewText += text
			bytes[len(bytes)-1].text += text
			titles = append(titles, fx.Title)
			continue
		}
		edits = append(edits, protocol.TextEdit{Range: spanRange(snap.m, fx.Span), NewText: fx.NewText})
		bytes = append(bytes, byteEdit{fx.Span.Start.Offset, fx.Span.End.Offset, fx.NewText})
		titles = append(titles, fx.Title)
		end = max(end, fx.Span.End.Offset)
		last = fx
	}
	return edits, bytes, titles
}

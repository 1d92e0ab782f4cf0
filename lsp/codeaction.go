package lsp

import (
	protocol "github.com/tliron/glsp/protocol_3_16"

	"github.com/wfc-lang/wfc/lang/source"
)

// codeActions offers the fixes the compiler attached to the diagnostics in
// the requested range ("did you mean ...?") as quick fixes.
func (s *server) codeActions(p *protocol.CodeActionParams) (any, error) {
	snap := s.snapshotFor(p.TextDocument.URI)
	if snap == nil {
		return nil, nil
	}
	if len(p.Context.Only) > 0 {
		ok := false
		for _, k := range p.Context.Only {
			if k == protocol.CodeActionKindQuickFix || k == "quickfix" || k == "" {
				ok = true
			}
		}
		if !ok {
			return []protocol.CodeAction{}, nil
		}
	}
	res := snap.result()
	want := snap.m.ByteRange(p.Range)
	out := []protocol.CodeAction{}
	kind := protocol.CodeActionKindQuickFix
	for _, d := range res.Diags {
		if len(d.Fixes) == 0 || (d.Span.File != snap.name && d.Span.File != "") {
			continue
		}
		dr := source.Range{Start: d.Span.Start.Offset, End: d.Span.End.Offset}
		if dr.Start > want.End || want.Start > dr.End {
			continue
		}
		pd := toProtocolDiagnostic(snap, res, d)
		for _, fx := range d.Fixes {
			if fx.Span.File != snap.name && fx.Span.File != "" {
				continue
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
	return out, nil
}

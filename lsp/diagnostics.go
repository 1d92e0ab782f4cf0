package lsp

import (
	protocol "github.com/tliron/glsp/protocol_3_16"

	"github.com/wfc-lang/wfc/compiler"
	"github.com/wfc-lang/wfc/lang/diag"
	"github.com/wfc-lang/wfc/lang/source"
)

// diagSource is the "source" of every diagnostic the server publishes.
const diagSource = "wfc"

// toProtocolDiagnostics converts the compiler's diagnostics for snap's file:
// the same list `wfc check` prints, with the hint appended to the message.
// Diagnostics about other files (an import's own errors) are reported by the
// compiler at the import, so those are skipped here, and so is WF0009 for a
// library (isLibrary).
func toProtocolDiagnostics(snap *snapshot, res *compiler.Result) []protocol.Diagnostic {
	out := make([]protocol.Diagnostic, 0, len(res.Diags))
	for _, d := range res.Diags {
		if d.Span.File != snap.name && d.Span.File != "" || suppressed(res.AST, d) {
			continue
		}
		out = append(out, toProtocolDiagnostic(snap, res, d))
	}
	return out
}

func toProtocolDiagnostic(snap *snapshot, res *compiler.Result, d diag.Diagnostic) protocol.Diagnostic {
	src := diagSource
	sev := severity(d.Severity)
	msg := d.Message
	if d.Hint != "" {
		msg += "\nhint: " + d.Hint
	}
	pd := protocol.Diagnostic{
		Range:    spanRange(snap.m, d.Span),
		Severity: &sev,
		Code:     &protocol.IntegerOrString{Value: string(d.Code)},
		Source:   &src,
		Message:  msg,
	}
	for _, r := range d.Related {
		uri, m := locate(snap, res, r.Span.File)
		var rng protocol.Range
		if m != nil {
			rng = spanRange(m, r.Span)
		} else {
			rng = approxRange(r.Span)
		}
		pd.RelatedInformation = append(pd.RelatedInformation, protocol.DiagnosticRelatedInformation{
			Location: protocol.Location{URI: uri, Range: rng},
			Message:  r.Message,
		})
	}
	return pd
}

func severity(s diag.Severity) protocol.DiagnosticSeverity {
	switch s {
	case diag.Error:
		return protocol.DiagnosticSeverityError
	case diag.Warning:
		return protocol.DiagnosticSeverityWarning
	}
	return protocol.DiagnosticSeverityInformation
}

// spanRange converts a span of the file m maps.
func spanRange(m *Mapper, s source.Span) protocol.Range {
	if !s.IsValid() {
		return protocol.Range{}
	}
	return m.Range(source.Range{Start: s.Start.Offset, End: max(s.Start.Offset, s.End.Offset)})
}

// approxRange is the position of a span in a file whose text is unknown:
// byte columns stand in for UTF-16 ones.
func approxRange(s source.Span) protocol.Range {
	if !s.IsValid() {
		return protocol.Range{}
	}
	pos := func(p source.Pos) protocol.Position {
		return protocol.Position{Line: uint32(max(p.Line-1, 0)), Character: uint32(max(p.Col-1, 0))}
	}
	end := s.End
	if !end.IsValid() {
		end = s.Start
	}
	return protocol.Range{Start: pos(s.Start), End: pos(end)}
}

// locate returns the URI of the file named name, as compiled with snap, and
// a Mapper for it when its text is known.
func locate(snap *snapshot, res *compiler.Result, name string) (string, *Mapper) {
	if name == snap.name || name == "" {
		return snap.uri, snap.m
	}
	if f := res.Files[name]; f != nil {
		return pathToURI(name), NewMapper(f)
	}
	return pathToURI(name), nil
}

package lsp

import (
	"errors"
	"fmt"
	"unicode/utf8"

	protocol "github.com/tliron/glsp/protocol_3_16"

	format "github.com/wfc-lang/wfc/fmt"
	"github.com/wfc-lang/wfc/lang/diag"
	"github.com/wfc-lang/wfc/lang/source"
)

// formatting rewrites the document in the canonical layout, byte for byte
// what `wfc fmt` writes (both call format.Source). A document with syntax
// errors is left alone, and the reply is an error saying why (the first
// syntax error), which editors show: an empty reply would look as if
// formatting did nothing. The edit covers only the part that changes, so
// the editor keeps the cursor and the undo history small.
func (s *server) formatting(p *protocol.DocumentFormattingParams) ([]protocol.TextEdit, error) {
	snap := s.snapshotFor(p.TextDocument.URI)
	if snap == nil {
		return nil, nil
	}
	src := snap.src()
	out, diags, err := format.Source(snap.name, src)
	if err != nil {
		if !errors.Is(err, format.ErrSyntax) {
			s.log.Warn("formatter failed", "uri", snap.uri, "err", err)
			return nil, &rpcError{Code: codeRequestFailed, Message: "cannot format: " + err.Error()}
		}
		return nil, &rpcError{Code: codeRequestFailed, Message: syntaxReason(diags)}
	}
	r, text, changed := minimalEdit(src, out)
	if !changed {
		return []protocol.TextEdit{}, nil
	}
	return []protocol.TextEdit{{Range: snap.m.Range(r), NewText: text}}, nil
}

// syntaxReason says why a document is not formatted: its first syntax
// error, with its position, and how many more there are.
func syntaxReason(diags diag.List) string {
	msg := "cannot format: the file has syntax errors"
	n := 0
	for _, d := range diags {
		if d.Severity != diag.Error {
			continue
		}
		if n == 0 {
			msg += ": " + d.Error()
		}
		n++
	}
	if n > 1 {
		msg += fmt.Sprintf(" (and %d more)", n-1)
	}
	return msg
}

// minimalEdit returns the range of old and the text that replace it to turn
// old into new: everything between their common prefix and suffix, cut at
// character boundaries and never inside a "\r\n".
func minimalEdit(old, new []byte) (source.Range, string, bool) {
	if string(old) == string(new) {
		return source.Range{}, "", false
	}
	pre := 0
	for pre < len(old) && pre < len(new) && old[pre] == new[pre] {
		pre++
	}
	for pre > 0 && (pre < len(old) && !utf8.RuneStart(old[pre]) || pre < len(new) && !utf8.RuneStart(new[pre])) {
		pre--
	}
	suf := 0
	for suf < len(old)-pre && suf < len(new)-pre && old[len(old)-1-suf] == new[len(new)-1-suf] {
		suf++
	}
	for suf > 0 && (!utf8.RuneStart(old[len(old)-suf]) || !utf8.RuneStart(new[len(new)-suf])) {
		suf--
	}
	// A position cannot fall between the "\r" and "\n" of a line end: an
	// LSP line ends after both.
	if pre > 0 && old[pre-1] == '\r' && pre < len(old) && old[pre] == '\n' {
		pre--
	}
	if e := len(old) - suf; suf > 0 && e > 0 && old[e-1] == '\r' && old[e] == '\n' {
		suf--
	}
	return source.Range{Start: pre, End: len(old) - suf}, string(new[pre : len(new)-suf]), true
}

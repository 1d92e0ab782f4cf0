package lsp

import (
	"errors"
	"unicode/utf8"

	protocol "github.com/tliron/glsp/protocol_3_16"

	format "github.com/wfc-lang/wfc/fmt"
	"github.com/wfc-lang/wfc/lang/source"
)

// formatting rewrites the document in the canonical layout, byte for byte
// what `wfc fmt` writes (both call format.Source). A document with syntax
// errors is left alone. The edit covers only the part that changes, so the
// editor keeps the cursor and the undo history small.
func (s *server) formatting(p *protocol.DocumentFormattingParams) ([]protocol.TextEdit, error) {
	snap := s.snapshotFor(p.TextDocument.URI)
	if snap == nil {
		return nil, nil
	}
	src := snap.src()
	out, _, err := format.Source(snap.name, src)
	if err != nil {
		if !errors.Is(err, format.ErrSyntax) {
			s.log.Warn("formatter failed", "uri", snap.uri, "err", err)
		}
		return []protocol.TextEdit{}, nil
	}
	r, text, changed := minimalEdit(src, out)
	if !changed {
		return []protocol.TextEdit{}, nil
	}
	return []protocol.TextEdit{{Range: snap.m.Range(r), NewText: text}}, nil
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

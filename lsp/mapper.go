package lsp

import (
	"unicode/utf8"

	protocol "github.com/tliron/glsp/protocol_3_16"

	"github.com/wfc-lang/wfc/lang/source"
)

// A Mapper converts between the byte offsets of a document, which the rest
// of wfc uses, and LSP positions: a 0-based line and a 0-based character
// counted in UTF-16 code units. It is the only place in wfc that knows about
// UTF-16.
//
// Lines end at "\n" (a "\r" before it belongs to the line terminator), as in
// package source. Positions past the end of a line are clamped to the line's
// end, positions past the last line to the end of the document, and a
// character that falls inside a surrogate pair or a multi-byte sequence
// maps to the start of that character.
type Mapper struct {
	f *source.File
}

// NewMapper returns a Mapper for f.
func NewMapper(f *source.File) *Mapper { return &Mapper{f: f} }

// lineBounds returns the offsets of the first byte of 0-based line and of
// the end of its content (before "\r\n" or "\n").
func (m *Mapper) lineBounds(line int) (start, end int) {
	start = m.f.LineStart(line + 1)
	if line+1 < m.f.LineCount() {
		end = m.f.LineStart(line+2) - 1
	} else {
		end = len(m.f.Src)
	}
	if end > start && m.f.Src[end-1] == '\r' {
		end--
	}
	return start, end
}

// Position converts a byte offset to an LSP position. Offsets are clamped to
// the document; an offset inside a multi-byte character maps to its start.
func (m *Mapper) Position(off int) protocol.Position {
	src := m.f.Src
	off = max(0, min(off, len(src)))
	for off > 0 && off < len(src) && !utf8.RuneStart(src[off]) {
		off--
	}
	p := m.f.Pos(off)
	start, end := m.lineBounds(p.Line - 1)
	off = min(off, end) // between "\r" and "\n"
	return protocol.Position{Line: uint32(p.Line - 1), Character: uint32(utf16Len(src[start:off]))}
}

// Offset converts an LSP position to a byte offset, clamping as the type
// comment describes.
func (m *Mapper) Offset(p protocol.Position) int {
	if int(p.Line) >= m.f.LineCount() {
		return len(m.f.Src)
	}
	start, end := m.lineBounds(int(p.Line))
	want := int(p.Character)
	units, i := 0, start
	for i < end && units < want {
		r, size := utf8.DecodeRune(m.f.Src[i:end])
		n := 1
		if r >= 0x10000 {
			n = 2
		}
		if units+n > want {
			break // inside a surrogate pair
		}
		units += n
		i += size
	}
	return i
}

// Range converts a byte range to an LSP range.
func (m *Mapper) Range(r source.Range) protocol.Range {
	return protocol.Range{Start: m.Position(r.Start), End: m.Position(r.End)}
}

// ByteRange converts an LSP range to a byte range (start <= end).
func (m *Mapper) ByteRange(r protocol.Range) source.Range {
	a, b := m.Offset(r.Start), m.Offset(r.End)
	if b < a {
		a, b = b, a
	}
	return source.Range{Start: a, End: b}
}

// utf16Len returns the length of b in UTF-16 code units; an invalid byte
// counts as one (it stands for U+FFFD).
func utf16Len(b []byte) int {
	n := 0
	for i := 0; i < len(b); {
		c := b[i]
		if c < utf8.RuneSelf {
			n++
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if r >= 0x10000 {
			n += 2
		} else {
			n++
		}
		i += size
	}
	return n
}

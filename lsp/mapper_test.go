package lsp

import (
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	protocol "github.com/tliron/glsp/protocol_3_16"

	"github.com/wfc-lang/wfc/lang/source"
)

func pos(line, char uint32) protocol.Position { return protocol.Position{Line: line, Character: char} }

func TestMapperNonASCII(t *testing.T) {
	// é is 2 bytes / 1 unit, 日本 3 bytes / 1 unit each, 😀 4 bytes / 2 units.
	src := "a é\n日本 x\n😀b\r\nlast"
	m := NewMapper(source.NewFile("t.wf", []byte(src)))
	cases := []struct {
		off int
		pos protocol.Position
	}{
		{0, pos(0, 0)},
		{2, pos(0, 2)},                 // é
		{4, pos(0, 3)},                 // end of line 0
		{5, pos(1, 0)},                 // 日
		{8, pos(1, 1)},                 // 本
		{11, pos(1, 2)},                // space
		{12, pos(1, 3)},                // x
		{14, pos(2, 0)},                // 😀
		{18, pos(2, 2)},                // b: the emoji is two UTF-16 units
		{19, pos(2, 3)},                // \r is not a character of the line
		{21, pos(3, 0)},                // last
		{len(src), pos(3, 4)},          // end of file
		{len(src) + 10, pos(3, 4)},     // clamped
		{-3, pos(0, 0)},                // clamped
		{6, pos(1, 0)}, {7, pos(1, 0)}, // inside 日: its start
		{16, pos(2, 0)}, // inside 😀
	}
	for _, c := range cases {
		if got := m.Position(c.off); got != c.pos {
			t.Errorf("Position(%d) = %v, want %v", c.off, got, c.pos)
		}
	}
	offs := []struct {
		pos protocol.Position
		off int
	}{
		{pos(0, 3), 4},
		{pos(0, 99), 4}, // past the end of the line: its end
		{pos(1, 1), 8},  // 本
		{pos(2, 1), 14}, // inside the surrogate pair: the emoji's start
		{pos(2, 2), 18}, // b
		{pos(2, 9), 19}, // before \r\n
		{pos(3, 2), 23}, //
		{pos(9, 0), len(src)},
	}
	for _, c := range offs {
		if got := m.Offset(c.pos); got != c.off {
			t.Errorf("Offset(%v) = %d, want %d", c.pos, got, c.off)
		}
	}
}

// TestMapperRoundTrip checks every rune boundary of a mixed text against an
// independent UTF-16 count.
func TestMapperRoundTrip(t *testing.T) {
	src := "workflow w { // é 日本 😀\n  input { name: string = \"😀😀\" }\n\n\ttask a { run \"𝄞\" }\n}"
	f := source.NewFile("t.wf", []byte(src))
	m := NewMapper(f)
	line, lineStart := 0, 0
	for off := 0; off <= len(src); {
		want := pos(uint32(line), uint32(len(utf16.Encode([]rune(src[lineStart:off])))))
		if got := m.Position(off); got != want {
			t.Fatalf("Position(%d) = %v, want %v", off, got, want)
		}
		if back := m.Offset(want); back != off {
			t.Fatalf("Offset(%v) = %d, want %d", want, back, off)
		}
		if off == len(src) {
			break
		}
		if src[off] == '\n' {
			line++
			lineStart = off + 1
			off++
			continue
		}
		_, size := utf8.DecodeRuneInString(src[off:])
		off += size
	}
}

func TestUTF16Len(t *testing.T) {
	for s, want := range map[string]int{"": 0, "abc": 3, "é": 1, "日本": 2, "😀": 2, "a😀b": 4, "\xff": 1} {
		if got := utf16Len([]byte(s)); got != want {
			t.Errorf("utf16Len(%q) = %d, want %d", s, got, want)
		}
	}
}

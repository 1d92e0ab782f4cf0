// Package source is the one position model of wfc: byte offsets are
// authoritative; lines and columns are derived from them on demand.
//
// Columns are 1-based byte columns (as go/token and HCL report them). The
// language server converts to UTF-16 at its edge; nothing else does.
package source

import (
	"fmt"
	"sort"
	"unicode/utf8"
)

// A Pos is a position in a source file. Offset is the 0-based byte offset;
// Line and Col are 1-based, Col counting bytes.
type Pos struct {
	Offset int `json:"offset"`
	Line   int `json:"line"`
	Col    int `json:"col"`
}

// IsValid reports whether p was set (Line 0 means unknown).
func (p Pos) IsValid() bool { return p.Line > 0 }

func (p Pos) String() string { return fmt.Sprintf("%d:%d", p.Line, p.Col) }

// A Span is a source range with an exclusive end.
type Span struct {
	File  string `json:"file"`
	Start Pos    `json:"start"`
	End   Pos    `json:"end"`
}

// IsValid reports whether s has a known start.
func (s Span) IsValid() bool { return s.Start.IsValid() }

func (s Span) String() string {
	if s.File == "" {
		return s.Start.String()
	}
	return s.File + ":" + s.Start.String()
}

// A Range is a half-open byte range [Start, End) within one file. AST nodes
// store Ranges (two ints) rather than Spans; a File turns them into Spans.
type Range struct {
	Start int `json:"start"`
	End   int `json:"end"`
}

// Rng returns r; it lets any type embedding Range satisfy interfaces that
// ask for the node's range.
func (r Range) Rng() Range { return r }

// Contains reports whether offset lies in [Start, End].
// The end is inclusive so a cursor just after a token still "touches" it.
func (r Range) Contains(off int) bool { return off >= r.Start && off <= r.End }

// Len is the length in bytes.
func (r Range) Len() int { return r.End - r.Start }

// A File is a named source text with its line table.
type File struct {
	Name  string
	Src   []byte
	lines []int // offset of the first byte of each line
}

// NewFile builds the line table of src.
func NewFile(name string, src []byte) *File {
	f := &File{Name: name, Src: src}
	n := 1
	for _, b := range src {
		if b == '\n' {
			n++
		}
	}
	f.lines = make([]int, 1, n)
	for i, b := range src {
		if b == '\n' {
			f.lines = append(f.lines, i+1)
		}
	}
	return f
}

// LineCount returns the number of lines (a final line without newline counts).
func (f *File) LineCount() int { return len(f.lines) }

// LineStart returns the offset of the first byte of 1-based line.
func (f *File) LineStart(line int) int {
	if line < 1 {
		return 0
	}
	if line > len(f.lines) {
		return len(f.Src)
	}
	return f.lines[line-1]
}

// Line returns the text of 1-based line without its line terminator.
func (f *File) Line(line int) string {
	if line < 1 || line > len(f.lines) {
		return ""
	}
	start := f.lines[line-1]
	end := len(f.Src)
	if line < len(f.lines) {
		end = f.lines[line] - 1
	}
	if end > start && f.Src[end-1] == '\r' {
		end--
	}
	return string(f.Src[start:end])
}

// Pos converts a byte offset to a Pos. Offsets are clamped to the file.
func (f *File) Pos(off int) Pos {
	if off < 0 {
		off = 0
	}
	if off > len(f.Src) {
		off = len(f.Src)
	}
	i := sort.Search(len(f.lines), func(i int) bool { return f.lines[i] > off }) - 1
	return Pos{Offset: off, Line: i + 1, Col: off - f.lines[i] + 1}
}

// Span converts a Range to a Span.
func (f *File) Span(r Range) Span {
	return Span{File: f.Name, Start: f.Pos(r.Start), End: f.Pos(r.End)}
}

// Offset converts a 1-based line and byte column back to an offset.
func (f *File) Offset(line, col int) int {
	off := f.LineStart(line) + col - 1
	if off > len(f.Src) {
		off = len(f.Src)
	}
	if off < 0 {
		off = 0
	}
	return off
}

// Text returns the source text of r (clamped).
func (f *File) Text(r Range) string {
	s, e := r.Start, r.End
	if s < 0 {
		s = 0
	}
	if e > len(f.Src) {
		e = len(f.Src)
	}
	if s > e {
		return ""
	}
	return string(f.Src[s:e])
}

// RuneOffsetToByte converts an offset counted in code points from base into a
// byte offset. CEL reports locations in code points of the expression text.
func RuneOffsetToByte(text string, runes int) int {
	i := 0
	for n := 0; n < runes && i < len(text); n++ {
		_, size := utf8.DecodeRuneInString(text[i:])
		i += size
	}
	return i
}

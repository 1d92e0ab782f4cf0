package format

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/wfc-lang/wfc/lang/ast"
)

// Layout constants.
const (
	indentWidth = 2   // spaces per block level
	maxWidth    = 80  // a construct written on one line stays on one line if it fits
	lineWidth   = 100 // lines are broken (after lists, && and ||) to fit here
)

// Whitespace requested before a token: a number of spaces (0, 1, 2, or more
// for alignment), or one of these line breaks.
const (
	wsLine = -1 // the token starts a new line
	wsItem = -2 // the token starts an item: a new line, after a blank line when the source has one there
)

// A pad is alignment padding to insert at out[off:] once the whole file is
// printed: n spaces after a label, or, for a trailing comment, as many as
// its run needs.
type pad struct {
	off  int
	n    int // spaces after a label
	unit int // for a trailing comment: the unit it ends (0 for a label)
}

// A printError is a tree that does not match its source text (a token
// expected at some offset is not there): File and Source report it instead
// of printing a wrong file.
type printError struct{ msg string }

func (e printError) Error() string { return e.msg }

// A printer writes the canonical text of one file.
//
// Tokens are written in source order. Before each token the comments that
// start before it are flushed (see flush), which keeps every comment between
// the two tokens it was written between. lastEnd, the source end of the last
// token or comment written, tells whether the source had a newline (or a
// blank line) before the next one.
type printer struct {
	src      string
	comments []*ast.Comment
	ci       int // next comment to print

	out     []byte
	col     int  // bytes written on the current output line
	started bool // something has been written

	ind  int // indentation of the current unit's lines
	cont int // indentation of a line a comment forces inside a unit

	lastEnd     int  // source end of the last token or comment written
	lastComment bool // the last thing written was a comment
	lastLine    bool // ... a // comment, which must end its line
	afterOpen   bool // the last line ends with the "{" of a multi-line block (no blank line may follow)

	// Alignment (see units and align): positions recorded while printing,
	// padded once the file is done, when every unit's lines are known.
	unitFirst int   // output offset of the first token of the unit being printed (-1: not yet)
	labelAt   int   // output offset where the unit's label ends (-1: none)
	trailUnit int   // id of the unit a trailing comment would end (0: none)
	nunits    int   // unit ids given so far
	unitRun   []int // trailing-comment run of each unit id (0: none)
	pads      []pad

	flat      bool     // print every block and list on one line (set for a unit that fits)
	scratch   *printer // measures units (flat, without comments)
	measuring bool     // this is a scratch printer
}

func newPrinter(src []byte, comments []*ast.Comment) *printer {
	return &printer{src: string(src), comments: comments, out: make([]byte, 0, len(src)+len(src)/8)}
}

func (p *printer) fail(format string, args ...any) {
	panic(printError{fmt.Sprintf(format, args...)})
}

// write appends text, keeping col up to date.
func (p *printer) write(text string) {
	p.out = append(p.out, text...)
	if i := strings.LastIndexByte(text, '\n'); i >= 0 {
		p.col = len(text) - i - 1
	} else {
		p.col += len(text)
	}
	p.started = true
}

func (p *printer) spaces(n int) {
	for i := 0; i < n; i++ {
		p.out = append(p.out, ' ')
	}
	p.col += max(n, 0)
}

func (p *printer) newline() {
	p.out = append(p.out, '\n')
	p.col = 0
}

func (p *printer) indent(n int) {
	p.spaces(n)
}

// newlines counts the line breaks in src[from:to].
func (p *printer) newlines(from, to int) int {
	if from >= to {
		return 0
	}
	return strings.Count(p.src[from:to], "\n")
}

// flush prints the comments that start before pos, the offset of the next
// token, which will be printed with whitespace ws. A comment on the same
// source line as the token or comment before it stays on that line; any
// other starts a line of its own, at the unit's indentation when the token
// starts a line (cind), at the continuation indentation otherwise. A blank
// line before an own-line comment is kept when blank lines are allowed
// there (blank).
func (p *printer) flush(pos int, ws int, blank bool, cind int) {
	for p.ci < len(p.comments) && p.comments[p.ci].Start < pos {
		c := p.comments[p.ci]
		p.ci++
		p.checkGap(p.lastEnd, c.Start)
		nl := p.newlines(p.lastEnd, c.Start)
		switch {
		case !p.started:
		case nl == 0 && !p.lastLine:
			p.spaces(1)
			if p.trailUnit != 0 {
				p.pads = append(p.pads, pad{off: len(p.out), unit: p.trailUnit})
				p.trailUnit = 0
			}
		default:
			p.newline()
			if nl >= 2 && blank && !p.afterOpen {
				p.newline()
			}
			if ws < 0 {
				p.indent(cind)
			} else {
				p.indent(p.cont)
			}
			p.afterOpen = false
		}
		text := c.Text
		if strings.HasPrefix(text, "//") {
			text = strings.TrimRight(text, " \t\r")
		}
		p.write(text)
		p.lastEnd = c.End
		p.lastComment = true
		p.lastLine = strings.HasPrefix(text, "//")
	}
}

// space writes the whitespace before the token at pos: ws, unless a
// comment just written ended its line.
func (p *printer) space(pos int, ws int) {
	switch {
	case !p.started:
	case ws < 0:
		nl := p.newlines(p.lastEnd, pos)
		p.newline()
		if ws == wsItem && nl >= 2 && !p.afterOpen {
			p.newline()
		}
		p.indent(p.ind)
		p.afterOpen = false
	case p.lastLine || (p.lastComment && p.newlines(p.lastEnd, pos) > 0):
		p.newline()
		p.indent(p.cont)
	case p.lastComment:
		p.spaces(max(ws, 1)) // an inline comment has a space on each side
	default:
		p.spaces(ws)
	}
}

// emit prints the token text found in the source at [start, end) (text may
// be a canonical spelling of it), after the comments before it and the
// whitespace ws.
func (p *printer) emit(start, end int, text string, ws int) {
	p.flush(start, ws, ws == wsItem, p.ind)
	p.checkGap(p.lastEnd, start)
	p.space(start, ws)
	if p.unitFirst < 0 {
		p.unitFirst = len(p.out)
	}
	p.write(text)
	p.lastEnd = end
	p.lastComment, p.lastLine = false, false
	p.trailUnit = 0
}

// label marks the end of the current unit's label: alignment padding goes
// here. Only the first mark counts: the fields of a flat object type inside
// a unit have labels of their own that are not aligned.
func (p *printer) label() {
	if p.labelAt < 0 {
		p.labelAt = len(p.out)
	}
}

// pad inserts the alignment padding recorded in p.pads: label paddings as
// recorded, and trailing comments moved right so that those of one run
// start in the same column (counted in runes, after the label padding).
func (p *printer) pad() {
	if len(p.pads) == 0 {
		return
	}
	// Label pads were recorded body by body, trailing comments in output
	// order: sort them all by offset (a label before a comment at the same
	// offset cannot happen: a comment follows a space).
	sort.SliceStable(p.pads, func(i, j int) bool { return p.pads[i].off < p.pads[j].off })
	target := map[int]int{} // run -> column
	cols := make([]int, len(p.pads))
	lineStart, shift := -1, 0 // label padding inserted so far on the current line
	for i, d := range p.pads {
		ls := bytes.LastIndexByte(p.out[:d.off], '\n') + 1
		if ls != lineStart {
			lineStart, shift = ls, 0
		}
		if d.unit == 0 {
			shift += d.n
			continue
		}
		cols[i] = utf8.RuneCount(p.out[ls:d.off]) + shift
		if run := p.unitRun[d.unit]; run != 0 {
			target[run] = max(target[run], cols[i])
		}
	}
	out := make([]byte, 0, len(p.out)+len(p.pads)*8)
	prev := 0
	for i, d := range p.pads {
		out = append(out, p.out[prev:d.off]...)
		n := d.n
		if d.unit != 0 {
			if run := p.unitRun[d.unit]; run != 0 {
				n = target[run] - cols[i]
			}
		}
		for range n {
			out = append(out, ' ')
		}
		prev = d.off
	}
	p.out = append(out, p.out[prev:]...)
}

// glue writes text right after the last token, with no comment flush: the
// separators ",", ":" and "?" (comments written before them in the source
// come out after them).
func (p *printer) glue(text string) {
	p.write(text)
}

// tok prints the punctuation or keyword text, which must be the next token
// of the source at or after off, and returns its end.
func (p *printer) tok(off int, text string, ws int) int {
	pos := p.next(off)
	if !strings.HasPrefix(p.src[pos:], text) {
		p.fail("expected %q at offset %d", text, pos)
	}
	p.emit(pos, pos+len(text), text, ws)
	return pos + len(text)
}

// tokAt prints text, which must be in the source at pos.
func (p *printer) tokAt(pos int, text string, ws int) int {
	if pos < 0 || !strings.HasPrefix(p.src[pos:], text) {
		p.fail("expected %q at offset %d", text, pos)
	}
	p.emit(pos, pos+len(text), text, ws)
	return pos + len(text)
}

// next returns the offset of the first token at or after off, skipping
// whitespace and comments.
func (p *printer) next(off int) int {
	s := p.src
	for off < len(s) {
		switch c := s[off]; {
		case c == ' ' || c == '\t' || c == '\r' || c == '\n':
			off++
		case c == '/' && off+1 < len(s) && s[off+1] == '/':
			for off < len(s) && s[off] != '\n' {
				off++
			}
		case c == '/' && off+1 < len(s) && s[off+1] == '*':
			if e := strings.Index(s[off+2:], "*/"); e >= 0 {
				off += e + 4
			} else {
				off = len(s)
			}
		default:
			return off
		}
	}
	return off
}

// firstComment returns the index of the first comment that starts at or
// after off.
func (p *printer) firstComment(off int) int {
	cs := p.comments
	return sort.Search(len(cs), func(i int) bool { return cs[i].Start >= off })
}

// hasComment reports whether a comment starts in [start, end).
func (p *printer) hasComment(start, end int) bool {
	i := p.firstComment(start)
	return i < len(p.comments) && p.comments[i].Start < end
}

// skipComments marks the comments that start before end as printed (they
// were copied as part of an expression).
func (p *printer) skipComments(end int) {
	for p.ci < len(p.comments) && p.comments[p.ci].Start < end {
		p.ci++
	}
}

// width returns the width in columns (runes) of unit i of u printed flat,
// on a scratch printer without comments.
func (p *printer) width(u units, i int) int {
	q := p.scratch
	if q == nil {
		q = &printer{src: p.src, flat: true, measuring: true}
		p.scratch = q
	}
	q.out, q.col, q.started = q.out[:0], 0, false
	q.lastEnd, q.lastComment, q.lastLine, q.afterOpen = 0, false, false, false
	u.print(q, i, wsItem)
	return utf8.RuneCount(q.out)
}

// checkGap fails unless src[from:to], text between two tokens and
// comments, holds only whitespace and the separators the printer drops or
// glues (";", ",", ":", "?"): a tree that does not cover every token of its
// source (parsed with errors) is not printed.
func (p *printer) checkGap(from, to int) {
	if p.measuring {
		return
	}
	for i := from; i < to; i++ {
		switch p.src[i] {
		case ' ', '\t', '\r', '\n', ';', ',', ':', '?':
		default:
			if i == 0 && strings.HasPrefix(p.src, "\xef\xbb\xbf") {
				i += 2
				continue
			}
			p.fail("text %q at offset %d is not in the tree", p.src[i:min(i+10, to)], i)
		}
	}
}

package format

import (
	"strings"

	"github.com/wfc-lang/wfc/lang/ast"
)

// expr prints an expression as written, comments inside it included. An
// expression that spans lines keeps its line breaks; its continuation lines
// move by as many columns as its first token moved, so they keep their
// place relative to it, and lose their trailing whitespace. Lines inside a
// multi-line string or block comment are left exactly as they are.
func (p *printer) expr(e *ast.Expr, ws int) {
	p.flush(e.Start, ws, ws == wsItem, p.ind)
	p.checkGap(p.lastEnd, e.Start)
	p.space(e.Start, ws)
	text := p.src[e.Start:e.End]
	if strings.IndexByte(text, '\n') < 0 {
		p.write(text)
	} else {
		srcCol := e.Start - (strings.LastIndexByte(p.src[:e.Start], '\n') + 1)
		p.write(reindent(text, p.col-srcCol))
	}
	p.skipComments(e.End)
	p.lastEnd = e.End
	p.lastComment, p.lastLine = false, false
}

// reindent shifts the continuation lines of the expression text by delta
// columns (leading whitespace counts a column a byte and becomes spaces;
// it never goes below zero), empties blank lines and drops whitespace at
// the ends of lines. Newlines inside strings and block comments are not
// line breaks of the expression and are left alone.
func reindent(text string, delta int) string {
	var b strings.Builder
	b.Grow(len(text) + 16)
	seg := 0 // start of the text not yet copied
	i := 0
	for i < len(text) {
		c := text[i]
		switch {
		case c == '\n':
			end := i
			for end > seg && (text[end-1] == ' ' || text[end-1] == '\t' || text[end-1] == '\r') {
				end--
			}
			b.WriteString(text[seg:end])
			b.WriteByte('\n')
			j := i + 1
			for j < len(text) && (text[j] == ' ' || text[j] == '\t') {
				j++
			}
			if j < len(text) && text[j] != '\n' && text[j] != '\r' {
				for n := j - (i + 1) + delta; n > 0; n-- {
					b.WriteByte(' ')
				}
			}
			seg, i = j, j
		case c == '/' && i+1 < len(text) && text[i+1] == '/':
			for i < len(text) && text[i] != '\n' {
				i++
			}
		case c == '/' && i+1 < len(text) && text[i+1] == '*':
			if e := strings.Index(text[i+2:], "*/"); e >= 0 {
				i += e + 4
			} else {
				i = len(text)
			}
		case c == '"' || c == '\'':
			i = stringEnd(text, i, i)
		case isLetter(c):
			j := i
			for j < len(text) && j-i < 2 && (text[j]|0x20 == 'r' || text[j]|0x20 == 'b') {
				j++
			}
			if j > i && j < len(text) && (text[j] == '"' || text[j] == '\'') {
				i = stringEnd(text, i, j)
				continue
			}
			for i < len(text) && (isLetter(text[i]) || isDigit(text[i])) {
				i++
			}
		case isDigit(c):
			// Numbers: digits, letters (hex, exponents, suffixes) and dots;
			// never a quote or a comment.
			for i < len(text) && (isLetter(text[i]) || isDigit(text[i]) || text[i] == '.') {
				i++
			}
		default:
			i++
		}
	}
	b.WriteString(text[seg:])
	return b.String()
}

// stringEnd returns the end of the string literal whose prefix starts at
// start and whose opening quote is at q, as the lexer scans it.
func stringEnd(s string, start, q int) int {
	quote := s[q]
	raw := strings.ContainsAny(s[start:q], "rR")
	triple := q+2 < len(s) && s[q+1] == quote && s[q+2] == quote
	i := q + 1
	if triple {
		i = q + 3
	}
	for i < len(s) {
		switch c := s[i]; {
		case c == '\\' && !raw:
			i += 2
			continue
		case c == '\n' && !triple:
			return i
		case c == quote:
			if !triple {
				return i + 1
			}
			if i+2 < len(s) && s[i+1] == quote && s[i+2] == quote {
				return i + 3
			}
		}
		i++
	}
	return len(s)
}

func isLetter(c byte) bool { return c == '_' || (c|0x20 >= 'a' && c|0x20 <= 'z') }
func isDigit(c byte) bool  { return c >= '0' && c <= '9' }

package format

import (
	"bytes"
	"strings"
	"unicode/utf8"

	"github.com/wfc-lang/wfc/lang/ast"
)

// expr prints an expression as written, comments inside it included.
// Only its line breaks are touched (see layoutExpr): the continuation lines
// of an expression that spans lines are indented on the grid, and a line
// wider than lineWidth is broken after its top-level && and || operators.
func (p *printer) expr(e *ast.Expr, ws int) { p.exprTail(e, ws, 0) }

// exprTail is expr for an expression followed on its last line by tail
// columns of text (a branch rule's ` => target,`), counted in its width.
func (p *printer) exprTail(e *ast.Expr, ws, tail int) {
	p.flush(e.Start, ws, ws == wsItem, p.ind)
	p.checkGap(p.lastEnd, e.Start)
	p.space(e.Start, ws)
	text := p.src[e.Start:e.End]
	wrap := !p.measuring && !p.flat
	if strings.IndexByte(text, '\n') < 0 && (!wrap || p.col+len(text)+tail <= lineWidth || p.column()+utf8.RuneCountInString(text)+tail <= lineWidth) {
		p.write(text)
	} else {
		p.write(layoutExpr(text, p.lineIndent(), p.column(), tail, wrap))
	}
	p.skipComments(e.End)
	p.lastEnd = e.End
	p.lastComment, p.lastLine = false, false
}

// column returns the column of the end of the output, in runes (p.col
// counts bytes).
func (p *printer) column() int {
	return utf8.RuneCount(p.out[bytes.LastIndexByte(p.out, '\n')+1:])
}

// lineIndent returns the indentation of the current output line.
func (p *printer) lineIndent() int {
	ls := bytes.LastIndexByte(p.out, '\n') + 1
	n := 0
	for ls+n < len(p.out) && p.out[ls+n] == ' ' {
		n++
	}
	return n
}

// layoutExpr lays out the lines of the expression text, whose first line
// is printed at column col of an output line indented base columns, and
// whose last line is followed by tail columns of text:
//
//   - each continuation line is indented base + indentWidth*level, where
//     level is one more than the level of the line that opened the
//     innermost bracket ((, [, {) still open at its start, or 1 outside
//     brackets; a line that starts by closing brackets takes the level of
//     the line that opened them. The indentation depends only on the
//     tokens and the line breaks, never on the source's spaces;
//   - with wrap, a line wider than lineWidth is broken after the && and ||
//     operators outside brackets that a space follows, greedily: as many
//     operands as fit stay on a line (an operand too wide for any line
//     stays whole);
//   - blank lines are emptied and whitespace at the ends of lines dropped.
//
// Only whitespace between tokens changes: newlines inside strings and
// block comments are not line breaks of the expression and are left alone.
//
// Breaking a line moves the brackets it opens to a line of another level,
// which can change the indentation (and so the width) of the lines after
// it: layout and wrapping alternate until wrapping adds no break (each
// round adds one at least, so this ends), which makes the result a fixed
// point, as idempotence needs.
func layoutExpr(text string, base, col, tail int, wrap bool) string {
	out, breaks := layoutLines(text, base, wrap)
	for len(breaks) > 0 {
		w := wrapLines(out, breaks, base, col, tail)
		if w == out {
			break
		}
		out, breaks = layoutLines(w, base, wrap)
	}
	return out
}

// layoutLines indents the continuation lines of text on the grid (see
// layoutExpr) and, with wrap, returns the offsets in its result where a
// line may be broken: just after a && or || outside brackets that spaces
// and more text on the same line follow.
func layoutLines(text string, base int, wrap bool) (string, []int) {
	var b strings.Builder
	b.Grow(len(text) + 16)
	var stack []int  // level of the line that opened each open bracket
	level := 0       // level of the current line
	var breaks []int // offsets in b where a top-level &&/|| ends, a space after it
	seg := 0         // start of the text not yet copied
	i := 0
	for i < len(text) {
		c := text[i]
		if c == '\n' {
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
			seg, i = j, j
			if j < len(text) && text[j] != '\n' && text[j] != '\r' {
				// The level of the new line: closers at its start first.
				k, depth := j, len(stack)
				for k < len(text) && (text[k] == ')' || text[k] == ']' || text[k] == '}' || text[k] == ' ' || text[k] == '\t') {
					if text[k] != ' ' && text[k] != '\t' && depth > 0 {
						depth--
					}
					k++
				}
				switch {
				case depth < len(stack):
					level = stack[depth]
				case depth > 0:
					level = stack[depth-1] + 1
				default:
					level = 1
				}
				for n := base + indentWidth*level; n > 0; n-- {
					b.WriteByte(' ')
				}
			}
			continue
		}
		switch {
		case c == ' ' || c == '\t' || c == '\r':
			i++
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
		case c == '(' || c == '[' || c == '{':
			stack = append(stack, level)
			i++
		case c == ')' || c == ']' || c == '}':
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
			i++
		case (c == '&' || c == '|') && i+1 < len(text) && text[i+1] == c:
			i += 2
			if wrap && len(stack) == 0 && i < len(text) && (text[i] == ' ' || text[i] == '\t') {
				j := i
				for j < len(text) && (text[j] == ' ' || text[j] == '\t') {
					j++
				}
				if j < len(text) && text[j] != '\n' && text[j] != '\r' {
					b.WriteString(text[seg:i])
					seg = i
					breaks = append(breaks, b.Len())
				}
			}
		default:
			i++
		}
	}
	b.WriteString(text[seg:])
	return b.String(), breaks
}

// wrapLines breaks the lines of the laid-out expression out that are wider
// than lineWidth at the offsets breaks (each just after a top-level && or
// ||, before the spaces that follow it), greedily; the new lines are
// continuation lines outside brackets, indented base+indentWidth. The
// first line starts at column col, the others at their indentation; tail
// columns follow the last.
func wrapLines(out string, breaks []int, base, col, tail int) string {
	var b strings.Builder
	b.Grow(len(out) + 8*len(breaks))
	cont := base + indentWidth
	lineStart, startCol := 0, col // current output line of out, and its column
	k := 0
	for lineStart <= len(out) {
		lineEnd := strings.IndexByte(out[lineStart:], '\n')
		if lineEnd < 0 {
			lineEnd = len(out)
		} else {
			lineEnd += lineStart
		}
		var bs []int
		for k < len(breaks) && breaks[k] < lineEnd {
			if breaks[k] > lineStart {
				bs = append(bs, breaks[k])
			}
			k++
		}
		line := out[lineStart:lineEnd]
		after := 0 // text after the line
		if lineEnd == len(out) {
			after = tail
		}
		if len(bs) == 0 || startCol+utf8.RuneCountInString(line)+after <= lineWidth {
			b.WriteString(line)
		} else {
			// Greedy: from the start of the current piece, keep adding
			// operands while the piece fits; break after the last that fits.
			from, w := lineStart, startCol // piece start and its column
			for n := 0; n < len(bs); n++ {
				end, extra := lineEnd, after
				if n+1 < len(bs) {
					end, extra = bs[n+1], 0
				}
				if w+utf8.RuneCountInString(out[from:end])+extra <= lineWidth {
					continue
				}
				b.WriteString(out[from:bs[n]])
				b.WriteByte('\n')
				for j := 0; j < cont; j++ {
					b.WriteByte(' ')
				}
				from = bs[n]
				for from < lineEnd && (out[from] == ' ' || out[from] == '\t') {
					from++
				}
				w = cont
			}
			b.WriteString(out[from:lineEnd])
		}
		if lineEnd == len(out) {
			break
		}
		b.WriteByte('\n')
		lineStart = lineEnd + 1
		startCol = 0 // the indentation is part of the line
	}
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

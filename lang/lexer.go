package lang

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/alecthomas/participle/v2/lexer"

	"github.com/wfc-lang/wfc/lang/ast"
	"github.com/wfc-lang/wfc/lang/diag"
	"github.com/wfc-lang/wfc/lang/source"
)

// Token types. Whitespace and comments never become tokens: comments are
// collected on the side (the formatter needs them, the grammar must not), and
// spans are computed from token offsets, so participle's EndPos overshoot
// does not matter.
const (
	tEOF      = lexer.EOF
	tIdent    = lexer.TokenType(-2)
	tInt      = lexer.TokenType(-3)
	tFloat    = lexer.TokenType(-4)
	tDuration = lexer.TokenType(-5)
	tString   = lexer.TokenType(-6)
	tPunct    = lexer.TokenType(-7)
)

// Limits enforced while lexing; see docs/language.md "Limits".
const (
	MaxFileSize = 4 << 20 // bytes: room for the 10,000-node limit at ~400 bytes a node
	MaxDepth    = 64      // nesting of brackets and blocks
)

// wfLexer is the participle lexer definition. ParseFile bypasses Lex (it
// lexes once and feeds participle the tokens), but Lex keeps the Parser
// usable on its own, e.g. for the grammar golden test.
type wfLexer struct{}

// Symbols builds its map on each call: package-level parsers are built
// during initialisation, before a package-level map would be.
func (wfLexer) Symbols() map[string]lexer.TokenType {
	return map[string]lexer.TokenType{
		"EOF": tEOF, "Ident": tIdent, "Int": tInt, "Float": tFloat,
		"Duration": tDuration, "String": tString, "Punct": tPunct,
	}
}

func (wfLexer) Lex(filename string, r io.Reader) (lexer.Lexer, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	f := source.NewFile(filename, b)
	lx := scan(f, &diag.Reporter{File: f})
	return &sliceLexer{toks: lx.toks}, nil
}

type sliceLexer struct {
	toks []lexer.Token
	i    int
}

func (s *sliceLexer) Next() (lexer.Token, error) {
	if s.i >= len(s.toks) {
		return s.toks[len(s.toks)-1], nil
	}
	t := s.toks[s.i]
	s.i++
	return t, nil
}

// scanned is the result of lexing one file.
type scanned struct {
	toks     []lexer.Token // ends with EOF
	comments []*ast.Comment
	tooDeep  bool
}

// scan lexes f, reporting bad input to rp and skipping it, so the parser sees
// as much of the file as possible.
func scan(f *source.File, rp *diag.Reporter) *scanned {
	src := string(f.Src)
	out := &scanned{toks: make([]lexer.Token, 0, len(src)/4+1)}
	line, lineStart := 1, 0
	depth := 0
	var stack []int // offsets of open brackets, for "unclosed" messages
	i := 0
	if len(src) >= 3 && src[:3] == "\xef\xbb\xbf" { // UTF-8 byte order mark
		i = 3
	}
	emit := func(typ lexer.TokenType, start, end int) {
		out.toks = append(out.toks, lexer.Token{Type: typ, Value: src[start:end], Pos: lexer.Position{
			Filename: f.Name, Offset: start, Line: line, Column: start - lineStart + 1}})
	}
	badUTF8 := false
	checkUTF8 := func(start, end int) {
		if !badUTF8 && !utf8.ValidString(src[start:end]) {
			badUTF8 = true
			j := start
			for j < end {
				r, size := utf8.DecodeRuneInString(src[j:end])
				if r == utf8.RuneError && size <= 1 {
					break
				}
				j += size
			}
			rp.Add(diag.BadUTF8, source.Range{Start: j, End: j + 1}, "invalid UTF-8 byte in source")
		}
	}
	// checkText checks the text of a string literal or comment: valid
	// UTF-8 and no NUL byte (WF0002 wherever it is, §2.1; reported once
	// per literal or comment).
	checkText := func(start, end int, what string) {
		checkUTF8(start, end)
		if k := strings.IndexByte(src[start:end], 0); k >= 0 {
			rp.Add(diag.BadChar, source.Range{Start: start + k, End: start + k + 1}, "NUL byte in "+what)
		}
	}
	// stringLit lexes the string literal at start (with its prefix, if
	// any, before the quote at q) and returns where it ends.
	stringLit := func(start, q int) int {
		end, nl := scanString(src, start, q, rp)
		emit(tString, start, end)
		if nl > 0 {
			line += nl
			lineStart = lastLineStart(src, start, end)
		}
		checkText(start, end, "string literal")
		return end
	}
	for i < len(src) {
		c := src[i]
		switch {
		case c == '\n':
			i++
			line, lineStart = line+1, i
		case c == ' ' || c == '\t' || c == '\r':
			i++
		case c == '/' && i+1 < len(src) && src[i+1] == '/':
			start := i
			for i < len(src) && src[i] != '\n' {
				i++
			}
			end := i
			if end > start && src[end-1] == '\r' {
				end--
			}
			checkText(start, end, "comment")
			out.comments = append(out.comments, &ast.Comment{Range: source.Range{Start: start, End: end}, Text: src[start:end]})
		case c == '/' && i+1 < len(src) && src[i+1] == '*':
			start := i
			i += 2
			closed := false
			for i < len(src) {
				if src[i] == '\n' {
					line, lineStart = line+1, i+1
				}
				if src[i] == '*' && i+1 < len(src) && src[i+1] == '/' {
					i += 2
					closed = true
					break
				}
				i++
			}
			if !closed {
				rp.Add(diag.Unterminated, source.Range{Start: start, End: start + 2}, "block comment is not terminated")
			}
			checkText(start, i, "comment")
			out.comments = append(out.comments, &ast.Comment{Range: source.Range{Start: start, End: i}, Text: src[start:i]})
		case isLetter(c):
			start := i
			// String prefixes of CEL: r"raw", b"bytes", rb/br.
			if j := stringPrefix(src, i); j > i {
				i = stringLit(start, j)
				continue
			}
			for i < len(src) && (isLetter(src[i]) || isDigit(src[i])) {
				i++
			}
			emit(tIdent, start, i)
		case isDigit(c) || (c == '.' && i+1 < len(src) && isDigit(src[i+1])):
			start := i
			typ := tInt
			i, typ = scanNumber(src, i)
			if i < len(src) && (isLetter(src[i]) || src[i] >= utf8.RuneSelf) {
				if (src[i] == 'u' || src[i] == 'U') && typ == tInt && (i+1 >= len(src) || !isLetter(src[i+1]) && !isDigit(src[i+1])) {
					i++ // CEL unsigned literal 1u
				} else {
					// A number glued to letters is a duration: 30s, 1h30m, 250ms.
					typ = tDuration
					for i < len(src) && (isLetter(src[i]) || isDigit(src[i]) || src[i] == '.' || src[i] >= utf8.RuneSelf) {
						if src[i] >= utf8.RuneSelf {
							if r, size := utf8.DecodeRuneInString(src[i:]); r == 'µ' {
								i += size
								continue
							}
							break
						}
						i++
					}
					if msg := checkDuration(src[start:i]); msg != "" {
						rp.Add(diag.BadNumber, source.Range{Start: start, End: i}, msg)
					}
				}
			} else if typ == tInt && i-start == 2 && (src[i-1] == 'x' || src[i-1] == 'X') {
				rp.Add(diag.BadNumber, source.Range{Start: start, End: i}, "hexadecimal literal has no digits")
			}
			emit(typ, start, i)
		case c == '"' || c == '\'':
			i = stringLit(i, i)
		default:
			if n := punctLen(src, i); n > 0 {
				switch c {
				case '{', '(', '[':
					depth++
					stack = append(stack, i)
					if depth > MaxDepth && !out.tooDeep {
						out.tooDeep = true
						rp.Add(diag.TooDeep, source.Range{Start: i, End: i + 1}, fmt.Sprintf("nesting deeper than %d levels", MaxDepth))
					}
				case '}', ')', ']':
					if depth > 0 {
						depth--
						stack = stack[:len(stack)-1]
					}
				}
				emit(tPunct, i, i+n)
				i += n
				continue
			}
			r, size := utf8.DecodeRuneInString(src[i:])
			switch {
			case r == utf8.RuneError && size <= 1:
				checkUTF8(i, i+1)
			case r == 0:
				rp.Add(diag.BadChar, source.Range{Start: i, End: i + size}, "NUL byte in source")
			default:
				rp.Add(diag.BadChar, source.Range{Start: i, End: i + size}, fmt.Sprintf("unexpected character %q", r))
			}
			i += size
		}
	}
	out.toks = append(out.toks, lexer.Token{Type: tEOF, Pos: lexer.Position{Filename: f.Name, Offset: len(src), Line: line, Column: len(src) - lineStart + 1}})
	return out
}

func lastLineStart(src string, start, end int) int {
	for j := end - 1; j >= start; j-- {
		if src[j] == '\n' {
			return j + 1
		}
	}
	return start
}

func isLetter(c byte) bool { return c == '_' || (c|0x20 >= 'a' && c|0x20 <= 'z') }
func isDigit(c byte) bool  { return c >= '0' && c <= '9' }

func stringPrefix(src string, i int) int {
	j := i
	for k := 0; k < 2 && j < len(src); k++ {
		switch src[j] {
		case 'r', 'R', 'b', 'B':
			j++
			continue
		}
		break
	}
	if j > i && j < len(src) && (src[j] == '"' || src[j] == '\'') {
		// Only a prefix if the letters are r/b and nothing else precedes.
		return j
	}
	return i
}

// scanString scans a CEL string literal whose quote is at q (start is where
// any r/b prefix began). It returns the end offset and the number of
// newlines inside (only triple-quoted strings may span lines).
func scanString(src string, start, q int, rp *diag.Reporter) (int, int) {
	quote := src[q]
	raw := false
	for _, p := range src[start:q] {
		if p == 'r' || p == 'R' {
			raw = true
		}
	}
	triple := q+2 < len(src) && src[q+1] == quote && src[q+2] == quote
	i := q + 1
	if triple {
		i = q + 3
	}
	nl := 0
	for i < len(src) {
		c := src[i]
		switch {
		case c == '\\' && !raw:
			if i+1 < len(src) && src[i+1] == '\n' && !triple {
				// An escaped newline does not continue a one-line string.
				i++
				continue
			}
			if i+1 < len(src) && src[i+1] == '\n' {
				nl++
			}
			i += 2
			continue
		case c == '\n':
			if !triple {
				rp.Add(diag.Unterminated, source.Range{Start: start, End: i}, "string literal is not terminated before the end of the line")
				return i, nl
			}
			nl++
		case c == quote:
			if !triple {
				return i + 1, nl
			}
			if i+2 < len(src) && src[i+1] == quote && src[i+2] == quote {
				return i + 3, nl
			}
		}
		i++
	}
	if i > len(src) {
		i = len(src)
	}
	rp.Add(diag.Unterminated, source.Range{Start: start, End: min(start+1, len(src))}, "string literal is not terminated")
	return i, nl
}

func scanNumber(src string, i int) (int, lexer.TokenType) {
	typ := tInt
	if src[i] == '0' && i+1 < len(src) && (src[i+1] == 'x' || src[i+1] == 'X') {
		i += 2
		for i < len(src) && (isDigit(src[i]) || (src[i]|0x20 >= 'a' && src[i]|0x20 <= 'f')) {
			i++
		}
		return i, tInt
	}
	for i < len(src) && isDigit(src[i]) {
		i++
	}
	if i+1 < len(src) && src[i] == '.' && isDigit(src[i+1]) {
		typ = tFloat
		i++
		for i < len(src) && isDigit(src[i]) {
			i++
		}
	}
	if i < len(src) && (src[i] == 'e' || src[i] == 'E') {
		j := i + 1
		if j < len(src) && (src[j] == '+' || src[j] == '-') {
			j++
		}
		if j < len(src) && isDigit(src[j]) {
			typ = tFloat
			i = j
			for i < len(src) && isDigit(src[i]) {
				i++
			}
		}
	}
	return i, typ
}

func punctLen(src string, i int) int {
	c := src[i]
	if i+1 < len(src) {
		two := src[i : i+2]
		switch two {
		case "=>", "==", "!=", "<=", ">=", "&&", "||":
			return 2
		}
	}
	switch c {
	case '{', '}', '(', ')', '[', ']', ',', ';', ':', '.', '=', '<', '>', '+', '-', '*', '/', '%', '!', '?':
		return 1
	}
	return 0
}

// checkDuration validates a duration literal the way time.ParseDuration
// reads it (without a sign): one or more decimal numbers, each followed by
// a unit. It returns a message for a malformed one, or "".
func checkDuration(d string) string {
	i := 0
	for i < len(d) {
		j := i
		for j < len(d) && isDigit(d[j]) {
			j++
		}
		if j < len(d) && d[j] == '.' {
			j++
			for j < len(d) && isDigit(d[j]) {
				j++
			}
		}
		if j == i || (j == i+1 && d[i] == '.') {
			return fmt.Sprintf("invalid duration %q: expected a number at %q", d, d[i:])
		}
		k := j
		for k < len(d) && !isDigit(d[k]) && d[k] != '.' {
			k++
		}
		switch unit := d[j:k]; unit {
		case "ns", "us", "µs", "ms", "s", "m", "h":
		case "":
			return fmt.Sprintf("invalid duration %q: missing unit after %q (units are ns, us, ms, s, m, h)", d, d[i:j])
		default:
			return fmt.Sprintf("invalid duration %q: unknown unit %q (units are ns, us, ms, s, m, h)", d, unit)
		}
		i = k
	}
	return ""
}

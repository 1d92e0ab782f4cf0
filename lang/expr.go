package lang

import (
	"strconv"
	"unicode"
	"unicode/utf8"

	"github.com/alecthomas/participle/v2"
	"github.com/alecthomas/participle/v2/lexer"
)

// gExpr is the grammar's CEL expression. It implements participle.Parseable:
// instead of describing CEL's grammar a second time (cel-go parses the text
// later), it skims tokens to find where the expression ends — at the first
// token that cannot continue it — with brackets balanced. This is what lets
// items need no separators (`when x > 0  timeout 30s`).
type gExpr struct {
	Start, End int
	// Str is set when the expression is one string literal (not a bytes
	// literal): the parser then decodes it and splits its template.
	Str bool
}

var binaryOps = map[string]bool{
	"||": true, "&&": true, "==": true, "!=": true, "<": true, "<=": true,
	">": true, ">=": true, "+": true, "-": true, "*": true, "/": true, "%": true,
}

type skimmer struct {
	lex   tokenStream
	end   int
	depth int
}

// tokenStream is what the skimmer reads: participle's PeekingLexer, or the
// fast parser's cursor.
type tokenStream interface {
	Peek() *lexer.Token
	Next() *lexer.Token
}

func (e *gExpr) Parse(lex *lexer.PeekingLexer) error {
	return e.parse(lex)
}

func (e *gExpr) parse(lex tokenStream) error {
	t := lex.Peek()
	if !startsOperand(t) {
		// Every expression in the grammar follows a fixed token, so a
		// missing one is an error here rather than a reason to backtrack;
		// this gives "expected an expression" at the right place. The bad
		// token is consumed so that participle does not take the error for
		// a reason to try another alternative (or to skip an optional
		// group) and report something vaguer at the token before.
		lex.Next()
		if t.Type == tDuration {
			return participle.Errorf(t.Pos, "expected an expression, found the duration %s; CEL writes it duration(%q)", t.Value, t.Value)
		}
		return participle.Errorf(t.Pos, "expected an expression, found %s", describe(t))
	}
	s := skimmer{lex: lex}
	e.Start = t.Pos.Offset
	if err := s.ternary(); err != nil {
		return err
	}
	e.End = s.end
	e.Str = t.Type == tString && e.End == t.Pos.Offset+len(t.Value) && !isBytesLiteral(t.Value)
	return nil
}

// isBytesLiteral reports whether a string token has a b/B prefix.
func isBytesLiteral(v string) bool {
	for i := 0; i < len(v) && v[i] != '"' && v[i] != '\''; i++ {
		if v[i] == 'b' || v[i] == 'B' {
			return true
		}
	}
	return false
}

func startsOperand(t *lexer.Token) bool {
	switch t.Type {
	case tIdent, tInt, tFloat, tString:
		return true
	case tPunct:
		switch t.Value {
		case "(", "[", "{", "!", "-", ".":
			return true
		}
	}
	return false
}

func (s *skimmer) next() *lexer.Token {
	t := s.lex.Next()
	s.end = t.Pos.Offset + len(t.Value)
	return t
}

func (s *skimmer) ternary() error {
	s.depth++
	defer func() { s.depth-- }()
	if s.depth > MaxDepth {
		return participle.Errorf(s.lex.Peek().Pos, "expression nested deeper than %d levels", MaxDepth)
	}
	if err := s.binary(); err != nil {
		return err
	}
	if t := s.lex.Peek(); t.Type == tPunct && t.Value == "?" {
		s.next()
		if err := s.ternary(); err != nil {
			return err
		}
		t := s.lex.Peek()
		if t.Type != tPunct || t.Value != ":" {
			return participle.Errorf(t.Pos, "expected \":\" of a conditional expression, found %s", describe(t))
		}
		s.next()
		return s.ternary()
	}
	return nil
}

func (s *skimmer) binary() error {
	for {
		if err := s.unary(); err != nil {
			return err
		}
		t := s.lex.Peek()
		if (t.Type == tPunct && binaryOps[t.Value]) || (t.Type == tIdent && t.Value == "in") {
			s.next()
			continue
		}
		return nil
	}
}

func (s *skimmer) unary() error {
	for {
		t := s.lex.Peek()
		if t.Type == tPunct && (t.Value == "!" || t.Value == "-") {
			s.next()
			continue
		}
		break
	}
	// A qualified name (a.b.c, .a.b) may be followed by a message literal
	// `{ field: value }`; track whether the operand is still one.
	first := s.lex.Peek()
	qualified := first.Type == tIdent || (first.Type == tPunct && first.Value == ".")
	if err := s.primary(); err != nil {
		return err
	}
	// Postfix: member access, calls, indexing, message construction.
	for {
		t := s.lex.Peek()
		if t.Type != tPunct {
			return nil
		}
		switch t.Value {
		case ".":
			s.next()
			id := s.lex.Peek()
			if id.Type != tIdent {
				return participle.Errorf(id.Pos, "expected a field name after \".\", found %s", describe(id))
			}
			s.next()
		case "(", "[":
			qualified = false
			if err := s.balanced(); err != nil {
				return err
			}
		case "{":
			if !qualified {
				return nil
			}
			qualified = false
			if err := s.balanced(); err != nil {
				return err
			}
		default:
			return nil
		}
	}
}

func (s *skimmer) primary() error {
	t := s.lex.Peek()
	switch t.Type {
	case tIdent, tInt, tFloat, tString:
		s.next()
		return nil
	case tPunct:
		switch t.Value {
		case "(", "[", "{":
			return s.balanced()
		case ".": // leading-dot qualified name
			s.next()
			id := s.lex.Peek()
			if id.Type != tIdent {
				return participle.Errorf(id.Pos, "expected a name after \".\", found %s", describe(id))
			}
			s.next()
			return nil
		}
	}
	return participle.Errorf(t.Pos, "expected an expression, found %s", describe(t))
}

// balanced consumes an opening bracket and everything up to its match.
func (s *skimmer) balanced() error {
	open := s.next()
	stack := []string{closer(open.Value)}
	for len(stack) > 0 {
		t := s.lex.Peek()
		if t.EOF() {
			return participle.Errorf(open.Pos, "%q is not closed", open.Value)
		}
		if t.Type == tPunct {
			switch t.Value {
			case "(", "[", "{":
				if len(stack) >= MaxDepth {
					return participle.Errorf(t.Pos, "expression nested deeper than %d levels", MaxDepth)
				}
				stack = append(stack, closer(t.Value))
			case ")", "]", "}":
				if t.Value != stack[len(stack)-1] {
					return participle.Errorf(t.Pos, "unexpected %q: %q at %d:%d is not closed", t.Value, open.Value, open.Pos.Line, open.Pos.Column)
				}
				stack = stack[:len(stack)-1]
			}
		}
		s.next()
	}
	return nil
}

func closer(open string) string {
	switch open {
	case "(":
		return ")"
	case "[":
		return "]"
	}
	return "}"
}

func describe(t *lexer.Token) string {
	if t.EOF() && len(t.Value) > len(chunkEnd) {
		// The end of a chunk parsed during recovery: name the real token.
		return describeText(t.Value[len(chunkEnd):])
	}
	if t.EOF() {
		return "end of file"
	}
	return describeText(t.Value)
}

// describeText names a token by its text for a message: a string literal as
// `string "..."`, anything else in quotes; long tokens are shortened and
// unprintable characters escaped.
func describeText(v string) string {
	j := stringPrefix(v, 0)
	isString := j < len(v) && (v[j] == '"' || v[j] == '\'')
	if len(v) > 32 {
		cut := 28
		for cut > 0 && !utf8.RuneStart(v[cut]) {
			cut--
		}
		v = v[:cut] + "..."
		if isString {
			v += v[j : j+1] // close the quote
		}
	}
	printable := utf8.ValidString(v)
	for _, r := range v {
		if !unicode.IsPrint(r) {
			printable = false
		}
	}
	if isString {
		if !printable {
			return "string " + strconv.Quote(v)
		}
		return "string " + v
	}
	if !printable {
		return strconv.Quote(v)
	}
	return "\"" + v + "\""
}

package lang

import (
	"fmt"
	"strings"
	"testing"

	"github.com/alecthomas/participle/v2/lexer"

	"github.com/wfc-lang/wfc/lang/diag"
	"github.com/wfc-lang/wfc/lang/source"
)

var tokName = map[lexer.TokenType]string{
	tEOF: "EOF", tIdent: "Ident", tInt: "Int", tFloat: "Float",
	tDuration: "Duration", tString: "String", tPunct: "Punct",
}

// lexString lexes src and returns its tokens as `Kind(value)` (without the
// final EOF), its comments, and the lexer's diagnostics as
// `line:col-line:col CODE`.
func lexString(t *testing.T, src string) (toks []string, comments []string, diags []string) {
	t.Helper()
	f := source.NewFile("t.wf", []byte(src))
	rp := &diag.Reporter{File: f}
	sc := scan(f, rp)
	last := sc.toks[len(sc.toks)-1]
	if last.Type != tEOF || last.Pos.Offset != len(src) {
		t.Errorf("%q: last token %v, want EOF at %d", src, last, len(src))
	}
	for _, tk := range sc.toks[:len(sc.toks)-1] {
		toks = append(toks, fmt.Sprintf("%s(%s)", tokName[tk.Type], tk.Value))
		// Every token's value is its source text, and its line:col agrees
		// with the line table.
		if got := src[tk.Pos.Offset : tk.Pos.Offset+len(tk.Value)]; got != tk.Value {
			t.Errorf("%q: token %q at %d has text %q", src, tk.Value, tk.Pos.Offset, got)
		}
		if p := f.Pos(tk.Pos.Offset); p.Line != tk.Pos.Line || p.Col != tk.Pos.Column {
			t.Errorf("%q: token %q at %d:%d, line table says %v", src, tk.Value, tk.Pos.Line, tk.Pos.Column, p)
		}
	}
	for _, c := range sc.comments {
		comments = append(comments, fmt.Sprintf("%d-%d %s", c.Start, c.End, c.Text))
	}
	for _, d := range rp.Diags {
		diags = append(diags, fmt.Sprintf("%d:%d-%d:%d %s", d.Span.Start.Line, d.Span.Start.Col, d.Span.End.Line, d.Span.End.Col, d.Code))
	}
	return toks, comments, diags
}

func TestLexer(t *testing.T) {
	tests := []struct {
		name, src string
		toks      string // space-separated Kind(value)
		diags     string // space-separated line:col-line:col CODE
	}{
		{"empty", "", "", ""},
		{"idents", "a _b c9 A_Z __", "Ident(a) Ident(_b) Ident(c9) Ident(A_Z) Ident(__)", ""},
		{"keywords are idents", "workflow task after join true null", "Ident(workflow) Ident(task) Ident(after) Ident(join) Ident(true) Ident(null)", ""},
		{"ints", "0 42 007", "Int(0) Int(42) Int(007)", ""},
		{"hex", "0x1F 0XfF 0xdeadBEEF", "Int(0x1F) Int(0XfF) Int(0xdeadBEEF)", ""},
		{"hex without digits", "0x", "Int(0x)", "1:1-1:3 WF0005"},
		{"unsigned", "1u 42U 0x1Fu", "Int(1u) Int(42U) Int(0x1Fu)", ""},
		{"floats", "1.5 .5 1e3 1.5e-3 2E+10 0.0", "Float(1.5) Float(.5) Float(1e3) Float(1.5e-3) Float(2E+10) Float(0.0)", ""},
		{"int then dot", "1.x", "Int(1) Punct(.) Ident(x)", ""},
		{"exponent without digits", "1e+", "Duration(1e) Punct(+)", "1:1-1:3 WF0005"},
		{"durations", "250ms 30s 5m 48h 1h30m 1.5h 2us 3ns 2µs 1h2m3s4ms", "Duration(250ms) Duration(30s) Duration(5m) Duration(48h) Duration(1h30m) Duration(1.5h) Duration(2us) Duration(3ns) Duration(2µs) Duration(1h2m3s4ms)", ""},
		{"duration bad unit", "5x", "Duration(5x)", "1:1-1:3 WF0005"},
		{"duration missing unit", "1h5", "Duration(1h5)", "1:1-1:4 WF0005"},
		{"duration unit u is not unsigned", "1us 1ux", "Duration(1us) Duration(1ux)", "1:5-1:8 WF0005"},
		{"float unsigned is a bad duration", "1.5u", "Duration(1.5u)", "1:1-1:5 WF0005"},
		{"strings", `"a" 'b' "" ''`, `String("a") String('b') String("") String('')`, ""},
		{"string escapes", `"a\"b" 'c\'d' "\\" "\n\t\u00e9\x41\101"`, `String("a\"b") String('c\'d') String("\\") String("\n\t\u00e9\x41\101")`, ""},
		{"other quote inside", `"it's" 'say "hi"'`, `String("it's") String('say "hi"')`, ""},
		{"raw strings", `r"a\b" R'c\d' r"\"`, `String(r"a\b") String(R'c\d') String(r"\")`, ""},
		{"bytes strings", `b"ab" B'x' rb"\z" br'\z' Rb"q"`, `String(b"ab") String(B'x') String(rb"\z") String(br'\z') String(Rb"q")`, ""},
		{"prefix letters are idents without quote", `r b rb rx"a"`, `Ident(r) Ident(b) Ident(rb) Ident(rx) String("a")`, ""},
		{"triple quoted", "\"\"\"a\n\"b\"\nc\"\"\" '''x\ny'''", "String(\"\"\"a\n\"b\"\nc\"\"\") String('''x\ny''')", ""},
		{"raw triple", `r"""\d"""`, `String(r"""\d""")`, ""},
		{"unterminated string at newline", "\"abc\nx", "String(\"abc) Ident(x)", "1:1-1:5 WF0003"},
		{"unterminated string at EOF", `"abc`, `String("abc)`, "1:1-1:2 WF0003"},
		{"unterminated string ends in backslash", `"abc\`, `String("abc\)`, "1:1-1:2 WF0003"},
		{"escaped newline ends a one-line string", "\"a\\\nx\" c", "String(\"a\\) Ident(x) String(\" c)", "1:1-1:4 WF0003 2:2-2:3 WF0003"},
		{"unterminated triple", "'''abc\n", "String('''abc\n)", "1:1-1:2 WF0003"},
		{"punctuation", "{ } ( ) [ ] , ; : . = < > + - * / % ! ?", "Punct({) Punct(}) Punct(() Punct()) Punct([) Punct(]) Punct(,) Punct(;) Punct(:) Punct(.) Punct(=) Punct(<) Punct(>) Punct(+) Punct(-) Punct(*) Punct(/) Punct(%) Punct(!) Punct(?)", ""},
		{"two-char operators", "=> == != <= >= && ||", "Punct(=>) Punct(==) Punct(!=) Punct(<=) Punct(>=) Punct(&&) Punct(||)", ""},
		{"operators glued", "a>=b&&!c", "Ident(a) Punct(>=) Ident(b) Punct(&&) Punct(!) Ident(c)", ""},
		{"bad chars", "a # b @ $", "Ident(a) Ident(b)", "1:3-1:4 WF0002 1:7-1:8 WF0002 1:9-1:10 WF0002"},
		{"lone ampersand and pipe", "a & b | c", "Ident(a) Ident(b) Ident(c)", "1:3-1:4 WF0002 1:7-1:8 WF0002"},
		{"non-ascii letter outside string", "é x", "Ident(x)", "1:1-1:3 WF0002"},
		{"non-ascii inside string", `"héllo ✓"`, `String("héllo ✓")`, ""},
		{"NUL", "a\x00b", "Ident(a) Ident(b)", "1:2-1:3 WF0002"},
		{"NUL in string is WF0002, the string kept", "\"a\x00b\"", "String(\"a\x00b\")", "1:3-1:4 WF0002"},
		{"NUL in comments is WF0002", "// a\x00b\n/*\x00*/", "", "1:5-1:6 WF0002 2:3-2:4 WF0002"},
		{"invalid UTF-8", "a \xff b", "Ident(a) Ident(b)", "1:3-1:4 WF0008"},
		{"invalid UTF-8 reported once", "\xff \xfe", "", "1:1-1:2 WF0008"},
		{"invalid UTF-8 in string", "\"a\xc3\"", "String(\"a\xc3\")", "1:3-1:4 WF0008"},
		{"invalid UTF-8 in comment", "// \xff\nx", "Ident(x)", "1:4-1:5 WF0008"},
		{"BOM", "\xef\xbb\xbfworkflow w", "Ident(workflow) Ident(w)", ""},
		{"BOM only at start", "a \xef\xbb\xbf", "Ident(a)", "1:3-1:6 WF0002"},
		{"CRLF", "a\r\nb\r\n  c", "Ident(a) Ident(b) Ident(c)", ""},
		{"tabs", "\ta\t\tb", "Ident(a) Ident(b)", ""},
		{"comments are not tokens", "a // x y\nb /* c\nd */ e", "Ident(a) Ident(b) Ident(e)", ""},
		{"comment markers in strings", `"// x" "/* y */"`, `String("// x") String("/* y */")`, ""},
		{"division is not a comment", "a / b", "Ident(a) Punct(/) Ident(b)", ""},
		{"unterminated block comment", "a /* b\nc", "Ident(a)", "1:3-1:5 WF0003"},
		{"block comments do not nest", "/* /* */ x */", "Ident(x) Punct(*) Punct(/)", ""},
		{"positions after multi-line string", "'''a\nb''' x\ny", "String('''a\nb''') Ident(x) Ident(y)", ""},
		{"positions after block comment", "/*\n\n*/ x", "Ident(x)", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			toks, _, diags := lexString(t, tt.src)
			if got := strings.Join(toks, " "); got != tt.toks {
				t.Errorf("tokens of %q:\n got %s\nwant %s", tt.src, got, tt.toks)
			}
			if got := strings.Join(diags, " "); got != tt.diags {
				t.Errorf("diagnostics of %q:\n got %s\nwant %s", tt.src, got, tt.diags)
			}
		})
	}
}

func TestLexerComments(t *testing.T) {
	tests := []struct{ src, want string }{
		{"// a", "0-4 // a"},
		{"x // a\r\ny", "2-6 // a"}, // the CR is not part of the comment
		{"/* a */", "0-7 /* a */"},
		{"/* a\n b */ // c\n", "0-10 /* a\n b */|11-15 // c"},
		{"/* open", "0-7 /* open"},
		{"a//b", "1-4 //b"},
		{"//", "0-2 //"},
		{"/**/", "0-4 /**/"},
	}
	for _, tt := range tests {
		_, comments, _ := lexString(t, tt.src)
		if got := strings.Join(comments, "|"); got != tt.want {
			t.Errorf("comments of %q = %q, want %q", tt.src, got, tt.want)
		}
	}
}

// TestLexerLines checks line:col of tokens on files with CRLF, BOM and
// multi-line tokens (lexString compares each with the line table).
func TestLexerLines(t *testing.T) {
	for _, src := range []string{
		"\xef\xbb\xbfa\r\n  b /* x\r\n y */ c\r\n'''\r\nq''' d",
		"a\n\n\n\tb\n",
		"x \"\"\"\n\n\"\"\" y /*\n*/ z",
	} {
		lexString(t, src)
	}
}

// The parser (not the lexer) enforces the file-size limit, so the limit tests
// go through ParseFile.
func TestFileSizeLimit(t *testing.T) {
	body := "workflow w {\n  task a { run \"noop\" }\n}\n"
	pad := func(n int) string {
		// A comment fills the file up to n bytes exactly.
		s := body + "//"
		return s + strings.Repeat("x", n-len(s))
	}
	at := pad(MaxFileSize)
	f, _, diags := ParseString("big.wf", at)
	if len(at) != MaxFileSize || len(diags) != 0 || f.Workflow() == nil {
		t.Fatalf("file of exactly %d bytes: %d diagnostics %v", len(at), len(diags), diags)
	}
	over := pad(MaxFileSize + 1)
	_, _, diags = ParseString("big.wf", over)
	if len(diags) != 1 || diags[0].Code != diag.FileTooLarge {
		t.Fatalf("file of %d bytes: %v", len(over), diags)
	}
	d := diags[0]
	// The diagnostic points at the first byte past the limit.
	if d.Span.Start.Offset != MaxFileSize || d.Span.Start.Line != 4 || d.Span.Start.Col != MaxFileSize-len(body)+1 {
		t.Errorf("position = %+v", d.Span.Start)
	}
	if want := fmt.Sprintf("file is %d bytes; the limit is %d bytes (%d MiB)", MaxFileSize+1, MaxFileSize, MaxFileSize>>20); d.Message != want {
		t.Errorf("message = %q", d.Message)
	}
}

func TestNestingLimit(t *testing.T) {
	// workflow {, task {, with { are 3 levels; parentheses make up the rest.
	nest := func(depth int) string {
		n := depth - 3
		return "workflow w {\n  task a {\n    with { x = " + strings.Repeat("(", n) + "1" + strings.Repeat(")", n) + " }\n  }\n}\n"
	}
	src := nest(MaxDepth)
	f, _, diags := ParseString("deep.wf", src)
	if len(diags) != 0 {
		t.Fatalf("depth %d: %v", MaxDepth, diags)
	}
	n := f.Workflow().Items[0].(interface{ Rng() source.Range })
	if n == nil {
		t.Fatal("no node")
	}
	src = nest(MaxDepth + 1)
	_, _, diags = ParseString("deep.wf", src)
	if len(diags) != 1 || diags[0].Code != diag.TooDeep {
		t.Fatalf("depth %d: %v", MaxDepth+1, diags)
	}
	// The 65th bracket: "    with { x = " is 15 bytes, then 61 parens.
	if p := diags[0].Span.Start; p.Line != 3 || p.Col != 16+MaxDepth-3 {
		t.Errorf("position = %v", p)
	}
	if diags[0].Message != "nesting deeper than 64 levels" {
		t.Errorf("message = %q", diags[0].Message)
	}

	// Blocks count as much as brackets: nested retry blocks.
	blocks := func(depth int) string {
		n := depth - 2
		return "workflow w {\n  task a {" + strings.Repeat(" retry {", n) + strings.Repeat(" }", n) + " }\n}\n"
	}
	if _, _, diags := ParseString("deep.wf", blocks(MaxDepth)); len(diags) != 0 {
		t.Errorf("blocks at depth %d: %v", MaxDepth, diags)
	}
	if _, _, diags := ParseString("deep.wf", blocks(MaxDepth+1)); len(diags) != 1 || diags[0].Code != diag.TooDeep {
		t.Errorf("blocks at depth %d: %v", MaxDepth+1, diags)
	}
	// Object types nest too.
	types := func(depth int) string {
		n := depth - 2
		return "workflow w {\n  input { a: " + strings.Repeat("{ b: ", n) + "int" + strings.Repeat(" }", n) + " }\n}\n"
	}
	if _, _, diags := ParseString("deep.wf", types(MaxDepth)); len(diags) != 0 {
		t.Errorf("types at depth %d: %v", MaxDepth, diags)
	}
	if _, _, diags := ParseString("deep.wf", types(MaxDepth+1)); len(diags) != 1 || diags[0].Code != diag.TooDeep {
		t.Errorf("types at depth %d: %v", MaxDepth+1, diags)
	}
}

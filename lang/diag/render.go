package diag

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/wfc-lang/wfc/lang/source"
)

// WriteText renders diagnostics in the compiler style:
//
//	file:line:col: error[WF1001]: message
//	   12 |   task b after x {
//	      |                ^
//	   = hint: did you mean `a`?
//
// files maps a file name to its source, for the excerpt; a missing file just
// omits the excerpt.
func WriteText(w io.Writer, l List, files map[string]*source.File) error {
	var b strings.Builder
	for _, d := range l {
		if d.Span.IsValid() {
			fmt.Fprintf(&b, "%s:%d:%d: %s[%s]: %s\n", d.Span.File, d.Span.Start.Line, d.Span.Start.Col, d.Severity, d.Code, d.Message)
		} else {
			// Not about a place in the file (e.g. a command-line --goal).
			fmt.Fprintf(&b, "%s: %s[%s]: %s\n", d.Span.File, d.Severity, d.Code, d.Message)
		}
		if f := files[d.Span.File]; f != nil && d.Span.IsValid() {
			excerpt(&b, f, d.Span)
		}
		if d.Hint != "" {
			fmt.Fprintf(&b, "  = hint: %s\n", d.Hint)
		}
		for _, r := range d.Related {
			fmt.Fprintf(&b, "  = note: %s:%d:%d: %s\n", r.Span.File, r.Span.Start.Line, r.Span.Start.Col, r.Message)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func excerpt(b *strings.Builder, f *source.File, s source.Span) {
	line := f.Line(s.Start.Line)
	if len(line) > 200 {
		// Very long lines (minified or generated input) would drown the message.
		lo := max(0, s.Start.Col-100)
		line = line[lo:min(len(line), lo+200)]
		s.Start.Col -= lo
		if s.End.Line == s.Start.Line {
			s.End.Col -= lo
		}
	}
	line = printable(strings.ToValidUTF8(line, "\uFFFD"))
	num := fmt.Sprint(s.Start.Line)
	pad := strings.Repeat(" ", len(num))
	fmt.Fprintf(b, " %s | %s\n", num, strings.ReplaceAll(line, "\t", " "))
	width := 1
	if s.End.Line == s.Start.Line && s.End.Col > s.Start.Col {
		width = s.End.Col - s.Start.Col
	} else if s.End.Line > s.Start.Line {
		width = max(1, len(line)-s.Start.Col+1)
	}
	col := min(s.Start.Col-1, len(line))
	// Count display cells, not bytes, so the caret sits under multi-byte text.
	prefix := len([]rune(line[:max(0, col)]))
	under := width
	if end := min(len(line), col+width); end > col {
		under = max(1, len([]rune(line[col:end])))
	}
	fmt.Fprintf(b, " %s | %s^%s\n", pad, strings.Repeat(" ", prefix), strings.Repeat("~", under-1))
}

// printable replaces control characters of a source line, so an excerpt of
// a binary file cannot drive the terminal.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\t' {
			return ' '
		}
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return '\uFFFD'
		}
		return r
	}, s)
}

// WriteJSON renders diagnostics as a JSON array (never null).
func WriteJSON(w io.Writer, l List) error {
	if l == nil {
		l = List{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(l)
}

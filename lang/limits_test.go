package lang

import (
	"strings"
	"testing"

	"github.com/wfc-lang/wfc/lang/diag"
)

// An unterminated string or block comment is reported once, as WF0003: not
// also as a bad string (WF0004), nor by the syntax errors that follow from
// the braces it swallowed ("the { of task a is never closed").
func TestLimitUnterminatedNoCascade(t *testing.T) {
	for _, src := range []string{
		"workflow w {\n  task a { run \"noop }\n}\n",                                     // to the end of the line
		"workflow w {\n  task a { run \"noop",                                            // to the end of the file
		"workflow w {\n  task a { run \"no\\",                                            // a backslash at the end
		"workflow w {\n  task a { run 'noop\" }\n  task b after a { run \"noop\" }\n}\n", // the other quote
		"workflow w {\n  task a { run \"noop\" } /* open\n}\n",                           // a block comment
		"workflow w {\n  task a { run \"\"\"noop }\n}\n",                                 // triple-quoted
	} {
		_, _, diags := ParseString("u.wf", src)
		if len(diags) != 1 || diags[0].Code != diag.Unterminated {
			t.Errorf("%q: got %d diagnostics, want one WF0003:\n%s", src, len(diags), diagLines(diags))
		}
	}
}

// A NUL byte is WF0002 wherever it is (docs/language.md §2.1), a string
// literal included.
func TestLimitNULInString(t *testing.T) {
	src := "workflow w {\n  task a { run \"no\x00op\" }\n}\n"
	_, _, diags := ParseString("n.wf", src)
	if len(diags) != 1 || diags[0].Code != diag.BadChar || diags[0].Span.Start.Offset != strings.IndexByte(src, 0) {
		t.Errorf("got:\n%s\nwant one WF0002 at the NUL byte", diagLines(diags))
	}
}

func diagLines(l diag.List) string {
	var b strings.Builder
	for _, d := range l {
		b.WriteString(d.Span.String() + " " + string(d.Code) + " " + d.Message + "\n")
	}
	return b.String()
}

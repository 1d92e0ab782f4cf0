package lsp

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	protocol "github.com/tliron/glsp/protocol_3_16"

	format "github.com/wfc-lang/wfc/fmt"
)

// TestFormattingLikeFormatSource: for every example file, the edits of
// textDocument/formatting, applied the way a client applies them, give
// exactly format.Source's output (what `wfc fmt` writes); a formatted file
// gets no edits, and a file with syntax errors an error response.
func TestFormattingLikeFormatSource(t *testing.T) {
	c := newTestClient(t, Options{}, nil)
	c.initialize()
	formattedCount, refused := 0, 0
	for i, path := range exampleFiles(t) {
		src, _ := os.ReadFile(path)
		uri := fmt.Sprintf("file:///fmt/%d.wf", i)
		c.open(uri, string(src))
		var edits []protocol.TextEdit
		rerr := c.call("textDocument/formatting", map[string]any{"textDocument": map[string]any{"uri": uri}, "options": map[string]any{"tabSize": 2, "insertSpaces": true}}, &edits)
		src = c.srv.docs.get(uri).latest().src() // JSON carries invalid UTF-8 as U+FFFD
		want, _, err := format.Source(uri, src)
		if err != nil {
			refused++
			if rerr == nil || len(edits) != 0 {
				t.Errorf("%s does not format (%v) but got edits %v and error %v", path, err, edits, rerr)
			}
			continue
		}
		if rerr != nil {
			t.Errorf("%s: formatting: %v", path, rerr)
			continue
		}
		formattedCount++
		text := string(src)
		for _, e := range edits {
			text = clientApply(text, e.Range, e.NewText)
		}
		if text != string(want) {
			t.Errorf("%s: formatting edits give\n%s\nwant\n%s", path, text, want)
			continue
		}
		// Formatting again changes nothing.
		c.changeFull(uri, 2, text)
		c.mustCall("textDocument/formatting", map[string]any{"textDocument": map[string]any{"uri": uri}, "options": map[string]any{"tabSize": 2, "insertSpaces": true}}, &edits)
		if len(edits) != 0 {
			t.Errorf("%s: formatting a formatted file gives %v", path, edits)
		}
	}
	if formattedCount < 20 || refused == 0 {
		t.Errorf("formatted %d files, refused %d: the corpus should have both", formattedCount, refused)
	}
}

// TestFormattingSyntaxErrorSaysWhy: formatting a document with syntax
// errors changes nothing and answers with an error naming the first one
// and its position (issue #20: it used to answer nothing at all).
func TestFormattingSyntaxErrorSaysWhy(t *testing.T) {
	c := newTestClient(t, Options{}, nil)
	c.initialize()
	uri := "file:///fmt/broken.wf"
	c.open(uri, "workflow w {\n  task a { { }\n  task b { run \"noop\" } }\n}\n")
	var edits []protocol.TextEdit
	rerr := c.call("textDocument/formatting", map[string]any{"textDocument": map[string]any{"uri": uri}, "options": map[string]any{"tabSize": 2, "insertSpaces": true}}, &edits)
	if rerr == nil {
		t.Fatalf("formatting a file with syntax errors: no error, edits %v", edits)
	}
	if rerr.Code != codeRequestFailed || !strings.HasPrefix(rerr.Message, "cannot format: the file has syntax errors: ") ||
		!strings.Contains(rerr.Message, ":2:10: error[WF0001]") {
		t.Errorf("error %d %q: want RequestFailed naming the syntax error at 2:10", rerr.Code, rerr.Message)
	}
	if got := string(c.srv.docs.get(uri).latest().src()); !strings.Contains(got, "task a { { }") {
		t.Errorf("document changed: %q", got)
	}
}

func TestMinimalEdit(t *testing.T) {
	cases := []struct{ old, new string }{
		{"a😀b", "a😁b"}, // the emoji share three bytes
		{"abc", "abc\n"},
		{"x  y", "x y"},
		{"日本", "日本語"},
		{"", "workflow"},
		{"é", ""},
		{"a\r\nb", "a\nb"},
		{"a\r\n", "a\n"},
		{"x\r\n\r\ny", "x\r\ny"},
	}
	for _, c := range cases {
		r, text, changed := minimalEdit([]byte(c.old), []byte(c.new))
		if !changed {
			t.Errorf("%q -> %q: no change", c.old, c.new)
			continue
		}
		got := c.old[:r.Start] + text + c.old[r.End:]
		if got != c.new {
			t.Errorf("%q -> %q: edit %v %q gives %q", c.old, c.new, r, text, got)
		}
		if r.Start > 0 && r.Start < len(c.old) && c.old[r.Start-1] == '\r' && c.old[r.Start] == '\n' ||
			r.End > 0 && r.End < len(c.old) && c.old[r.End-1] == '\r' && c.old[r.End] == '\n' {
			t.Errorf("%q -> %q: edit %v splits a CRLF", c.old, c.new, r)
		}
		for _, s := range []string{c.old[:r.Start], c.old[r.End:], text} {
			if !utf8.ValidString(s) {
				t.Errorf("%q -> %q: edit splits a character (%v %q)", c.old, c.new, r, text)
			}
		}
	}
	if _, _, changed := minimalEdit([]byte("same"), []byte("same")); changed {
		t.Error("equal texts changed")
	}
}

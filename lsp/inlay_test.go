package lsp

import (
	"strings"
	"testing"

	protocol "github.com/tliron/glsp/protocol_3_16"
)

// TestInlayHints: the inferred types of a cel task's with entries, of
// for_each variables, and the implicit join mode; none where the text says
// it (a declared output, a written join) or outside the range asked for.
func TestInlayHints(t *testing.T) {
	c := newTestClient(t, Options{}, nil)
	c.initialize()
	uri := "file:///inlay.wf"
	src := "workflow w {\n" +
		"  input { names: list<string> }\n" +
		"  task a { run \"cel\"  with { n = 1  s = \"x\" } }\n" +
		"  task b { run \"cel\"  with { ok = true }  output { ok: bool } }\n" +
		"  task c after a, b { run \"noop\" }\n" +
		"  task d after a, b join any { run \"noop\" }\n" +
		"  task e after c {\n    for_each i, name in input.names\n    run \"echo\"\n    with { who = name }\n  }\n" +
		"}\n"
	c.open(uri, src)
	c.diagnostics(uri, 1)
	type hint struct {
		Position protocol.Position `json:"position"`
		Label    string            `json:"label"`
		Kind     int               `json:"kind"`
	}
	get := func(r protocol.Range) map[string]string {
		var hints []hint
		c.mustCall("textDocument/inlayHint", map[string]any{"textDocument": map[string]any{"uri": uri}, "range": r}, &hints)
		got := map[string]string{}
		lines := strings.Split(src, "\n")
		for _, h := range hints {
			line := lines[h.Position.Line]
			got[line[:h.Position.Character]+"|"] = h.Label
		}
		return got
	}
	all := get(protocol.Range{Start: pos(0, 0), End: pos(20, 0)})
	want := map[string]string{
		"  task a { run \"cel\"  with { n|":        ": int",
		"  task a { run \"cel\"  with { n = 1  s|": ": string",
		"  task c after a, b|":                     "join all",
		"    for_each i|":                          ": int",
		"    for_each i, name|":                    ": string",
		"    with { who|":                          ": string",
	}
	for k, v := range want {
		if all[k] != v {
			t.Errorf("hint at %q = %q, want %q", k, all[k], v)
		}
	}
	if len(all) != len(want) {
		t.Errorf("hints = %q, want %q", all, want)
	}
	// Only the range asked for: line 4 (task c).
	if got := get(protocol.Range{Start: pos(4, 0), End: pos(5, 0)}); len(got) != 1 || got["  task c after a, b|"] != "join all" {
		t.Errorf("hints of line 4 = %q", got)
	}
}

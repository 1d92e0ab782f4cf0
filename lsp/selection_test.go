package lsp

import (
	"strings"
	"testing"

	protocol "github.com/tliron/glsp/protocol_3_16"

	"github.com/wfc-lang/wfc/lang/source"
)

// TestSelectionRange: expanding the selection from a name inside an
// expression walks out through its sub-expressions, the entry, the with
// block, the node and the workflow to the file, each range holding the
// one before.
func TestSelectionRange(t *testing.T) {
	c := newTestClient(t, Options{}, nil)
	c.initialize()
	uri := "file:///sel.wf"
	src := "workflow w {\n  task a { run \"cel\"  with { n = 1 } }\n  task b after a {\n    run \"cel\"\n    with { m = a.output.n + 1  k = 2 }\n  }\n}\n"
	c.open(uri, src)
	c.diagnostics(uri, 1)
	var got []protocol.SelectionRange
	c.mustCall("textDocument/selectionRange", map[string]any{
		"textDocument": map[string]any{"uri": uri},
		"positions":    []protocol.Position{at(t, src, "output.n +", 0, 2), pos(0, 0)},
	}, &got)
	if len(got) != 2 {
		t.Fatalf("ranges = %+v", got)
	}
	m := NewMapper(source.NewFile("", []byte(src)))
	var texts []string
	var prev *protocol.Range
	for r := &got[0]; r != nil; r = r.Parent {
		br := m.ByteRange(r.Range)
		texts = append(texts, src[br.Start:br.End])
		if prev != nil {
			pb := m.ByteRange(*prev)
			if br.Start > pb.Start || br.End < pb.End {
				t.Errorf("%q does not hold %q", src[br.Start:br.End], src[pb.Start:pb.End])
			}
		}
		prev = &r.Range
	}
	for _, want := range []string{"output", "a.output.n", "a.output.n + 1", "m = a.output.n + 1", "with { m = a.output.n + 1  k = 2 }", "task b after a {", src} {
		found := false
		for _, x := range texts {
			if x == want || strings.HasPrefix(want, "task b") && strings.HasPrefix(x, want) && strings.HasSuffix(x, "}") {
				found = true
			}
		}
		if !found {
			t.Errorf("no range %q in %q", want, texts)
		}
	}
	if texts[len(texts)-1] != src {
		t.Errorf("outermost = %q, want the file", texts[len(texts)-1])
	}
}

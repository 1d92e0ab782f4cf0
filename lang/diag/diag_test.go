package diag

import (
	"bytes"
	"strings"
	"testing"

	"github.com/wfc-lang/wfc/lang/source"
)

func TestRegistryUnique(t *testing.T) {
	seen := map[Code]bool{}
	for _, c := range Codes() {
		if seen[c.Code] {
			t.Errorf("duplicate code %s", c.Code)
		}
		seen[c.Code] = true
		if c.Title == "" || c.Severity == 0 {
			t.Errorf("code %s lacks title or severity", c.Code)
		}
	}
}

func TestWriteText(t *testing.T) {
	f := source.NewFile("a.wf", []byte("workflow w {\n  task é after x {}\n}\n"))
	rp := &Reporter{File: f}
	off := strings.Index(string(f.Src), "x {")
	rp.Add(UnknownNode, source.Range{Start: off, End: off + 1}, "unknown node `x`").WithHint("did you mean `é`?")
	var b bytes.Buffer
	if err := WriteText(&b, rp.Diags.Sorted(), map[string]*source.File{"a.wf": f}); err != nil {
		t.Fatal(err)
	}
	want := "a.wf:2:17: error[WF1001]: unknown node `x`\n 2 |   task é after x {}\n   |                ^\n  = hint: did you mean `é`?\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestSortedDedup(t *testing.T) {
	f := source.NewFile("a.wf", []byte("abc\ndef"))
	rp := &Reporter{File: f}
	rp.Add(UnknownNode, source.Range{Start: 4, End: 5}, "m")
	rp.Add(SyntaxError, source.Range{Start: 0, End: 1}, "m")
	rp.Add(UnknownNode, source.Range{Start: 4, End: 5}, "m")
	got := rp.Diags.Sorted()
	if len(got) != 2 || got[0].Code != SyntaxError {
		t.Errorf("got %v", got)
	}
}

package diag

import (
	"bytes"
	"fmt"
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

// A Reporter shows the first MaxPerFile diagnostics, errors first, and one
// TooManyDiags counting the rest, those it did not even keep included; its
// severity is that of the most serious one left out.
func TestLimitReporterCap(t *testing.T) {
	f := source.NewFile("x.wf", []byte(strings.Repeat("x", 10_000)))
	for _, c := range []struct {
		name      string
		errors    int // reported after the warnings, at lower offsets
		warnings  int
		wantSev   Severity
		wantCount int
	}{
		{"none left out", 40, 60, 0, 0},
		{"errors left out", 5000, 10, Error, 4910},
		{"warnings left out", 10, 5000, Warning, 4910},
	} {
		rp := &Reporter{File: f}
		for i := range c.warnings {
			rp.Add(Unreachable, source.Range{Start: 5000 + i, End: 5001 + i}, "w").WithHint("h")
		}
		for i := range c.errors {
			rp.Add(BadChar, source.Range{Start: i, End: i + 1}, "e").WithRelated(source.Span{}, "r")
		}
		if len(rp.Diags) > maxKept {
			t.Errorf("%s: %d kept, want at most %d", c.name, len(rp.Diags), maxKept)
		}
		l := rp.List()
		if c.wantCount == 0 {
			if len(l) != c.errors+c.warnings {
				t.Errorf("%s: %d diagnostics, want %d", c.name, len(l), c.errors+c.warnings)
			}
			continue
		}
		if len(l) != MaxPerFile+1 {
			t.Fatalf("%s: %d diagnostics, want %d", c.name, len(l), MaxPerFile+1)
		}
		last := l[MaxPerFile]
		if last.Code != TooManyDiags || last.Severity != c.wantSev || !strings.Contains(last.Message, fmt.Sprintf(": %d more not shown", c.wantCount)) {
			t.Errorf("%s: last diagnostic %v (%v), want %s %v for %d more", c.name, last, last.Severity, TooManyDiags, c.wantSev, c.wantCount)
		}
		if last.Span.Start.Offset < l[MaxPerFile-1].Span.Start.Offset {
			t.Errorf("%s: %s at %d, before the last one shown", c.name, TooManyDiags, last.Span.Start.Offset)
		}
		// Errors are shown first, wherever they are.
		if n := l[:MaxPerFile].Count(Error); n != min(c.errors, MaxPerFile) {
			t.Errorf("%s: %d errors shown, want %d", c.name, n, min(c.errors, MaxPerFile))
		}
		// The totals stay exact: the TooManyDiags counts what it stands for.
		if e, w := l.Count(Error), l.Count(Warning); e != c.errors || w != c.warnings {
			t.Errorf("%s: counted %d errors and %d warnings, want %d and %d", c.name, e, w, c.errors, c.warnings)
		}
	}
}

package compiler

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/wfc-lang/wfc/ir"
)

// FuzzCompile runs the whole compiler on arbitrary input: it must never
// panic or hang; every diagnostic has a registered code and a span inside
// the file; a program without errors yields IR that validates and
// round-trips through its JSON encoding.
func FuzzCompile(f *testing.F) {
	for _, pat := range []string{"../testdata/golden/*/*.wf", "../testdata/golden/*/*/*.wf", "../examples/*.wf"} {
		files, _ := filepath.Glob(pat)
		for _, p := range files {
			if b, err := os.ReadFile(p); err == nil {
				f.Add(b)
			}
		}
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		res := Compile("fuzz.wf", src, Config{ReadFile: func(string) ([]byte, error) { return nil, os.ErrNotExist }})
		for _, d := range res.Diags {
			if !d.Code.Known() {
				t.Fatalf("unregistered code %q: %s", d.Code, d.Message)
			}
			if d.Span.File == "fuzz.wf" && d.Span.IsValid() && (d.Span.Start.Offset > len(src) || d.Span.End.Offset > len(src) || d.Span.Start.Offset > d.Span.End.Offset) {
				t.Fatalf("span %v outside the file (%d bytes): %s", d.Span, len(src), d.Message)
			}
		}
		if res.Diags.HasErrors() {
			if res.IR != nil {
				t.Fatal("IR returned despite errors")
			}
			return
		}
		if res.IR == nil {
			t.Fatal("no IR and no error")
		}
		if probs := ir.Validate(res.IR); len(probs) > 0 {
			t.Fatalf("compiled IR does not validate: %v", probs)
		}
		b, err := ir.Marshal(res.IR)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ir.Decode(b); err != nil {
			t.Fatalf("compiled IR does not decode: %v", err)
		}
	})
}

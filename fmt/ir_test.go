package format_test

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wfc-lang/wfc/compiler"
	format "github.com/wfc-lang/wfc/fmt"
	"github.com/wfc-lang/wfc/ir"
)

// TestIRUnchanged compiles every .wf file of testdata/golden and examples
// that compiles without errors, formats it, compiles the result under the
// same name (so imports and child flows resolve the same way) and checks
// that the IR is the same apart from source locations (ir.Canonical).
// Files that do not compile are compared by their diagnostics' codes.
func TestIRUnchanged(t *testing.T) {
	var files []string
	for _, root := range []string{"../testdata/golden", "../examples"} {
		filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(path, ".wf") {
				files = append(files, path)
			}
			return nil
		})
	}
	compiled := 0
	for _, name := range files {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		out, _, err := format.Source(name, src)
		if err != nil {
			continue // syntax errors: not formatted
		}
		before := compiler.Compile(name, src, compiler.Config{})
		after := compiler.Compile(name, out, compiler.Config{})
		if codes(before) != codes(after) {
			t.Errorf("%s: diagnostics changed:\n%s\nbecame\n%s", name, codes(before), codes(after))
			continue
		}
		if before.IR == nil || before.Diags.HasErrors() {
			continue
		}
		compiled++
		a, err := ir.Canonical(before.IR)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if after.IR == nil {
			t.Errorf("%s: the formatted file has no IR", name)
			continue
		}
		b, err := ir.Canonical(after.IR)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s: the IR changed:\n%s\nbecame\n%s", name, a, b)
		}
	}
	if compiled == 0 {
		t.Fatal("no file compiled")
	}
	t.Logf("%d files compiled to the same IR", compiled)
}

// codes lists the severity and code of each diagnostic, in order.
func codes(r *compiler.Result) string {
	var b strings.Builder
	for _, d := range r.Diags {
		b.WriteString(d.Severity.String() + " " + string(d.Code) + "\n")
	}
	return b.String()
}

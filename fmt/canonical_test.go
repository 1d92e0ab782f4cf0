package format

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The project's own workflows (examples, the benchmark's) are in canonical
// form: a reader copies them, and a change of the rules shows here first.
func TestOwnWorkflowsCanonical(t *testing.T) {
	n := 0
	for _, root := range []string{"../examples", "../runtime/bench/workflows"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".wf") {
				return err
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			out, diags, err := Source(path, src)
			if err != nil || diags.HasErrors() {
				t.Errorf("%s: %v %v", path, err, diags)
				return nil
			}
			n++
			if string(out) != string(src) {
				t.Errorf("%s is not in canonical form (wfc fmt -w %s):\n%s", path, path, Diff(path, src, out))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if n < 10 {
		t.Fatalf("only %d workflows found", n)
	}
}

package editorcheck

import (
	"os"
	"strings"
	"testing"
)

// TestHelixConfig checks that docs/editors.md shows editors/helix/languages.toml
// as it is, and that it starts `wfc lsp` for .wf files. Helix itself is not
// in Debian, so the file is not loaded by Helix here.
func TestHelixConfig(t *testing.T) {
	b, err := os.ReadFile("../helix/languages.toml")
	if err != nil {
		t.Fatal(err)
	}
	file := string(b)
	if doc := docBlock(t, "<!-- checked by editors/editorcheck/helix_test.go", "toml"); doc != file {
		t.Errorf("docs/editors.md's Helix block differs from editors/helix/languages.toml:\n--- docs\n%s--- file\n%s", doc, file)
	}
	for _, want := range []string{
		"[[language]]\nname = \"wf\"\n",
		"file-types = [\"wf\"]\n",
		"comment-tokens = [\"//\"]\n",
		"language-servers = [\"wfc\"]\n",
		"[language-server.wfc]\ncommand = \"wfc\"\nargs = [\"lsp\"]\n",
	} {
		if !strings.Contains(file, want) {
			t.Errorf("editors/helix/languages.toml has no %q", want)
		}
	}
}

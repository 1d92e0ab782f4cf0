package server

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// shBlocks returns the ```sh blocks of a Markdown document, in order.
func shBlocks(doc string) []string {
	var out []string
	var cur []string
	in := false
	for line := range strings.Lines(doc) {
		t := strings.TrimRight(line, "\n")
		switch {
		case !in && t == "```sh":
			in, cur = true, nil
		case in && t == "```":
			in = false
			out = append(out, strings.Join(cur, "\n"))
		case in:
			cur = append(cur, t)
		}
	}
	return out
}

// TestAPIDocExamples runs the curl examples of docs/api.md, in order, in
// one shell, against a server with a token: each block must succeed (the
// blocks check what they expect with test and jq -e).
func TestAPIDocExamples(t *testing.T) {
	for _, bin := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s is not on PATH", bin)
		}
	}
	data, err := os.ReadFile(filepath.Join("..", "docs", "api.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := shBlocks(string(data))
	if len(blocks) < 8 {
		t.Fatalf("docs/api.md has %d sh blocks", len(blocks))
	}
	tokens, err := LoadTokens("", "doc-admin-token-0123456789 doc admin", nil)
	if err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, backends[0], func(c *Config) { c.Tokens = tokens })
	var script strings.Builder
	script.WriteString("set -euo pipefail\n")
	for i, b := range blocks {
		script.WriteString("echo '### block " + string(rune('0'+i%10)) + "' >&2\n" + b + "\n")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "WFC_URL="+ts.http.URL, "WFC_TOKEN=doc-admin-token-0123456789")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the examples of docs/api.md failed: %v\n%s", err, out)
	}
}

package lsp

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	protocol "github.com/tliron/glsp/protocol_3_16"
)

// benchProject opens a project of files: lib.wf, a library of handlers,
// and files-1 workflows of about lines lines each that import it. It
// returns the client, the URIs of the library and of the workflows.
func benchProject(b *testing.B, opts Options, files, lines int) (*testClient, string, []string) {
	dir := b.TempDir()
	lib := "// rev 0\nhandler \"lib.svc\" {\n  config { x: int }\n  output { v: int }\n}\n"
	src := "import \"lib.wf\"\n" + genLines(lines)
	fs := map[string]string{"lib.wf": lib}
	for i := 1; i < files; i++ {
		fs[fmt.Sprintf("w%02d.wf", i)] = src
	}
	for name, text := range fs {
		if err := writeFile(filepath.Join(dir, name), text); err != nil {
			b.Fatal(err)
		}
	}
	c := newTestClient(b, opts, nil)
	c.initialize()
	libURI := pathToURI(filepath.Join(dir, "lib.wf"))
	c.open(libURI, lib)
	c.diagnostics(libURI, 1)
	var mains []string
	for i := 1; i < files; i++ {
		uri := pathToURI(filepath.Join(dir, fmt.Sprintf("w%02d.wf", i)))
		c.open(uri, src)
		mains = append(mains, uri)
	}
	for _, uri := range mains {
		c.diagnostics(uri, 1)
	}
	return c, libURI, mains
}

// BenchmarkProjectRecheck: in a project of 20 files (a library imported by
// 19 workflows of 200 lines, all open), from a one-character edit of the
// library to the re-published diagnostics of all 19 importers, with no
// debounce delay.
func BenchmarkProjectRecheck(b *testing.B) {
	c, lib, mains := benchProject(b, Options{Debounce: -1}, 20, 200)
	at := protocol.Position{Line: 0, Character: 7}
	l := newLatencies(b)
	for i := 0; i < b.N; i++ {
		before := make([]int, len(mains))
		for k, uri := range mains {
			before[k] = len(c.publishes(uri))
		}
		start := time.Now()
		c.changeRange(lib, i+2, protocol.Range{Start: at, End: protocol.Position{Line: 0, Character: 8}}, string(rune('1'+i%2)))
		for k, uri := range mains {
			c.waitPublishes(uri, before[k]+1)
		}
		l.add(time.Since(start))
	}
	l.report()
}

// BenchmarkProjectCompletion: in the same project, with 1,000-line
// workflows, completion in one of them right after each edit of the
// library, while the 19 importers are re-checked.
func BenchmarkProjectCompletion(b *testing.B) {
	c, lib, mains := benchProject(b, Options{}, 20, 1000)
	src := "import \"lib.wf\"\n" + genLines(1000)
	p := NewMapper(sourceFileOf(src)).Position(strings.LastIndex(src, ".output.") + len(".output."))
	at := protocol.Position{Line: 0, Character: 7}
	l := newLatencies(b)
	for i := 0; i < b.N; i++ {
		c.changeRange(lib, i+2, protocol.Range{Start: at, End: protocol.Position{Line: 0, Character: 8}}, string(rune('1'+i%2)))
		var list struct {
			Items []completionItem `json:"items"`
		}
		start := time.Now()
		c.mustCall("textDocument/completion", tdp(mains[i%len(mains)], p), &list)
		l.add(time.Since(start))
		if len(list.Items) == 0 {
			b.Fatal("no completion items")
		}
	}
	l.report()
}

// waitPublishes waits until uri has had at least n publishes.
func (c *testClient) waitPublishes(uri string, n int) {
	c.t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		c.mu.Lock()
		got := len(c.pubs[uri])
		ch := c.changed
		c.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			c.t.Fatalf("%s: %d publishes, want %d", uri, got, n)
		}
	}
}

func writeFile(path, text string) error { return os.WriteFile(path, []byte(text), 0o644) }

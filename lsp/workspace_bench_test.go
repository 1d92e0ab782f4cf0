package lsp

import (
	"encoding/json"
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
	src := projectSource(lines)
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
	src := projectSource(1000)
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

// projectSource is a workflow of about lines lines that imports lib.wf
// and runs its handler (so definition can cross files).
func projectSource(lines int) string {
	src := "import \"lib.wf\"\n" + genLines(lines)
	k := strings.LastIndex(src, "}")
	return src[:k] + "  task use_lib { run \"lib.svc\"  with { x = 1 } }\n" + src[k:]
}

// BenchmarkProjectRequests: the latency targets of the single-file
// benchmarks, in a project of 20 files (a library imported by 19 open
// workflows of 1,000 lines), on one of the workflows: diagnostics after a
// one-character change (no debounce), completion after an edit, hover and
// definition of a node, definition of the imported handler (in lib.wf),
// all code actions of the file (each fix checked by a compilation), and,
// new with this project, call hierarchy and workspace symbols.
func BenchmarkProjectRequests(b *testing.B) {
	c, _, mains := benchProject(b, Options{Debounce: -1}, 20, 1000)
	src := projectSource(1000)
	m := NewMapper(sourceFileOf(src))
	edit := m.Position(strings.Index(src, "deadline 72h") + len("deadline 7"))
	ref := strings.LastIndex(src, ".output.")
	for ref > 0 && isIdentByte(src[ref-1]) {
		ref--
	}
	nodeAt := m.Position(ref + 1)
	fieldsAt := m.Position(strings.LastIndex(src, ".output.") + len(".output."))
	handlerAt := m.Position(strings.Index(src, "\"lib.svc\"") + 2)
	version := map[string]int{}
	change := func(uri string) int {
		version[uri]++
		v := version[uri] + 1
		c.changeRange(uri, v, protocol.Range{Start: edit, End: protocol.Position{Line: edit.Line, Character: edit.Character + 1}}, string(rune('3'+v%2)))
		return v
	}
	// run times do; prep, when set, runs untimed before each do.
	run := func(name string, prep func(), do func(i int)) {
		b.Run(name, func(b *testing.B) {
			l := newLatencies(b)
			for i := 0; i < b.N; i++ {
				if prep != nil {
					prep()
				}
				start := time.Now()
				do(i)
				l.add(time.Since(start))
			}
			l.report()
		})
	}
	run("diagnostics", nil, func(int) {
		v := change(mains[0])
		c.diagnostics(mains[0], v)
	})
	run("completion", func() { change(mains[1]) }, func(int) {
		var list struct {
			Items []completionItem `json:"items"`
		}
		c.mustCall("textDocument/completion", tdp(mains[1], fieldsAt), &list)
		if len(list.Items) == 0 {
			b.Fatal("no completion items")
		}
	})
	for _, r := range []struct {
		name, method string
		at           protocol.Position
	}{
		{"hover", "textDocument/hover", nodeAt},
		{"definition", "textDocument/definition", nodeAt},
		{"definition-imported-handler", "textDocument/definition", handlerAt},
		{"call-hierarchy-prepare", "textDocument/prepareCallHierarchy", nodeAt},
	} {
		run(r.name, nil, func(int) {
			var res json.RawMessage
			c.mustCall(r.method, tdp(mains[2], r.at), &res)
			if len(res) < 10 {
				b.Fatalf("%s: no result", r.name)
			}
			if r.name == "definition-imported-handler" && !strings.Contains(string(res), "/lib.wf") {
				b.Fatalf("definition of the handler = %s", res)
			}
		})
	}
	var items []protocol.CallHierarchyItem
	c.mustCall("textDocument/prepareCallHierarchy", tdp(mains[2], nodeAt), &items)
	run("call-hierarchy-incoming", nil, func(int) {
		var calls []any
		c.mustCall("callHierarchy/incomingCalls", map[string]any{"item": items[0]}, &calls)
	})
	run("code-actions-file", nil, func(int) {
		var actions []any
		c.mustCall("textDocument/codeAction", map[string]any{
			"textDocument": map[string]any{"uri": mains[3]},
			"range":        protocol.Range{End: m.Position(len(src))},
			"context":      map[string]any{"diagnostics": []any{}},
		}, &actions)
	})
	// A quick fix at the cursor right after an edit: the fix is compiled
	// before it is offered (fixcheck.go), once per version.
	fixSrc := strings.Replace(src, "  task use_lib {", "  task fixme { run \"echo\"  with { s = use_lib.output.v } }\n  task use_lib {", 1)
	fixURI := strings.Replace(mains[0], "w01.wf", "fix.wf", 1)
	c.open(fixURI, fixSrc)
	c.diagnostics(fixURI, 1)
	fm := NewMapper(sourceFileOf(fixSrc))
	fixAt := fm.Position(strings.Index(fixSrc, "use_lib.output.v"))
	run("code-action-checked-fix", func() { change(fixURI) }, func(int) {
		var actions []map[string]any
		c.mustCall("textDocument/codeAction", map[string]any{
			"textDocument": map[string]any{"uri": fixURI},
			"range":        protocol.Range{Start: fixAt, End: fixAt},
			"context":      map[string]any{"diagnostics": []any{}},
		}, &actions)
		if len(actions) != 1 {
			b.Fatalf("code actions = %v, want the `after use_lib` fix", actions)
		}
	})
	run("workspace-symbols", nil, func(int) {
		var syms []any
		c.mustCall("workspace/symbol", map[string]any{"query": "n1"}, &syms)
		if len(syms) == 0 {
			b.Fatal("no symbols")
		}
	})
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

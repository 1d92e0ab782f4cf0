package lsp

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tliron/glsp"
	protocol "github.com/tliron/glsp/protocol_3_16"

	"github.com/wfc-lang/wfc/compiler"
	"github.com/wfc-lang/wfc/lang/source"
)

const greet = `workflow greet {
  input { name: string }

  task hello {
    run "cel"
    with { message = "Hello, " + input.name }
  }

  task shout after hello {
    run "cel"
    with { loud = hello.output.message.upperAscii() + "!" }
  }

  output { result = shout.output.loud }
}
`

func TestLifecycle(t *testing.T) {
	c := newTestClient(t, Options{}, nil)
	// Before initialize: ServerNotInitialized.
	if err := c.call("textDocument/hover", tdp("file:///x.wf", pos(0, 0)), nil); err == nil || err.Code != codeServerNotInitialized {
		t.Fatalf("hover before initialize: %v, want code %d", err, codeServerNotInitialized)
	}
	res := c.initialize()
	if res.ServerInfo == nil || res.ServerInfo.Name != "wfc" {
		t.Errorf("serverInfo = %+v", res.ServerInfo)
	}
	if err := c.call("initialize", map[string]any{"capabilities": map[string]any{}}, nil); err == nil || err.Code != codeInvalidRequest {
		t.Errorf("second initialize: %v", err)
	}
	if err := c.call("textDocument/unknownThing", map[string]any{}, nil); err == nil || err.Code != codeMethodNotFound {
		t.Errorf("unknown method: %v", err)
	}
	// Unknown notifications are ignored; the server still answers.
	c.notify("$/unknownNotification", map[string]any{"x": 1})
	c.notify("workspace/didChangeConfiguration", map[string]any{"settings": map[string]any{}})
	var hover *protocol.Hover
	c.mustCall("textDocument/hover", tdp("file:///never-opened.wf", pos(0, 0)), &hover)
	if hover != nil {
		t.Errorf("hover on a document that is not open = %+v, want null", hover)
	}
	if err := c.shutdown(); err != nil {
		t.Errorf("Serve after shutdown and exit = %v, want nil", err)
	}
}

func TestCapabilities(t *testing.T) {
	c := newTestClient(t, Options{}, nil)
	var raw map[string]any
	c.mustCall("initialize", map[string]any{"capabilities": map[string]any{}}, &raw)
	caps := raw["capabilities"].(map[string]any)
	for _, k := range []string{"textDocumentSync", "completionProvider", "hoverProvider", "definitionProvider", "referencesProvider",
		"renameProvider", "documentSymbolProvider", "documentFormattingProvider", "codeActionProvider", "semanticTokensProvider", "foldingRangeProvider", "signatureHelpProvider", "inlayHintProvider", "selectionRangeProvider"} {
		if caps[k] == nil {
			t.Errorf("capability %s missing", k)
		}
	}
	if sync := caps["textDocumentSync"].(map[string]any); sync["change"] != float64(2) || sync["openClose"] != true {
		t.Errorf("textDocumentSync = %v, want incremental with open/close", sync)
	}
	legend := caps["semanticTokensProvider"].(map[string]any)["legend"].(map[string]any)
	if len(legend["tokenTypes"].([]any)) != int(numTokenTypes) {
		t.Errorf("legend = %v", legend)
	}
}

func TestExitWithoutShutdown(t *testing.T) {
	c := newTestClient(t, Options{}, nil)
	c.initialize()
	c.notify("exit", nil)
	select {
	case err := <-c.done:
		c.done <- err
		if !errors.Is(err, ErrExitWithoutShutdown) {
			t.Errorf("Serve = %v, want ErrExitWithoutShutdown", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("server did not exit")
	}
}

func TestRequestsAfterShutdown(t *testing.T) {
	c := newTestClient(t, Options{}, nil)
	c.initialize()
	c.mustCall("shutdown", nil, nil)
	if err := c.call("textDocument/hover", tdp("file:///x.wf", pos(0, 0)), nil); err == nil || err.Code != codeInvalidRequest {
		t.Errorf("request after shutdown: %v", err)
	}
}

// TestPanicBecomesError injects a panicking handler: the request gets an
// internal error and the server keeps answering.
func TestPanicBecomesError(t *testing.T) {
	c := newTestClient(t, Options{}, func(s *server) {
		s.handler.TextDocumentHover = func(*glsp.Context, *protocol.HoverParams) (*protocol.Hover, error) {
			var m map[string]int
			m["boom"]++
			return nil, nil
		}
	})
	c.initialize()
	c.open("file:///p.wf", greet)
	err := c.call("textDocument/hover", tdp("file:///p.wf", pos(0, 0)), nil)
	if err == nil || err.Code != codeInternalError || !strings.Contains(err.Message, "assignment to entry in nil map") {
		t.Fatalf("panicking hover = %v, want an internal error", err)
	}
	var syms []protocol.DocumentSymbol
	c.mustCall("textDocument/documentSymbol", map[string]any{"textDocument": map[string]any{"uri": "file:///p.wf"}}, &syms)
	if len(syms) != 1 {
		t.Errorf("server did not survive: symbols = %v", syms)
	}
}

func TestMalformedMessages(t *testing.T) {
	c := newTestClient(t, Options{}, nil)
	c.initialize()
	// A body that is not JSON: a parse error response with id null.
	c.st.mu.Lock()
	_, _ = c.st.w.Write([]byte("Content-Length: 9\r\n\r\n{not json"))
	c.st.mu.Unlock()
	// Params of the wrong shape: invalid params.
	if err := c.call("textDocument/hover", []int{1, 2}, nil); err == nil || err.Code != codeInvalidParams {
		t.Errorf("bad params: %v", err)
	}
	var syms []protocol.DocumentSymbol
	c.mustCall("textDocument/documentSymbol", map[string]any{"textDocument": map[string]any{"uri": "file:///none.wf"}}, &syms)
}

// TestDiagnosticsLikeCheck: the published diagnostics are the compiler's,
// compiled as `wfc check` compiles: same codes, messages, ranges, related
// locations.
func TestDiagnosticsLikeCheck(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "bad.wf")
	src := "workflow w {\n  input { name: string }\n  task a { run \"cell\" }\n  task a { run \"noop\" }\n  task b after c { run \"noop\"  with { x = input.nam } }\n}\n"
	os.WriteFile(path, []byte(src), 0o644)
	uri := pathToURI(path)
	c := newTestClient(t, Options{}, nil)
	c.initialize()
	c.open(uri, src)
	got := c.diagnostics(uri, 1)
	want := compiler.Compile(path, []byte(src), compiler.Config{NoOptimize: true}).Diags
	if len(got) != len(want) || len(want) < 3 {
		t.Fatalf("got %d diagnostics, want %d (%v)", len(got), len(want), want)
	}
	f := source.NewFile(path, []byte(src))
	m := NewMapper(f)
	for i, w := range want {
		g := got[i]
		if g.Code != string(w.Code) {
			t.Errorf("diag %d code = %v, want %s", i, g.Code, w.Code)
		}
		if g.Source != "wfc" {
			t.Errorf("diag %d source = %v", i, g.Source)
		}
		if !strings.HasPrefix(g.Message, w.Message) || (w.Hint != "" && !strings.Contains(g.Message, w.Hint)) {
			t.Errorf("diag %d message = %q, want %q + hint %q", i, g.Message, w.Message, w.Hint)
		}
		if r := m.Range(source.Range{Start: w.Span.Start.Offset, End: w.Span.End.Offset}); r != g.Range {
			t.Errorf("diag %d range = %s, want %s", i, fmtRange(g.Range), fmtRange(r))
		}
		if g.Severity != int(w.Severity) {
			t.Errorf("diag %d severity = %v, want %v", i, g.Severity, w.Severity)
		}
		if len(g.RelatedInformation) != len(w.Related) {
			t.Errorf("diag %d related = %v, want %v", i, g.RelatedInformation, w.Related)
		}
		for _, r := range g.RelatedInformation {
			if r.Location.URI != uri {
				t.Errorf("related location %s, want %s", r.Location.URI, uri)
			}
		}
	}
}

func TestDiagnosticsNonASCII(t *testing.T) {
	// The error is after an emoji and CJK text on the same line: its
	// character offset counts UTF-16 units.
	src := "workflow w {\n  task a { description \"日本😀\" run \"nope\" }\n}\n"
	c := newTestClient(t, Options{}, nil)
	c.initialize()
	c.open("file:///u.wf", src)
	diags := c.diagnostics("file:///u.wf", 1)
	var found bool
	for _, d := range diags {
		if d.Code == "WF1003" {
			found = true
			col := strings.Index(strings.Split(src, "\n")[1], `"nope"`)
			line := strings.Split(src, "\n")[1]
			want := uint32(utf16Len([]byte(line[:col])))
			if d.Range.Start.Line != 1 || d.Range.Start.Character != want || d.Range.End.Character != want+6 {
				t.Errorf("range %s, want 1:%d-1:%d", fmtRange(d.Range), want, want+6)
			}
		}
	}
	if !found {
		t.Fatalf("no WF1003 in %v", diags)
	}
}

// TestIncrementalSync applies range edits around non-BMP text and checks the
// server's text and its diagnostics follow.
func TestIncrementalSync(t *testing.T) {
	uri := "file:///inc.wf"
	src := "workflow w {\n  task a { description \"😀é\" run \"noop\" }\n}\n"
	c := newTestClient(t, Options{}, nil)
	c.initialize()
	c.open(uri, src)
	if d := c.diagnostics(uri, 1); len(d) != 0 {
		t.Fatalf("unexpected diagnostics %v", d)
	}
	// Replace "noop" (after 😀é: UTF-16 column = 2+len(`  task a { description "`)+... ) with "nope".
	line := strings.Split(src, "\n")[1]
	k := strings.Index(line, "noop")
	col := uint32(utf16Len([]byte(line[:k])))
	c.changeRange(uri, 2, protocol.Range{Start: pos(1, col), End: pos(1, col+4)}, "nope")
	d := c.diagnostics(uri, 2)
	if len(d) != 1 || d[0].Code != "WF1003" {
		t.Fatalf("after edit: %v", d)
	}
	// Insert text before the emoji, then delete across the emoji.
	e := uint32(utf16Len([]byte(line[:strings.Index(line, "😀")])))
	c.changeRange(uri, 3, protocol.Range{Start: pos(1, e), End: pos(1, e)}, "日本")
	c.changeRange(uri, 4, protocol.Range{Start: pos(1, e+2), End: pos(1, e+4)}, "") // the emoji
	c.diagnostics(uri, 4)
	want := strings.Replace(strings.Replace(src, "noop", "nope", 1), "😀", "日本", 1)
	if got := string(c.srv.docs.get(uri).latest().src()); got != want {
		t.Errorf("text after edits:\n%q\nwant\n%q", got, want)
	}
	// Several changes in one notification, applied in order.
	c.notify("textDocument/didChange", map[string]any{
		"textDocument": map[string]any{"uri": uri, "version": 5},
		"contentChanges": []any{
			map[string]any{"range": protocol.Range{Start: pos(0, 9), End: pos(0, 10)}, "text": "flow_one"},
			map[string]any{"range": protocol.Range{Start: pos(0, 0), End: pos(0, 0)}, "text": "// x\n"},
		},
	})
	c.diagnostics(uri, 5)
	if got := string(c.srv.docs.get(uri).latest().src()); !strings.HasPrefix(got, "// x\nworkflow flow_one {\n") {
		t.Errorf("text after multi-change: %q", got)
	}
}

// TestStaleDiagnosticsDropped sends a burst of changes: the versions of the
// published diagnostics never go back, and the last is the last version.
func TestStaleDiagnosticsDropped(t *testing.T) {
	uri := "file:///burst.wf"
	c := newTestClient(t, Options{Debounce: -1}, nil) // no debounce: every change compiles
	c.initialize()
	c.open(uri, greet)
	c.diagnostics(uri, 1)
	const n = 60
	for v := 2; v <= n; v++ {
		text := greet
		if v%2 == 0 {
			text = strings.Replace(greet, `run "cel"`, `run "cell"`, 1)
		}
		c.changeFull(uri, v, text)
	}
	d := c.diagnostics(uri, n)
	if len(d) != 1 {
		t.Errorf("last version has %d diagnostics, want 1", len(d))
	}
	last := -1
	for _, p := range c.publishes(uri) {
		v := int(*p.Version)
		if v < last {
			t.Fatalf("diagnostics of version %d published after version %d", v, last)
		}
		last = v
	}
}

// TestPublishDropsOldSnapshot: a publisher holding an older snapshot than
// the one already published sends nothing.
func TestPublishDropsOldSnapshot(t *testing.T) {
	c := newTestClient(t, Options{Debounce: time.Hour}, nil) // changes never publish on their own
	c.initialize()
	uri := "file:///old.wf"
	c.open(uri, greet)
	c.diagnostics(uri, 1)
	d := c.srv.docs.get(uri)
	old := d.latest()
	c.changeFull(uri, 2, greet+"\n")
	c.mustCall("textDocument/documentSymbol", map[string]any{"textDocument": map[string]any{"uri": uri}}, nil) // the change is applied
	c.srv.publish(d)                                                                                           // publishes version 2
	c.diagnostics(uri, 2)
	n := len(c.publishes(uri))
	d.mu.Lock()
	d.snap = old // as if a timer for version 1 fired late
	d.mu.Unlock()
	c.srv.publish(d)
	time.Sleep(20 * time.Millisecond)
	if got := len(c.publishes(uri)); got != n {
		t.Errorf("an older snapshot was published after a newer one")
	}
}

func TestCloseClearsDiagnostics(t *testing.T) {
	c := newTestClient(t, Options{}, nil)
	c.initialize()
	uri := "file:///close.wf"
	c.open(uri, "workflow w { task a { run \"nope\" } }")
	if len(c.diagnostics(uri, 1)) == 0 {
		t.Fatal("no diagnostics")
	}
	c.notify("textDocument/didClose", map[string]any{"textDocument": map[string]any{"uri": uri}})
	c.mustCall("textDocument/documentSymbol", map[string]any{"textDocument": map[string]any{"uri": uri}}, nil)
	pubs := c.publishes(uri)
	if last := pubs[len(pubs)-1]; len(last.Diagnostics) != 0 {
		t.Errorf("after close: %v", last)
	}
	// Requests on the closed document answer empty.
	var hover json.RawMessage
	c.mustCall("textDocument/hover", tdp(uri, pos(0, 0)), &hover)
	if string(hover) != "null" {
		t.Errorf("hover on closed document = %s", hover)
	}
	// A change to a closed document is an error in the log, not a crash.
	c.changeFull(uri, 2, "x")
	c.mustCall("textDocument/documentSymbol", map[string]any{"textDocument": map[string]any{"uri": uri}}, nil)
}

// TestImportFromOpenDocument: an import that is open in the editor is read
// from its unsaved text.
func TestImportFromOpenDocument(t *testing.T) {
	dir := t.TempDir()
	lib := filepath.Join(dir, "lib.wf")
	main := filepath.Join(dir, "main.wf")
	os.WriteFile(lib, []byte(`handler "old" { output { v: int } }`), 0o644)
	c := newTestClient(t, Options{}, nil)
	c.initialize()
	c.open(pathToURI(lib), `handler "fresh" { output { v: int } }`)
	c.open(pathToURI(main), "import \"lib.wf\"\nworkflow w { task a { run \"fresh\" } }\n")
	if d := c.diagnostics(pathToURI(main), 1); len(d) != 0 {
		t.Errorf("diagnostics: %v", d)
	}
}

func TestURIs(t *testing.T) {
	for uri, path := range map[string]string{
		"file:///home/u/a%20b.wf": "/home/u/a b.wf",
		"file:///tmp/x.wf":        "/tmp/x.wf",
		"untitled:Untitled-1":     "untitled:Untitled-1",
	} {
		if got := uriToPath(uri); got != filepath.FromSlash(path) {
			t.Errorf("uriToPath(%s) = %s, want %s", uri, got, path)
		}
	}
	if got := pathToURI("/home/u/a b.wf"); got != "file:///home/u/a%20b.wf" {
		t.Errorf("pathToURI = %s", got)
	}
}

// TestRefreshOnWatchedFiles: when an imported file changes on disk, the
// importer's diagnostics are published again.
func TestRefreshOnWatchedFiles(t *testing.T) {
	dir := t.TempDir()
	lib := filepath.Join(dir, "lib.wf")
	main := filepath.Join(dir, "main.wf")
	os.WriteFile(lib, []byte(`handler "old" { output { v: int } }`), 0o644)
	c := newTestClient(t, Options{}, nil)
	c.initialize()
	uri := pathToURI(main)
	c.open(uri, "import \"lib.wf\"\nworkflow w { task a { run \"fresh\" } }\n")
	if d := c.diagnostics(uri, 1); len(d) != 1 {
		t.Fatalf("diagnostics: %v", d)
	}
	n := len(c.publishes(uri))
	os.WriteFile(lib, []byte(`handler "fresh" { output { v: int } }`), 0o644)
	c.notify("workspace/didChangeWatchedFiles", map[string]any{"changes": []any{map[string]any{"uri": pathToURI(lib), "type": 2}}})
	deadline := time.Now().Add(10 * time.Second)
	for {
		pubs := c.publishes(uri)
		if len(pubs) > n && len(pubs[len(pubs)-1].Diagnostics) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no fresh diagnostics after the import changed: %+v", pubs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestVersionsOutOfOrder: a client that sends a lower version number still
// gets its edits applied in order and diagnostics for its last change.
func TestVersionsOutOfOrder(t *testing.T) {
	c := newTestClient(t, Options{}, nil)
	c.initialize()
	uri := "file:///ooo.wf"
	c.open(uri, greet)
	c.diagnostics(uri, 1)
	c.changeFull(uri, 5, strings.Replace(greet, `run "cel"`, `run "cell"`, 1))
	c.changeFull(uri, 3, greet)
	if d := c.diagnostics(uri, 3); len(d) != 0 {
		t.Errorf("diagnostics of the last change: %v", d)
	}
	if got := string(c.srv.docs.get(uri).latest().src()); got != greet {
		t.Errorf("text = %q", got)
	}
}

// TestClientProcessGone: the server exits when the editor process named by
// Options.ClientProcessID (or initialize's processId) is gone.
func TestClientProcessGone(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip("no `true` command")
	}
	c := newTestClient(t, Options{ClientProcessID: cmd.Process.Pid}, nil)
	c.initialize()
	select {
	case err := <-c.done:
		c.done <- err
		if !errors.Is(err, errClientGone) {
			t.Errorf("Serve = %v, want errClientGone", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("server did not notice that the client process is gone")
	}
}

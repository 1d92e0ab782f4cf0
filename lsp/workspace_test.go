package lsp

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	protocol "github.com/tliron/glsp/protocol_3_16"
)

// waitDiags waits for a publish of uri whose diagnostics satisfy ok, and
// returns them.
func (c *testClient) waitDiags(uri string, ok func([]testDiagnostic) bool) []testDiagnostic {
	c.t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		c.mu.Lock()
		pubs := c.pubs[uri]
		ch := c.changed
		c.mu.Unlock()
		if n := len(pubs); n > 0 && ok(pubs[n-1].Diagnostics) {
			return pubs[n-1].Diagnostics
		}
		select {
		case <-ch:
		case <-deadline:
			var last []testDiagnostic
			if n := len(pubs); n > 0 {
				last = pubs[n-1].Diagnostics
			}
			c.t.Fatalf("no fitting diagnostics for %s (got %d publishes, last %+v)", uri, len(pubs), last)
			return nil
		}
	}
}

func hasCode(code string) func([]testDiagnostic) bool {
	return func(ds []testDiagnostic) bool {
		for _, d := range ds {
			if d.Code == code {
				return true
			}
		}
		return false
	}
}

func noDiags(ds []testDiagnostic) bool { return len(ds) == 0 }

// project writes files into a new directory and returns it.
func project(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, src := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const (
	libSrc  = "handler \"svc\" {\n  config { x: int }\n  output { v: int }\n}\n"
	mainSrc = "import \"lib.wf\"\nworkflow w {\n  task a { run \"svc\"  with { x = 1 } }\n}\n"
)

// A file with handlers and no workflow is a library: the editor shows no
// WF0009 for it (an empty file still gets one).
func TestWorkspaceLibraryNoWorkflowDiagnostic(t *testing.T) {
	dir := project(t, map[string]string{"lib.wf": libSrc})
	c := newTestClient(t, Options{}, nil)
	c.initialize()
	lib := pathToURI(filepath.Join(dir, "lib.wf"))
	c.open(lib, libSrc)
	if ds := c.diagnostics(lib, 1); len(ds) != 0 {
		t.Errorf("library diagnostics = %+v, want none", ds)
	}
	only := pathToURI(filepath.Join(dir, "imports.wf"))
	c.open(only, "import \"lib.wf\"\n")
	if ds := c.diagnostics(only, 1); len(ds) != 0 {
		t.Errorf("imports-only library diagnostics = %+v, want none", ds)
	}
	empty := pathToURI(filepath.Join(dir, "empty.wf"))
	c.open(empty, "// nothing\n")
	if ds := c.diagnostics(empty, 1); !hasCode("WF0009")(ds) {
		t.Errorf("empty file diagnostics = %+v, want WF0009", ds)
	}
	// A library's own errors are still reported.
	bad := pathToURI(filepath.Join(dir, "bad.wf"))
	c.open(bad, "handler \"h\" { config { x: nosuchtype } }\n")
	if ds := c.diagnostics(bad, 1); len(ds) == 0 || hasCode("WF0009")(ds) {
		t.Errorf("bad library diagnostics = %+v, want its type error only", ds)
	}
}

// Editing an imported file that is open re-checks the open files that
// import it, against the edited (unsaved) text; closing it re-checks them
// against the disk.
func TestWorkspaceRecheckImporters(t *testing.T) {
	dir := project(t, map[string]string{"lib.wf": libSrc, "main.wf": mainSrc})
	c := newTestClient(t, Options{}, nil)
	c.initialize()
	lib, main := pathToURI(filepath.Join(dir, "lib.wf")), pathToURI(filepath.Join(dir, "main.wf"))
	c.open(main, mainSrc)
	if ds := c.diagnostics(main, 1); len(ds) != 0 {
		t.Fatalf("main diagnostics = %+v, want none", ds)
	}
	c.open(lib, libSrc)
	c.diagnostics(lib, 1)
	// The handler's config changes type: main's `x = 1` is now wrong.
	c.changeFull(lib, 2, strings.Replace(libSrc, "x: int", "x: string", 1))
	c.waitDiags(main, hasCode("WF2006"))
	c.changeFull(lib, 3, libSrc)
	c.waitDiags(main, noDiags)
	// Renamed in the editor: unknown handler in main.
	c.changeFull(lib, 4, strings.Replace(libSrc, `"svc"`, `"svc2"`, 1))
	c.waitDiags(main, hasCode("WF1003"))
	// Closed without saving: main compiles against the disk again.
	c.notify("textDocument/didClose", map[string]any{"textDocument": map[string]any{"uri": lib}})
	c.waitDiags(main, noDiags)
}

// A transitive import counts: main imports mid, which imports lib.
func TestWorkspaceRecheckTransitive(t *testing.T) {
	mid := "import \"lib.wf\"\n"
	dir := project(t, map[string]string{"lib.wf": libSrc, "mid.wf": mid, "main.wf": strings.Replace(mainSrc, "lib.wf", "mid.wf", 1)})
	c := newTestClient(t, Options{}, nil)
	c.initialize()
	lib, main := pathToURI(filepath.Join(dir, "lib.wf")), pathToURI(filepath.Join(dir, "main.wf"))
	c.open(main, strings.Replace(mainSrc, "lib.wf", "mid.wf", 1))
	if ds := c.diagnostics(main, 1); len(ds) != 0 {
		t.Fatalf("main diagnostics = %+v, want none", ds)
	}
	c.open(lib, libSrc)
	c.changeFull(lib, 2, strings.Replace(libSrc, "x: int", "x: string", 1))
	c.waitDiags(main, hasCode("WF2006"))
}

// The server asks for save notifications and, when the client can
// register one, for a watcher of **/*.wf; a file changed on disk re-checks
// the documents that read it.
func TestWorkspaceWatchedFiles(t *testing.T) {
	dir := project(t, map[string]string{"lib.wf": libSrc, "main.wf": mainSrc})
	c := newTestClient(t, Options{}, nil)
	var raw json.RawMessage
	c.mustCall("initialize", map[string]any{
		"processId": nil, "rootUri": nil,
		"capabilities": map[string]any{"workspace": map[string]any{"didChangeWatchedFiles": map[string]any{"dynamicRegistration": true}}},
	}, &raw)
	var init struct {
		Capabilities struct {
			TextDocumentSync struct {
				Save json.RawMessage `json:"save"`
			} `json:"textDocumentSync"`
		} `json:"capabilities"`
	}
	if err := json.Unmarshal(raw, &init); err != nil {
		t.Fatal(err)
	}
	if s := string(init.Capabilities.TextDocumentSync.Save); s == "" || s == "false" || s == "null" {
		t.Errorf("textDocumentSync.save = %q, want save notifications", s)
	}
	c.notify("initialized", map[string]any{})
	main := pathToURI(filepath.Join(dir, "main.wf"))
	c.open(main, mainSrc)
	if ds := c.diagnostics(main, 1); len(ds) != 0 {
		t.Fatalf("main diagnostics = %+v, want none", ds)
	}
	c.mu.Lock()
	var reg *message
	for i := range c.notes {
		if c.notes[i].Method == "client/registerCapability" {
			reg = &c.notes[i]
		}
	}
	c.mu.Unlock()
	if reg == nil || len(reg.ID) == 0 || !strings.Contains(string(reg.Params), `"workspace/didChangeWatchedFiles"`) || !strings.Contains(string(reg.Params), `**/*.wf`) {
		t.Fatalf("no watcher registration request; got %+v", reg)
	}
	c.st.write(map[string]any{"jsonrpc": "2.0", "id": reg.ID, "result": nil}) // the client's answer is dropped

	os.WriteFile(filepath.Join(dir, "lib.wf"), []byte(strings.Replace(libSrc, "x: int", "x: string", 1)), 0o644)
	c.notify("workspace/didChangeWatchedFiles", map[string]any{"changes": []any{map[string]any{"uri": pathToURI(filepath.Join(dir, "lib.wf")), "type": protocol.FileChangeTypeChanged}}})
	c.waitDiags(main, hasCode("WF2006"))
	// A file the import needs appears: deleted, then created again.
	os.Remove(filepath.Join(dir, "lib.wf"))
	c.notify("workspace/didChangeWatchedFiles", map[string]any{"changes": []any{map[string]any{"uri": pathToURI(filepath.Join(dir, "lib.wf")), "type": protocol.FileChangeTypeDeleted}}})
	c.waitDiags(main, hasCode("WF1011"))
	os.WriteFile(filepath.Join(dir, "lib.wf"), []byte(libSrc), 0o644)
	c.notify("workspace/didChangeWatchedFiles", map[string]any{"changes": []any{map[string]any{"uri": pathToURI(filepath.Join(dir, "lib.wf")), "type": protocol.FileChangeTypeCreated}}})
	c.waitDiags(main, noDiags)
}

// Without dynamic registration the server sends no request.
func TestWorkspaceNoWatcherWithoutDynamicRegistration(t *testing.T) {
	c := newTestClient(t, Options{}, nil)
	c.initialize()
	uri := "file:///x.wf"
	c.open(uri, "workflow w { task a { run \"noop\" } }\n")
	c.diagnostics(uri, 1)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.notes {
		if n.Method == "client/registerCapability" {
			t.Errorf("registration sent to a client that cannot register: %s", n.Params)
		}
	}
}

const flowSrc = "import \"lib.wf\"\nworkflow w {\n  flow f { uses \"sub/child.wf\"  with { n = 1 } }\n}\n"
const childSrc = "workflow c {\n  input { n: int, label?: string }\n  task t { run \"noop\" }\n}\n"

// Import and uses paths are links to their files, and go to definition on
// one opens the file.
func TestWorkspaceDocumentLinks(t *testing.T) {
	dir := project(t, map[string]string{"lib.wf": libSrc, "sub/child.wf": childSrc, "main.wf": flowSrc})
	c := newTestClient(t, Options{}, nil)
	res := c.initialize()
	if res.Capabilities.DocumentLinkProvider == nil {
		t.Errorf("documentLinkProvider not advertised")
	}
	main := pathToURI(filepath.Join(dir, "main.wf"))
	c.open(main, flowSrc)
	var links []protocol.DocumentLink
	c.mustCall("textDocument/documentLink", map[string]any{"textDocument": map[string]any{"uri": main}}, &links)
	want := map[string]string{
		pathToURI(filepath.Join(dir, "lib.wf")):       fmtRange(protocol.Range{Start: pos(0, 8), End: pos(0, 14)}),
		pathToURI(filepath.Join(dir, "sub/child.wf")): fmtRange(protocol.Range{Start: pos(2, 17), End: pos(2, 29)}),
	}
	if len(links) != len(want) {
		t.Fatalf("links = %+v, want %v", links, want)
	}
	for _, l := range links {
		if l.Target == nil || want[*l.Target] != fmtRange(l.Range) {
			t.Errorf("link %v → %v; want %v", fmtRange(l.Range), l.Target, want)
		}
	}
	locs := locations(t, c, "textDocument/definition", main, at(t, flowSrc, "child.wf", 0, 2), nil)
	if len(locs) != 1 || locs[0].URI != pathToURI(filepath.Join(dir, "sub/child.wf")) {
		t.Errorf("definition on a uses path = %+v", locs)
	}
	locs = locations(t, c, "textDocument/definition", main, at(t, flowSrc, "lib.wf", 0, 0), nil)
	if len(locs) != 1 || locs[0].URI != pathToURI(filepath.Join(dir, "lib.wf")) {
		t.Errorf("definition on an import path = %+v", locs)
	}
}

// In the path of an import or a uses, completion offers the .wf files and
// the directories of the directory typed so far.
func TestWorkspacePathCompletion(t *testing.T) {
	dir := project(t, map[string]string{"lib.wf": libSrc, "notes.txt": "x", ".hidden.wf": "", "sub/child.wf": childSrc, "sub/other.wf": childSrc})
	c := newTestClient(t, Options{}, nil)
	c.initialize()
	cases := []struct {
		src     string
		trigger string
		want    []string
	}{
		{"import \"|\"\n", "\"", []string{"lib.wf", "sub/"}},
		{"import \"l|\n", "", []string{"lib.wf"}},
		{"import \"sub/|\"\n", "/", []string{"child.wf", "other.wf"}},
		{"import \"sub/ch|\"\n", "", []string{"child.wf"}},
		{"workflow w {\n  flow f { uses \"sub/|\" }\n}\n", "/", []string{"child.wf", "other.wf"}},
		{"workflow w {\n  flow f {\n    uses \"|\"\n  }\n}\n", "\"", []string{"lib.wf", "sub/"}},
		{"workflow w {\n  task a { run \"noop\"  when 4 /| }\n}\n", "/", nil},
	}
	for i, tc := range cases {
		text, p := marked(t, tc.src)
		uri := pathToURI(filepath.Join(dir, "m"+strings.Repeat("x", i)+".wf"))
		c.open(uri, text)
		params := tdp(uri, p)
		if tc.trigger != "" {
			params["context"] = map[string]any{"triggerKind": 2, "triggerCharacter": tc.trigger}
		}
		var list protocol.CompletionList
		c.mustCall("textDocument/completion", params, &list)
		var got []string
		for _, it := range list.Items {
			got = append(got, it.Label)
		}
		slices.Sort(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%q: completion = %v, want %v", tc.src, got, tc.want)
		}
	}
}

// References of a handler declared in a library reach its declaration and
// its uses in every open file that imports it.
func TestWorkspaceHandlerReferences(t *testing.T) {
	main2 := "import \"lib.wf\"\nworkflow v {\n  task a { run \"svc\"  with { x = 1 } }\n  task b { run \"svc\"  with { x = 2 } }\n}\n"
	other := "handler \"svc\" { }\nworkflow o {\n  task a { run \"svc\" }\n}\n" // its own svc: not a reference
	dir := project(t, map[string]string{"lib.wf": libSrc, "main.wf": mainSrc, "main2.wf": main2, "other.wf": other})
	c := newTestClient(t, Options{}, nil)
	c.initialize()
	uri := func(n string) string { return pathToURI(filepath.Join(dir, n)) }
	for n, src := range map[string]string{"lib.wf": libSrc, "main.wf": mainSrc, "main2.wf": main2, "other.wf": other} {
		c.open(uri(n), src)
		c.diagnostics(uri(n), 1)
	}
	str := func(locs []protocol.Location) []string {
		var out []string
		for _, l := range locs {
			out = append(out, strings.TrimPrefix(l.URI, pathToURI(dir)+"/")+" "+fmtRange(l.Range))
		}
		slices.Sort(out)
		return out
	}
	want := []string{"lib.wf 0:8-0:13", "main.wf 2:15-2:20", "main2.wf 2:15-2:20", "main2.wf 3:15-3:20"}
	ctx := map[string]any{"context": map[string]any{"includeDeclaration": true}}
	if got := str(locations(t, c, "textDocument/references", uri("lib.wf"), pos(0, 10), ctx)); !slices.Equal(got, want) {
		t.Errorf("references from the declaration = %v, want %v", got, want)
	}
	if got := str(locations(t, c, "textDocument/references", uri("main.wf"), pos(2, 16), ctx)); !slices.Equal(got, want) {
		t.Errorf("references from a use = %v, want %v", got, want)
	}
}

// Go to definition into an open import uses its text in the editor, even
// when it is not saved.
func TestWorkspaceDefinitionUnsavedImport(t *testing.T) {
	dir := project(t, map[string]string{"lib.wf": libSrc, "main.wf": mainSrc})
	c := newTestClient(t, Options{}, nil)
	c.initialize()
	lib, main := pathToURI(filepath.Join(dir, "lib.wf")), pathToURI(filepath.Join(dir, "main.wf"))
	c.open(main, mainSrc)
	c.diagnostics(main, 1)
	c.open(lib, libSrc)
	c.diagnostics(lib, 1)
	c.changeFull(lib, 2, "// moved\n// down\n"+libSrc)
	c.diagnostics(lib, 2)
	deadline := time.Now().Add(20 * time.Second)
	for {
		locs := locations(t, c, "textDocument/definition", main, at(t, mainSrc, `"svc"`, 0, 1), nil)
		if len(locs) == 1 && locs[0].URI == lib && locs[0].Range.Start == pos(2, 8) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("definition = %+v, want %s at 2:8", locs, lib)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Workspace symbols cover the open documents and the files they read.
func TestWorkspaceSymbols(t *testing.T) {
	dir := project(t, map[string]string{"lib.wf": libSrc, "sub/child.wf": childSrc, "main.wf": flowSrc})
	c := newTestClient(t, Options{}, nil)
	res := c.initialize()
	if res.Capabilities.WorkspaceSymbolProvider != true {
		t.Errorf("workspaceSymbolProvider = %v", res.Capabilities.WorkspaceSymbolProvider)
	}
	main := pathToURI(filepath.Join(dir, "main.wf"))
	c.open(main, flowSrc)
	c.diagnostics(main, 1)
	ask := func(q string) []string {
		var syms []protocol.SymbolInformation
		c.mustCall("workspace/symbol", map[string]any{"query": q}, &syms)
		var out []string
		for _, s := range syms {
			out = append(out, s.Name+" "+strings.TrimPrefix(s.Location.URI, pathToURI(dir)+"/")+" "+fmtRange(s.Location.Range))
		}
		return out
	}
	want := []string{"c sub/child.wf 0:9-0:10", "f main.wf 2:7-2:8", "svc lib.wf 0:8-0:13", "t sub/child.wf 2:7-2:8", "w main.wf 1:9-1:10"}
	if got := ask(""); !slices.Equal(got, want) {
		t.Errorf("all symbols = %v, want %v", got, want)
	}
	if got := ask("SV"); !slices.Equal(got, want[2:3]) {
		t.Errorf("symbols for SV = %v, want %v", got, want[2:3])
	}
}

// In a flow's with block, completion offers the child workflow's inputs.
func TestWorkspaceFlowWithCompletesChildInputs(t *testing.T) {
	dir := project(t, map[string]string{"sub/child.wf": childSrc})
	c := newTestClient(t, Options{}, nil)
	c.initialize()
	cases := []struct {
		src  string
		want []string
	}{
		{"workflow w {\n  flow f { uses \"sub/child.wf\"  with { | } }\n}\n", []string{"label", "n"}},
		{"workflow w {\n  flow f { uses \"sub/child.wf\"  with { n = 1  | } }\n}\n", []string{"label"}},
		{"workflow w {\n  flow f {\n    uses \"sub/child.wf\"\n    with {\n      label = \"x\"\n      |\n    }\n  }\n}\n", []string{"n"}},
	}
	for i, tc := range cases {
		text, p := marked(t, tc.src)
		uri := pathToURI(filepath.Join(dir, "f"+strings.Repeat("x", i)+".wf"))
		c.open(uri, text)
		c.diagnostics(uri, 1)
		var list protocol.CompletionList
		c.mustCall("textDocument/completion", tdp(uri, p), &list)
		var got []string
		for _, it := range list.Items {
			got = append(got, it.Label)
		}
		slices.Sort(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%q: completion = %v, want %v", tc.src, got, tc.want)
		}
	}
}

// Editing a child workflow re-checks the open workflows that run it.
func TestWorkspaceRecheckFlowParents(t *testing.T) {
	parent := "workflow w {\n  flow f { uses \"sub/child.wf\"  with { n = 1 } }\n}\n"
	dir := project(t, map[string]string{"sub/child.wf": childSrc, "main.wf": parent})
	c := newTestClient(t, Options{}, nil)
	c.initialize()
	child, main := pathToURI(filepath.Join(dir, "sub/child.wf")), pathToURI(filepath.Join(dir, "main.wf"))
	c.open(main, parent)
	if ds := c.diagnostics(main, 1); len(ds) != 0 {
		t.Fatalf("parent diagnostics = %+v, want none", ds)
	}
	c.open(child, childSrc)
	c.changeFull(child, 2, strings.Replace(childSrc, "n: int", "n: string", 1))
	c.waitDiags(main, hasCode("WF2006"))
}

// Renaming a handler renames its declaration and its uses in every file of
// the workspace that sees that declaration, open or not.
func TestWorkspaceRenameHandler(t *testing.T) {
	main2 := "import \"lib.wf\"\nworkflow v {\n  task a { run \"svc\"  with { x = 1 } }\n}\n"
	deep := "import \"../lib.wf\"\nworkflow d {\n  task a { run \"svc\"  with { x = 1 }  compensate { run \"svc\"  with { x = 2 } } }\n}\n"
	other := "handler \"svc\" { }\nworkflow o {\n  task a { run \"svc\" }\n}\n" // its own svc
	dir := project(t, map[string]string{"lib.wf": libSrc, "main.wf": mainSrc, "main2.wf": main2, "sub/deep.wf": deep, "other.wf": other, ".git/x.wf": deep})
	c := newTestClient(t, Options{}, nil)
	c.mustCall("initialize", map[string]any{"processId": nil, "rootUri": pathToURI(dir), "capabilities": map[string]any{}}, nil)
	c.notify("initialized", map[string]any{})
	main := pathToURI(filepath.Join(dir, "main.wf"))
	c.open(main, mainSrc)
	c.diagnostics(main, 1)
	use := at(t, mainSrc, `"svc"`, 0, 2)
	var prep protocol.RangeWithPlaceholder
	c.mustCall("textDocument/prepareRename", tdp(main, use), &prep)
	if prep.Placeholder != "svc" || fmtRange(prep.Range) != "2:16-2:19" {
		t.Errorf("prepareRename = %+v", prep)
	}
	var edit protocol.WorkspaceEdit
	params := tdp(main, use)
	params["newName"] = "svc.v2"
	c.mustCall("textDocument/rename", params, &edit)
	var got []string
	for uri, edits := range edit.Changes {
		for _, e := range edits {
			got = append(got, strings.TrimPrefix(uri, pathToURI(dir)+"/")+" "+fmtRange(e.Range)+" "+e.NewText)
		}
	}
	slices.Sort(got)
	want := []string{
		`lib.wf 0:8-0:13 "svc.v2"`,
		`main.wf 2:15-2:20 "svc.v2"`,
		`main2.wf 2:15-2:20 "svc.v2"`,
		`sub/deep.wf 2:15-2:20 "svc.v2"`,
		`sub/deep.wf 2:55-2:60 "svc.v2"`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("rename edits:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, bad := range []string{"noop", "", `a"b`} {
		params["newName"] = bad
		if err := c.call("textDocument/rename", params, nil); err == nil {
			t.Errorf("rename to %q: no error", bad)
		}
	}
	// A file that runs it and does not parse: refused.
	os.WriteFile(filepath.Join(dir, "broken.wf"), []byte("import \"lib.wf\"\nworkflow b {\n  task a { run \"svc\" \n"), 0o644)
	params["newName"] = "svc2"
	if err := c.call("textDocument/rename", params, nil); err == nil || !strings.Contains(err.Message, "broken.wf") {
		t.Errorf("rename with a broken file: %v", err)
	}
}

// Completing in the middle of a path replaces the whole file name.
func TestWorkspacePathCompletionReplacesName(t *testing.T) {
	dir := project(t, map[string]string{"lib.wf": libSrc})
	c := newTestClient(t, Options{}, nil)
	c.initialize()
	text, p := marked(t, "import \"li|b.w\"\n")
	uri := pathToURI(filepath.Join(dir, "m.wf"))
	c.open(uri, text)
	var list protocol.CompletionList
	c.mustCall("textDocument/completion", tdp(uri, p), &list)
	if len(list.Items) != 1 {
		t.Fatalf("items = %+v", list.Items)
	}
	raw, _ := json.Marshal(list.Items[0].TextEdit)
	var te protocol.TextEdit
	json.Unmarshal(raw, &te)
	if te.NewText != "lib.wf" || fmtRange(te.Range) != "0:8-0:13" {
		t.Errorf("edit = %s", raw)
	}
}

// TestWorkspaceDuplicateWatchEvents: a client that watches files itself as
// well as through the server's registration sends each event twice; the
// re-checks they cause within the debounce are one compilation, one
// publish.
func TestWorkspaceDuplicateWatchEvents(t *testing.T) {
	dir := project(t, map[string]string{"lib.wf": libSrc, "main.wf": mainSrc})
	c := newTestClient(t, Options{Debounce: 300 * time.Millisecond}, nil)
	c.initialize()
	main := pathToURI(filepath.Join(dir, "main.wf"))
	c.open(main, mainSrc)
	c.diagnostics(main, 1)
	before := len(c.publishes(main))
	os.WriteFile(filepath.Join(dir, "lib.wf"), []byte(strings.Replace(libSrc, "x: int", "x: string", 1)), 0o644)
	event := map[string]any{"changes": []any{map[string]any{"uri": pathToURI(filepath.Join(dir, "lib.wf")), "type": protocol.FileChangeTypeChanged}}}
	c.notify("workspace/didChangeWatchedFiles", event)
	c.notify("workspace/didChangeWatchedFiles", event)
	c.waitDiags(main, hasCode("WF2006"))
	time.Sleep(600 * time.Millisecond) // a second publish would come by now
	if n := len(c.publishes(main)) - before; n != 1 {
		t.Errorf("%d publishes after two identical events, want 1", n)
	}
}

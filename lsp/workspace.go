package lsp

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	protocol "github.com/tliron/glsp/protocol_3_16"

	"github.com/wfc-lang/wfc/compiler"
	"github.com/wfc-lang/wfc/lang"
	"github.com/wfc-lang/wfc/lang/ast"
	"github.com/wfc-lang/wfc/lang/diag"
	"github.com/wfc-lang/wfc/lang/source"
)

// The workspace: how open documents relate to the files they import or run
// as child flows. The server keeps no index of its own that could go stale:
// a document's dependencies are read, when needed, from its latest syntax
// tree (the import and uses paths it names, whether they exist or not) and
// from the files its latest compilation read (res.Files: imports of
// imports, children's imports).

// isLibrary reports whether f is a library: a file with handler
// declarations or imports and no workflow, meant to be imported. The
// language (§3.3) requires a workflow in a file that is compiled on its
// own, so `wfc check lib.wf` reports WF0009; in the editor a library is
// opened to be edited, and "no workflow declared" on it is noise.
func isLibrary(f *ast.File) bool {
	if f == nil {
		return false
	}
	lib := false
	for _, it := range f.Items {
		switch it.(type) {
		case *ast.Workflow:
			return false
		case *ast.Handler, *ast.Import:
			lib = true
		}
	}
	return lib
}

// suppressed reports whether the diagnostic d is not shown in the editor
// for a file with syntax tree f.
func suppressed(f *ast.File, d diag.Diagnostic) bool {
	return d.Code == diag.NoWorkflow && isLibrary(f)
}

// A fileRef is a path string of a document that names another file: the
// path of an `import` or of a flow's `uses`.
type fileRef struct {
	str  *ast.String
	path string // resolved against the document's directory
	uses bool
}

// fileRefs lists the import and uses paths of f, a file named name.
// Templates are not paths (the compiler refuses them).
func fileRefs(name string, f *ast.File) []fileRef {
	if f == nil {
		return nil
	}
	var out []fileRef
	add := func(s *ast.String, uses bool) {
		if s == nil || s.Template != nil || s.Value == "" {
			return
		}
		out = append(out, fileRef{str: s, path: resolvePath(name, s.Value), uses: uses})
	}
	for _, it := range f.Items {
		switch it := it.(type) {
		case *ast.Import:
			add(it.Path, false)
		case *ast.Workflow:
			for _, wi := range it.Items {
				n, ok := wi.(*ast.NodeDecl)
				if !ok || n.Kind == nil || n.Kind.Name != "flow" {
					continue
				}
				for _, ni := range n.Items {
					if st, ok := ni.(*ast.Setting); ok && st.Key != nil && st.Key.Name == "uses" && st.Value != nil && st.Value.Str != nil {
						add(st.Value.Str, true)
					}
				}
			}
		}
	}
	return out
}

// resolvePath resolves path as the compiler does: relative to the directory
// of the file from (compiler.Config.resolve).
func resolvePath(from, path string) string {
	if filepath.IsAbs(path) || from == "" || from == "-" {
		return filepath.Clean(path)
	}
	return filepath.Join(filepath.Dir(from), path)
}

// dependsOn reports whether document d reads the file at path (clean):
// its last compilation did (an import, an import of an import, a child
// flow, its imports) or named it without reading it (it did not exist).
// A newer text, not compiled yet, counts when it contains the file's base
// name: a cheap test, run on every keystroke for every open document,
// that errs only on the side of an extra re-check.
func (d *document) dependsOn(path string) bool {
	d.mu.Lock()
	snap, old, closed := d.snap, d.compiled, d.closed
	d.mu.Unlock()
	if snap == nil || closed || filepath.Clean(snap.name) == path {
		return false
	}
	if old != nil && old.deps()[path] {
		return true
	}
	return snap != old && bytes.Contains(snap.src(), []byte(filepath.Base(path)))
}

// deps returns the files a compiled snapshot reads or names (clean paths),
// computed once.
func (s *snapshot) deps() map[string]bool {
	s.depsOnce.Do(func() {
		res := s.result()
		s.depSet = make(map[string]bool, len(res.Files)+4)
		for _, r := range fileRefs(s.name, res.AST) {
			s.depSet[r.path] = true
		}
		for name := range res.Files {
			s.depSet[filepath.Clean(name)] = true
		}
	})
	return s.depSet
}

// openDocs returns the open documents.
func (s *server) openDocs() []*document {
	s.docs.mu.Lock()
	defer s.docs.mu.Unlock()
	out := make([]*document, 0, len(s.docs.docs))
	for _, d := range s.docs.docs {
		out = append(out, d)
	}
	return out
}

// recheck compiles the latest text of each document again (a new snapshot
// of the same text and version) and publishes its diagnostics: a file it
// reads has changed.
func (s *server) recheck(docs []*document) {
	for _, d := range docs {
		d.mu.Lock()
		old := d.snap
		if old == nil || d.closed {
			d.mu.Unlock()
			continue
		}
		d.snap = newSnapshot(old.uri, old.version, s.docs.nextSeq(), old.src(), s.compilerConfig(), s.log)
		d.mu.Unlock()
		s.schedule(d, s.opts.Debounce)
	}
}

// recheckDependants re-checks the open documents, other than the one at
// uri, that read the file at uri: its text in the editor (or on disk, after
// it was closed) is what they compile against.
func (s *server) recheckDependants(uri string) {
	path := filepath.Clean(uriToPath(uri))
	var deps []*document
	for _, d := range s.openDocs() {
		if d.uri != uri && d.dependsOn(path) {
			deps = append(deps, d)
		}
	}
	if len(deps) > 0 {
		s.log.Debug("re-checking dependants", "uri", uri, "count", len(deps))
		s.recheck(deps)
	}
}

// filesChanged handles workspace/didChangeWatchedFiles: files changed on
// disk. Open documents that read one of them are re-checked; when a file
// was created or deleted, so are those with an import or flow that could
// not be read (it may be one an import of an import names). A checkout
// changes thousands of files at once: each document is tested against the
// set of them, not once per file.
func (s *server) filesChanged(events []protocol.FileEvent) {
	changed := make(map[string]bool, len(events))
	created := false
	for _, e := range events {
		changed[filepath.Clean(uriToPath(e.URI))] = true
		created = created || e.Type != protocol.FileChangeTypeChanged
	}
	var deps []*document
	for _, d := range s.openDocs() {
		if d.readsAny(changed) || created && d.importFailed() {
			deps = append(deps, d)
		}
	}
	s.recheck(deps)
}

// readsAny reports whether d reads one of the files in paths, like
// dependsOn; a document whose latest text is not compiled yet counts (its
// compilation is pending anyway).
func (d *document) readsAny(paths map[string]bool) bool {
	d.mu.Lock()
	snap, old, closed := d.snap, d.compiled, d.closed
	d.mu.Unlock()
	if snap == nil || closed {
		return false
	}
	if snap != old {
		return true
	}
	for p := range old.deps() {
		if paths[p] && p != filepath.Clean(snap.name) {
			return true
		}
	}
	return false
}

// importFailed reports whether the latest compiled snapshot of d has an
// import or child flow that could not be read or compiled (WF1011).
func (d *document) importFailed() bool {
	d.mu.Lock()
	old := d.compiled
	d.mu.Unlock()
	if old == nil {
		return true
	}
	for _, dg := range old.result().Diags {
		if dg.Code == diag.ImportError {
			return true
		}
	}
	return false
}

// watchID is the id of the server's client/registerCapability request, and
// of the registration it asks for.
const watchID = "wfc-watch-wf-files"

// registerWatcher asks the client to watch **/*.wf on disk and send
// workspace/didChangeWatchedFiles, so that a file changed outside the
// editor (git checkout, another editor) re-checks the documents that import
// it. The client's answer is not waited for: the server reads responses
// and drops them.
func (s *server) registerWatcher() {
	kind := protocol.WatchKindCreate | protocol.WatchKindChange | protocol.WatchKindDelete
	params := protocol.RegistrationParams{Registrations: []protocol.Registration{{
		ID:     watchID,
		Method: string(protocol.MethodWorkspaceDidChangeWatchedFiles),
		RegisterOptions: protocol.DidChangeWatchedFilesRegistrationOptions{
			Watchers: []protocol.FileSystemWatcher{{GlobPattern: "**/*.wf", Kind: &kind}},
		},
	}}}
	msg := struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
		Params  any             `json:"params"`
	}{"2.0", json.RawMessage(`"` + watchID + `"`), string(protocol.ServerClientRegisterCapability), params}
	if err := s.out.write(msg); err != nil {
		s.log.Debug("cannot register the file watcher", "err", err)
	}
}

// pathRange is the range of a path string without its quotes.
func pathRange(str *ast.String) source.Range {
	r := str.Range
	if strings.HasPrefix(str.Raw, `"`) && r.Len() > 0 {
		r.Start++
		if len(str.Raw) >= 2 && strings.HasSuffix(str.Raw, `"`) {
			r.End--
		}
	}
	return r
}

// documentLinks links the path of each import and flow `uses` to its file.
// A document that is not a file (untitled:) has no directory to resolve
// them against, and no links.
func (s *server) documentLinks(p *protocol.DocumentLinkParams) ([]protocol.DocumentLink, error) {
	snap := s.snapshotFor(p.TextDocument.URI)
	if snap == nil || !filepath.IsAbs(snap.name) {
		return nil, nil
	}
	out := []protocol.DocumentLink{}
	for _, r := range fileRefs(snap.name, snap.ast()) {
		target := pathToURI(r.path)
		tip := "import " + r.str.Value
		if r.uses {
			tip = "child workflow " + r.str.Value
		}
		out = append(out, protocol.DocumentLink{Range: snap.m.Range(pathRange(r.str)), Target: &target, Tooltip: &tip})
	}
	return out, nil
}

// pathDefinition answers go to definition on the path of an import or a
// flow's `uses`: the start of that file. ok is false elsewhere.
func (s *server) pathDefinition(uri string, pos protocol.Position) ([]protocol.Location, bool) {
	snap := s.snapshotFor(uri)
	if snap == nil || !filepath.IsAbs(snap.name) {
		return nil, false
	}
	off := snap.m.Offset(pos)
	for _, r := range fileRefs(snap.name, snap.ast()) {
		if r.str.Range.Contains(off) || r.str.Range.End == off {
			return []protocol.Location{{URI: pathToURI(r.path)}}, true
		}
	}
	return nil, false
}

// pathPrefix matches the text of a line up to the cursor when the cursor is
// in the path string of an import or a flow's uses.
var pathPrefix = regexp.MustCompile(`(?:^|[\s{;])(?:import|uses)\s+"([^"\\{}]*)$`)

// maxPathItems bounds the directory entries path completion reads: a
// directory of a million files must not stall the editor.
const maxPathItems = 1000

// pathCompletion completes the path of an import or a flow's uses: the
// .wf files and the directories in the directory typed so far, relative to
// the document. ok is false when the cursor is not in such a path.
func pathCompletion(snap *snapshot, off int) (items []protocol.CompletionItem, ok bool) {
	src := snap.src()
	if off < 0 || off > len(src) {
		return nil, false
	}
	ls := bytes.LastIndexByte(src[:off], '\n') + 1
	m := pathPrefix.FindSubmatch(src[ls:off])
	if m == nil {
		return nil, false
	}
	items = []protocol.CompletionItem{}
	if !filepath.IsAbs(snap.name) {
		return items, true // untitled: no directory to look in
	}
	typed := string(m[1])
	dirPart, prefix := "", typed
	if k := strings.LastIndex(typed, "/"); k >= 0 {
		dirPart, prefix = typed[:k+1], typed[k+1:]
	}
	dir := filepath.Dir(snap.name)
	if dirPart != "" {
		dir = resolvePath(snap.name, dirPart)
	}
	f, err := os.Open(dir)
	if err != nil {
		return items, true
	}
	entries, _ := f.ReadDir(maxPathItems)
	f.Close()
	end := off // the rest of the name after the cursor is replaced too
	for end < len(src) && !strings.ContainsRune("\"/\\\n{", rune(src[end])) {
		end++
	}
	replace := snap.m.Range(source.Range{Start: off - len(prefix), End: end})
	self := filepath.Clean(snap.name)
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") && !strings.HasPrefix(prefix, ".") || !strings.HasPrefix(name, prefix) {
			continue
		}
		isDir := e.IsDir()
		if e.Type()&fs.ModeSymlink != 0 {
			if fi, err := os.Stat(filepath.Join(dir, name)); err == nil {
				isDir = fi.IsDir()
			}
		}
		kind, label, order := protocol.CompletionItemKindFile, name, "0"
		switch {
		case isDir:
			kind, label, order = protocol.CompletionItemKindFolder, name+"/", "1"
		case !strings.HasSuffix(name, ".wf") || filepath.Join(dir, name) == self:
			continue
		}
		k, sortText := kind, order+label
		items = append(items, protocol.CompletionItem{
			Label: label, Kind: &k, SortText: &sortText,
			TextEdit: protocol.TextEdit{Range: replace, NewText: label},
		})
	}
	return items, true
}

// handlerRefsElsewhere extends the references of a handler beyond the
// document: its declaration when another file declares it, and its uses in
// the other open documents that see the same declaration (they import its
// file, or are it). Files that are not open are not searched.
func (s *server) handlerRefsElsewhere(snap *snapshot, res *compiler.Result, sym symbol, withDecl bool) []protocol.Location {
	if sym.kind != compiler.RefHandler {
		return nil
	}
	h := res.Info.Handlers[sym.name]
	if h == nil || h.Decl == nil {
		return nil // built in: every file may run it; not a cross-file name
	}
	declFile := h.File
	if declFile == "" {
		declFile = snap.name
	}
	declFile = filepath.Clean(declFile)
	var out []protocol.Location
	if withDecl && declFile != filepath.Clean(snap.name) {
		if uri, m := locate(snap, res, h.File); m != nil {
			out = append(out, protocol.Location{URI: uri, Range: m.Range(h.Decl.Name.Range)})
		}
	}
	for _, d := range s.openDocs() {
		if d.uri == snap.uri {
			continue
		}
		d.mu.Lock()
		other := d.compiled
		d.mu.Unlock()
		if other == nil {
			continue
		}
		ores := other.result()
		oh := ores.Info.Handlers[sym.name]
		if oh == nil || oh.Decl == nil {
			continue
		}
		if f := oh.File; f == "" && filepath.Clean(other.name) != declFile || f != "" && filepath.Clean(f) != declFile {
			continue
		}
		for _, r := range ores.Info.Refs {
			if r.Kind == compiler.RefHandler && r.Name == sym.name {
				out = append(out, protocol.Location{URI: other.uri, Range: other.m.Range(r.Range)})
			}
		}
	}
	return out
}

// maxWorkspaceSymbols bounds an answer to workspace/symbol.
const maxWorkspaceSymbols = 1000

// workspaceSymbols lists the workflows, nodes and handlers of the open
// documents and of the files they read (imports, child flows, and theirs)
// whose names match the query (its letters in order, ignoring case).
func (s *server) workspaceSymbols(p *protocol.WorkspaceSymbolParams) ([]protocol.SymbolInformation, error) {
	query := strings.ToLower(p.Query)
	out := []protocol.SymbolInformation{}
	seen := map[string]bool{}
	add := func(uri string, m *Mapper, f *ast.File) {
		for _, si := range fileSymbols(uri, m, f) {
			if len(out) < maxWorkspaceSymbols && fuzzyMatch(strings.ToLower(si.Name), query) {
				out = append(out, si)
			}
		}
	}
	docs := s.openDocs()
	var others []*source.File
	for _, d := range docs {
		snap := d.latest()
		if snap == nil {
			continue
		}
		seen[filepath.Clean(snap.name)] = true
		add(snap.uri, snap.m, snap.ast())
		d.mu.Lock()
		old := d.compiled
		d.mu.Unlock()
		if old != nil {
			for _, f := range old.result().Files {
				others = append(others, f)
			}
		}
	}
	for _, f := range others {
		name := filepath.Clean(f.Name)
		if seen[name] {
			continue
		}
		seen[name] = true
		parsed, _ := lang.ParseFile(f)
		add(pathToURI(f.Name), NewMapper(f), parsed)
	}
	slices.SortFunc(out, func(a, b protocol.SymbolInformation) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return strings.Compare(a.Location.URI, b.Location.URI)
	})
	return out, nil
}

// fileSymbols lists the workflow, its nodes and the handlers of a file.
func fileSymbols(uri string, m *Mapper, f *ast.File) []protocol.SymbolInformation {
	if f == nil {
		return nil
	}
	var out []protocol.SymbolInformation
	sym := func(name string, kind protocol.SymbolKind, r source.Range, container string) {
		si := protocol.SymbolInformation{Name: name, Kind: kind, Location: protocol.Location{URI: uri, Range: m.Range(r)}}
		if container != "" {
			si.ContainerName = &container
		}
		out = append(out, si)
	}
	handler := func(h *ast.Handler, container string) {
		if h.Name != nil && h.Name.Value != "" {
			sym(h.Name.Value, protocol.SymbolKindInterface, h.Name.Range, container)
		}
	}
	for _, it := range f.Items {
		switch it := it.(type) {
		case *ast.Handler:
			handler(it, "")
		case *ast.Workflow:
			if it.Name == nil {
				continue
			}
			wf := it.Name.Name
			sym(wf, protocol.SymbolKindModule, it.Name.Range, "")
			for _, wi := range it.Items {
				switch wi := wi.(type) {
				case *ast.NodeDecl:
					if wi.Name != nil && wi.Kind != nil {
						sym(wi.Name.Name, nodeSymbolKind(wi.Kind.Name), wi.Name.Range, wf)
					}
				case *ast.Handler:
					handler(wi, wf)
				}
			}
		}
	}
	return out
}

// fuzzyMatch reports whether the letters of query appear in name in order.
func fuzzyMatch(name, query string) bool {
	for _, r := range query {
		k := strings.IndexRune(name, r)
		if k < 0 {
			return false
		}
		name = name[k+len(string(r)):]
	}
	return true
}

// completeChildInputs offers, in the with block of a flow node, the inputs
// of its child workflow not set yet (compiler.NodeInfo.ChildInputs, from
// the latest compilation). It reports whether the node is a flow: its with
// block sets inputs, not a handler's config.
func (c *cursor) completeChildInputs(id string) bool {
	if kind, _ := c.nodeScope(); kind != "flow" {
		return false
	}
	ni := c.info.Nodes[id]
	if ni == nil || ni.Kind != "flow" || ni.ChildInputs == nil {
		return true // the child does not compile (yet): nothing known
	}
	set := map[string]bool{}
	fr := c.frames[len(c.frames)-1]
	for i := fr.start; i+1 < len(c.toks); i++ {
		if c.toks[i].kind == lWord && c.toks[i+1].text == "=" {
			set[c.toks[i].text] = true
		}
	}
	for _, f := range ni.ChildInputs.Fields {
		if set[f.Name] {
			continue
		}
		detail := "required " + f.Type.String()
		if f.Optional {
			detail = "optional " + f.Type.String()
		}
		c.add(f.Name, protocol.CompletionItemKindField, detail, "input of the child workflow of flow `"+id+"`", "0")
	}
	return true
}

package lsp

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	protocol "github.com/tliron/glsp/protocol_3_16"

	"github.com/wfc-lang/wfc/compiler"
	"github.com/wfc-lang/wfc/lang/diag"
	"github.com/wfc-lang/wfc/lang/source"
)

// Renaming a handler is a workspace operation: other files run it by name.
// The server renames its declaration and its uses in every file that sees
// that declaration: the open documents and the .wf files under the
// workspace folders (those whose text names the handler are compiled to
// find out). A file it could not check would be left running the old name,
// so the rename is refused when one of them has syntax errors.

// maxRenameFiles bounds the .wf files a handler rename reads from the
// workspace folders.
const maxRenameFiles = 5000

// handlerAt returns the handler symbol at pos of the document, if any.
func (s *server) handlerAt(uri string, pos protocol.Position) (*snapshot, *compiler.Result, symbol, bool) {
	snap, res, sym, ok := s.symbolUnder(uri, pos)
	if !ok || sym.kind != compiler.RefHandler {
		return nil, nil, symbol{}, false
	}
	return snap, res, sym, true
}

// prepareRenameHandler answers prepareRename on a handler name; ok is false
// when the cursor is not on one (the in-file rename answers then).
func (s *server) prepareRenameHandler(p *protocol.PrepareRenameParams) (any, bool, error) {
	snap, res, sym, ok := s.handlerAt(p.TextDocument.URI, p.Position)
	if !ok {
		return nil, false, nil
	}
	h := res.Info.Handlers[sym.name]
	if h == nil || h.Decl == nil {
		return nil, true, fmt.Errorf("%q is built in and cannot be renamed", sym.name)
	}
	r := sym.at
	if r.Len() >= 2 && snap.src()[r.Start] == '"' {
		r = source.Range{Start: r.Start + 1, End: r.End - 1}
	}
	return protocol.RangeWithPlaceholder{Range: snap.m.Range(r), Placeholder: sym.name}, true, nil
}

// renameHandler answers rename on a handler name; ok is false when the
// cursor is not on one.
func (s *server) renameHandler(p *protocol.RenameParams) (*protocol.WorkspaceEdit, bool, error) {
	snap, res, sym, ok := s.handlerAt(p.TextDocument.URI, p.Position)
	if !ok {
		return nil, false, nil
	}
	edit, err := s.renameHandlerTo(snap, res, sym.name, p.NewName)
	return edit, true, err
}

func validHandlerName(name string) error {
	switch {
	case name == "":
		return errors.New("a handler name must not be empty")
	case strings.ContainsAny(name, "\"\\\n\r\t") || strings.Contains(name, "{{"):
		return fmt.Errorf("%q cannot be a handler name here: no quotes, backslashes, line breaks or {{", name)
	case compiler.Builtins()[name] != nil:
		return fmt.Errorf("%q is a built-in handler", name)
	}
	return nil
}

func (s *server) renameHandlerTo(snap *snapshot, res *compiler.Result, old, name string) (*protocol.WorkspaceEdit, error) {
	h := res.Info.Handlers[old]
	if h == nil || h.Decl == nil {
		return nil, fmt.Errorf("%q is built in and cannot be renamed", old)
	}
	if err := validHandlerName(name); err != nil {
		return nil, err
	}
	if name == old {
		return &protocol.WorkspaceEdit{Changes: map[string][]protocol.TextEdit{}}, nil
	}
	declFile := h.File
	if declFile == "" {
		declFile = snap.name
	}
	declFile = filepath.Clean(declFile)
	quoted := `"` + name + `"`
	changes := map[string][]protocol.TextEdit{}
	seen := map[source.Range]map[string]bool{}
	add := func(uri string, m *Mapper, r source.Range) {
		if seen[r] == nil {
			seen[r] = map[string]bool{}
		}
		if seen[r][uri] {
			return
		}
		seen[r][uri] = true
		changes[uri] = append(changes[uri], protocol.TextEdit{Range: m.Range(r), NewText: quoted})
	}
	cfg := s.compilerConfig()
	check := func(path string, f *source.File, uri string) error {
		if !bytes.Contains(f.Src, []byte(`"`+old+`"`)) {
			return nil
		}
		r := compiler.CompileFile(f, cfg)
		for _, d := range r.Diags {
			if d.Severity == diag.Error && (strings.HasPrefix(string(d.Code), "WF0") && d.Code != diag.NoWorkflow || d.Code == diag.ExprSyntax) && (d.Span.File == path || d.Span.File == "") {
				return fmt.Errorf("%s has syntax errors; fix them first, or uses of %q in the broken parts would be missed", path, old)
			}
		}
		oh := r.Info.Handlers[old]
		if oh == nil || oh.Decl == nil {
			return nil
		}
		of := oh.File
		if of == "" {
			of = path
		}
		if filepath.Clean(of) != declFile {
			return nil // another handler of the same name
		}
		if other := r.Info.Handlers[name]; other != nil {
			return fmt.Errorf("handler %q already exists in %s", name, path)
		}
		m := NewMapper(f)
		if filepath.Clean(path) == declFile {
			add(uri, m, oh.Decl.Name.Range)
		}
		for _, ref := range r.Info.Refs {
			if ref.Kind == compiler.RefHandler && ref.Name == old {
				add(uri, m, ref.Range)
			}
		}
		return nil
	}
	done := map[string]bool{}
	for _, d := range s.openDocs() {
		ds := d.latest()
		if ds == nil {
			continue
		}
		done[filepath.Clean(ds.name)] = true
		if err := check(ds.name, ds.file, ds.uri); err != nil {
			return nil, err
		}
	}
	for _, path := range s.workspaceFiles(append([]string{filepath.Dir(declFile)}, s.roots...)) {
		if done[path] {
			continue
		}
		done[path] = true
		src, err := compiler.ReadFile(path)
		if err != nil {
			continue
		}
		if err := check(path, source.NewFile(path, src), pathToURI(path)); err != nil {
			return nil, err
		}
	}
	if !done[declFile] {
		// The declaring file is outside the folders searched: rename
		// its declaration all the same.
		if src, err := compiler.ReadFile(declFile); err == nil {
			if err := check(declFile, source.NewFile(declFile, src), pathToURI(declFile)); err != nil {
				return nil, err
			}
		}
	}
	return &protocol.WorkspaceEdit{Changes: changes}, nil
}

// workspaceFiles lists the .wf files under dirs (at most maxRenameFiles),
// skipping hidden directories and node_modules.
func (s *server) workspaceFiles(dirs []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, dir := range dirs {
		if dir == "" || !filepath.IsAbs(dir) || seen[dir] {
			continue
		}
		seen[dir] = true
		_ = filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if len(out) >= maxRenameFiles {
				return filepath.SkipAll
			}
			if e.IsDir() {
				if path != dir && (strings.HasPrefix(e.Name(), ".") || e.Name() == "node_modules") {
					return filepath.SkipDir
				}
				return nil
			}
			if strings.HasSuffix(e.Name(), ".wf") && e.Type().IsRegular() && !seen[path] {
				seen[path] = true
				out = append(out, filepath.Clean(path))
			}
			return nil
		})
	}
	return out
}

// rootsOf returns the workspace folders of initialize as paths.
func rootsOf(p *protocol.InitializeParams) []string {
	var out []string
	for _, f := range p.WorkspaceFolders {
		out = append(out, uriToPath(f.URI))
	}
	if len(out) == 0 && p.RootURI != nil && *p.RootURI != "" {
		out = append(out, uriToPath(*p.RootURI))
	}
	return out
}

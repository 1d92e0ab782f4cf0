package lsp

import (
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/wfc-lang/wfc/compiler"
	"github.com/wfc-lang/wfc/lang"
	"github.com/wfc-lang/wfc/lang/ast"
	"github.com/wfc-lang/wfc/lang/diag"
	"github.com/wfc-lang/wfc/lang/source"
)

// A snapshot is one version of one open document. It never changes after it
// is made: the text is fixed, and the parse and the compilation are computed
// once, on first use, by whichever goroutine asks first (the diagnostics
// publisher or a request). Handlers answer from one snapshot, so a result
// never mixes two versions.
type snapshot struct {
	uri     string
	name    string // the file name the compiler sees: a path for file: URIs
	version int32  // the client's version number
	seq     uint64 // the server's order of snapshots (versions may repeat)
	file    *source.File
	m       *Mapper
	cfg     compiler.Config

	parseOnce sync.Once
	parsed    *ast.File

	compileOnce sync.Once
	res         *compiler.Result
	done        atomic.Bool // the compilation has finished
	failure     string      // set when the compiler panicked
	log         *slog.Logger

	depsOnce sync.Once
	depSet   map[string]bool // deps (workspace.go)

	fixChecks sync.Map // fix key -> whether it adds no error (fixcheck.go)
}

func newSnapshot(uri string, version int32, seq uint64, text []byte, cfg compiler.Config, log *slog.Logger) *snapshot {
	name := uriToPath(uri)
	f := source.NewFile(name, text)
	return &snapshot{uri: uri, name: name, version: version, seq: seq, file: f, m: NewMapper(f), cfg: cfg, log: log}
}

// src returns the text of the snapshot.
func (s *snapshot) src() []byte { return s.file.Src }

// ast returns the syntax tree of the snapshot: parsing is cheap (a few
// milliseconds for thousands of lines), so completion uses it without
// waiting for a compilation.
func (s *snapshot) ast() *ast.File {
	s.parseOnce.Do(func() {
		if s.compiled() {
			s.parsed = s.res.AST
			return
		}
		defer func() {
			if r := recover(); r != nil {
				s.log.Error("parser panic", "uri", s.uri, "version", s.version, "panic", r, "stack", string(debug.Stack()))
				s.parsed = &ast.File{Name: s.name, Range: source.Range{End: len(s.file.Src)}}
			}
		}()
		s.parsed, _ = lang.ParseFile(s.file)
	})
	return s.parsed
}

// compiled reports whether the compilation has finished, without starting it.
func (s *snapshot) compiled() bool { return s.done.Load() }

// result compiles the snapshot (once) and returns the result. It is never
// nil: if the compiler panics, the result holds the syntax tree only and a
// diagnostic that says so.
func (s *snapshot) result() *compiler.Result {
	s.compileOnce.Do(func() {
		defer s.done.Store(true)
		defer func() {
			if r := recover(); r != nil {
				s.log.Error("compiler panic", "uri", s.uri, "version", s.version, "panic", r, "stack", string(debug.Stack()))
				s.failure = fmt.Sprint(r)
				s.res = &compiler.Result{
					File: s.file,
					AST:  s.safeAST(),
					Info: &compiler.Info{Nodes: map[string]*compiler.NodeInfo{}, Inputs: map[string]*compiler.InputInfo{},
						Handlers: map[string]*compiler.HandlerInfo{}, Exprs: map[*ast.Expr]*compiler.ExprInfo{}},
					Diags: diag.List{{Code: diag.SyntaxError, Severity: diag.Error, Span: s.file.Span(source.Range{}),
						Message: "internal error: the compiler crashed on this file (" + s.failure + "); please report it"}},
					Files: map[string]*source.File{s.name: s.file},
				}
			}
		}()
		s.res = compiler.CompileFile(s.file, s.cfg)
	})
	return s.res
}

// safeAST parses without letting a panic escape (used after the compiler
// crashed, when the parser may be the culprit).
func (s *snapshot) safeAST() (f *ast.File) {
	defer func() {
		if recover() != nil {
			f = &ast.File{Name: s.name, Range: source.Range{End: len(s.file.Src)}}
		}
	}()
	return s.ast()
}

// uriToPath turns a file: URI into a path, so that imports and child flows
// resolve relative to the document. Other URIs (untitled:, ...) are used as
// they are.
func uriToPath(uri string) string {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "file" {
		return uri
	}
	p := u.Path
	// file:///C:/dir/a.wf on Windows.
	if len(p) >= 3 && p[0] == '/' && p[2] == ':' {
		p = p[1:]
	}
	return filepath.FromSlash(p)
}

// pathToURI is the inverse of uriToPath for other files (imports).
func pathToURI(path string) string {
	if strings.Contains(path, ":") && !filepath.IsAbs(path) && !strings.HasPrefix(path, "/") {
		if u, err := url.Parse(path); err == nil && u.Scheme != "" && len(u.Scheme) > 1 {
			return path // already a URI
		}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	p := filepath.ToSlash(abs)
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	return (&url.URL{Scheme: "file", Path: p}).String()
}

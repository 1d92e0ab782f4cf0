package lsp

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	protocol "github.com/tliron/glsp/protocol_3_16"

	"github.com/wfc-lang/wfc/compiler"
)

// exampleFiles returns the .wf files of examples/ and the golden corpus.
func exampleFiles(t testing.TB) []string {
	t.Helper()
	var files []string
	for _, pattern := range []string{"../examples/*.wf"} {
		m, _ := filepath.Glob(pattern)
		files = append(files, m...)
	}
	filepath.WalkDir("../testdata/golden", func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".wf") {
			files = append(files, path)
		}
		return nil
	})
	if len(files) < 3 {
		t.Fatalf("found only %d example files", len(files))
	}
	return files
}

// probe runs every read-only request at off on the document uri and checks
// each answers without a panic and with ranges inside the document.
type prober struct {
	t   testing.TB
	s   *server
	uri string
}

func (p *prober) check(what string, f func() (any, error)) any {
	p.t.Helper()
	var res any
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("panic: %v", r)
			}
		}()
		res, err = f()
	}()
	if err != nil && strings.HasPrefix(err.Error(), "panic") {
		doc := p.s.docs.get(p.uri).latest()
		p.t.Fatalf("%s panicked on %q: %v", what, doc.src(), err)
	}
	return res
}

func (p *prober) positions(src []byte, rng *rand.Rand) []protocol.Position {
	snap := p.s.docs.get(p.uri).latest()
	offs := []int{len(src), len(src) / 2, 0}
	if len(src) > 0 {
		offs = append(offs, rng.Intn(len(src)+1))
	}
	var out []protocol.Position
	for _, o := range offs {
		out = append(out, snap.m.Position(o))
	}
	return out
}

func (p *prober) parseOnly(ps []protocol.Position) {
	id := protocol.TextDocumentIdentifier{URI: p.uri}
	for _, pos := range ps {
		tdpp := protocol.TextDocumentPositionParams{TextDocument: id, Position: pos}
		p.check("completion", func() (any, error) {
			return p.s.completion(&protocol.CompletionParams{TextDocumentPositionParams: tdpp})
		})
	}
	p.check("documentSymbol", func() (any, error) { return p.s.documentSymbols(&protocol.DocumentSymbolParams{TextDocument: id}) })
	p.check("foldingRange", func() (any, error) { return p.s.foldingRanges(&protocol.FoldingRangeParams{TextDocument: id}) })
}

func (p *prober) compiled(ps []protocol.Position) {
	id := protocol.TextDocumentIdentifier{URI: p.uri}
	snap := p.s.docs.get(p.uri).latest()
	lines := uint32(snap.file.LineCount())
	inDoc := func(what string, r protocol.Range) {
		if r.Start.Line >= lines || r.End.Line >= lines || r.End.Line < r.Start.Line || (r.End.Line == r.Start.Line && r.End.Character < r.Start.Character) {
			p.t.Fatalf("%s: range %s outside the document of %d lines:\n%s", what, fmtRange(r), lines, snap.src())
		}
	}
	for _, pos := range ps {
		tdpp := protocol.TextDocumentPositionParams{TextDocument: id, Position: pos}
		if h, _ := p.check("hover", func() (any, error) { return p.s.hover(&protocol.HoverParams{TextDocumentPositionParams: tdpp}) }).(*protocol.Hover); h != nil && h.Range != nil {
			inDoc("hover", *h.Range)
		}
		if locs, _ := p.check("definition", func() (any, error) {
			return p.s.definition(&protocol.DefinitionParams{TextDocumentPositionParams: tdpp})
		}).([]protocol.Location); locs != nil {
			for _, l := range locs {
				if l.URI == p.uri {
					inDoc("definition", l.Range)
				}
			}
		}
		if locs, _ := p.check("references", func() (any, error) {
			return p.s.references(&protocol.ReferenceParams{TextDocumentPositionParams: tdpp, Context: protocol.ReferenceContext{IncludeDeclaration: true}})
		}).([]protocol.Location); locs != nil {
			for _, l := range locs {
				inDoc("references", l.Range)
			}
		}
		p.check("highlight", func() (any, error) {
			return p.s.highlight(&protocol.DocumentHighlightParams{TextDocumentPositionParams: tdpp})
		})
		p.check("selectionRange", func() (any, error) {
			return p.s.selectionRanges(&protocol.SelectionRangeParams{TextDocument: id, Positions: []protocol.Position{pos}})
		})
		p.check("signatureHelp", func() (any, error) {
			return p.s.signatureHelp(&protocol.SignatureHelpParams{TextDocumentPositionParams: tdpp})
		})
		p.check("prepareRename", func() (any, error) {
			return p.s.prepareRename(&protocol.PrepareRenameParams{TextDocumentPositionParams: tdpp})
		})
		p.check("rename", func() (any, error) {
			return p.s.rename(&protocol.RenameParams{TextDocumentPositionParams: tdpp, NewName: "renamed_x"})
		})
	}
	p.check("semanticTokens", func() (any, error) { return p.s.semanticTokens(&protocol.SemanticTokensParams{TextDocument: id}) })
	p.check("codeAction", func() (any, error) {
		return p.s.codeActions(&protocol.CodeActionParams{TextDocument: id, Range: protocol.Range{End: protocol.Position{Line: lines}}})
	})
	p.check("inlayHint", func() (any, error) {
		raw, _ := json.Marshal(map[string]any{"textDocument": id, "range": protocol.Range{End: protocol.Position{Line: lines}}})
		hints, rerr := p.s.inlayHints(raw)
		if rerr != nil {
			return nil, rerr
		}
		return hints, nil
	})
	p.check("fixAll", func() (any, error) {
		return p.s.codeActions(&protocol.CodeActionParams{TextDocument: id, Context: protocol.CodeActionContext{Only: []protocol.CodeActionKind{codeActionKindFixAll}}})
	})
	p.check("formatting", func() (any, error) { return p.s.formatting(&protocol.DocumentFormattingParams{TextDocument: id}) })
	p.check("diagnostics", func() (any, error) { return toProtocolDiagnostics(snap, snap.result()), nil })
}

// setText makes text the document's latest snapshot without scheduling
// diagnostics.
func (p *prober) setText(text []byte, stale *compiler.Result) {
	snap := newSnapshot(p.uri, 1, p.s.docs.nextSeq(), text, p.s.compilerConfig(), p.s.log)
	d := &document{uri: p.uri, snap: snap}
	if stale != nil {
		// The last compiled snapshot is the whole file: completion on a
		// prefix reads names and types from it, as it does while typing.
		old := newSnapshot(p.uri, 0, 0, stale.File.Src, p.s.compilerConfig(), p.s.log)
		old.res = stale
		old.compileOnce.Do(func() {})
		old.done.Store(true)
		d.compiled = old
	}
	p.s.docs.mu.Lock()
	p.s.docs.docs[p.uri] = d
	p.s.docs.mu.Unlock()
}

// TestEveryPrefix cuts example files at every prefix and asks for
// completion, symbols and folding at several positions, and for hover,
// definition, references, highlights, rename, semantic tokens, code
// actions, formatting and diagnostics. No request may panic, and every
// range stays inside the document. Every prefix of examples/*.wf gets every
// request; for the golden corpus, every prefix at a line boundary and every
// 13th byte gets them (the parse-only ones at every 5th byte; for the
// 1,000-node file, every 50th line and every 97th byte). With
// WFC_LSP_EXHAUSTIVE=1 every prefix of every file gets everything (about
// 143,000 compilations: minutes).
func TestEveryPrefix(t *testing.T) {
	exhaustive := os.Getenv("WFC_LSP_EXHAUSTIVE") != ""
	s := newServer(Options{})
	s.out = newStream(strings.NewReader(""), discard{})
	for fi, path := range exampleFiles(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			t.Parallel()
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			all := exhaustive || strings.HasPrefix(path, "../examples/")
			parseStep, compileStep := 5, 13
			if testing.Short() {
				parseStep, compileStep = 11, 29
			}
			lineStep := 1 // compile at every line-th line boundary
			if len(src) > 8000 && !exhaustive {
				// A thousand-node file: its prefixes cost quadratic time.
				parseStep, compileStep, lineStep = 97, 1009, 50
			}
			line := 0
			rng := rand.New(rand.NewSource(int64(fi)))
			full := compiler.Compile(path, src, compiler.Config{NoOptimize: true})
			p := &prober{t: t, s: s, uri: fmt.Sprintf("file:///prefix/%d.wf", fi)}
			for n := 0; n <= len(src); n++ {
				if n < len(src) && !utf8.RuneStart(src[n]) {
					continue
				}
				atLine := n == len(src) || src[n] == '\n' && line%lineStep == 0
				if n < len(src) && src[n] == '\n' {
					line++
				}
				if !all && !atLine && n%parseStep != 0 && n%compileStep != 0 {
					continue
				}
				prefix := src[:n]
				p.setText(prefix, full)
				ps := p.positions(prefix, rng)
				p.parseOnly(ps)
				if all || atLine || n%compileStep == 0 {
					p.compiled(ps)
				}
			}
		})
	}
}

type discard struct{}

func (discard) Write(b []byte) (int, error) { return len(b), nil }

// clientApply applies an LSP edit to text the way a client does, with its
// own UTF-16 arithmetic (independent of Mapper).
func clientApply(text string, r protocol.Range, newText string) string {
	off := func(p protocol.Position) int {
		lines := strings.SplitAfter(text, "\n")
		o := 0
		for i := 0; i < int(p.Line) && i < len(lines); i++ {
			o += len(lines[i])
		}
		if int(p.Line) >= len(lines) {
			return len(text)
		}
		line := strings.TrimRight(lines[p.Line], "\n")
		units := 0
		for i, r := range line {
			if units >= int(p.Character) {
				return o + i
			}
			units += len(utf16.Encode([]rune{r}))
		}
		return o + len(line)
	}
	a, b := off(r.Start), off(r.End)
	return text[:a] + newText + text[b:]
}

// randomPos returns a position at a character boundary of text.
func randomPos(rng *rand.Rand, text string) protocol.Position {
	lines := strings.Split(text, "\n")
	l := rng.Intn(len(lines))
	n := len(utf16.Encode([]rune(lines[l])))
	c := 0
	if n > 0 {
		c = rng.Intn(n + 1)
	}
	// Do not split a surrogate pair.
	units := 0
	for _, r := range lines[l] {
		w := len(utf16.Encode([]rune{r}))
		if units < c && c < units+w {
			c = units
			break
		}
		units += w
	}
	return protocol.Position{Line: uint32(l), Character: uint32(c)}
}

var fragments = []string{"", "a", " ", "\n", "{", "}", "(", ")", "\"", "{{", "}}", ".", ",", "=>", "task ", "after ", "run \"cel\"",
	"with { x = ", "input.", ".output.", "when ", "retry { attempts 3 }", "é", "日本", "😀", "//", "/*", "*/", "\t", "0", "30s", "'", "?", ":"}

// TestRandomEditsOverRPC drives the server over JSON-RPC with random
// incremental edits and requests at random positions, including non-BMP
// text: every request is answered, the server's text matches the client's,
// and the last version's diagnostics arrive.
func TestRandomEditsOverRPC(t *testing.T) {
	files := exampleFiles(t)
	n := 150
	if testing.Short() {
		n = 40
		files = files[:3]
	} else if len(files) > 12 {
		files = files[:12]
	}
	c := newTestClient(t, Options{Debounce: time.Millisecond}, nil)
	c.initialize()
	rng := rand.New(rand.NewSource(2))
	methods := []string{"textDocument/completion", "textDocument/hover", "textDocument/definition", "textDocument/references",
		"textDocument/documentSymbol", "textDocument/semanticTokens/full", "textDocument/formatting", "textDocument/foldingRange",
		"textDocument/codeAction", "textDocument/prepareRename", "textDocument/documentHighlight", "textDocument/signatureHelp"}
	for fi, path := range files {
		src, _ := os.ReadFile(path)
		text := string(src)
		uri := fmt.Sprintf("file:///rpc/%d.wf", fi)
		c.open(uri, text)
		for v := 2; v <= n; v++ {
			a, b := randomPos(rng, text), randomPos(rng, text)
			if b.Line < a.Line || b.Line == a.Line && b.Character < a.Character {
				a, b = b, a
			}
			if rng.Intn(3) > 0 {
				b = a // mostly insertions, as when typing
			}
			ins := fragments[rng.Intn(len(fragments))]
			c.changeRange(uri, v, protocol.Range{Start: a, End: b}, ins)
			text = clientApply(text, protocol.Range{Start: a, End: b}, ins)
			m := methods[rng.Intn(len(methods))]
			params := tdp(uri, randomPos(rng, text))
			params["context"] = map[string]any{"includeDeclaration": true, "diagnostics": []any{}}
			params["range"] = protocol.Range{Start: randomPos(rng, text), End: randomPos(rng, text)}
			params["options"] = map[string]any{"tabSize": 2, "insertSpaces": true}
			if err := c.call(m, params, nil); err != nil && err.Code != codeRequestFailed {
				t.Fatalf("%s after edit %d of %s: %v", m, v, path, err)
			}
		}
		c.diagnostics(uri, n)
		if got := string(c.srv.docs.get(uri).latest().src()); got != text {
			t.Fatalf("%s: server text differs from the client's after %d edits:\n%q\n%q", path, n, got, text)
		}
	}
}

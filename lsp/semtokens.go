package lsp

import (
	"sort"
	"strings"

	protocol "github.com/tliron/glsp/protocol_3_16"

	"github.com/wfc-lang/wfc/compiler"
	"github.com/wfc-lang/wfc/lang/ast"
	"github.com/wfc-lang/wfc/lang/source"
)

// Semantic token types and modifiers: the legend sent in initialize. The
// order is the protocol's index.
type tokenType uint32

const (
	tokKeyword    tokenType = iota // workflow, task, run, retry, after, when ...
	tokFunction                    // node ids
	tokClass                       // handler names
	tokParameter                   // inputs
	tokProperty                    // fields: output fields, with and output entries, type fields
	tokVariable                    // for_each variables; the scope names input and output
	tokType                        // type names
	tokString                      // strings
	tokNumber                      // numbers and durations
	tokComment                     // comments
	tokEnumMember                  // values such as exponential, reject, any
	tokMacro                       // the {{ and }} of templates
	numTokenTypes
)

var tokenTypeList = [numTokenTypes]protocol.SemanticTokenType{
	protocol.SemanticTokenTypeKeyword, protocol.SemanticTokenTypeFunction, protocol.SemanticTokenTypeClass,
	protocol.SemanticTokenTypeParameter, protocol.SemanticTokenTypeProperty, protocol.SemanticTokenTypeVariable,
	protocol.SemanticTokenTypeType, protocol.SemanticTokenTypeString, protocol.SemanticTokenTypeNumber,
	protocol.SemanticTokenTypeComment, protocol.SemanticTokenTypeEnumMember, protocol.SemanticTokenTypeMacro,
}

const (
	modDeclaration    = 1 << 0
	modDefaultLibrary = 1 << 1
)

func tokenTypeNames() []string {
	out := make([]string, len(tokenTypeList))
	for i, t := range tokenTypeList {
		out[i] = string(t)
	}
	return out
}

func tokenModifierNames() []string {
	return []string{string(protocol.SemanticTokenModifierDeclaration), string(protocol.SemanticTokenModifierDefaultLibrary)}
}

type semToken struct {
	r    source.Range
	typ  tokenType
	mods uint32
	prio int // among overlapping tokens the higher one wins
}

// semanticTokens classifies the document's tokens from the syntax tree and
// the compiler's references.
func (s *server) semanticTokens(p *protocol.SemanticTokensParams) (*protocol.SemanticTokens, error) {
	snap := s.snapshotFor(p.TextDocument.URI)
	if snap == nil {
		return &protocol.SemanticTokens{Data: []uint32{}}, nil
	}
	res := snap.result()
	return &protocol.SemanticTokens{Data: encodeTokens(snap.m, collectTokens(snap.file, res))}, nil
}

func collectTokens(f *source.File, res *compiler.Result) []semToken {
	src := f.Src
	var toks []semToken
	add := func(r source.Range, t tokenType, mods uint32, prio int) {
		if r.Start < 0 || r.End > len(src) || r.End <= r.Start {
			return
		}
		toks = append(toks, semToken{r, t, mods, prio})
	}
	ident := func(id *ast.Ident, t tokenType, mods uint32) {
		if id != nil {
			add(id.Range, t, mods, 1)
		}
	}
	// keywordIn marks the first occurrence of word as a whole word in
	// src[from:to].
	keywordIn := func(word string, from, to int) {
		if from < 0 || to > len(src) || from >= to {
			return
		}
		text := string(src[from:to])
		for i := 0; i+len(word) <= len(text); {
			k := strings.Index(text[i:], word)
			if k < 0 {
				return
			}
			a := i + k
			b := a + len(word)
			if (a == 0 || !isIdentByte(text[a-1])) && (b == len(text) || !isIdentByte(text[b])) {
				add(source.Range{Start: from + a, End: from + b}, tokKeyword, 0, 1)
				return
			}
			i = b
		}
	}
	leading := func(word string, at int) {
		if at >= 0 && at+len(word) <= len(src) && string(src[at:at+len(word)]) == word {
			add(source.Range{Start: at, End: at + len(word)}, tokKeyword, 0, 1)
		}
	}
	value := func(v *ast.Value) {
		if v == nil {
			return
		}
		switch v.Kind {
		case ast.IntValue, ast.FloatValue, ast.DurationValue:
			add(v.Range, tokNumber, 0, 1)
		case ast.IdentValue:
			add(v.Range, tokEnumMember, 0, 1)
		}
	}
	inputFields := map[*ast.Field]bool{}

	if res.AST != nil {
		ast.Inspect(res.AST, func(n ast.Node) bool {
			switch n := n.(type) {
			case nil:
				return false
			case *ast.Import:
				leading("import", n.Start)
			case *ast.Handler:
				leading("handler", n.Start)
				if n.Name != nil {
					add(n.Name.Range, tokClass, modDeclaration, 2)
				}
			case *ast.Workflow:
				leading("workflow", n.Start)
				ident(n.Name, tokClass, modDeclaration)
			case *ast.NodeDecl:
				ident(n.Kind, tokKeyword, 0)
				ident(n.Name, tokFunction, modDeclaration)
				header := n.Name.End
				for _, a := range n.After {
					ident(a, tokFunction, 0)
				}
				if len(n.After) > 0 {
					keywordIn("after", header, n.After[0].Start)
					header = n.After[len(n.After)-1].End
				}
				if n.Join != nil {
					keywordIn("join", header, n.Join.Start)
					ident(n.Join, tokEnumMember, 0)
				}
			case *ast.Bad:
				ident(n.Kind, tokKeyword, 0)
				ident(n.Name, tokFunction, modDeclaration)
			case *ast.Setting:
				ident(n.Key, tokKeyword, 0)
				value(n.Value)
				if n.Value != nil && n.Value.Kind == ast.ListValue {
					for _, v := range n.Value.List {
						value(v)
					}
				}
			case *ast.Goto:
				ident(n.Key, tokKeyword, 0)
				for _, t := range n.Targets {
					ident(t, tokFunction, 0)
				}
			case *ast.Cond:
				ident(n.Key, tokKeyword, 0)
			case *ast.ForEach:
				ident(n.Key, tokKeyword, 0)
				ident(n.Var, tokVariable, modDeclaration)
				if n.Var != nil && n.Items != nil {
					keywordIn("in", n.Var.End, n.Items.Start)
				}
				if n.Parallel != nil && n.Items != nil {
					keywordIn("parallel", n.Items.End, n.Parallel.Start)
					value(n.Parallel)
				}
			case *ast.Block:
				ident(n.Key, tokKeyword, 0)
			case *ast.Branch:
				ident(n.Key, tokKeyword, 0)
			case *ast.Rule:
				if n.Else {
					leading("else", n.Start)
				} else {
					leading("when", n.Start)
				}
				for _, t := range n.Targets {
					ident(t, tokFunction, 0)
				}
			case *ast.TypeBlock:
				ident(n.Key, tokKeyword, 0)
			case *ast.InputBlock:
				ident(n.Key, tokKeyword, 0)
				for _, f := range n.Fields {
					inputFields[f] = true
				}
			case *ast.ParamBlock:
				ident(n.Key, tokKeyword, 0)
			case *ast.Param:
				ident(n.Name, tokProperty, modDeclaration)
			case *ast.Field:
				if inputFields[n] {
					ident(n.Name, tokParameter, modDeclaration)
				} else {
					ident(n.Name, tokProperty, modDeclaration)
				}
			case *ast.Type:
				ident(n.Name, tokType, 0)
			case *ast.String:
				stringTokens(src, n, add)
				return false // template expressions are covered by the references
			case *ast.Expr:
				if n.Str != nil {
					stringTokens(src, n.Str, add)
				}
				return false
			}
			return true
		})
		for _, c := range res.AST.Comments {
			add(c.Range, tokComment, 0, 1)
		}
	}
	for _, r := range res.Info.Refs {
		switch r.Kind {
		case compiler.RefNode:
			add(r.Range, tokFunction, 0, 2)
		case compiler.RefHandler:
			add(r.Range, tokClass, 0, 2)
		case compiler.RefField:
			add(r.Range, tokProperty, 0, 2)
		case compiler.RefInput:
			add(r.Range, tokParameter, 0, 2)
			// The scope name before it: input.x
			if k := r.Range.Start - len("input."); k >= 0 && string(src[k:r.Range.Start]) == "input." {
				add(source.Range{Start: k, End: k + len("input")}, tokVariable, modDefaultLibrary, 2)
			}
		}
	}
	return normalizeTokens(f, toks)
}

// stringTokens marks a string literal; in a template, the {{ }} delimiters
// are macros and the expressions between them are left to the references.
func stringTokens(src []byte, s *ast.String, add func(source.Range, tokenType, uint32, int)) {
	if s.Template == nil {
		add(s.Range, tokString, 0, 1)
		return
	}
	pos := s.Start
	for _, p := range s.Template {
		if p.Expr == nil {
			continue
		}
		add(source.Range{Start: pos, End: p.Start}, tokString, 0, 1)
		add(source.Range{Start: p.Start, End: p.Start + 2}, tokMacro, 0, 1)
		add(source.Range{Start: p.End - 2, End: p.End}, tokMacro, 0, 1)
		pos = p.End
	}
	add(source.Range{Start: pos, End: s.End}, tokString, 0, 1)
}

// normalizeTokens sorts the tokens, drops overlaps (the higher priority, then
// the earlier, wins) and splits multi-line tokens into one per line.
func normalizeTokens(f *source.File, toks []semToken) []semToken {
	sort.SliceStable(toks, func(i, j int) bool {
		if toks[i].r.Start != toks[j].r.Start {
			return toks[i].r.Start < toks[j].r.Start
		}
		return toks[i].prio > toks[j].prio
	})
	var out []semToken
	for _, t := range toks {
		if n := len(out); n > 0 && t.r.Start < out[n-1].r.End {
			prev := out[n-1]
			// A higher-priority token inside a lower one (a handler name
			// inside a string) replaces it.
			if t.prio > prev.prio && t.r.Start == prev.r.Start && t.r.End <= prev.r.End {
				out[n-1] = t
			}
			continue
		}
		out = append(out, t)
	}
	var split []semToken
	for _, t := range out {
		for t.r.Start < t.r.End {
			p := f.Pos(t.r.Start)
			lineEnd := len(f.Src)
			if p.Line < f.LineCount() {
				lineEnd = f.LineStart(p.Line+1) - 1
			}
			end := min(t.r.End, lineEnd)
			if end > t.r.Start {
				part := t
				part.r = source.Range{Start: t.r.Start, End: end}
				if end > 0 && f.Src[end-1] == '\r' {
					part.r.End--
				}
				if part.r.End > part.r.Start {
					split = append(split, part)
				}
			}
			t.r.Start = end + 1
		}
	}
	return split
}

// encodeTokens writes tokens in the protocol's relative encoding.
func encodeTokens(m *Mapper, toks []semToken) []uint32 {
	data := make([]uint32, 0, 5*len(toks))
	var line, char uint32
	for _, t := range toks {
		p := m.Position(t.r.Start)
		length := uint32(utf16Len(m.f.Src[t.r.Start:t.r.End]))
		if length == 0 {
			continue
		}
		dl := p.Line - line
		dc := p.Character
		if dl == 0 {
			dc = p.Character - char
		}
		data = append(data, dl, dc, length, uint32(t.typ), t.mods)
		line, char = p.Line, p.Character
	}
	return data
}

package lsp

import (
	"slices"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	protocol "github.com/tliron/glsp/protocol_3_16"

	"github.com/wfc-lang/wfc/compiler"
	"github.com/wfc-lang/wfc/ir/cellib"
)

// Signature help: inside the parentheses of a CEL call, the overloads of
// the function with the argument under the cursor; inside a `with { }`,
// the config fields of the node's handler with the one being set.

var signatureTriggers = []string{"(", ",", "{", "="}

func (s *server) signatureHelp(p *protocol.SignatureHelpParams) (*protocol.SignatureHelp, error) {
	d := s.docs.get(p.TextDocument.URI)
	if d == nil {
		return nil, nil
	}
	snap := d.latest()
	info := d.infoSnapshot().result().Info
	return signatureAt(snap, info, snap.m.Offset(p.Position)), nil
}

func signatureAt(snap *snapshot, info *compiler.Info, off int) *protocol.SignatureHelp {
	c := &cursor{src: snap.src(), m: snap.m, f: snap.ast(), info: info, off: off, wordStart: off, seen: map[string]bool{}}
	if c.inComment() {
		return nil
	}
	c.locate()
	if c.container == "header" {
		return nil
	}
	sc, ok := c.scanFrames()
	if !ok || sc.inString != nil || len(c.frames) < 2 {
		return nil
	}
	fr := c.frames[len(c.frames)-1]
	switch {
	case fr.open == "(":
		return c.callSignature(fr)
	case fr.head == "with":
		return c.withSignature(fr)
	}
	return nil
}

// activeArg counts the commas at the frame's own depth.
func (c *cursor) activeArg(fr frame) int { return len(c.frameCommas(fr)) }

// frameCommas returns the indexes in c.toks of the commas at the frame's
// own depth (not inside a bracket opened after it), which separate its
// arguments.
func (c *cursor) frameCommas(fr frame) []int {
	var out []int
	depth := 0
	for k := fr.start; k < len(c.toks); k++ {
		t := c.toks[k]
		if t.kind != lPunct {
			continue
		}
		switch t.text {
		case "(", "[", "{":
			depth++
		case ")", "]", "}":
			depth--
		case ",":
			if depth == 0 {
				out = append(out, k)
			}
		}
	}
	return out
}

// macroSignatures are the CEL macros, which are no functions of the
// environment.
var macroSignatures = map[string][]string{
	"has":        {"has(e.f) -> bool"},
	"all":        {"all(x, predicate) -> bool"},
	"exists":     {"exists(x, predicate) -> bool"},
	"exists_one": {"exists_one(x, predicate) -> bool"},
	"map":        {"map(x, expr) -> list", "map(x, filter, expr) -> list"},
	"filter":     {"filter(x, predicate) -> list"},
	// Not called on a value:
	"math.greatest": {"math.greatest(a, b, ...) -> number"},
	"math.least":    {"math.least(a, b, ...) -> number"},
}

func (c *cursor) callSignature(fr frame) *protocol.SignatureHelp {
	i := fr.start - 1 // the "("
	if i < 1 || c.toks[i-1].kind != lWord {
		return nil
	}
	name := c.toks[i-1].text
	member := i >= 2 && c.toks[i-2].text == "."
	if member && i >= 3 && c.toks[i-3].kind == lWord && slices.Contains(celNamespace(c.toks[i-3].text), name) {
		name, member = c.toks[i-3].text+"."+name, false // math.greatest(
	}
	var labels []string
	if ms, ok := macroSignatures[name]; ok && member == !(name == "has" || strings.HasPrefix(name, "math.")) {
		labels = ms
	} else {
		labels = celSignatures(name, member)
	}
	if len(labels) == 0 {
		return nil
	}
	active := c.activeArg(fr)
	help := &protocol.SignatureHelp{}
	// The first overload whose types fit those the text shows
	// (overload.go) and that has a parameter at the cursor; else the
	// first whose types fit; else the first with that parameter.
	recv, args := c.argTypes(fr)
	best, chosen := 0, 0
	for k, l := range labels {
		sig := signatureInfo(l)
		score := 0
		if active < len(sig.Parameters) {
			score = 1
		}
		if overloadFits(l, name, member, recv, args) {
			score += 2
		}
		if score > best {
			best, chosen = score, k
		}
		help.Signatures = append(help.Signatures, sig)
	}
	as, ap := protocol.UInteger(chosen), protocol.UInteger(active)
	help.ActiveSignature, help.ActiveParameter = &as, &ap
	return help
}

// signatureInfo splits "name(a, b) -> r" into its parameters, given by
// their offsets in UTF-16 code units (two of one type stay apart).
func signatureInfo(label string) protocol.SignatureInformation {
	sig := protocol.SignatureInformation{Label: label}
	open := strings.IndexByte(label, '(')
	if open < 0 || strings.HasPrefix(label[open:], "()") {
		return sig
	}
	add := func(from, to int) {
		for from < to && label[from] == ' ' {
			from++
		}
		sig.Parameters = append(sig.Parameters, protocol.ParameterInformation{
			Label: [2]protocol.UInteger{protocol.UInteger(utf16Len([]byte(label[:from]))), protocol.UInteger(utf16Len([]byte(label[:to])))},
		})
	}
	depth, from := 0, open+1
	for k := open + 1; k < len(label); k++ {
		switch label[k] {
		case '(', '<', '[', '{':
			depth++
		case '>', ']', '}':
			depth--
		case ')':
			if depth == 0 {
				add(from, k)
				return sig
			}
			depth--
		case ',':
			if depth == 0 {
				add(from, k)
				from = k + 1
			}
		}
	}
	return sig
}

// celSignatures lists the overloads of a CEL function, called as a
// member (x.f(...)) or not, as "f(int, int) -> int".
func celSignatures(name string, member bool) []string {
	env, err := celSignatureEnv()
	if err != nil {
		return nil
	}
	fn := env.Functions()[name]
	if fn == nil {
		return nil
	}
	var out []string
	for _, o := range fn.OverloadDecls() {
		if o.IsMemberFunction() != member {
			continue
		}
		args := o.ArgTypes()
		recv := ""
		if member {
			if len(args) == 0 {
				continue
			}
			recv, args = celTypeName(args[0].String())+".", args[1:]
		}
		parts := make([]string, len(args))
		for k, a := range args {
			parts[k] = celTypeName(a.String())
		}
		l := recv + name + "(" + strings.Join(parts, ", ") + ") -> " + celTypeName(o.ResultType().String())
		if !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	slices.Sort(out)
	return out
}

// celTypeName writes cel-go's type names as the language does.
// (list(<A>) is list<A>, map(string, <A>) is map<string, A>).
func celTypeName(s string) string {
	s = strings.NewReplacer("google.protobuf.Timestamp", "timestamp", "google.protobuf.Duration", "duration", "<", "", ">", "").Replace(s)
	var b strings.Builder
	var generic []bool // per open parenthesis: list( or map(
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '(':
			g := strings.HasSuffix(s[:i], "list") || strings.HasSuffix(s[:i], "map")
			generic = append(generic, g)
			if g {
				c = '<'
			}
			b.WriteByte(c)
		case ')':
			if k := len(generic) - 1; k >= 0 {
				if generic[k] {
					c = '>'
				}
				generic = generic[:k]
			}
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

var celSignatureEnv = sync.OnceValues(func() (*cel.Env, error) { return cel.NewEnv(cellib.Options()...) })

// withSignature shows the config fields of the handler (or the inputs of
// the child workflow) of the `with` the cursor is in.
func (c *cursor) withSignature(fr frame) *protocol.SignatureHelp {
	_, id := c.nodeScope()
	handler := ""
	switch {
	case c.inFrame("compensate"):
		handler = c.compensateHandler()
	case c.inFrame("finally"):
		handler = c.finallyHandler()
	default:
		if ni := c.info.Nodes[id]; ni != nil && ni.Handler != "" {
			handler = ni.Handler
		} else {
			handler = c.runSetting()
		}
	}
	h := handlerOf(c.info, handler)
	if h == nil || h.Open || h.Config == nil || len(h.Config.Fields) == 0 {
		return nil
	}
	// The entry being written: the last `name =` of this block.
	current, depth := "", 0
	set := map[string]bool{}
	for k, t := range c.toks[fr.start:] {
		switch {
		case t.kind == lPunct && (t.text == "(" || t.text == "[" || t.text == "{"):
			depth++
		case t.kind == lPunct && (t.text == ")" || t.text == "]" || t.text == "}"):
			depth--
		case depth == 0 && t.kind == lWord && fr.start+k+1 < len(c.toks) && c.toks[fr.start+k+1].text == "=":
			current = t.text
			set[t.text] = true
		}
	}
	parts := make([]string, len(h.Config.Fields))
	active := -1
	for k, f := range h.Config.Fields {
		opt := ""
		if f.Optional {
			opt = "?"
		}
		parts[k] = f.Name + opt + ": " + f.Type.String()
		if f.Name == current {
			active = k
		}
	}
	if active < 0 { // a new entry: the first required field not set yet
		for k, f := range h.Config.Fields {
			if !f.Optional && !set[f.Name] {
				active = k
				break
			}
		}
	}
	sig := signatureInfo(`run "` + h.Name + `" with(` + strings.Join(parts, ", ") + ")")
	sig.Documentation = h.Doc
	help := &protocol.SignatureHelp{Signatures: []protocol.SignatureInformation{sig}}
	as := protocol.UInteger(0)
	help.ActiveSignature = &as
	if active >= 0 {
		ap := protocol.UInteger(active)
		help.ActiveParameter = &ap
	}
	return help
}

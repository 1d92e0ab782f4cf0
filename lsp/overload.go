package lsp

import (
	"strings"

	protocol "github.com/tliron/glsp/protocol_3_16"

	"github.com/wfc-lang/wfc/ir"
)

// Choosing the overload signature help marks active: among those with a
// parameter at the cursor, the first whose receiver and written arguments
// have the types the text shows. An argument's type is known when it is a
// literal (a string, a number, true/false, a list, a map) or a chain of
// names the completion tables resolve (input.s, node.output.a.b, a
// for_each or macro variable); other arguments, and types the text does
// not show, match any parameter.

// argTypes returns the type names (as in the signature labels) of the
// receiver of the call opened by frame fr ("" when it is not a member
// call or its type is unknown) and of its arguments before the cursor's.
func (c *cursor) argTypes(fr frame) (recv string, args []string) {
	i := fr.start - 1 // the "("
	if i >= 2 && c.toks[i-2].text == "." {
		dot := c.toks[i-2]
		if i >= 3 && c.toks[i-3].kind != lWord {
			recv = literalType(c.toks[i-3 : i-2])
		} else if chain := c.identsEnding(c.local + dot.start); len(chain) > 0 {
			recv = c.chainType(chain, c.local+dot.start)
		}
	}
	from := fr.start
	for _, k := range c.frameCommas(fr) {
		args = append(args, c.exprType(c.toks[from:k]))
		from = k + 1
	}
	return recv, args
}

// exprType is the type name of one argument's tokens, or "".
func (c *cursor) exprType(toks []ltok) string {
	if t := literalType(toks); t != "" {
		return t
	}
	// A chain of names: a.b.c.
	if len(toks)%2 == 0 {
		return ""
	}
	var chain []string
	for k, t := range toks {
		if k%2 == 0 && t.kind != lWord || k%2 == 1 && t.text != "." {
			return ""
		}
		if k%2 == 0 {
			chain = append(chain, t.text)
		}
	}
	last := toks[len(toks)-1]
	return c.chainType(chain, c.local+last.start+len(last.text))
}

// literalType is the type name of a literal's tokens, or "".
func literalType(toks []ltok) string {
	if len(toks) == 0 {
		return ""
	}
	t := toks[0]
	switch {
	case len(toks) == 1 && t.kind == lString:
		return "string"
	case len(toks) == 1 && t.kind == lNumber:
		if strings.ContainsAny(t.text, ".eE") && !strings.HasPrefix(t.text, "0x") {
			return "double"
		}
		if strings.HasSuffix(t.text, "u") || strings.HasSuffix(t.text, "U") {
			return "uint"
		}
		return "int"
	case len(toks) == 1 && t.kind == lWord && (t.text == "true" || t.text == "false"):
		return "bool"
	case t.kind == lPunct && t.text == "[" && toks[len(toks)-1].text == "]":
		return "list"
	case t.kind == lPunct && t.text == "{" && toks[len(toks)-1].text == "}":
		return "map"
	}
	return ""
}

// chainType is the type name of the value a chain of names reads, or "".
func (c *cursor) chainType(chain []string, end int) string {
	if c.info == nil {
		return ""
	}
	t, isNode := c.resolveChain(chain, end)
	if t == nil || isNode {
		return ""
	}
	switch t.Kind {
	case ir.KindNumber:
		return "double"
	case ir.KindObject:
		return "map"
	case ir.KindSecret:
		return "string"
	case ir.KindAny:
		return ""
	}
	return t.Kind
}

// typeFits reports whether an argument of type arg (a name as argTypes
// gives, "" for unknown) fits a parameter of type param (a label's type:
// `string`, `list<A>`, `A`, `dyn`).
func typeFits(param, arg string) bool {
	if arg == "" || param == "dyn" {
		return true
	}
	base, _, _ := strings.Cut(param, "<")
	if len(base) == 1 && base[0] >= 'A' && base[0] <= 'Z' {
		return true // a type parameter
	}
	return base == arg
}

// overloadFits reports whether the overload label (`string.f(int) -> x`)
// fits the receiver and argument types.
func overloadFits(label, name string, member bool, recv string, args []string) bool {
	sig := signatureInfo(label)
	if member {
		head, _, _ := strings.Cut(label, "(")
		if r := strings.TrimSuffix(head, "."+name); r != head && !typeFits(r, recv) {
			return false
		}
	}
	for k, a := range args {
		if k >= len(sig.Parameters) {
			return false
		}
		p, ok := sig.Parameters[k].Label.([2]protocol.UInteger)
		if !ok || int(p[1]) > len(label) {
			continue
		}
		if !typeFits(strings.TrimSpace(label[p[0]:p[1]]), a) { // ASCII labels: offsets are bytes
			return false
		}
	}
	return true
}

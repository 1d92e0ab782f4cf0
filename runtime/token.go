package runtime

import (
	"encoding/json"
	"strings"
)

// decodeToken decodes a token's JSON into tok. The scripts write tokens in
// one layout — the fields in Token's order, g and mh (and o, when it
// carries fields) only in exec tokens, strings that need no escaping,
// integers — which it reads directly:
// encoding/json's reflection cost a worker about a tenth of its CPU.
// Anything else goes to encoding/json, whose result it equals for every
// input it reads itself (FuzzDecodeToken).
func decodeToken(raw string, tok *Token) error {
	if t, ok := fastToken(raw, *tok); ok {
		*tok = t
		return nil
	}
	return json.Unmarshal([]byte(raw), tok)
}

// fastToken reads the scripts' layout into a copy of t; ok is false when
// raw is in any other.
func fastToken(raw string, t Token) (_ Token, ok bool) {
	p := tokenReader{s: raw}
	ok = p.lit(`{"kind":`) && p.str(&t.Kind) &&
		p.lit(`,"run":`) && p.str(&t.Run) &&
		p.lit(`,"node":`) && p.str(&t.Node) &&
		p.lit(`,"iter":`) && p.str(&t.Iter) &&
		p.lit(`,"hop":`) && p.int(&t.Hop) &&
		p.lit(`,"attempt":`) && p.int(&t.Attempt) &&
		p.lit(`,"item":`) && p.int(&t.Item) &&
		p.lit(`,"gen":`) && p.int(&t.Gen)
	if ok && p.lit(`,"g":`) {
		ok = p.str(&t.Graph) && p.lit(`,"mh":`) && p.int(&t.MaxHops)
		// The fields an exec token carries (carry.go), last: an object
		// of strings and nulls, which encoding/json reads.
		if ok && p.lit(`,"o":`) {
			if !strings.HasSuffix(raw, "}") || json.Unmarshal([]byte(raw[p.i:len(raw)-1]), &t.Outs) != nil {
				return t, false
			}
			return t, true
		}
	}
	return t, ok && p.lit("}") && p.i == len(raw)
}

type tokenReader struct {
	s string
	i int
}

func (p *tokenReader) lit(l string) bool {
	if len(p.s)-p.i < len(l) || p.s[p.i:p.i+len(l)] != l {
		return false
	}
	p.i += len(l)
	return true
}

// str reads a JSON string of printable ASCII without escapes.
func (p *tokenReader) str(v *string) bool {
	if p.i >= len(p.s) || p.s[p.i] != '"' {
		return false
	}
	for j := p.i + 1; j < len(p.s); j++ {
		switch c := p.s[j]; {
		case c == '"':
			*v = p.s[p.i+1 : j]
			p.i = j + 1
			return true
		case c == '\\' || c < 0x20 || c >= 0x7f:
			return false
		}
	}
	return false
}

// int reads a JSON integer of at most 18 digits (no fraction, no
// exponent, no leading zero).
func (p *tokenReader) int(v *int) bool {
	j, neg := p.i, false
	if j < len(p.s) && p.s[j] == '-' {
		neg = true
		j++
	}
	start, n := j, 0
	for ; j < len(p.s) && p.s[j] >= '0' && p.s[j] <= '9'; j++ {
		n = n*10 + int(p.s[j]-'0')
	}
	if d := j - start; d == 0 || d > 18 || d > 1 && p.s[start] == '0' {
		return false
	}
	if neg {
		n = -n
	}
	*v, p.i = n, j
	return true
}

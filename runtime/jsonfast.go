package runtime

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// fastJSON decodes the common JSON of outputs and inputs — objects,
// arrays, numbers, booleans, null and strings of valid UTF-8 with the
// common escapes — into the values encoding/json's Decoder with UseNumber
// gives (map[string]any, []any, json.Number, string, bool, nil), without
// its reader, buffer and scanner state: the worker decodes every output it
// reads, and the Decoder's setup was half of that time. ok is false for
// anything else (invalid JSON, deep nesting, a surrogate escape): the
// caller then decodes with encoding/json, which also words the error.
// Like Decoder.Decode, it reads one value and ignores what follows it.
func fastJSON(data []byte) (v any, ok bool) {
	d := fastDec{b: data}
	d.space()
	v, ok = d.value(0)
	return v, ok
}

type fastDec struct {
	b []byte
	i int
}

// fastMaxDepth: deeper values go to encoding/json (whose own limit is
// 10,000).
const fastMaxDepth = 200

func (d *fastDec) space() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *fastDec) value(depth int) (any, bool) {
	if d.i >= len(d.b) || depth > fastMaxDepth {
		return nil, false
	}
	switch c := d.b[d.i]; {
	case c == '{':
		d.i++
		m := map[string]any{}
		d.space()
		if d.i < len(d.b) && d.b[d.i] == '}' {
			d.i++
			return m, true
		}
		for {
			d.space()
			if d.i >= len(d.b) || d.b[d.i] != '"' {
				return nil, false
			}
			k, ok := d.str()
			if !ok {
				return nil, false
			}
			d.space()
			if d.i >= len(d.b) || d.b[d.i] != ':' {
				return nil, false
			}
			d.i++
			d.space()
			v, ok := d.value(depth + 1)
			if !ok {
				return nil, false
			}
			m[k] = v
			d.space()
			if d.i >= len(d.b) {
				return nil, false
			}
			if d.b[d.i] == '}' {
				d.i++
				return m, true
			}
			if d.b[d.i] != ',' {
				return nil, false
			}
			d.i++
		}
	case c == '[':
		d.i++
		a := []any{}
		d.space()
		if d.i < len(d.b) && d.b[d.i] == ']' {
			d.i++
			return a, true
		}
		for {
			d.space()
			v, ok := d.value(depth + 1)
			if !ok {
				return nil, false
			}
			a = append(a, v)
			d.space()
			if d.i >= len(d.b) {
				return nil, false
			}
			if d.b[d.i] == ']' {
				d.i++
				return a, true
			}
			if d.b[d.i] != ',' {
				return nil, false
			}
			d.i++
		}
	case c == '"':
		return d.str()
	case c == 't':
		return true, d.lit("true")
	case c == 'f':
		return false, d.lit("false")
	case c == 'n':
		return nil, d.lit("null")
	case c == '-' || c >= '0' && c <= '9':
		return d.num()
	}
	return nil, false
}

func (d *fastDec) lit(s string) bool {
	if len(d.b)-d.i < len(s) || string(d.b[d.i:d.i+len(s)]) != s {
		return false
	}
	d.i += len(s)
	return true
}

// num reads a number in JSON's grammar: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func (d *fastDec) num() (any, bool) {
	start := d.i
	if d.b[d.i] == '-' {
		d.i++
	}
	digits := func() int {
		n := 0
		for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
			d.i++
			n++
		}
		return n
	}
	if d.i < len(d.b) && d.b[d.i] == '0' {
		d.i++
	} else if digits() == 0 {
		return nil, false
	}
	if d.i < len(d.b) && d.b[d.i] == '.' {
		d.i++
		if digits() == 0 {
			return nil, false
		}
	}
	if d.i < len(d.b) && (d.b[d.i] == 'e' || d.b[d.i] == 'E') {
		d.i++
		if d.i < len(d.b) && (d.b[d.i] == '+' || d.b[d.i] == '-') {
			d.i++
		}
		if digits() == 0 {
			return nil, false
		}
	}
	return json.Number(d.b[start:d.i]), true
}

// str reads a string (d.b[d.i] is its quote): valid UTF-8, the escapes
// \" \\ \/ \b \f \n \r \t and \u of a non-surrogate; anything else is left
// to encoding/json (which replaces invalid UTF-8 and pairs surrogates).
func (d *fastDec) str() (string, bool) {
	d.i++
	start := d.i
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			s := string(d.b[start:d.i])
			d.i++
			return s, true
		case c == '\\':
			return d.escaped(start)
		case c < 0x20:
			return "", false
		case c < utf8.RuneSelf:
			d.i++
		default:
			r, n := utf8.DecodeRune(d.b[d.i:])
			if r == utf8.RuneError {
				return "", false
			}
			d.i += n
		}
	}
	return "", false
}

// escaped finishes a string with escapes, from its first backslash.
func (d *fastDec) escaped(start int) (string, bool) {
	out := append([]byte(nil), d.b[start:d.i]...)
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			d.i++
			return string(out), true
		case c == '\\':
			if d.i+1 >= len(d.b) {
				return "", false
			}
			e := d.b[d.i+1]
			d.i += 2
			switch e {
			case '"', '\\', '/':
				out = append(out, e)
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				if d.i+4 > len(d.b) {
					return "", false
				}
				n, err := strconv.ParseUint(string(d.b[d.i:d.i+4]), 16, 32)
				if err != nil || n >= 0xD800 && n < 0xE000 {
					return "", false
				}
				out = utf8.AppendRune(out, rune(n))
				d.i += 4
			default:
				return "", false
			}
		case c < 0x20:
			return "", false
		case c < utf8.RuneSelf:
			out = append(out, c)
			d.i++
		default:
			r, n := utf8.DecodeRune(d.b[d.i:])
			if r == utf8.RuneError {
				return "", false
			}
			out = append(out, d.b[d.i:d.i+n]...)
			d.i += n
		}
	}
	return "", false
}

package ir

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// The IR has its own small encoder, instead of encoding/json, because one
// walk over the types serves both Marshal and Canonical: it drops hash:"-"
// fields for Canonical, writes nil slices as [] (never null), rewrites
// embedded JSON values (consts, defaults) in one normal form so that equal
// values hash equally, and does not HTML-escape CEL's < > &.

var rawMessageType = reflect.TypeFor[json.RawMessage]()

// maxEncodeDepth bounds recursion so that a cyclic Type built in Go fails
// cleanly instead of overflowing the stack.
const maxEncodeDepth = 1000

// A fieldInfo describes one struct field as the IR encodes it.
type fieldInfo struct {
	name      string
	index     int
	omitEmpty bool
	hashed    bool // false for hash:"-" fields, which Canonical leaves out
	typ       reflect.Type
}

type typeInfo struct {
	fields []fieldInfo
	byName map[string]int
}

var typeInfos sync.Map // reflect.Type -> *typeInfo

func infoOf(t reflect.Type) *typeInfo {
	if ti, ok := typeInfos.Load(t); ok {
		return ti.(*typeInfo)
	}
	ti := &typeInfo{byName: map[string]int{}}
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if !sf.IsExported() || tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = sf.Name
		}
		ti.byName[name] = len(ti.fields)
		ti.fields = append(ti.fields, fieldInfo{
			name:      name,
			index:     i,
			omitEmpty: opts == "omitempty",
			hashed:    sf.Tag.Get("hash") != "-",
			typ:       sf.Type,
		})
	}
	typeInfos.Store(t, ti)
	return ti
}

// An encoder writes IR values as JSON.
type encoder struct {
	buf       []byte
	indent    bool // two-space indentation, as Marshal writes
	canonical bool // leave out hash:"-" fields
}

func (e *encoder) newline(level int) {
	if e.indent {
		e.buf = append(e.buf, '\n')
		for range level {
			e.buf = append(e.buf, ' ', ' ')
		}
	}
}

func (e *encoder) key(name string) {
	e.buf = appendString(e.buf, name)
	e.buf = append(e.buf, ':')
	if e.indent {
		e.buf = append(e.buf, ' ')
	}
}

func (e *encoder) encode(v reflect.Value, level int) error {
	if level > maxEncodeDepth {
		return errors.New("value nested too deeply (is a Type cyclic?)")
	}
	if v.Type() == rawMessageType {
		return e.raw(v.Bytes(), level)
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		return e.encode(v.Elem(), level)
	case reflect.Struct:
		e.buf = append(e.buf, '{')
		n := 0
		for _, f := range infoOf(v.Type()).fields {
			fv := v.Field(f.index)
			if (e.canonical && !f.hashed) || (f.omitEmpty && isEmpty(fv)) {
				continue
			}
			if n > 0 {
				e.buf = append(e.buf, ',')
			}
			n++
			e.newline(level + 1)
			e.key(f.name)
			if err := e.encode(fv, level+1); err != nil {
				return err
			}
		}
		if n > 0 {
			e.newline(level)
		}
		e.buf = append(e.buf, '}')
	case reflect.Slice:
		e.buf = append(e.buf, '[')
		for i := range v.Len() {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			e.newline(level + 1)
			if err := e.encode(v.Index(i), level+1); err != nil {
				return err
			}
		}
		if v.Len() > 0 {
			e.newline(level)
		}
		e.buf = append(e.buf, ']')
	case reflect.String:
		e.buf = appendString(e.buf, v.String())
	case reflect.Bool:
		e.buf = strconv.AppendBool(e.buf, v.Bool())
	case reflect.Int, reflect.Int64:
		e.buf = strconv.AppendInt(e.buf, v.Int(), 10)
	case reflect.Float64:
		f := v.Float()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("unsupported number %v", f)
		}
		b, _ := json.Marshal(f) // encoding/json's float format is the JSON norm
		e.buf = append(e.buf, b...)
	default:
		return fmt.Errorf("unsupported Go type %s", v.Type())
	}
	return nil
}

func isEmpty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool:
		return !v.Bool()
	case reflect.Int, reflect.Int64:
		return v.Int() == 0
	case reflect.Float64:
		return v.Float() == 0
	case reflect.Pointer:
		return v.IsNil()
	}
	return false
}

// raw writes an embedded JSON value in normal form: the same layout as the
// rest of the document, strings re-escaped, numbers kept as written (1.0 and
// 1 differ in CEL), object members in their original order.
func (e *encoder) raw(data []byte, level int) error {
	if len(data) == 0 {
		e.buf = append(e.buf, "null"...)
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := e.rawValue(dec, level); err != nil {
		return fmt.Errorf("invalid embedded JSON value: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("invalid embedded JSON value: data after the value")
	}
	return nil
}

func (e *encoder) rawValue(dec *json.Decoder, level int) error {
	if level > maxEncodeDepth {
		return errors.New("nested too deeply")
	}
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			e.buf = append(e.buf, '{')
			n := 0
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return err
				}
				if n > 0 {
					e.buf = append(e.buf, ',')
				}
				n++
				e.newline(level + 1)
				e.key(k.(string))
				if err := e.rawValue(dec, level+1); err != nil {
					return err
				}
			}
			if _, err := dec.Token(); err != nil {
				return err
			}
			if n > 0 {
				e.newline(level)
			}
			e.buf = append(e.buf, '}')
		case '[':
			e.buf = append(e.buf, '[')
			n := 0
			for dec.More() {
				if n > 0 {
					e.buf = append(e.buf, ',')
				}
				n++
				e.newline(level + 1)
				if err := e.rawValue(dec, level+1); err != nil {
					return err
				}
			}
			if _, err := dec.Token(); err != nil {
				return err
			}
			if n > 0 {
				e.newline(level)
			}
			e.buf = append(e.buf, ']')
		default:
			return fmt.Errorf("unexpected %v", t)
		}
	case string:
		e.buf = appendString(e.buf, t)
	case json.Number:
		e.buf = append(e.buf, t...)
	case bool:
		e.buf = strconv.AppendBool(e.buf, t)
	case nil:
		e.buf = append(e.buf, "null"...)
	}
	return nil
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string. It escapes what JSON requires
// plus U+2028 and U+2029 (which break JavaScript), and writes invalid UTF-8
// as U+FFFD, like encoding/json, but leaves < > & alone.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

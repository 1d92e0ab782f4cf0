package ir

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
)

// A shapeScanner checks a JSON document against the shape of the Go types
// before encoding/json decodes it: nesting depth, duplicate keys, exact field
// names (encoding/json would accept "NAME" for "name"), and JSON types. It
// walks tokens without recursing into the decoder, so a document of 10^5
// nested brackets is refused at depth MaxDepth+1, and every problem carries
// the byte offset and JSON pointer where it occurs.
type shapeScanner struct {
	data []byte
	dec  *json.Decoder
	path []string
}

// scanShape checks data against the shape of t. A nil t accepts any JSON.
func scanShape(data []byte, t reflect.Type) error {
	s := &shapeScanner{data: data, dec: json.NewDecoder(bytes.NewReader(data))}
	s.dec.UseNumber()
	if err := s.value(t, 1); err != nil {
		return err
	}
	off := s.next()
	if _, err := s.dec.Token(); err != io.EOF {
		return s.errAt(off, "unexpected data after the document")
	}
	return nil
}

// next returns the offset of the next token: the decoder's offset is just
// past the previous one, before any separator.
func (s *shapeScanner) next() int {
	off := int(s.dec.InputOffset())
	for off < len(s.data) {
		switch s.data[off] {
		case ' ', '\t', '\n', '\r', ',', ':':
			off++
			continue
		}
		break
	}
	return off
}

func (s *shapeScanner) errAt(off int, format string, args ...any) error {
	return newDecodeError(s.data, off, pointer(s.path), fmt.Sprintf(format, args...))
}

func (s *shapeScanner) token() (json.Token, int, error) {
	off := s.next()
	tok, err := s.dec.Token()
	if err != nil {
		var se *json.SyntaxError
		switch {
		case errors.As(err, &se):
			msg := strings.TrimPrefix(se.Error(), "json: ")
			return nil, off, s.errAt(int(se.Offset), "%s", msg)
		case err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF):
			return nil, off, s.errAt(len(s.data), "unexpected end of document")
		}
		return nil, off, s.errAt(off, "%v", err)
	}
	return tok, off, nil
}

func (s *shapeScanner) value(t reflect.Type, depth int) error {
	tok, off, err := s.token()
	if err != nil {
		return err
	}
	return s.check(t, tok, off, depth)
}

func (s *shapeScanner) check(t reflect.Type, tok json.Token, off, depth int) error {
	if d, ok := tok.(json.Delim); ok && (d == '{' || d == '[') && depth > MaxDepth {
		return s.errAt(off, "nesting deeper than %d levels", MaxDepth)
	}
	if t == nil || t == rawMessageType {
		switch tok {
		case json.Delim('{'):
			return s.object(nil, depth)
		case json.Delim('['):
			return s.array(nil, depth)
		}
		return nil
	}
	if tok == nil && (t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice) {
		return nil
	}
	switch t.Kind() {
	case reflect.Pointer:
		return s.check(t.Elem(), tok, off, depth)
	case reflect.Struct:
		if tok == json.Delim('{') {
			return s.object(t, depth)
		}
	case reflect.Slice:
		if tok == json.Delim('[') {
			return s.array(t.Elem(), depth)
		}
	case reflect.String:
		if _, ok := tok.(string); ok {
			return nil
		}
	case reflect.Bool:
		if _, ok := tok.(bool); ok {
			return nil
		}
	case reflect.Int, reflect.Int64:
		if n, ok := tok.(json.Number); ok {
			if _, err := strconv.ParseInt(string(n), 10, t.Bits()); err != nil {
				if errors.Is(err, strconv.ErrRange) {
					return s.errAt(off, "integer %s out of range", n)
				}
				return s.errAt(off, "expected an integer, found %s", n)
			}
			return nil
		}
	case reflect.Float64:
		if n, ok := tok.(json.Number); ok {
			if _, err := strconv.ParseFloat(string(n), 64); err != nil {
				return s.errAt(off, "number %s out of range", n)
			}
			return nil
		}
	}
	return s.errAt(off, "expected %s, found %s", jsonKindOf(t), describe(tok))
}

func (s *shapeScanner) object(t reflect.Type, depth int) error {
	var ti *typeInfo
	if t != nil {
		ti = infoOf(t)
	}
	seen := map[string]bool{}
	for s.dec.More() {
		tok, off, err := s.token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		s.path = append(s.path, key)
		if seen[key] {
			return s.errAt(off, "duplicate key %q", key)
		}
		seen[key] = true
		var ft reflect.Type
		if ti != nil {
			i, ok := ti.byName[key]
			if !ok {
				return s.errAt(off, "unknown field %q", key)
			}
			ft = ti.fields[i].typ
		}
		if err := s.value(ft, depth+1); err != nil {
			return err
		}
		s.path = s.path[:len(s.path)-1]
	}
	_, _, err := s.token() // '}'
	return err
}

func (s *shapeScanner) array(elem reflect.Type, depth int) error {
	for i := 0; s.dec.More(); i++ {
		s.path = append(s.path, strconv.Itoa(i))
		if err := s.value(elem, depth+1); err != nil {
			return err
		}
		s.path = s.path[:len(s.path)-1]
	}
	_, _, err := s.token() // ']'
	return err
}

func jsonKindOf(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Struct:
		return "an object"
	case reflect.Slice:
		return "an array"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int64:
		return "an integer"
	case reflect.Float64:
		return "a number"
	}
	return t.String()
}

func describe(tok json.Token) string {
	switch t := tok.(type) {
	case json.Delim:
		if t == '{' {
			return "an object"
		}
		return "an array"
	case string:
		return "a string"
	case json.Number:
		return "number " + string(t)
	case bool:
		return strconv.FormatBool(t)
	}
	return "null"
}

var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// pointer renders path segments as a JSON pointer (RFC 6901).
func pointer(segs []string) string {
	var b strings.Builder
	for _, s := range segs {
		b.WriteByte('/')
		b.WriteString(pointerEscaper.Replace(s))
	}
	return b.String()
}

package ir

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/lexer"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
)

// maxYAMLColumn bounds the column of block indicators (- and ?). Compact
// nesting such as "- - - x" costs two bytes a level, and go-yaml's parser
// slows down badly with depth, so this is refused from the tokens before
// parsing. Nesting by indentation costs quadratic space and stays shallow
// within MaxSize.
const maxYAMLColumn = 4 * MaxDepth

// DecodeYAML decodes an IR document written in YAML: it converts the YAML to
// JSON and calls Decode, so the same strictness applies. Anchors, aliases,
// merge keys and tags are refused before anything is expanded (no alias
// bombs), as are multiple documents, .inf and .nan. Plain scalars that read
// as JSON numbers are numbers, written as they appear, so 1.0 stays 1.0.
// Errors found in the YAML carry its line and column; errors found after
// conversion carry the JSON pointer only.
func DecodeYAML(data []byte) (*Workflow, error) {
	j, err := yamlToJSON(data)
	if err != nil {
		return nil, err
	}
	w, err := Decode(j)
	var de *DecodeError
	if errors.As(err, &de) {
		// Positions in the converted JSON would mislead.
		de.Line, de.Col, de.Offset = 0, 0, -1
	}
	return w, err
}

func yamlError(line, col int, format string, args ...any) error {
	return &DecodeError{Line: line, Col: col, Offset: -1, Msg: "yaml: " + fmt.Sprintf(format, args...)}
}

func yamlToJSON(data []byte) ([]byte, error) {
	if len(data) > MaxSize {
		return nil, &DecodeError{Offset: -1, Msg: fmt.Sprintf("document is %d bytes, over the limit of %d", len(data), MaxSize)}
	}
	if !utf8.Valid(data) {
		return nil, &DecodeError{Offset: -1, Msg: "yaml: invalid UTF-8"}
	}
	toks := lexer.Tokenize(string(data))
	flow := 0
	for _, tk := range toks {
		pos := tk.Position
		if pos == nil {
			pos = &token.Position{}
		}
		switch tk.Type {
		case token.AnchorType, token.AliasType:
			return nil, yamlError(pos.Line, pos.Column, "anchors and aliases are not allowed")
		case token.MergeKeyType:
			return nil, yamlError(pos.Line, pos.Column, "merge keys are not allowed")
		case token.TagType:
			return nil, yamlError(pos.Line, pos.Column, "tags are not allowed")
		case token.SequenceStartType, token.MappingStartType:
			if flow++; flow > MaxDepth {
				return nil, yamlError(pos.Line, pos.Column, "nesting deeper than %d levels", MaxDepth)
			}
		case token.SequenceEndType, token.MappingEndType:
			flow = max(flow-1, 0)
		case token.SequenceEntryType, token.MappingKeyType:
			if pos.Column > maxYAMLColumn {
				return nil, yamlError(pos.Line, pos.Column, "nesting too deep")
			}
		}
	}
	f, err := parser.Parse(toks, 0)
	if err != nil {
		return nil, &DecodeError{Offset: -1, Msg: "yaml: " + yaml.FormatError(err, false, false)}
	}
	var body ast.Node
	for _, doc := range f.Docs {
		if doc == nil || doc.Body == nil {
			continue
		}
		if body != nil {
			tk := doc.Body.GetToken()
			line, col := 0, 0
			if tk != nil && tk.Position != nil {
				line, col = tk.Position.Line, tk.Position.Column
			}
			return nil, yamlError(line, col, "more than one document")
		}
		body = doc.Body
	}
	if body == nil {
		return nil, yamlError(0, 0, "empty document")
	}
	c := &yamlConverter{}
	if err := c.node(body, 1); err != nil {
		return nil, err
	}
	return c.buf, nil
}

// A yamlConverter writes a YAML AST as JSON, refusing what JSON cannot say.
type yamlConverter struct {
	buf []byte
}

func nodeError(n ast.Node, format string, args ...any) error {
	line, col := 0, 0
	if tk := n.GetToken(); tk != nil && tk.Position != nil {
		line, col = tk.Position.Line, tk.Position.Column
	}
	return yamlError(line, col, format, args...)
}

func (c *yamlConverter) node(n ast.Node, depth int) error {
	switch n := n.(type) {
	case nil:
		c.buf = append(c.buf, "null"...)
	case *ast.NullNode:
		c.buf = append(c.buf, "null"...)
	case *ast.BoolNode:
		c.buf = strconv.AppendBool(c.buf, n.Value)
	case *ast.IntegerNode:
		if n.Token != nil && isJSONNumber(n.Token.Value) {
			c.buf = append(c.buf, n.Token.Value...)
			break
		}
		switch v := n.Value.(type) {
		case int64:
			c.buf = strconv.AppendInt(c.buf, v, 10)
		case uint64:
			c.buf = strconv.AppendUint(c.buf, v, 10)
		default:
			return nodeError(n, "unsupported integer %v", v)
		}
	case *ast.FloatNode:
		if n.Token != nil && isJSONNumber(n.Token.Value) {
			c.buf = append(c.buf, n.Token.Value...)
			break
		}
		if math.IsInf(n.Value, 0) || math.IsNaN(n.Value) {
			return nodeError(n, "%v cannot be represented in JSON", n.Value)
		}
		b, _ := json.Marshal(n.Value)
		c.buf = append(c.buf, b...)
	case *ast.StringNode:
		// A plain scalar such as 1e3 or a huge integer is a number in YAML
		// 1.2, even where go-yaml reads it as a string.
		if n.Token != nil && n.Token.Type == token.StringType && isJSONNumber(n.Value) {
			c.buf = append(c.buf, n.Value...)
			break
		}
		c.buf = appendString(c.buf, n.Value)
	case *ast.LiteralNode:
		s := ""
		if n.Value != nil {
			s = n.Value.Value
		}
		c.buf = appendString(c.buf, s)
	case *ast.MappingNode:
		return c.mapping(n, n.Values, depth)
	case *ast.MappingValueNode:
		return c.mapping(n, []*ast.MappingValueNode{n}, depth)
	case *ast.SequenceNode:
		if depth > MaxDepth {
			return nodeError(n, "nesting deeper than %d levels", MaxDepth)
		}
		c.buf = append(c.buf, '[')
		for i, v := range n.Values {
			if i > 0 {
				c.buf = append(c.buf, ',')
			}
			if err := c.node(v, depth+1); err != nil {
				return err
			}
		}
		c.buf = append(c.buf, ']')
	case *ast.InfinityNode, *ast.NanNode:
		return nodeError(n, "%s cannot be represented in JSON", n.GetToken().Value)
	case *ast.AnchorNode, *ast.AliasNode:
		return nodeError(n, "anchors and aliases are not allowed")
	case *ast.TagNode:
		return nodeError(n, "tags are not allowed")
	default:
		return nodeError(n, "unsupported YAML %s", n.Type())
	}
	return nil
}

func (c *yamlConverter) mapping(n ast.Node, pairs []*ast.MappingValueNode, depth int) error {
	if depth > MaxDepth {
		return nodeError(n, "nesting deeper than %d levels", MaxDepth)
	}
	seen := map[string]bool{}
	c.buf = append(c.buf, '{')
	for i, mv := range pairs {
		if mv == nil {
			return nodeError(n, "malformed mapping")
		}
		key, err := yamlKey(mv.Key, n)
		if err != nil {
			return err
		}
		if seen[key] {
			return nodeError(mv.Key, "duplicate key %q", key)
		}
		seen[key] = true
		if i > 0 {
			c.buf = append(c.buf, ',')
		}
		c.buf = appendString(c.buf, key)
		c.buf = append(c.buf, ':')
		if err := c.node(mv.Value, depth+1); err != nil {
			return err
		}
	}
	c.buf = append(c.buf, '}')
	return nil
}

// yamlKey returns a mapping key as a string; JSON keys are strings, so a
// scalar key stands for its text.
func yamlKey(k ast.MapKeyNode, parent ast.Node) (string, error) {
	var n ast.Node = k
	if mk, ok := k.(*ast.MappingKeyNode); ok {
		n = mk.Value
	}
	switch n := n.(type) {
	case nil:
		return "", nodeError(parent, "missing mapping key")
	case *ast.StringNode:
		return n.Value, nil
	case *ast.LiteralNode:
		if n.Value != nil {
			return n.Value.Value, nil
		}
		return "", nil
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode, *ast.NullNode:
		return n.GetToken().Value, nil
	case *ast.MergeKeyNode:
		return "", nodeError(n, "merge keys are not allowed")
	}
	return "", nodeError(n, "mapping keys must be scalars")
}

// isJSONNumber reports whether s is a number in JSON's grammar.
func isJSONNumber(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && '1' <= s[i] && s[i] <= '9':
		for i < len(s) && '0' <= s[i] && s[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if i == len(s) || s[i] < '0' || s[i] > '9' {
			return false
		}
		for i < len(s) && '0' <= s[i] && s[i] <= '9' {
			i++
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if i == len(s) || s[i] < '0' || s[i] > '9' {
			return false
		}
		for i < len(s) && '0' <= s[i] && s[i] <= '9' {
			i++
		}
	}
	return i == len(s)
}

// MarshalYAML encodes w as YAML with the fields in the same order as
// Marshal's JSON, which it converts: block style, strings quoted unless they
// are plain identifiers or names, multi-line strings as literal blocks
// where that is exact, numbers as written.
func MarshalYAML(w *Workflow) ([]byte, error) {
	j, err := Marshal(w)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	root, err := readOrdered(dec)
	if err != nil {
		return nil, fmt.Errorf("ir: %w", err)
	}
	y := &yamlWriter{}
	y.mapping(root, 0, false)
	return y.buf, nil
}

// A jnode is a JSON value that keeps object members in order.
type jnode struct {
	kind byte   // 'o' object, 'a' array, 's' string, 'l' other literal
	text string // string value, or the literal as written
	keys []string
	vals []*jnode
}

func readOrdered(dec *json.Decoder) (*jnode, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		n := &jnode{kind: 'a'}
		if t == '{' {
			n.kind = 'o'
		}
		for dec.More() {
			if n.kind == 'o' {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				n.keys = append(n.keys, k.(string))
			}
			v, err := readOrdered(dec)
			if err != nil {
				return nil, err
			}
			n.vals = append(n.vals, v)
		}
		_, err := dec.Token()
		return n, err
	case string:
		return &jnode{kind: 's', text: t}, nil
	case json.Number:
		return &jnode{kind: 'l', text: string(t)}, nil
	case bool:
		return &jnode{kind: 'l', text: strconv.FormatBool(t)}, nil
	}
	return &jnode{kind: 'l', text: "null"}, nil
}

type yamlWriter struct {
	buf []byte
}

func (y *yamlWriter) pad(n int) {
	for range n {
		y.buf = append(y.buf, ' ')
	}
}

// mapping writes the members of o at indent; inline means the first member
// continues a line already started (after "- ").
func (y *yamlWriter) mapping(o *jnode, indent int, inline bool) {
	for i, k := range o.keys {
		if i > 0 || !inline {
			y.pad(indent)
		}
		y.scalarText(k)
		y.buf = append(y.buf, ':')
		y.after(o.vals[i], indent)
	}
}

func (y *yamlWriter) sequence(a *jnode, indent int) {
	for _, v := range a.vals {
		y.pad(indent)
		y.buf = append(y.buf, '-')
		if v.kind == 'o' && len(v.keys) > 0 {
			y.buf = append(y.buf, ' ')
			y.mapping(v, indent+2, true)
			continue
		}
		y.after(v, indent)
	}
}

// after writes v following "key:" or "-" of a line indented by indent.
func (y *yamlWriter) after(v *jnode, indent int) {
	switch {
	case v.kind == 'o' && len(v.keys) > 0:
		y.buf = append(y.buf, '\n')
		y.mapping(v, indent+2, false)
	case v.kind == 'a' && len(v.vals) > 0:
		y.buf = append(y.buf, '\n')
		y.sequence(v, indent+2)
	case v.kind == 'o':
		y.buf = append(y.buf, " {}\n"...)
	case v.kind == 'a':
		y.buf = append(y.buf, " []\n"...)
	case v.kind == 's' && literalOK(v.text):
		y.buf = append(y.buf, " |"...)
		s := v.text
		if strings.HasSuffix(s, "\n") {
			s = s[:len(s)-1]
		} else {
			y.buf = append(y.buf, '-')
		}
		y.buf = append(y.buf, '\n')
		for _, line := range strings.Split(s, "\n") {
			if line != "" {
				y.pad(indent + 2)
				y.buf = append(y.buf, line...)
			}
			y.buf = append(y.buf, '\n')
		}
	case v.kind == 's':
		y.buf = append(y.buf, ' ')
		y.scalarText(v.text)
		y.buf = append(y.buf, '\n')
	default:
		y.buf = append(y.buf, ' ')
		y.buf = append(y.buf, v.text...)
		y.buf = append(y.buf, '\n')
	}
}

// scalarText writes a string plain when it cannot be read as anything else,
// and double-quoted otherwise.
func (y *yamlWriter) scalarText(s string) {
	if plainOK(s) {
		y.buf = append(y.buf, s...)
		return
	}
	y.buf = appendYAMLQuoted(y.buf, s)
}

// plainOK reports whether s can be written as a plain scalar and read back
// as the same string under any YAML schema: a name that starts with a
// letter or underscore and is not a YAML 1.1 boolean, null or special float.
func plainOK(s string) bool {
	if s == "" || len(s) > 200 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '.' || c == '-' || c == '/'):
		default:
			return false
		}
	}
	switch strings.ToLower(s) {
	case "true", "false", "null", "yes", "no", "on", "off", "y", "n", "nan", "inf", "infinity":
		return false
	}
	return true
}

// literalOK reports whether s can be written as a literal block scalar and
// read back exactly: several lines of printable text, no tabs or carriage
// returns, no blank-but-not-empty lines, no trailing spaces, a first line
// that does not start with a space (it would set the indentation), and at
// most one final newline.
func literalOK(s string) bool {
	if !strings.Contains(s, "\n") || strings.HasPrefix(s, "\n") || strings.HasSuffix(s, "\n\n") || strings.HasPrefix(s, " ") {
		return false
	}
	for _, line := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		if strings.HasSuffix(line, " ") {
			return false
		}
	}
	for _, r := range s {
		if r != '\n' && (!yamlPrintable(r) || r < 0x20 || r == 0x85 || r == 0x2028 || r == 0x2029 || r == 0xFEFF || r == utf8.RuneError) {
			return false
		}
	}
	return true
}

// yamlPrintable reports whether YAML allows r unescaped (c-printable).
func yamlPrintable(r rune) bool {
	return r == 0x9 || r == 0xA || r == 0xD || 0x20 <= r && r <= 0x7E || r == 0x85 ||
		0xA0 <= r && r <= 0xD7FF || 0xE000 <= r && r <= 0xFFFD || 0x10000 <= r && r <= 0x10FFFF
}

// appendYAMLQuoted appends s as a YAML double-quoted scalar, escaping
// everything that is not printable or that some reader treats as a line
// break.
func appendYAMLQuoted(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch r {
		case '"':
			b = append(b, `\"`...)
		case '\\':
			b = append(b, `\\`...)
		case '\n':
			b = append(b, `\n`...)
		case '\t':
			b = append(b, `\t`...)
		case '\r':
			b = append(b, `\r`...)
		default:
			switch {
			case r == utf8.RuneError && size == 1:
				b = append(b, `\uFFFD`...)
			case !yamlPrintable(r) || r == 0x85 || r == 0x2028 || r == 0x2029 || r == 0xFEFF:
				if r <= 0xFFFF {
					b = fmt.Appendf(b, `\u%04X`, r)
				} else {
					b = fmt.Appendf(b, `\U%08X`, r)
				}
			default:
				b = utf8.AppendRune(b, r)
			}
		}
	}
	return append(b, '"')
}

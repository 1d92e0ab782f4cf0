package ir

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"unicode/utf8"
)

// Limits. Decode, DecodeYAML and Validate enforce them so that a hostile or
// broken document costs bounded time and memory.
const (
	MaxSize       = 10 << 20  // bytes of a JSON or YAML document
	MaxDepth      = 256       // nesting of JSON arrays and objects (YAML collections)
	MaxNodes      = 10_000    // nodes in a workflow
	MaxOutEdges   = 1_000     // forward out-edges of one node
	MaxTypeDepth  = 64        // nesting of a Type
	MaxValueDepth = 64        // nesting of a const or default value
	MaxAttempts   = 1000      // retry attempts (the compiler's limit)
	MaxLoop       = 1_000_000 // loop iterations (max)
	MaxExprSize   = 10_000    // code points of one CEL expression
	// MaxSettingBytes bounds the byte settings (max_input_bytes, ...)
	// like the other integer settings: 2^31-1.
	MaxSettingBytes = 1<<31 - 1
)

var workflowType = reflect.TypeFor[Workflow]()

// Marshal encodes w as indented JSON (two spaces) with a trailing newline.
// Fields appear in struct order, arrays are never null, and embedded JSON
// values are normalized, so equal workflows encode to equal bytes. Marshal
// writes derived fields as they are; call Analyze first to fill them.
func Marshal(w *Workflow) ([]byte, error) {
	return encode(w, &encoder{indent: true})
}

// Canonical encodes w as compact JSON without the fields that do not change
// what the workflow does: the derived fields, Source and every Loc. So
// reformatting or moving the .wf file leaves it unchanged.
func Canonical(w *Workflow) ([]byte, error) {
	b, err := encode(w, &encoder{canonical: true})
	if err != nil {
		return nil, err
	}
	return b[:len(b)-1], nil
}

// Hash returns "sha256:" and the hex SHA-256 of Canonical(w): the content
// address under which the runtime stores compiled IR.
func Hash(w *Workflow) (string, error) {
	b, err := Canonical(w)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

func encode(w *Workflow, e *encoder) ([]byte, error) {
	if w == nil {
		return nil, errors.New("ir: nil workflow")
	}
	if err := e.encode(reflect.ValueOf(w).Elem(), 0); err != nil {
		return nil, fmt.Errorf("ir: %w", err)
	}
	return append(e.buf, '\n'), nil
}

// A DecodeError reports why a document could not be decoded.
type DecodeError struct {
	Line, Col int    // 1-based position (byte column); 0 if unknown
	Offset    int64  // byte offset; -1 if unknown
	Path      string // JSON pointer of the offending value, if known
	Msg       string
}

func (e *DecodeError) Error() string {
	var b strings.Builder
	b.WriteString("ir: ")
	if e.Line > 0 {
		fmt.Fprintf(&b, "%d:%d: ", e.Line, e.Col)
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// newDecodeError locates offset off of data as a line and column.
func newDecodeError(data []byte, off int, path, msg string) *DecodeError {
	off = min(max(off, 0), len(data))
	line := 1 + bytes.Count(data[:off], []byte{'\n'})
	col := off - bytes.LastIndexByte(data[:off], '\n')
	return &DecodeError{Line: line, Col: col, Offset: int64(off), Path: path, Msg: msg}
}

// Decode decodes a JSON IR document strictly and analyzes it.
//
// It refuses documents larger than MaxSize, nested deeper than MaxDepth, not
// UTF-8, with unknown fields (names match exactly), duplicate keys, values of
// the wrong JSON type, trailing data, or an ir_version other than Version;
// such errors are *DecodeError with the position. Derived fields in the
// document are ignored and recomputed by Analyze. If Analyze fails (unknown
// nodes in edges, a forward cycle), Decode returns the decoded workflow
// together with the error, so that the caller can still run Validate for a
// full report. Decode does not call Validate.
func Decode(data []byte) (*Workflow, error) {
	w, err := decode(data)
	if err != nil {
		return nil, err
	}
	return w, Analyze(w)
}

func decode(data []byte) (*Workflow, error) {
	if len(data) > MaxSize {
		return nil, &DecodeError{Offset: -1, Msg: fmt.Sprintf("document is %d bytes, over the limit of %d", len(data), MaxSize)}
	}
	if !utf8.Valid(data) {
		off := 0
		for off < len(data) {
			r, size := utf8.DecodeRune(data[off:])
			if r == utf8.RuneError && size == 1 {
				break
			}
			off += size
		}
		return nil, newDecodeError(data, off, "", "invalid UTF-8")
	}
	if err := scanShape(data, workflowType); err != nil {
		return nil, err
	}
	w := new(Workflow)
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(w); err != nil {
		// scanShape has already checked everything encoding/json checks.
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, newDecodeError(data, int(te.Offset), "", err.Error())
		}
		return nil, &DecodeError{Offset: -1, Msg: err.Error()}
	}
	if w.IRVersion != "" && w.IRVersion != Version {
		return nil, &DecodeError{Offset: -1, Path: "/ir_version", Msg: fmt.Sprintf("unsupported ir_version %q (this build reads %q)", w.IRVersion, Version)}
	}
	return w, nil
}

package ir

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
)

// Limits of a live patch (ApplyPatch). A patch is hostile input: it is
// bounded in bytes and operations, copies may grow the document by a
// bounded amount, and the result is a document Decode accepts (MaxSize).
const (
	MaxPatchBytes = 1 << 20 // bytes of a patch document
	MaxPatchOps   = 1000    // operations of a patch
	MaxCopyBytes  = 1 << 20 // bytes all copy operations of a patch may add
)

// A PatchError reports why a patch could not be applied: the operation (its
// index in the patch, 0-based; -1 when the patch as a whole is at fault),
// the JSON pointer at fault and why. Path is the pointer of the IR value
// that is wrong or missing; for a document the patch produced that does
// not decode or validate, it is the pointer in that document.
type PatchError struct {
	Op   int
	Path string
	Msg  string
}

func (e *PatchError) Error() string {
	var b strings.Builder
	b.WriteString("patch: ")
	if e.Op >= 0 {
		fmt.Fprintf(&b, "operation %d: ", e.Op)
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// ApplyPatch applies an RFC 6902 JSON Patch to w's JSON encoding (Marshal)
// and returns the resulting workflow, decoded strictly, analyzed and
// validated: the same checks as a document read from outside. w is not
// modified. Negative array indices are refused (RFC 6902 has none), copies
// may add at most MaxCopyBytes, and the patch is bounded by MaxPatchBytes
// and MaxPatchOps. Errors are *PatchError, naming the operation and the
// JSON pointer at fault. The compiler's typing of expressions
// (compiler.CheckIR) and the runtime's checks against a run's live state
// come after.
func ApplyPatch(w *Workflow, patch []byte) (*Workflow, error) {
	if w == nil {
		return nil, &PatchError{Op: -1, Msg: "nil workflow"}
	}
	ops, err := decodePatch(patch)
	if err != nil {
		return nil, err
	}
	doc, err := Marshal(w)
	if err != nil {
		return nil, &PatchError{Op: -1, Msg: err.Error()}
	}
	out, err := applyOps(doc, ops)
	if err != nil {
		return nil, err
	}
	nw, err := Decode(out)
	if err != nil {
		var de *DecodeError
		if errors.As(err, &de) {
			return nil, &PatchError{Op: -1, Path: de.Path, Msg: "the patched document is not valid IR: " + de.Msg}
		}
		return nil, &PatchError{Op: -1, Msg: "the patched document is not valid IR: " + strings.TrimPrefix(err.Error(), "ir: ")}
	}
	if ps := Validate(nw); len(ps) > 0 {
		return nil, &PatchError{Op: -1, Path: ps[0].Path, Msg: "the patched document is not valid IR: " + patchProblems(ps)}
	}
	return nw, nil
}

// patchProblems spells the problems of a patched document, the first
// without its path (PatchError carries it), at most 10.
func patchProblems(ps []Problem) string {
	var b strings.Builder
	b.WriteString(ps[0].Message)
	for i, p := range ps[1:] {
		if i == 9 {
			fmt.Fprintf(&b, "; and %d more", len(ps)-10)
			break
		}
		b.WriteString("; ")
		b.WriteString(p.String())
	}
	return b.String()
}

// A patchOp is one decoded operation, kept with its own encoding so that a
// failing prefix can be re-applied.
type patchOp struct {
	op, path, from string
	raw            json.RawMessage
}

// decodePatch checks a patch's shape before anything is applied: bounded,
// a JSON array of objects with a known op and JSON pointers as paths, and
// no negative index in a path.
func decodePatch(patch []byte) ([]patchOp, error) {
	if len(patch) > MaxPatchBytes {
		return nil, &PatchError{Op: -1, Msg: fmt.Sprintf("the patch is %d bytes, over the limit of %d", len(patch), MaxPatchBytes)}
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(patch, &raws); err != nil {
		return nil, &PatchError{Op: -1, Msg: "a patch is a JSON array of operations (RFC 6902): " + err.Error()}
	}
	if len(raws) > MaxPatchOps {
		return nil, &PatchError{Op: -1, Msg: fmt.Sprintf("the patch has %d operations, over the limit of %d", len(raws), MaxPatchOps)}
	}
	ops := make([]patchOp, len(raws))
	for i, raw := range raws {
		var o struct {
			Op    *string         `json:"op"`
			Path  *string         `json:"path"`
			From  *string         `json:"from"`
			Value json.RawMessage `json:"value"`
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		if err := dec.Decode(&o); err != nil {
			return nil, &PatchError{Op: i, Msg: "not an operation object: " + err.Error()}
		}
		if o.Op == nil || o.Path == nil {
			return nil, &PatchError{Op: i, Msg: `an operation needs "op" and "path"`}
		}
		switch *o.Op {
		case "add", "replace", "test":
			if o.Value == nil {
				return nil, &PatchError{Op: i, Path: *o.Path, Msg: fmt.Sprintf(`%s needs a "value"`, *o.Op)}
			}
		case "remove":
		case "move", "copy":
			if o.From == nil {
				return nil, &PatchError{Op: i, Path: *o.Path, Msg: fmt.Sprintf(`%s needs a "from"`, *o.Op)}
			}
		default:
			return nil, &PatchError{Op: i, Path: *o.Path, Msg: fmt.Sprintf("unknown op %q (add, remove, replace, move, copy or test)", *o.Op)}
		}
		ops[i] = patchOp{op: *o.Op, path: *o.Path, raw: raw}
		if o.From != nil {
			ops[i].from = *o.From
		}
		for _, p := range []string{ops[i].path, ops[i].from} {
			if err := checkPointer(p); err != "" {
				return nil, &PatchError{Op: i, Path: p, Msg: err}
			}
		}
	}
	return ops, nil
}

// checkPointer returns why p is not a JSON pointer a patch may use, or "".
func checkPointer(p string) string {
	if p == "" {
		return ""
	}
	if p[0] != '/' {
		return `a JSON pointer starts with "/"`
	}
	for _, seg := range strings.Split(p[1:], "/") {
		if len(seg) > 1 && seg[0] == '-' && strings.Trim(seg[1:], "0123456789") == "" {
			return fmt.Sprintf("negative index %s: RFC 6902 has none (use - to append)", seg)
		}
	}
	return ""
}

var applyOptions = &jsonpatch.ApplyOptions{
	SupportNegativeIndices:   false,
	AccumulatedCopySizeLimit: MaxCopyBytes,
	AllowMissingPathOnRemove: false,
	EnsurePathExistsOnAdd:    false,
}

// applyOps applies ops to doc. When the patch fails, the first failing
// operation is found by applying prefixes (a failing prefix fails longer
// ones too), a logarithmic number of applications, and named.
func applyOps(doc []byte, ops []patchOp) ([]byte, error) {
	out, err := applyPrefix(doc, ops)
	if err == nil {
		if len(out) > MaxSize {
			return nil, &PatchError{Op: -1, Msg: fmt.Sprintf("the patched document is %d bytes, over the limit of %d", len(out), MaxSize)}
		}
		return out, nil
	}
	lo, hi := 0, len(ops) // ops[:lo] applies, ops[:hi] fails
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if _, e := applyPrefix(doc, ops[:mid]); e != nil {
			hi, err = mid, e
		} else {
			lo = mid
		}
	}
	o := ops[hi-1]
	path := o.path
	msg := patchMessage(err)
	if (o.op == "move" || o.op == "copy") && strings.Contains(msg, "from") {
		path = o.from
	}
	return nil, &PatchError{Op: hi - 1, Path: path, Msg: fmt.Sprintf("%s: %s", o.op, msg)}
}

func applyPrefix(doc []byte, ops []patchOp) ([]byte, error) {
	buf := make([]byte, 0, 2+len(ops)*64)
	buf = append(buf, '[')
	for i, o := range ops {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, o.raw...)
	}
	buf = append(buf, ']')
	p, err := jsonpatch.DecodePatch(buf)
	if err != nil {
		return nil, err
	}
	return p.ApplyWithOptions(doc, applyOptions)
}

// patchMessage turns the library's error into a sentence: its messages
// wrap sentinel errors with their Go spelling.
func patchMessage(err error) string {
	var ce *jsonpatch.AccumulatedCopySizeError
	if errors.As(err, &ce) {
		return fmt.Sprintf("copies would add more than %d bytes to the document", MaxCopyBytes)
	}
	msg := err.Error()
	switch {
	case errors.Is(err, jsonpatch.ErrTestFailed):
		return "test failed: the value at the path differs"
	case errors.Is(err, jsonpatch.ErrInvalidIndex):
		return "no such array index"
	case errors.Is(err, jsonpatch.ErrMissing):
		return "no value at the path (unknown path)"
	}
	return msg
}

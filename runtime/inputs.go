package runtime

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/wfc-lang/wfc/ir"
)

// An InputError lists everything wrong with a run's inputs.
type InputError struct {
	Problems []string
}

func (e *InputError) Error() string {
	if len(e.Problems) == 1 {
		return "invalid inputs: " + e.Problems[0]
	}
	return "invalid inputs:\n\t" + strings.Join(e.Problems, "\n\t")
}

// ValidateInputs checks a run's inputs against the workflow's input block
// and returns them as a JSON object with defaults filled in. Unknown names,
// missing required inputs and values of the wrong type are errors; nothing
// is written anywhere. Values may be what encoding/json decodes (float64
// numbers, json.Number, map[string]any, []any) or Go ints, strings, bools,
// slices and maps of them. An int must be written as an integer (no
// fraction or exponent) that fits in 64 bits, a number must be finite as a
// 64-bit float (DecodeInputs keeps numbers as written, so that an int
// keeps all its digits).
func ValidateInputs(w *ir.Workflow, inputs map[string]any) (json.RawMessage, error) {
	var probs []string
	declared := map[string]*ir.Input{}
	for i := range w.Inputs {
		declared[w.Inputs[i].Name] = &w.Inputs[i]
	}
	var unknown []string
	for k := range inputs {
		if declared[k] == nil {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	for _, k := range unknown {
		probs = append(probs, fmt.Sprintf("unknown input %q", k))
	}
	out := map[string]json.RawMessage{}
	for i := range w.Inputs {
		in := &w.Inputs[i]
		v, ok := inputs[in.Name]
		if !ok {
			switch {
			case in.Default != nil:
				out[in.Name] = in.Default
			case in.Required:
				probs = append(probs, fmt.Sprintf("missing required input %q (%s)", in.Name, in.Type.String()))
			}
			continue
		}
		// Normalize through JSON, then check the decoded form.
		data, err := json.Marshal(v)
		if err != nil {
			probs = append(probs, fmt.Sprintf("input %q: %v", in.Name, err))
			continue
		}
		dv, err := decodeJSON(data)
		if err != nil {
			probs = append(probs, fmt.Sprintf("input %q: %v", in.Name, err))
			continue
		}
		if v == nil && !in.Required {
			continue // an explicit null for an optional input: absent
		}
		if d := jsonDepth(dv); d > ir.MaxValueDepth {
			probs = append(probs, fmt.Sprintf("input %q is nested %d deep, over the limit of %d", in.Name, d, ir.MaxValueDepth))
			continue
		}
		if err := checkType(dv, &in.Type, "input "+in.Name); err != nil {
			if s, ok := dv.(string); ok && in.Type.Kind == ir.KindDuration {
				err = badDuration(in.Name, s)
			}
			probs = append(probs, err.Error())
			continue
		}
		if err := checkInputNumbers(dv, &in.Type, "input "+in.Name); err != nil {
			probs = append(probs, err.Error())
			continue
		}
		out[in.Name] = data
	}
	if len(probs) > 0 {
		return nil, &InputError{Problems: probs}
	}
	data, err := json.Marshal(out)
	if err != nil {
		return nil, errors.New("encoding inputs: " + err.Error())
	}
	return data, nil
}

// jsonDepth is the nesting of a decoded JSON value (a scalar is 0); it
// stops counting past ir.MaxValueDepth+1 (the nesting the IR allows a
// value, and the expressions that read it convert).
func jsonDepth(v any) int {
	d := 0
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			d = max(d, jsonDepth(e))
			if d > ir.MaxValueDepth {
				break
			}
		}
		return d + 1
	case map[string]any:
		for _, e := range x {
			d = max(d, jsonDepth(e))
			if d > ir.MaxValueDepth {
				break
			}
		}
		return d + 1
	}
	return 0
}

// DecodeInputs reads a run's inputs written as one JSON object (`wfc run
// --input-file`), for ValidateInputs. Numbers are kept as written
// (json.Number), so that an int keeps all its digits; nothing but white
// space may follow the object.
func DecodeInputs(data []byte) (map[string]any, error) {
	v, err := decodeWhole(data)
	if err != nil {
		return nil, err
	}
	in, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("got %s, want an object", jsonKind(v))
	}
	return in, nil
}

// ParseInput converts the text of a command-line input (`--input
// name=text`) to a value for ValidateInputs: strings are taken as they
// are; a duration is a Go duration literal (`100ms`, `1h30m`, `2s`),
// checked here and kept as that string, which is how a run's inputs hold a
// duration; for other types the whole text must be one JSON value (`4`,
// `true`, `["a","b"]`) of the input's type, checked as ValidateInputs
// checks a JSON input (DecodeInputs), so that --input and --input-file
// accept the same values; for an input of type any, text that is not JSON
// is a string. Unknown names are errors.
func ParseInput(w *ir.Workflow, name, text string) (any, error) {
	for i := range w.Inputs {
		in := &w.Inputs[i]
		if in.Name != name {
			continue
		}
		switch in.Type.Kind {
		case ir.KindString:
			return text, nil
		case ir.KindSecret:
			// The secret's name, as text; checked here so that the error
			// never quotes what may be the secret itself.
			if err := checkType(text, &in.Type, "input "+name); err != nil {
				return nil, err
			}
			return text, nil
		case ir.KindDuration:
			if _, err := time.ParseDuration(text); err != nil {
				return nil, badDuration(name, text)
			}
			return text, nil
		}
		v, err := decodeWhole([]byte(text))
		if err != nil {
			if in.Type.Kind == ir.KindAny {
				return text, nil
			}
			return nil, fmt.Errorf("input %s (%s): %q is not a JSON value (%v)", name, in.Type.String(), text, err)
		}
		if v == nil && !in.Required {
			return nil, nil // null for an optional input: absent, as in JSON inputs
		}
		if err := checkType(v, &in.Type, "input "+name); err != nil {
			return nil, err
		}
		if err := checkInputNumbers(v, &in.Type, "input "+name); err != nil {
			return nil, err
		}
		return v, nil
	}
	return nil, fmt.Errorf("unknown input %q", name)
}

// decodeWhole decodes data that must be exactly one JSON value (white
// space around it aside), numbers as json.Number.
func decodeWhole(data []byte) (any, error) {
	if !json.Valid(data) {
		var v any
		err := json.Unmarshal(data, &v) // for its description of the syntax error
		if err == nil {
			err = errors.New("not a JSON value")
		}
		return nil, err
	}
	return decodeJSON(data)
}

// checkInputNumbers checks the numbers of an input value that checkType
// accepted against what an input may hold: an int is an integer literal
// (no fraction, no exponent) that fits in 64 bits, a number is finite as
// a 64-bit float.
func checkInputNumbers(v any, t *ir.Type, path string) error {
	if t == nil {
		return nil
	}
	switch t.Kind {
	case ir.KindInt:
		n, ok := v.(json.Number)
		if !ok {
			return nil
		}
		if _, err := strconv.ParseInt(n.String(), 10, 64); err != nil {
			if errors.Is(err, strconv.ErrRange) {
				return fmt.Errorf("%s: %s is out of range for int (%d to %d)", path, n, math.MinInt64, math.MaxInt64)
			}
			return fmt.Errorf("%s: %s is not an int (write a whole number without fraction or exponent)", path, n)
		}
	case ir.KindNumber:
		n, ok := v.(json.Number)
		if !ok {
			return nil
		}
		if _, err := strconv.ParseFloat(n.String(), 64); err != nil {
			return fmt.Errorf("%s: %s is out of range for number (a 64-bit float)", path, n)
		}
	case ir.KindList:
		l, _ := v.([]any)
		for i, e := range l {
			if err := checkInputNumbers(e, t.Elem, path+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
	case ir.KindMap:
		m, _ := v.(map[string]any)
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if err := checkInputNumbers(m[k], t.Elem, path+"."+k); err != nil {
				return err
			}
		}
	case ir.KindObject:
		m, _ := v.(map[string]any)
		for i := range t.Fields {
			f := &t.Fields[i]
			if e, ok := m[f.Name]; ok {
				if err := checkInputNumbers(e, &f.Type, path+"."+f.Name); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// badDuration is the error for an input of type duration whose value is
// not a duration.
func badDuration(name, text string) error {
	return fmt.Errorf("input %s: %q is not a duration (write one like 100ms, 1h30m or 2s: units ns, us, ms, s, m, h)", name, text)
}

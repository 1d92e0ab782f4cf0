package runtime

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
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
// slices and maps of them.
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
		if err := checkType(dv, &in.Type, "input "+in.Name); err != nil {
			if s, ok := dv.(string); ok && in.Type.Kind == ir.KindDuration {
				err = badDuration(in.Name, s)
			}
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

// ParseInput converts the text of a command-line input (`--input
// name=text`) to a value for ValidateInputs: strings are taken as they
// are; a duration is a Go duration literal (`100ms`, `1h30m`, `2s`),
// checked here and kept as that string, which is how a run's inputs hold a
// duration; other types are read as JSON (`4`, `true`, `["a","b"]`); for
// an input of type any, text that is not JSON is a string. Unknown names
// are errors.
func ParseInput(w *ir.Workflow, name, text string) (any, error) {
	for i := range w.Inputs {
		in := &w.Inputs[i]
		if in.Name != name {
			continue
		}
		switch in.Type.Kind {
		case ir.KindString:
			return text, nil
		case ir.KindDuration:
			if _, err := time.ParseDuration(text); err != nil {
				return nil, badDuration(name, text)
			}
			return text, nil
		}
		v, err := decodeJSON([]byte(text))
		if err != nil {
			if in.Type.Kind == ir.KindAny {
				return text, nil
			}
			return nil, fmt.Errorf("input %s (%s): %q is not a JSON value", name, in.Type.String(), text)
		}
		return v, nil
	}
	return nil, fmt.Errorf("unknown input %q", name)
}

// badDuration is the error for an input of type duration whose value is
// not a duration.
func badDuration(name, text string) error {
	return fmt.Errorf("input %s: %q is not a duration (write one like 100ms, 1h30m or 2s: units ns, us, ms, s, m, h)", name, text)
}

package runtime

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/wfc-lang/wfc/ir"
)

// limitInputsWorkflow declares an optional input of each kind the
// input tests feed.
func limitInputsWorkflow(t testing.TB) *ir.Workflow {
	opt := func(name string, typ ir.Type) ir.Input { return ir.Input{Name: name, Type: typ} }
	intT, numT, strT := ir.Type{Kind: ir.KindInt}, ir.Type{Kind: ir.KindNumber}, ir.Type{Kind: ir.KindString}
	return build(t, wfSpec{
		inputs: []ir.Input{
			opt("n", intT),
			opt("x", numT),
			opt("b", ir.Type{Kind: ir.KindBool}),
			opt("xs", ir.Type{Kind: ir.KindList, Elem: &intT}),
			opt("m", ir.Type{Kind: ir.KindMap, Elem: &numT}),
			opt("o", ir.Type{Kind: ir.KindObject, Fields: []ir.Field{{Name: "a", Type: intT}, {Name: "s", Type: strT, Optional: true}}}),
			opt("a", ir.Type{Kind: ir.KindAny}),
			opt("s", strT),
			opt("d", ir.Type{Kind: ir.KindDuration}),
		},
		nodes: []*nodeSpec{task("x", "noop")},
	})
}

// limitInputNames are the inputs of limitInputsWorkflow, in order.
var limitInputNames = []string{"n", "x", "b", "xs", "m", "o", "a", "s", "d"}

// viaFlag is what `--input name=text` makes of text: ParseInput, then
// ValidateInputs.
func viaFlag(w *ir.Workflow, name, text string) (json.RawMessage, error) {
	v, err := ParseInput(w, name, text)
	if err != nil {
		return nil, err
	}
	return ValidateInputs(w, map[string]any{name: v})
}

// viaFile is what `--input-file` makes of {"name": value}: DecodeInputs,
// then ValidateInputs.
func viaFile(w *ir.Workflow, name, value string) (json.RawMessage, error) {
	in, err := DecodeInputs([]byte(`{"` + name + `": ` + value + `}`))
	if err != nil {
		return nil, err
	}
	return ValidateInputs(w, in)
}

// An --input value is parsed whole by its declared type: trailing
// garbage, a fraction or exponent for an int and numbers out of range are
// errors naming the input, not a prefix or a rounded value (issue 14, item
// 13).
func TestLimitInputParsedWhole(t *testing.T) {
	w := limitInputsWorkflow(t)
	for _, c := range []struct{ name, text, err string }{
		{"n", "1,000", `input n (int): "1,000" is not a JSON value (invalid character ',' after top-level value)`},
		{"n", "12abc", `input n (int): "12abc" is not a JSON value`},
		{"n", "0x10", `input n (int): "0x10" is not a JSON value`},
		{"n", "99999999999999999999999", `input n: 99999999999999999999999 is out of range for int (-9223372036854775808 to 9223372036854775807)`},
		{"n", "9223372036854775808", `out of range for int`},
		{"n", "-9223372036854775809", `out of range for int`},
		{"n", "4.5", `input n: got number, want int`},
		{"n", "4.0", `input n: 4.0 is not an int (write a whole number without fraction or exponent)`},
		{"n", "1e3", `input n: 1e3 is not an int`},
		{"n", `"4"`, `input n: got string, want int`},
		{"n", "", `input n (int): "" is not a JSON value`},
		{"x", "1e400", `input x: 1e400 is out of range for number (a 64-bit float)`},
		{"x", "1.5.2", `is not a JSON value`},
		{"x", "NaN", `is not a JSON value`},
		{"b", "truex", `is not a JSON value`},
		{"b", "1", `input b: got int, want bool`},
		{"xs", "[1,2]x", `input xs (list<int>): "[1,2]x" is not a JSON value`},
		{"xs", "[1,2][3]", `is not a JSON value`},
		{"xs", "[1,99999999999999999999]", `input xs[1]: 99999999999999999999 is out of range for int`},
		{"xs", "[1,2.5]", `input xs[1]: got number, want int`},
		{"m", `{"a":1}{}`, `is not a JSON value`},
		{"m", `{"b":1,"a":1e999}`, `input m.a: 1e999 is out of range for number`},
		{"o", `{"a":1e2}`, `input o.a: 1e2 is not an int`},
	} {
		_, err := ParseInput(w, c.name, c.text)
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("--input %s=%s: %v, want an error containing %q", c.name, c.text, err, c.err)
		}
		// The same value in a JSON input is refused as well.
		if json.Valid([]byte(c.text)) {
			if data, err := viaFile(w, c.name, c.text); err == nil {
				t.Errorf("--input-file {%q: %s}: accepted as %s", c.name, c.text, data)
			}
		}
	}
	for _, c := range []struct{ name, text, want string }{
		{"n", "12345678901234567", `{"n":12345678901234567}`},
		{"n", "9223372036854775807", `{"n":9223372036854775807}`},
		{"n", "-9223372036854775808", `{"n":-9223372036854775808}`},
		{"n", " 7 ", `{"n":7}`},
		{"n", "null", `{}`},
		{"x", "1e300", `{"x":1e300}`},
		{"x", "-0.25", `{"x":-0.25}`},
		{"x", "12345678901234567", `{"x":12345678901234567}`},
		{"b", "false", `{"b":false}`},
		{"xs", "[1, 2]", `{"xs":[1,2]}`},
		{"m", `{"k": 1.5}`, `{"m":{"k":1.5}}`},
		{"o", `{"a": 3, "s": "t"}`, `{"o":{"a":3,"s":"t"}}`},
		{"a", "99999999999999999999999", `{"a":99999999999999999999999}`},
		{"a", "12abc", `{"a":"12abc"}`}, // not JSON: a string
		{"a", "[1,2]x", `{"a":"[1,2]x"}`},
		{"s", "12abc", `{"s":"12abc"}`},
		{"d", "100ms", `{"d":"100ms"}`},
	} {
		data, err := viaFlag(w, c.name, c.text)
		if err != nil || string(data) != c.want {
			t.Errorf("--input %s=%s: %s, %v; want %s", c.name, c.text, data, err, c.want)
		}
	}
}

// A JSON input keeps an int's digits (it was decoded into a float64,
// which rounds above 2^53) and may hold nothing after the object.
func TestLimitInputFileExact(t *testing.T) {
	w := limitInputsWorkflow(t)
	for _, c := range []struct{ file, want string }{
		{`{"n": 12345678901234567}`, `{"n":12345678901234567}`},
		{`{"xs": [9007199254740993, -9223372036854775808]}`, `{"xs":[9007199254740993,-9223372036854775808]}`},
		{"\n{\"n\": 1}\n\n", `{"n":1}`},
	} {
		in, err := DecodeInputs([]byte(c.file))
		if err != nil {
			t.Errorf("%s: %v", c.file, err)
			continue
		}
		data, err := ValidateInputs(w, in)
		if err != nil || string(data) != c.want {
			t.Errorf("%s: %s, %v; want %s", c.file, data, err, c.want)
		}
	}
	for _, file := range []string{`{"n": 1}x`, `{"n": 1}{}`, `[1]`, `"n"`, `{"n": 1`, ``} {
		if in, err := DecodeInputs([]byte(file)); err == nil {
			t.Errorf("%q: accepted as %v", file, in)
		}
	}
	// Go values given to Submit are held to the same rules.
	for _, v := range []any{1e20, json.Number("1e3"), json.Number("99999999999999999999")} {
		if data, err := ValidateInputs(w, map[string]any{"n": v}); err == nil {
			t.Errorf("n=%v (%T): accepted as %s", v, v, data)
		}
	}
	if data, err := ValidateInputs(w, map[string]any{"n": float64(1 << 40), "xs": []int{1, 2}}); err != nil || string(data) != `{"n":1099511627776,"xs":[1,2]}` {
		t.Errorf("Go values: %s, %v", data, err)
	}
}

// FuzzLimitInputAgree: a value written in JSON syntax means the same
// given with --input as in an --input-file: both accept it, as the same
// value, or both refuse it. For string and duration inputs, whose --input
// text is taken as it is, the --input text is the JSON string's content.
func FuzzLimitInputAgree(f *testing.F) {
	for _, s := range []string{
		"1", "-0", "4.0", "1e3", "12abc", "1,000", "0x10", "99999999999999999999999",
		"12345678901234567", "9223372036854775807", "9223372036854775808", "1e400", "1e-400",
		"true", "null", `"x"`, `"100ms"`, `"1d"`, "[1,2]", "[1,2]x", `{"a":1}`, `{"a":1.5,"s":null}`,
		`{"k":1e309}`, "[]", "{}", " 5 ", "\t[ 1 ]\n",
	} {
		for i := range limitInputNames {
			f.Add(uint8(i), s)
		}
	}
	w := limitInputsWorkflow(f)
	f.Fuzz(func(t *testing.T, which uint8, text string) {
		name := limitInputNames[int(which)%len(limitInputNames)]
		kind := w.Inputs[int(which)%len(limitInputNames)].Type.Kind
		if !json.Valid([]byte(text)) {
			// No JSON input holds this text as the input's value: the flag
			// refuses it too, except where it takes text as it is.
			if kind == ir.KindString || kind == ir.KindDuration || kind == ir.KindAny {
				return
			}
			if data, err := viaFlag(w, name, text); err == nil {
				t.Fatalf("--input %s=%q accepted as %s; it is not JSON", name, text, data)
			}
			return
		}
		flagText := text
		if kind == ir.KindString || kind == ir.KindDuration {
			var v any
			json.Unmarshal([]byte(text), &v)
			s, ok := v.(string)
			if !ok {
				return // not a string: nothing to give the flag
			}
			flagText = s
		}
		fromFile, errFile := viaFile(w, name, text)
		fromFlag, errFlag := viaFlag(w, name, flagText)
		switch {
		case (errFile == nil) != (errFlag == nil):
			t.Fatalf("%s = %q: --input-file gives %s, %v; --input gives %s, %v", name, text, fromFile, errFile, fromFlag, errFlag)
		case errFile == nil && string(fromFile) != string(fromFlag):
			t.Fatalf("%s = %q: --input-file gives %s; --input gives %s", name, text, fromFile, fromFlag)
		}
	})
}

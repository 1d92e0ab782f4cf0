package runtime

import (
	"testing"

	"github.com/wfc-lang/wfc/ir"
)

func TestParseInput(t *testing.T) {
	w := build(t, wfSpec{
		inputs: []ir.Input{
			input("s", ir.KindString), input("n", ir.KindInt), input("d", ir.KindDuration), input("a", ir.KindAny),
			{Name: "l", Type: ir.Type{Kind: ir.KindList, Elem: &ir.Type{Kind: ir.KindString}}, Required: true},
		},
		nodes: []*nodeSpec{task("x", "noop")},
	})
	in := map[string]any{}
	for _, kv := range [][2]string{{"s", "4"}, {"n", "4"}, {"d", "1m"}, {"a", "hello"}, {"l", `["x","y"]`}} {
		v, err := ParseInput(w, kv[0], kv[1])
		if err != nil {
			t.Fatal(err)
		}
		in[kv[0]] = v
	}
	data, err := ValidateInputs(w, in)
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != `{"a":"hello","d":"1m","l":["x","y"],"n":4,"s":"4"}` {
		t.Errorf("inputs %s", data)
	}
	if _, err := ParseInput(w, "n", "four"); err == nil {
		t.Error("n=four accepted")
	}
	if _, err := ParseInput(w, "zz", "1"); err == nil {
		t.Error("unknown input accepted")
	}
}

// A duration input takes a Go duration literal, kept as the string a JSON
// input would hold; anything else is an error naming the input, from
// ParseInput and from ValidateInputs alike.
func TestDurationInput(t *testing.T) {
	w := build(t, wfSpec{
		inputs: []ir.Input{input("d", ir.KindDuration)},
		nodes:  []*nodeSpec{task("x", "noop")},
	})
	for _, text := range []string{"100ms", "1h30m", "2s", "1.5h", "250us"} {
		v, err := ParseInput(w, "d", text)
		if err != nil {
			t.Errorf("d=%s: %v", text, err)
			continue
		}
		data, err := ValidateInputs(w, map[string]any{"d": v})
		if want := `{"d":"` + text + `"}`; err != nil || string(data) != want {
			t.Errorf("d=%s: inputs %s, %v; want %s", text, data, err, want)
		}
	}
	const want = `input d: "abc" is not a duration (write one like 100ms, 1h30m or 2s: units ns, us, ms, s, m, h)`
	for _, text := range []string{"abc", "1d", "5", ""} {
		if v, err := ParseInput(w, "d", text); err == nil {
			t.Errorf("d=%q accepted as %v", text, v)
		}
	}
	if _, err := ParseInput(w, "d", "abc"); err == nil || err.Error() != want {
		t.Errorf("ParseInput(d=abc): %v\nwant %s", err, want)
	}
	if _, err := ValidateInputs(w, map[string]any{"d": "abc"}); err == nil || err.Error() != "invalid inputs: "+want {
		t.Errorf("ValidateInputs(d=abc): %v\nwant invalid inputs: %s", err, want)
	}
}

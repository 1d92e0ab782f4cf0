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

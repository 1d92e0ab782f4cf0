package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/wfc-lang/wfc/ir"
)

// benchPlan is the plan of a `wfc bench` shape (runtime/bench/workflows).
func benchPlan(t testing.TB, shape string) *plan {
	t.Helper()
	data, err := os.ReadFile("bench/workflows/" + shape + ".ir.json")
	if err != nil {
		t.Fatal(err)
	}
	w, err := ir.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	p, err := newPlan(w, func(string) string { return "q" }, "q")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// templateRun renders the `with` of each node of the bench's template
// shape as a worker does, each from its parent's output as the token
// carries it, and returns the three configs.
func templateRun(t testing.TB, p *plan) (order, letter, check []byte) {
	ctx := context.Background()
	node := func(id string, outputs map[string]string) []byte {
		var act vars
		if p.hasExprs(id) {
			var err error
			if act, err = p.activation("{}", p.reads(id), outputs); err != nil {
				t.Fatal(err)
			}
		}
		cfg, err := p.params(ctx, p.nodes[id].With, id, act, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	order = node("order", nil)
	letter = node("letter", map[string]string{"order": string(order)})
	check = node("check", map[string]string{"letter": string(letter)})
	return order, letter, check
}

// BenchmarkTemplatePath: the evaluation work of one run of the template
// shape (activations and configs of its three nodes).
func BenchmarkTemplatePath(b *testing.B) {
	p := benchPlan(b, "template")
	b.ReportAllocs()
	for b.Loop() {
		templateRun(b, p)
	}
}

// The configs of the template shape, and what rendering a run of it
// allocates: 167 before scalars, names and templates were written without
// encoding/json's reflection (jsonout.go), 137 after.
func TestTemplatePathAllocs(t *testing.T) {
	p := benchPlan(t, "template")
	order, letter, check := templateRun(t, p)
	var compact bytes.Buffer // (the IR file's constants are indented)
	if err := json.Compact(&compact, order); err != nil {
		t.Fatal(err)
	}
	order = compact.Bytes()
	for _, c := range []struct{ got, want string }{
		{string(order), `{"id":"A-1042","name":"Ada","items":["pen","ink","paper"],"total":42.5}`},
		{string(letter), `{"text":"Dear Ada, your order A-1042 of [\"pen\",\"ink\",\"paper\"] totals 42.5."}`},
		{string(check), `{"n":65}`},
	} {
		if c.got != c.want {
			t.Errorf("config %s, want %s", c.got, c.want)
		}
	}
	if n := testing.AllocsPerRun(200, func() { templateRun(t, p) }); n > 145 {
		t.Errorf("a run's configs took %.0f allocations, want at most 145", n)
	}
}

// A `with` value that fails to evaluate names its node and param, an
// expression's and a template's alike (params makes the name only then).
func TestParamsErrorNamesParam(t *testing.T) {
	w := build(t, wfSpec{nodes: []*nodeSpec{
		task("a", "cel", with("v", konst("1"))),
		task("b", "cel", after("a"), with("ok", konst("2")), with("bad", cexpr("a.output.missing"))),
		task("c", "echo", after("a"), with("text", tmpl("x ", &ir.Expr{CEL: "a.output.nope"}))),
	}})
	p, err := newPlan(w, func(string) string { return "q" }, "q")
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{"b": "evaluating b.with.bad: ", "c": "evaluating c.with.text: "} {
		act, err := p.activation("{}", p.reads(id), map[string]string{"a": `{"v":1}`})
		if err != nil {
			t.Fatal(err)
		}
		_, err = p.params(context.Background(), p.nodes[id].With, id, act, 1<<20)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one containing %q", id, err, want)
		}
	}
}

// The activation of cel-fanout's join (100 outputs) is made at its size,
// and each output converted for CEL in place: 906 allocations before (the
// map grown seven times as it filled, a second map for each output), 699
// after.
func TestJoinActivationAllocs(t *testing.T) {
	p := benchPlan(t, "cel-fanout")
	outs := map[string]string{}
	for i := 1; i <= 100; i++ {
		outs["w"+strconv.Itoa(i)] = `{"v":` + strconv.Itoa(i+1) + `}`
	}
	ids := p.reads("z")
	if len(ids) != 100 {
		t.Fatalf("the join reads %d outputs, want 100", len(ids))
	}
	n := testing.AllocsPerRun(50, func() {
		if _, err := p.activation("{}", ids, outs); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("%.0f allocations", n)
	if n > 700 {
		t.Errorf("the join's activation took %.0f allocations", n)
	}
}

package ir

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// analyzed returns every hand-built workflow after Analyze, by name.
func analyzed(t testing.TB) map[string]*Workflow {
	t.Helper()
	m := allWorkflows()
	for name, w := range m {
		if err := Analyze(w); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	return m
}

func names(m map[string]*Workflow) []string {
	var ns []string
	for n := range m {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return ns
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s differs (-want +got):\n%s", path, diff)
	}
}

func TestGolden(t *testing.T) {
	w := leadQualification()
	if err := Analyze(w); err != nil {
		t.Fatal(err)
	}
	j, err := Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "lead_qualification.json", j)
	y, err := MarshalYAML(w)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "lead_qualification.yaml", y)
	h, err := Hash(w)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "lead_qualification.hash", []byte(h+"\n"))
}

func TestMarshalShape(t *testing.T) {
	b, err := Marshal(&Workflow{Nodes: []Node{{ID: "a"}}})
	if err != nil {
		t.Fatal(err)
	}
	want := `{
  "ir_version": "",
  "name": "",
  "settings": {},
  "inputs": [],
  "outputs": [],
  "handlers": [],
  "nodes": [
    {
      "id": "a",
      "type": "",
      "join": "",
      "dependencies": [],
      "dependents": []
    }
  ],
  "edges": [],
  "entries": [],
  "terminals": [],
  "order": []
}
`
	if diff := cmp.Diff(want, string(b)); diff != "" {
		t.Errorf("Marshal (-want +got):\n%s", diff)
	}
	if _, err := Marshal(nil); err == nil {
		t.Error("Marshal(nil) succeeded")
	}
}

func TestMarshalErrors(t *testing.T) {
	cyclic := &Type{Kind: KindList}
	cyclic.Elem = cyclic
	for name, w := range map[string]*Workflow{
		"cyclic type": {Inputs: []Input{{Name: "x", Type: *cyclic}}},
		"bad const":   {Outputs: []Output{}, Nodes: []Node{{With: []Param{{Value: Value{Const: []byte(`{`)}}}}}},
		"trailing":    {Inputs: []Input{{Default: []byte(`1 2`)}}},
	} {
		if _, err := Marshal(w); err == nil {
			t.Errorf("%s: Marshal succeeded", name)
		}
		if _, err := Hash(w); err == nil {
			t.Errorf("%s: Hash succeeded", name)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	ws := analyzed(t)
	for _, name := range names(ws) {
		t.Run(name, func(t *testing.T) {
			w := ws[name]
			b1, err := Marshal(w)
			if err != nil {
				t.Fatal(err)
			}
			w2, err := Decode(b1)
			if err != nil {
				t.Fatal(err)
			}
			// Embedded JSON is normalized on output; compare it as JSON.
			if diff := cmp.Diff(w, w2, cmpopts.EquateEmpty(), equateJSON); diff != "" {
				t.Errorf("Decode(Marshal(w)) (-want +got):\n%s", diff)
			}
			b2, err := Marshal(w2)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(b1, b2) {
				t.Errorf("Marshal is not stable across Decode:\n%s\n%s", b1, b2)
			}
			if err := ValidateSchema(b1); err != nil {
				t.Errorf("schema: %v", err)
			}
		})
	}
}

// equateJSON compares embedded JSON values by meaning.
var equateJSON = cmp.FilterValues(func(a, b json.RawMessage) bool { return len(a) > 0 && len(b) > 0 }, cmp.Comparer(jsonEqual))

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	return cmp.Equal(x, y)
}

func TestHash(t *testing.T) {
	h := func(w *Workflow) string {
		t.Helper()
		s, err := Hash(w)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	base := h(leadQualification())
	if !strings.HasPrefix(base, "sha256:") || len(base) != len("sha256:")+64 {
		t.Fatalf("Hash = %q", base)
	}

	same := map[string]func(w *Workflow){
		"again": func(w *Workflow) {},
		"analyzed": func(w *Workflow) {
			if err := Analyze(w); err != nil {
				t.Fatal(err)
			}
		},
		"moved source": func(w *Workflow) {
			w.Source = "elsewhere/lead.wf"
			for i := range w.Nodes {
				if w.Nodes[i].Loc != nil {
					w.Nodes[i].Loc.Line += 10
				}
			}
			w.Inputs[0].Loc = nil
			w.Nodes[0].With[0].Value.Expr.Loc = &Loc{Line: 3, Col: 4}
			w.Handlers[1].Loc.File = "other.wf"
		},
		"const spelled differently": func(w *Workflow) {
			nodeOf(w, "manual_review").With[0].Value.Const = json.RawMessage("{\n \"priority\" :1.0,\"tags\":[\"lead\",\"\\u003creview>\"]}")
		},
	}
	for name, mutate := range same {
		w := leadQualification()
		mutate(w)
		if got := h(w); got != base {
			t.Errorf("%s: hash changed", name)
		}
	}

	differs := map[string]func(w *Workflow){
		"expression": func(w *Workflow) { w.Outputs[0].Expr.CEL += " " },
		"number literal": func(w *Workflow) {
			nodeOf(w, "manual_review").With[0].Value.Const = json.RawMessage(`{"priority": 1, "tags": ["lead", "<review>"]}`)
		},
		"key order": func(w *Workflow) {
			nodeOf(w, "manual_review").With[0].Value.Const = json.RawMessage(`{"tags": ["lead", "<review>"], "priority": 1.0}`)
		},
		"timeout":     func(w *Workflow) { w.Nodes[0].TimeoutMS++ },
		"edge":        func(w *Workflow) { w.Edges = w.Edges[1:] },
		"description": func(w *Workflow) { w.Description = "" },
	}
	for name, mutate := range differs {
		w := leadQualification()
		mutate(w)
		if got := h(w); got == base {
			t.Errorf("%s: hash did not change", name)
		}
	}
}

func TestCanonicalLeavesOut(t *testing.T) {
	w := leadQualification()
	if err := Analyze(w); err != nil {
		t.Fatal(err)
	}
	b, err := Canonical(w)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.ContainsAny(b, "\n ") && !json.Valid(b) {
		t.Fatalf("not compact JSON: %s", b)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if strings.HasSuffix(path, "/const") {
				return // user data
			}
			for k, x := range v {
				switch k {
				case "loc", "source", "entries", "terminals", "order", "dependencies", "dependents",
					"join_info", "may_skip", "entry", "terminal", "loop_body":
					t.Errorf("Canonical has %s/%s", path, k)
				}
				walk(path+"/"+k, x)
			}
		case []any:
			for _, x := range v {
				walk(path+"/*", x)
			}
		}
	}
	walk("", doc)
	if !bytes.Contains(b, []byte(`"<review>"`)) || !bytes.Contains(b, []byte(`"priority":1.0`)) {
		t.Errorf("embedded JSON not in normal form: %s", b)
	}
}

func TestDecodeErrors(t *testing.T) {
	valid, err := Marshal(sequence())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, doc string
		want      string
	}{
		{"empty", ``, "ir: 1:1: unexpected end of document"},
		{"array", `[]`, "ir: 1:1: expected an object, found an array"},
		{"syntax", `{"name": "x",}`, "ir: 1:14: invalid character '}' looking for beginning of object key string"},
		{"unknown field", "{\n  \"name\": \"x\",\n  \"nodez\": []\n}", `ir: 3:3: /nodez: unknown field "nodez"`},
		{"unknown nested field", `{"nodes": [{"id": "a", "handlr": "x"}]}`, `ir: 1:24: /nodes/0/handlr: unknown field "handlr"`},
		{"case differs", `{"Name": "x"}`, `ir: 1:2: /Name: unknown field "Name"`},
		{"duplicate key", `{"name": "x", "name": "y"}`, `ir: 1:15: /name: duplicate key "name"`},
		{"duplicate key in const", `{"nodes": [{"with": [{"name": "p", "value": {"const": {"a": 1, "a": 2}}}]}]}`,
			`/nodes/0/with/0/value/const/a: duplicate key "a"`},
		{"wrong type", `{"name": 7}`, "ir: 1:10: /name: expected a string, found number 7"},
		{"null string", `{"name": null}`, "/name: expected a string, found null"},
		{"float for int", `{"settings": {"max_hops": 1.5}}`, "/settings/max_hops: expected an integer, found 1.5"},
		{"int out of range", `{"settings": {"deadline_ms": 99999999999999999999}}`, "/settings/deadline_ms: integer 99999999999999999999 out of range"},
		{"float out of range", `{"nodes": [{"agent": {"temperature": 1e999}}]}`, "/nodes/0/agent/temperature: number 1e999 out of range"},
		{"bool for string", `{"edges": [{"kind": true}]}`, "/edges/0/kind: expected a string, found true"},
		{"trailing data", `{} {}`, "ir: 1:4: unexpected data after the document"},
		{"invalid utf-8", "{\"name\": \"\xff\"}", "ir: 1:11: invalid UTF-8"},
		{"version", `{"ir_version": "9"}`, `ir: /ir_version: unsupported ir_version "9" (this build reads "1")`},
		{"too deep", `{"nodes": [{"with": [{"value": {"const": ` + strings.Repeat("[", 100_000), "nesting deeper than 256 levels"},
		{"too big", string(valid) + strings.Repeat(" ", MaxSize), "over the limit of 10485760"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			w, err := Decode([]byte(tt.doc))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Decode error = %v, want it to contain %q", err, tt.want)
			}
			if w != nil {
				t.Errorf("Decode returned a workflow with error %v", err)
			}
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Errorf("error %T is not a *DecodeError", err)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
}

func TestDecodeAnalyzeError(t *testing.T) {
	doc := `{"ir_version": "1", "name": "x", "nodes": [{"id": "a", "type": "task", "handler": "noop", "join": "all"}],
	         "edges": [{"from": "a", "to": "b", "kind": "after"}]}`
	w, err := Decode([]byte(doc))
	if err == nil || !strings.Contains(err.Error(), `unknown node "b"`) {
		t.Fatalf("err = %v", err)
	}
	if w == nil {
		t.Fatal("no workflow returned with the analysis error")
	}
	if ps := Validate(w); len(ps) == 0 {
		t.Error("Validate found nothing")
	}
}

func TestDecodeIgnoresDerived(t *testing.T) {
	doc := `{"ir_version": "1", "name": "x", "settings": {}, "inputs": [], "outputs": [], "handlers": [],
	  "nodes": [{"id": "a", "type": "task", "handler": "noop", "join": "all", "dependents": ["zz"], "terminal": false, "join_info": {"mode": "any", "expect": 5, "incoming": [], "conditional": 0}}],
	  "edges": [], "entries": [], "terminals": ["q"], "order": ["q", "a"]}`
	w, err := Decode([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := graphFacts{ids("a"), ids("a"), ids("a"), map[string]facts{"a": {Entry: true, Terminal: true}}}
	if diff := cmp.Diff(want, factsOf(w), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("derived (-want +got):\n%s", diff)
	}
}

func TestDecodeNullConst(t *testing.T) {
	w, err := Decode([]byte(`{"nodes": [{"id": "a", "with": [{"name": "p", "value": {"const": null}}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(w.Nodes[0].With[0].Value.Const); got != "null" {
		t.Errorf("const = %q, want null", got)
	}
}

// TestDeepestEncodes: the deepest types and values that Validate allows, in
// the deepest places, still decode: MaxDepth leaves room for them.
func TestDeepestEncodes(t *testing.T) {
	typ := Type{Kind: KindString}
	for range MaxTypeDepth - 1 {
		typ = Type{Kind: KindObject, Fields: []Field{{Name: "f", Type: typ}}}
	}
	value := json.RawMessage(strings.Repeat("[", MaxValueDepth) + strings.Repeat("]", MaxValueDepth))
	w := onError()
	w.Nodes[0].Compensate.With = append(w.Nodes[0].Compensate.With,
		Param{Name: "deep", Value: Value{Template: []TemplatePart{{Expr: &Expr{CEL: "x", Type: &typ, Loc: &Loc{Line: 1}}}}}},
		Param{Name: "deeper", Value: Value{Const: value}})
	if ps := Validate(w); len(ps) > 0 {
		t.Fatal(Problems(ps))
	}
	if err := Analyze(w); err != nil {
		t.Fatal(err)
	}
	b, err := Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Decode(b); err != nil {
		t.Fatal(err)
	}
	yamlRoundTrip(t, w)
}

// TestDocExample keeps the example in docs/ir.md true: it decodes,
// validates, re-encodes to the same bytes, and has the hash the text names.
func TestDocExample(t *testing.T) {
	doc, err := os.ReadFile("../docs/ir.md")
	if err != nil {
		t.Skip(err)
	}
	_, rest, ok := bytes.Cut(doc, []byte("## Example"))
	_, rest, ok2 := bytes.Cut(rest, []byte("```json\n"))
	example, _, ok3 := bytes.Cut(rest, []byte("```"))
	if !ok || !ok2 || !ok3 {
		t.Fatal("no example in docs/ir.md")
	}
	w, err := Decode(example)
	if err != nil {
		t.Fatal(err)
	}
	if ps := Validate(w); len(ps) > 0 {
		t.Fatal(Problems(ps))
	}
	b, err := Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(example), string(b)); diff != "" {
		t.Errorf("the example is not what Marshal writes (-doc +Marshal):\n%s", diff)
	}
	h, err := Hash(w)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(doc, []byte("Its hash is `"+h+"`")) {
		t.Errorf("docs/ir.md does not give the example's hash %s", h)
	}
	lead, err := Hash(leadQualification())
	if err != nil || lead != h {
		t.Errorf("the example's hash %s differs from the test workflow's %s", h, lead)
	}
}

// TestDecodeChildren: embedded children decode and are analyzed like the
// root (their derived fields recomputed), and Canonical leaves them out
// (the flow nodes' hashes cover them).
func TestDecodeChildren(t *testing.T) {
	w := flows()
	b, err := Marshal(w) // not analyzed: no derived fields in the document
	if err != nil {
		t.Fatal(err)
	}
	d, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if ps := Validate(d); len(ps) > 0 {
		t.Fatal(Problems(ps))
	}
	for _, c := range d.Children {
		if len(c.Workflow.Order) == 0 || len(c.Workflow.Entries) == 0 {
			t.Errorf("child %s not analyzed: order %v", c.Workflow.Name, c.Workflow.Order)
		}
	}
	c, err := Canonical(d)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(c, []byte(`"children"`)) || bytes.Contains(c, []byte(`"uses"`)) {
		t.Errorf("Canonical has children or uses: %s", c)
	}
	// A child that does not analyze is reported with its path.
	bad := flows()
	childNamed(bad, "mid").Edges = append(childNamed(bad, "mid").Edges, after("y", "x"))
	if err := Analyze(bad); err == nil || !strings.Contains(err.Error(), "/children/1/workflow") {
		t.Errorf("Analyze of a child with a cycle: %v", err)
	}
}

// TestDeepestEncodesInChild: the deepest types and values Validate allows
// still decode inside an embedded child, three levels further down.
func TestDeepestEncodesInChild(t *testing.T) {
	typ := Type{Kind: KindString}
	for range MaxTypeDepth - 1 {
		typ = Type{Kind: KindObject, Fields: []Field{{Name: "f", Type: typ}}}
	}
	value := json.RawMessage(strings.Repeat("[", MaxValueDepth) + strings.Repeat("]", MaxValueDepth))
	child := onError()
	child.Nodes[0].Compensate.With = append(child.Nodes[0].Compensate.With,
		Param{Name: "deep", Value: Value{Template: []TemplatePart{{Expr: &Expr{CEL: "x", Type: &typ, Loc: &Loc{Line: 1}}}}}},
		Param{Name: "deeper", Value: Value{Const: value}})
	h := mustHash(child)
	w := wf("root", []Node{flowNode("f", "child.wf", h)}, nil)
	w.Handlers = []Handler{}
	w.Children = []Child{{Hash: h, Workflow: *child}}
	if ps := Validate(w); len(ps) > 0 {
		t.Fatal(Problems(ps))
	}
	if err := Analyze(w); err != nil {
		t.Fatal(err)
	}
	b, err := Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Decode(b); err != nil {
		t.Fatal(err)
	}
	yamlRoundTrip(t, w)
}

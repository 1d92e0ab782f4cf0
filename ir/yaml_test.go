package ir

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestYAMLRoundTrip(t *testing.T) {
	ws := analyzed(t)
	for _, name := range names(ws) {
		t.Run(name, func(t *testing.T) {
			yamlRoundTrip(t, ws[name])
		})
	}
}

// yamlRoundTrip checks that w survives MarshalYAML and DecodeYAML exactly.
func yamlRoundTrip(t *testing.T, w *Workflow) {
	t.Helper()
	want, err := Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	y, err := MarshalYAML(w)
	if err != nil {
		t.Fatal(err)
	}
	w2, err := DecodeYAML(y)
	if err != nil {
		t.Fatalf("DecodeYAML: %v\n%s", err, y)
	}
	got, err := Marshal(w2)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("YAML round trip (-want +got):\n%s\nYAML:\n%s", diff, y)
	}
}

// Strings and numbers that YAML could misread.
func TestYAMLScalars(t *testing.T) {
	strs := []string{
		"", "yes", "No", "ON", "y", "null", "~", "true", "1", "0x1F", "1e3", "-", "- x", "a: b", "#c", "a #b",
		"'q'", `"dq"`, "{a}", "[1]", "&anchor", "*alias", "!tag", "%dir", "@at", "`tick`", "|", ">", "?", ":",
		" lead", "trail ", "two\nlines", "ends\n", "ends\n\n", "\nstarts", " indented\nfirst", "line\n  more\n",
		"tab\there", "cr\r\nlf", "nul\x00", "del\x7f", "nel\u0085", "ls\u2028ps\u2029", "bom\ufeff", "bell\a",
		"é ü 日本 😀", "back\\slash", "2024-01-01", "12:30", ".inf", ".nan", "NaN", "inf", "0o17", "+1", "0777",
		"---", "...", "--- x", "a\n---\nb", "a\n...\nb", "x:\n  y", "blank\n   \nline", "trailing \nspace",
		"<<", "crm.lookup", "a/b-c.d", "_x", strings.Repeat("long ", 100),
	}
	nums := []string{"0", "-0", "1", "-1", "1.0", "-1.50", "1e3", "1E+3", "2.5e-10", "12345678901234567890123", "1e400", "18446744073709551616", "-9223372036854775809"}
	var consts []json.RawMessage
	for _, s := range strs {
		b, _ := json.Marshal(s)
		consts = append(consts, b)
	}
	for _, n := range nums {
		consts = append(consts, json.RawMessage(n))
	}
	consts = append(consts,
		json.RawMessage(`{}`), json.RawMessage(`[]`), json.RawMessage(`[[]]`), json.RawMessage(`[[1,[2]],{}]`),
		json.RawMessage(`{"yes": 1, "": 2, "a b": {"c": [true, false, null]}, "1": "x", "null": null}`),
		json.RawMessage(`null`), json.RawMessage(`true`),
	)
	for _, c := range consts {
		w := sequence()
		w.Description = "const " + string(c)
		w.Nodes[0].With = []Param{{Name: "p", Value: Value{Const: c}}}
		if err := Analyze(w); err != nil {
			t.Fatal(err)
		}
		yamlRoundTrip(t, w)
	}
	for _, s := range strs {
		w := sequence()
		w.Description = s
		w.Nodes[1].When = &Expr{CEL: s}
		w.Handlers[0].Name = s
		w.Nodes[0].Handler = s
		if err := Analyze(w); err != nil {
			t.Fatal(err)
		}
		yamlRoundTrip(t, w)
	}
}

func TestYAMLLiteralBlock(t *testing.T) {
	w := sequence()
	w.Nodes[0].When = &Expr{CEL: "input.a > 0 &&\n  input.b < 3"}
	if err := Analyze(w); err != nil {
		t.Fatal(err)
	}
	y, err := MarshalYAML(w)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(y, []byte("cel: |-\n        input.a > 0 &&\n          input.b < 3\n")) {
		t.Errorf("multi-line CEL not written as a literal block:\n%s", y)
	}
	yamlRoundTrip(t, w)
}

func TestDecodeYAMLHandWritten(t *testing.T) {
	doc := `
# A workflow written by hand.
ir_version: "1"
name: tiny
settings: {}
inputs: []
outputs: []
handlers:
  - {name: noop, builtin: true, config: {kind: object}, output: {kind: object}}
nodes:
  - id: a
    type: task
    handler: noop
    join: all
    with:
      - name: n
        value: {const: 1e3}
      - name: big
        value: {const: 0x10}
    when:
      cel: >-
        input.x
        > 3
  - {id: b, type: task, handler: noop, join: all}
edges:
  - {from: a, to: b, kind: after}
`
	w, err := DecodeYAML([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if ps := Validate(w); len(ps) > 0 {
		t.Fatal(Problems(ps))
	}
	if got := string(w.Nodes[0].With[0].Value.Const); got != "1e3" {
		t.Errorf("const = %s, want 1e3", got)
	}
	if got := string(w.Nodes[0].With[1].Value.Const); got != "16" {
		t.Errorf("const = %s, want 16", got)
	}
	if got := w.Nodes[0].When.CEL; got != "input.x > 3" {
		t.Errorf("cel = %q", got)
	}
	if diff := cmp.Diff(ids("a b"), w.Order); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
}

func TestDecodeYAMLErrors(t *testing.T) {
	bomb := `a: &a ["x","x","x","x","x","x","x","x","x"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
`
	tests := []struct {
		name, doc, want string
	}{
		{"alias bomb", bomb, "ir: 1:4: yaml: anchors and aliases are not allowed"},
		{"alias", "name: *x\n", "anchors and aliases are not allowed"},
		{"merge key", "a: {b: 1}\nc:\n  <<: {d: 2}\n", "merge keys are not allowed"},
		{"tag", "name: !!str x\n", "ir: 1:7: yaml: tags are not allowed"},
		{"custom tag", "name: !foo x\n", "tags are not allowed"},
		{"two documents", "name: a\n---\nname: b\n", "more than one document"},
		{"empty", "", "empty document"},
		{"comment only", "# nothing\n", "empty document"},
		{"infinity", "nodes: [{agent: {temperature: .inf}}]\n", "cannot be represented in JSON"},
		{"nan", "name: .nan\n", "cannot be represented in JSON"},
		{"duplicate key", "name: a\nname: b\n", "name"},
		{"collection key", "? [a]\n: b\n", "yaml:"},
		{"flow collection key", "{[a]: b}\n", "yaml:"},
		{"flow too deep", "name: " + strings.Repeat("[", 100_000), "nesting deeper than 256 levels"},
		{"block too deep", "name:\n" + strings.Repeat("- ", 100_000) + "x\n", "nesting too deep"},
		{"indented too deep", deepIndent(MaxDepth + 10), "nesting deeper than 256 levels"},
		{"syntax", "name: [a\n", "yaml:"},
		{"unknown field", "name: a\nnodez: []\n", `ir: /nodez: unknown field "nodez"`},
		{"wrong type", "name: [a]\n", "ir: /name: expected a string, found an array"},
		{"invalid utf-8", "name: \xff\n", "invalid UTF-8"},
		{"too big", strings.Repeat("#", MaxSize+1), "over the limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			_, err := DecodeYAML([]byte(tt.doc))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("DecodeYAML error = %v, want it to contain %q", err, tt.want)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
}

// deepIndent nests block mappings n levels deep by indentation.
func deepIndent(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString(strings.Repeat(" ", i))
		b.WriteString("k:\n")
	}
	b.WriteString(strings.Repeat(" ", n) + "v\n")
	return b.String()
}

package lsp

import (
	"encoding/json"
	"strings"
	"testing"
)

type testSignatureHelp struct {
	Signatures []struct {
		Label      string `json:"label"`
		Parameters []struct {
			Label [2]int `json:"label"`
		} `json:"parameters"`
	} `json:"signatures"`
	ActiveSignature *int `json:"activeSignature"`
	ActiveParameter *int `json:"activeParameter"`
}

// activeLabel is the text of the active parameter of the active signature.
func (h *testSignatureHelp) activeLabel() string {
	if h == nil || len(h.Signatures) == 0 || h.ActiveSignature == nil || h.ActiveParameter == nil {
		return ""
	}
	sig := h.Signatures[*h.ActiveSignature]
	if *h.ActiveParameter >= len(sig.Parameters) {
		return ""
	}
	p := sig.Parameters[*h.ActiveParameter].Label
	return sig.Label[p[0]:p[1]] // ASCII labels
}

// TestSignatureHelp: in a CEL call, the function's overloads and the
// argument at the cursor; in `with { }`, the handler's config fields and
// the one being set; nothing elsewhere.
func TestSignatureHelp(t *testing.T) {
	c := newTestClient(t, Options{}, nil)
	c.initialize()
	head := "workflow w {\n  input { s: string }\n  handler \"h\" { config { url: string  n: int  tags?: list<string> } output {} }\n"
	for _, tc := range []struct {
		name, src string // | marks the cursor
		label     string // in the active signature's label
		active    string // the active parameter's text; "" for no help
	}{
		// The argument's type is not known yet: the first overload.
		{"global", "  task a { run \"cel\"  with { v = size(|) } }\n", "size(bytes) -> int", "bytes"},
		{"member, second argument", "  task a { run \"cel\"  with { v = input.s.replace(\"a\", |) } }\n", "string.replace(string, string", "string"},
		{"member, first argument", "  task a { run \"cel\"  with { v = input.s.startsWith(|\"x\") } }\n", "string.startsWith(string) -> bool", "string"},
		{"nested call", "  task a { run \"cel\"  with { v = int(size(input.s), |) } }\n", "int(", ""},
		{"macro", "  task a { run \"cel\"  when has(|) }\n", "has(e.f) -> bool", "e.f"},
		{"namespaced macro", "  task a { run \"cel\"  with { v = math.greatest(1, |) } }\n", "math.greatest(a, b, ...)", "b"},
		{"namespaced function", "  task a { run \"cel\"  with { v = math.abs(|) } }\n", "math.abs(double) -> double", "double"},
		{"comprehension macro", "  task a { run \"cel\"  with { v = [1].exists(x, |) } }\n", "exists(x, predicate)", "predicate"},
		{"with, a new entry", "  task a {\n    run \"h\"\n    with { |\n  }\n", `run "h" with(url: string, n: int, tags?: list<string>)`, "url: string"},
		{"with, the entry being set", "  task a {\n    run \"h\"\n    with { url = \"x\"  n = | }\n  }\n", `run "h" with(`, "n: int"},
		{"with, inside a call in an entry", "  task a { run \"h\"  with { url = input.s.replace(\"a\", |) } }\n", "replace(", "string"},
		{"after list", "  task z { run \"noop\" }\n  task a after z| { run \"noop\" }\n", "", ""},
		{"in a string", "  task a { run \"cel\"  with { v = \"size(|\" } }\n", "", ""},
		{"open handler", "  task a { run \"cel\"  with { v = 1  |} }\n", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := head + tc.src + "}\n"
			off := strings.Index(src, "|")
			src = src[:off] + src[off+1:]
			uri := "file:///sig_" + strings.ReplaceAll(tc.name, " ", "_") + ".wf"
			c.open(uri, src)
			c.diagnostics(uri, 1)
			var raw json.RawMessage
			c.mustCall("textDocument/signatureHelp", map[string]any{
				"textDocument": map[string]any{"uri": uri},
				"position":     at(t, src, src[off:], 0, 0),
			}, &raw)
			var h *testSignatureHelp
			if err := json.Unmarshal(raw, &h); err != nil {
				t.Fatal(err)
			}
			if tc.label == "" {
				if h != nil && len(h.Signatures) > 0 {
					t.Errorf("want no help, got %s", raw)
				}
				return
			}
			if h == nil || h.ActiveSignature == nil {
				t.Fatalf("no help: %s", raw)
			}
			if l := h.Signatures[*h.ActiveSignature].Label; !strings.Contains(l, tc.label) {
				t.Errorf("active signature %q, want one with %q (all: %s)", l, tc.label, raw)
			}
			if got := h.activeLabel(); got != tc.active {
				t.Errorf("active parameter %q, want %q (%s)", got, tc.active, raw)
			}
		})
	}
}

// TestCELSignatureTypes: cel-go's type names are written as the language
// writes them.
func TestCELSignatureTypes(t *testing.T) {
	got := strings.Join(celSignatures("size", false), "; ")
	for _, want := range []string{"size(list<A>) -> int", "size(map<A, B>) -> int", "size(string) -> int"} {
		if !strings.Contains(got, want) {
			t.Errorf("size: %s; want %s", got, want)
		}
	}
	if got := celTypeName("map(string, list(<A>))"); got != "map<string, list<A>>" {
		t.Errorf("celTypeName = %q", got)
	}
}

// TestSignatureOverloadByType: the active overload is the one whose
// receiver and written arguments have the types the text shows, not the
// first that has enough parameters.
func TestSignatureOverloadByType(t *testing.T) {
	c := newTestClient(t, Options{}, nil)
	c.initialize()
	head := "workflow w {\n  input { s: string  tags: list<string>  d: duration  m: map<string, int> }\n"
	for _, tc := range []struct {
		name, src string
		label     string
	}{
		{"list receiver", "  task a { run \"cel\"  with { v = input.tags.size(|) } }\n", "list<A>.size() -> int"},
		{"map receiver", "  task a { run \"cel\"  with { v = input.m.size(|) } }\n", "map<A, B>.size() -> int"},
		{"string literal receiver", "  task a { run \"cel\"  with { v = \"abc\".size(|) } }\n", "string.size() -> int"},
		{"duration receiver", "  task a { run \"cel\"  with { v = input.d.getHours(|) } }\n", "duration.getHours() -> int"},
		{"field of a node's output", "  task b { run \"cel\"  with { n = [1] } }\n  task a after b { run \"cel\"  with { v = b.output.n.size(|) } }\n", "list<A>.size() -> int"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := head + tc.src + "}\n"
			off := strings.Index(src, "|")
			src = src[:off] + src[off+1:]
			uri := "file:///ovl_" + strings.ReplaceAll(tc.name, " ", "_") + ".wf"
			c.open(uri, src)
			c.diagnostics(uri, 1)
			var h *testSignatureHelp
			c.mustCall("textDocument/signatureHelp", map[string]any{
				"textDocument": map[string]any{"uri": uri},
				"position":     at(t, src, src[off:], 0, 0),
			}, &h)
			if h == nil || h.ActiveSignature == nil || len(h.Signatures) < 2 {
				t.Fatalf("help = %+v, want several overloads", h)
			}
			if l := h.Signatures[*h.ActiveSignature].Label; l != tc.label {
				t.Errorf("active signature %q, want %q", l, tc.label)
			}
		})
	}
}

func TestOverloadFits(t *testing.T) {
	for _, tc := range []struct {
		label, recv string
		args        []string
		want        bool
	}{
		{"f(int, string) -> int", "", []string{"string"}, false},
		{"f(string, int) -> int", "", []string{"string"}, true},
		{"f(string, int) -> int", "", []string{""}, true}, // unknown fits
		{"f(A, int) -> int", "", []string{"list"}, true},  // a type parameter
		{"f(list<A>, int) -> int", "", []string{"list"}, true},
		{"f(dyn) -> int", "", []string{"map"}, true},
		{"string.f(int) -> int", "list", nil, false},
		{"list<A>.f(int) -> int", "list", []string{"int"}, true},
		{"f(int) -> int", "", []string{"int", "int"}, false}, // too many arguments
	} {
		member := strings.Contains(tc.label, ".f(")
		if got := overloadFits(tc.label, "f", member, tc.recv, tc.args); got != tc.want {
			t.Errorf("overloadFits(%q, recv %q, %q) = %v, want %v", tc.label, tc.recv, tc.args, got, tc.want)
		}
	}
}

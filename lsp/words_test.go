package lsp

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/wfc-lang/wfc/compiler"
	"github.com/wfc-lang/wfc/lang/diag"
)

// The completion tables must say what the compiler accepts. Each test
// compiles snippets and looks for the compiler's own verdict.

var itemSnippet = map[string]string{
	"run": `run "noop"`, "with": "with { }", "when": "when true", "retry": "retry { attempts 2 }",
	"timeout": "timeout 5s", "on_error": "on_error => other", "description": `description "d"`,
	"output": "output { x: int }", "for_each": "for_each v in [1]", "branch": "branch { when true => other }",
	"loop": "loop { while false  max 2 }", "compensate": `compensate { run "noop" }`, "uses": `uses "child.wf"`,
	"model": `model "m"`, "temperature": "temperature 0.5", "prompt": `prompt "p"`, "routes": "routes other",
	"default": "default => other", "approvers": `approvers ["a@x"]`, "on_timeout": "on_timeout reject",
	"on_reject": "on_reject => other", "dispatch": `dispatch "x"`,
	"escalate_to": `escalate_to ["b@x"]`, "escalate_after": "escalate_after 1h",
	"max_routes": "routes other\n max_routes 1", "tools": "tools [search_tools]",
	"max_tool_calls": "tools [search_tools]\n max_tool_calls 2", "max_tokens": "max_tokens 100",
}

func compileSnippet(src string) diag.List {
	files := map[string][]byte{"child.wf": []byte("workflow c { task t { run \"noop\" } }")}
	return compiler.Compile("t.wf", []byte(src), compiler.Config{NoOptimize: true, ReadFile: func(p string) ([]byte, error) {
		if b, ok := files[strings.TrimPrefix(p, "./")]; ok {
			return b, nil
		}
		return nil, fmt.Errorf("no file %s", p)
	}}).Diags
}

// rejected reports whether diags reject the item key (WF1006 on it).
func rejected(diags diag.List, src, key string) bool {
	for _, d := range diags {
		if d.Code == diag.UnknownItem && src[d.Span.Start.Offset:d.Span.End.Offset] == key {
			return true
		}
	}
	return false
}

func TestNodeItemsMatchCompiler(t *testing.T) {
	if len(itemSnippet) != len(nodeItems) {
		t.Fatalf("itemSnippet has %d entries, nodeItems %d", len(itemSnippet), len(nodeItems))
	}
	for _, kind := range nodeKinds {
		for _, w := range nodeItems {
			src := fmt.Sprintf("workflow w {\n  %s n {\n    %s\n  }\n  task other { run \"noop\" }\n}\n", kind, itemSnippet[w.name])
			diags := compileSnippet(src)
			if got, want := rejected(diags, src, w.name), !slices.Contains(w.kinds, kind); got != want {
				t.Errorf("%s in a %s: compiler rejects it = %v, table says %v\n%v", w.name, kind, got, want, diags)
			}
		}
	}
}

func TestBlockItemsMatchCompiler(t *testing.T) {
	snippets := map[string]string{
		"retry":      "retry { attempts 2  %s }",
		"loop":       "loop { while false  max 2  %s }",
		"compensate": `compensate { %s }`,
	}
	values := map[string]string{
		"attempts": "attempts 3", "backoff": "backoff linear", "delay": "delay 1s", "max_delay": "max_delay 2s",
		"while": "while true", "max": "max 3", "back_to": "back_to n", "exhausted": "exhausted => other",
		"run": `run "noop"`, "with": `run "noop"  with { }`, "on": `on ["x"]`, "except": `except ["x"]`,
	}
	for block, form := range snippets {
		for _, w := range blockItems[block] {
			src := fmt.Sprintf("workflow w {\n  task n {\n    run \"noop\"\n    %s\n  }\n  task other { run \"noop\" }\n}\n", fmt.Sprintf(form, values[w.name]))
			if rejected(compileSnippet(src), src, w.name) {
				t.Errorf("%s in %s is rejected by the compiler", w.name, block)
			}
		}
		src := fmt.Sprintf("workflow w {\n  task n {\n    run \"noop\"\n    %s\n  }\n}\n", fmt.Sprintf(form, values[blockItems[block][0].name]+"  bogus 1"))
		if !rejected(compileSnippet(src), src, "bogus") {
			t.Errorf("the compiler accepts an unknown item in %s", block)
		}
	}
}

func TestWorkflowItemsMatchCompiler(t *testing.T) {
	values := map[string]string{
		"task": `task t { run "noop" }`, "agent": `agent g { model "m"  prompt "p" }`, "human": `human h { approvers ["a@x"] }`,
		"flow": `flow f { uses "child.wf" }`, "input": "input { x: int = 1 }", "output": "output { r = 1 }",
		"handler": `handler "h2" { }`, "version": `version "1"`, "description": `description "d"`, "deadline": "deadline 1h",
		"max_hops": "max_hops 10", "max_fanout": "max_fanout 10", "max_input_bytes": "max_input_bytes 10", "max_output_bytes": "max_output_bytes 10", "max_state_bytes": "max_state_bytes 10", "finally": `finally { run "noop" }`,
	}
	for _, w := range workflowItems {
		v, ok := values[w.name]
		if !ok {
			t.Fatalf("no snippet for %s", w.name)
		}
		src := "workflow w {\n  " + v + "\n  task other { run \"noop\" }\n}\n"
		if diags := compileSnippet(src); diags.HasErrors() {
			t.Errorf("workflow item %s: %v", w.name, diags)
		}
	}
}

func TestEnumValuesMatchCompiler(t *testing.T) {
	forms := map[string]string{
		"backoff":    "workflow w { task n { run \"noop\"  retry { attempts 2  backoff %s } } }",
		"on_timeout": "workflow w { human n { approvers [\"a@x\"]  on_timeout %s } }",
		"join":       "workflow w { task a { run \"noop\" } task n after a join %s { run \"noop\" } }",
	}
	for key, vals := range enumValues {
		for _, v := range append(slices.Clone(vals), "bogus") {
			diags := compileSnippet(fmt.Sprintf(forms[key], v))
			if got, want := diags.HasErrors(), v == "bogus"; got != want {
				t.Errorf("%s %s: errors = %v, want %v: %v", key, v, got, want, diags)
			}
		}
	}
}

func TestReservedMatchCompiler(t *testing.T) {
	candidates := []string{"run", "retry", "timeout", "default", "with", "branch", "routes", "model", "x", "size", "int", "string", "uses", "for_each", "max"}
	for w := range reserved {
		candidates = append(candidates, w)
	}
	for _, w := range candidates {
		src := fmt.Sprintf("workflow w { input { %s: int = 1 } task t { run \"noop\" } }", w)
		got := false
		for _, d := range compileSnippet(src) {
			got = got || d.Code == diag.ReservedName
		}
		if got != reserved[w] {
			t.Errorf("input %s: compiler reserved = %v, table = %v", w, got, reserved[w])
		}
	}
}

func TestTypeNamesMatchCompiler(t *testing.T) {
	for _, tn := range typeNames {
		ty := tn
		switch tn {
		case "list", "map":
			ty = tn + "<int>"
		}
		src := fmt.Sprintf("workflow w { input { x?: %s } task t { run \"noop\" } }", ty)
		if diags := compileSnippet(src); diags.HasErrors() {
			t.Errorf("type %s: %v", tn, diags)
		}
	}
}

// TestJoinModesMatchCompiler: every join mode of the table is one the
// compiler accepts, with a rule for hover; a word that is not a mode is
// refused (so the test can tell).
func TestJoinModesMatchCompiler(t *testing.T) {
	for _, m := range joinModes {
		src := "workflow w {\n  task a { run \"noop\" }\n  task b { run \"noop\" }\n  task c after a, b join " + m.name + " { run \"noop\" }\n}\n"
		if diags := compileSnippet(src); diags.HasErrors() {
			t.Errorf("join %s: %v", m.name, diags)
		}
		if !strings.Contains(m.rule, "%s") || !strings.Contains(m.rule, "join "+m.name) {
			t.Errorf("join %s: rule %q must name the mode and have a %%s for the sources", m.name, m.rule)
		}
		if !slices.Contains(enumValues["join"], m.name) {
			t.Errorf("join %s is not completed", m.name)
		}
	}
	src := "workflow w {\n  task a { run \"noop\" }\n  task b { run \"noop\" }\n  task c after a, b join bogus { run \"noop\" }\n}\n"
	if diags := compileSnippet(src); !diags.HasErrors() {
		t.Error("the compiler accepts join bogus")
	}
}

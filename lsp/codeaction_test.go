package lsp

import (
	"strings"
	"testing"

	protocol "github.com/tliron/glsp/protocol_3_16"

	"github.com/wfc-lang/wfc/compiler"
	"github.com/wfc-lang/wfc/lang/diag"
)

type testAction struct {
	Title       string           `json:"title"`
	Kind        string           `json:"kind"`
	Diagnostics []testDiagnostic `json:"diagnostics"`
	Edit        struct {
		Changes map[string][]protocol.TextEdit `json:"changes"`
	} `json:"edit"`
}

// fileActions asks for the code actions of the whole file.
func fileActions(c *testClient, uri, src string, only ...string) []testAction {
	var actions []testAction
	ctx := map[string]any{"diagnostics": []any{}}
	if len(only) > 0 {
		ctx["only"] = only
	}
	c.mustCall("textDocument/codeAction", map[string]any{
		"textDocument": map[string]any{"uri": uri},
		"range":        protocol.Range{Start: pos(0, 0), End: pos(uint32(strings.Count(src, "\n")+1), 0)},
		"context":      ctx,
	}, &actions)
	return actions
}

// compileDiags compiles src and lists its diagnostics as "CODE severity".
func compileDiags(src string) (codes map[diag.Code]int, errs []string) {
	codes = map[diag.Code]int{}
	for _, d := range compiler.Compile("fix.wf", []byte(src), compiler.Config{}).Diags {
		codes[d.Code]++
		if d.Severity == diag.Error {
			errs = append(errs, d.Error())
		}
	}
	return codes, errs
}

// TestCodeActionQuickFixes: each quick fix whose hint spells an edit,
// applied alone, leaves a file that compiles without that diagnostic and
// with no error.
func TestCodeActionQuickFixes(t *testing.T) {
	const skip = "  input { go: bool }\n  task start { run \"cel\"  with { n = 1  s = \"x\" } }\n  task opt after start { run \"cel\"  when input.go  with { v = 2  s = \"y\"  l = [1] } }\n"
	for _, tc := range []struct {
		name, src string
		code      diag.Code
		title     string // prefix of the action's title
		want      string // in the fixed file
	}{
		{"guard int in output", "workflow w {\n" + skip + "  output { plain = opt.output.v + 1 }\n}\n",
			"WF4004", "Guard with has(opt.output)", "(has(opt.output) ? opt.output.v : 0) + 1"},
		{"guard string in with", "workflow w {\n" + skip + "  task use after opt, start join settled { run \"cel\"  with { t = opt.output.s + start.output.s } }\n}\n",
			"WF4004", "Guard with has(opt.output)", "(has(opt.output) ? opt.output.s : \"\")"},
		{"guard int in a template", "workflow w {\n" + skip + "  agent g after opt, start join settled { model \"m\"  prompt \"v={{ opt.output.v }}\" }\n}\n",
			"WF4004", "Guard", "prompt \"v={{ (has(opt.output) ? opt.output.v : 0) }}\""},
		{"guard list", "workflow w {\n" + skip + "  output { l = opt.output.l }\n}\n",
			"WF4004", "Guard", "(has(opt.output) ? opt.output.l : [])"},
		{"after, none yet", "workflow w {\n  task a { run \"cel\"  with { n = 1 } }\n  task b { run \"cel\"  with { m = a.output.n } }\n}\n",
			"WF4003", "Add `after a` to b", "task b after a {"},
		{"after, appended", "workflow w {\n  task a { run \"cel\"  with { n = 1 } }\n  task z { run \"noop\" }\n  task b after z { run \"cel\"  with { m = a.output.n } }\n}\n",
			"WF4003", "Add `after a` to b", "task b after z, a {"},
		{"missing run, empty", "workflow w {\n  task a {}\n}\n", "WF1007", "Add `run \"noop\"`", "task a { run \"noop\" }"},
		{"missing run, with", "workflow w {\n  task a {\n    with { n = 1 }\n  }\n}\n", "WF1007", "Add `run \"echo\"`", "task a {\n    run \"echo\"\n    with { n = 1 }"},
		{"missing run, after and join", "workflow w {\n  task z { run \"noop\" }\n  task a after z join any { timeout 30s }\n}\n", "WF1007", "Add `run \"noop\"`", "{ run \"noop\" timeout 30s }"},
		{"missing with field, no with", "workflow w {\n  task a { run \"sleep\" }\n}\n", "WF2004", "Set duration", "run \"sleep\"  with { duration = \"0s\" }"},
		{"missing with fields, some set", "workflow w {\n  handler \"h\" { config { url: string  n: int  on: bool  x?: int } output {} }\n  task a {\n    run \"h\"\n    with { n = 1 }\n  }\n}\n",
			"WF2004", "Set url, on", "with { n = 1  url = \"\"  on = false }"},
		{"missing with field, empty with", "workflow w {\n  handler \"h\" { config { f: number } output {} }\n  task a { run \"h\"  with {} }\n}\n",
			"WF2004", "Set f", "with { f = 0.0 }"},
		{"missing field of a child flow", "workflow w {\n  task a { run \"sleep\"  with {  } }\n}\n", "WF2004", "Set duration", "duration = \"0s\""},
		{"join settled", "workflow w {\n  input { n: int }\n  task route { run \"cel\"  with { n = input.n }  branch { when output.n > 0 => pos  else => neg } }\n  task pos { run \"noop\" }\n  task neg { run \"noop\" }\n  task both after pos, neg { run \"noop\" }\n}\n",
			"WF4006", "Change to `join settled`", "task both after pos, neg join settled {"},
		{"join any", "workflow w {\n  input { n: int }\n  task route { run \"cel\"  with { n = input.n }  branch { when output.n > 0 => pos  else => neg } }\n  task pos { run \"noop\" }\n  task neg { run \"noop\" }\n  task both after pos, neg join all { run \"noop\" }\n}\n",
			"WF4006", "Change to `join any`", "task both after pos, neg join any {"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := compileDiags(tc.src)
			if before[tc.code] == 0 {
				t.Fatalf("no %s in\n%s\n%v", tc.code, tc.src, before)
			}
			c := newTestClient(t, Options{}, nil)
			c.initialize()
			uri := "file:///fix.wf"
			c.open(uri, tc.src)
			c.diagnostics(uri, 1)
			var got *testAction
			var titles []string
			for _, a := range fileActions(c, uri, tc.src) {
				titles = append(titles, a.Title)
				if got == nil && strings.HasPrefix(a.Title, tc.title) && len(a.Diagnostics) == 1 && a.Diagnostics[0].Code == string(tc.code) {
					got = &a
				}
			}
			if got == nil {
				t.Fatalf("no action %q for %s among %q", tc.title, tc.code, titles)
			}
			if got.Kind != "quickfix" {
				t.Errorf("kind = %q", got.Kind)
			}
			fixed := applyEdits(t, tc.src, got.Edit.Changes[uri])
			if !strings.Contains(fixed, tc.want) {
				t.Errorf("fixed file lacks %q:\n%s", tc.want, fixed)
			}
			after, errs := compileDiags(fixed)
			if after[tc.code] >= before[tc.code] {
				t.Errorf("%s not fixed (%d before, %d after):\n%s", tc.code, before[tc.code], after[tc.code], fixed)
			}
			if len(errs) > 0 {
				t.Errorf("errors after the fix:\n%s\n%s", strings.Join(errs, "\n"), fixed)
			}
		})
	}
}

// TestCodeActionFixAll: a source.fixAll action applies every unambiguous
// fix of the file at once (the join mode, a choice, is left alone), and is
// offered only when source actions are asked for.
func TestCodeActionFixAll(t *testing.T) {
	src := "workflow w {\n  input { go: bool }\n" +
		"  task start { run \"cel\"  with { n = 1 } }\n" +
		"  task opt after start { run \"cel\"  when input.go  with { v = 2 } }\n" +
		"  task a { run \"cel\"  with { n = 1 } }\n" +
		"  task b { run \"cel\"  with { m = a.output.n + start.output.n } }\n" +
		"  task c after sart {}\n" +
		"  task d after b { run \"sleep\" }\n" +
		"  output { x = opt.output.v  y = opt.output.v }\n}\n"
	before, _ := compileDiags(src)
	for _, code := range []diag.Code{"WF4004", "WF4003", "WF1001", "WF1007", "WF2004"} {
		if before[code] == 0 {
			t.Fatalf("no %s: %v", code, before)
		}
	}
	c := newTestClient(t, Options{}, nil)
	c.initialize()
	uri := "file:///fix.wf"
	c.open(uri, src)
	c.diagnostics(uri, 1)
	for _, a := range fileActions(c, uri, src) {
		if a.Kind != "quickfix" {
			t.Errorf("without `only`: %q of kind %q", a.Title, a.Kind)
		}
	}
	for _, only := range []string{"source.fixAll", "source"} {
		actions := fileActions(c, uri, src, only)
		if len(actions) != 1 || actions[0].Kind != "source.fixAll" {
			t.Fatalf("only %s: %+v", only, actions)
		}
		fixed := applyEdits(t, src, actions[0].Edit.Changes[uri])
		after, errs := compileDiags(fixed)
		if len(errs) > 0 || len(after) > 0 {
			t.Errorf("only %s: %q left %v %s\n%s", only, actions[0].Title, after, strings.Join(errs, "\n"), fixed)
		}
	}
	// Nothing to fix: no action.
	c.changeFull(uri, 2, "workflow w {\n  task a { run \"noop\" }\n}\n")
	c.diagnostics(uri, 2)
	if actions := fileActions(c, uri, src, "source.fixAll"); len(actions) != 0 {
		t.Errorf("clean file: %+v", actions)
	}
}

// TestCodeActionNoGuardOfStringInTemplate: the zero of a string ("") could
// end the string a {{ }} template is in, so no guard is offered there.
func TestCodeActionNoGuardOfStringInTemplate(t *testing.T) {
	src := "workflow w {\n  input { go: bool }\n  task start { run \"cel\"  with { n = 1 } }\n" +
		"  task opt after start { run \"cel\"  when input.go  with { s = \"y\" } }\n" +
		"  agent g after opt, start join settled { model \"m\"  prompt \"s={{ opt.output.s }}\" }\n}\n"
	if codes, _ := compileDiags(src); codes["WF4004"] != 1 {
		t.Fatalf("diagnostics: %v", codes)
	}
	c := newTestClient(t, Options{}, nil)
	c.initialize()
	uri := "file:///tmpl.wf"
	c.open(uri, src)
	c.diagnostics(uri, 1)
	if actions := fileActions(c, uri, src); len(actions) != 0 {
		t.Errorf("actions = %+v", actions)
	}
}

// TestCodeActionNoConfigFixForRunSet: a `run [...]` task's with block must
// suit every handler of the set: no fix adds a field one of them requires.
func TestCodeActionNoConfigFixForRunSet(t *testing.T) {
	src := "workflow w {\n  input { h: string }\n" +
		"  handler \"h1\" { config { a: int } output {} }\n" +
		"  handler \"h2\" { config { b: string } output {} }\n" +
		"  task t { run [\"h1\", \"h2\"]  dispatch input.h }\n}\n"
	if codes, _ := compileDiags(src); codes["WF2004"] != 2 {
		t.Fatalf("diagnostics: %v", codes)
	}
	for _, d := range compiler.Compile("fix.wf", []byte(src), compiler.Config{}).Diags {
		if len(d.Fixes) > 0 {
			t.Errorf("%s has fixes %v", d.Error(), d.Fixes)
		}
	}
}

// TestCodeActionDropsFixThatBreaks: the compiler's hint for WF4003 is
// `after sales`, but nurture and sales are the exclusive targets of one
// branch, so that would make nurture's join unsatisfiable (WF4006). The
// server compiles the fixed text first and does not offer the fix; a fix
// that is right in the same file (report) is still offered.
func TestCodeActionDropsFixThatBreaks(t *testing.T) {
	src := "workflow w {\n  task score {\n    run \"cel\"\n    with { big = true }\n    branch {\n      when output.big => sales\n      else => nurture\n    }\n  }\n" +
		"  task sales { run \"echo\"  with { m = \"x\" } }\n  task nurture { run \"echo\"  with { s = sales.output.m } }\n  task report { run \"echo\"  with { s = sales.output.m } }\n}\n"
	c := newTestClient(t, Options{}, nil)
	c.initialize()
	uri := "file:///drop.wf"
	c.open(uri, src)
	ds := c.diagnostics(uri, 1)
	n := 0
	for _, d := range ds {
		if d.Code == "WF4003" {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("want two WF4003 diagnostics, got %+v", ds)
	}
	var titles []string
	for _, a := range fileActions(c, uri, src) {
		titles = append(titles, a.Title)
	}
	if len(titles) != 1 || titles[0] != "Add `after sales` to report" {
		t.Errorf("quick fixes = %q, want only the one for report", titles)
	}
	all := fileActions(c, uri, src, "source.fixAll")
	if len(all) != 1 || !strings.Contains(all[0].Title, "report") {
		t.Errorf("fix all = %+v", all)
	}
}

func TestOldOffset(t *testing.T) {
	edits := []byteEdit{{start: 10, end: 12, text: "abcd"}, {start: 20, end: 20, text: "xyz"}} // +2, then +3
	for _, tc := range []struct{ in, want int }{
		{5, 5}, {10, 10}, {13, 10}, {14, 12}, {21, 19}, {22, 20}, {24, 20}, {25, 20}, {26, 21},
	} {
		if got := oldOffset(edits, tc.in); got != tc.want {
			t.Errorf("oldOffset(%d) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

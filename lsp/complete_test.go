package lsp

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	protocol "github.com/tliron/glsp/protocol_3_16"
)

// completionItem decodes an item as it is on the wire.
type completionItem struct {
	Label    string `json:"label"`
	Kind     int    `json:"kind"`
	Detail   string `json:"detail"`
	SortText string `json:"sortText"`
	TextEdit *struct {
		Range   protocol.Range `json:"range"`
		NewText string         `json:"newText"`
	} `json:"textEdit"`
}

func completeLabels(t *testing.T, c *testClient, uri, src string) ([]string, []completionItem) {
	t.Helper()
	text, p := marked(t, src)
	c.open(uri, text)
	var list struct {
		Items []completionItem `json:"items"`
	}
	c.mustCall("textDocument/completion", tdp(uri, p), &list)
	labels := make([]string, len(list.Items))
	for i, it := range list.Items {
		labels[i] = it.Label
		if it.TextEdit == nil {
			t.Errorf("item %s has no textEdit", it.Label)
			continue
		}
		if it.TextEdit.Range.End != p {
			t.Errorf("item %s replaces %s, which does not end at the cursor %v", it.Label, fmtRange(it.TextEdit.Range), p)
		}
	}
	return labels, list.Items
}

const handlerSvc = `handler "svc" {
  description "a service"
  config { key: string  n?: int }
  output { v: int  s: string  deep: { inner: { leaf: bool } }  items: list<string> }
}
`

func TestCompletion(t *testing.T) {
	cases := []struct {
		name    string
		src     string
		want    []string
		notWant []string
	}{
		{"top level", "|", []string{"workflow", "handler", "import"}, []string{"task"}},
		{"workflow body", "workflow w {\n  |\n}", []string{"task", "agent", "human", "flow", "input", "output", "handler", "deadline", "max_hops"}, []string{"run", "retry"}},
		{"workflow body, typing", "workflow w {\n  ta|\n}", []string{"task"}, nil},
		{"task body", "workflow w {\n  task a {\n    |\n  }\n}", []string{"run", "with", "when", "retry", "timeout", "on_error", "for_each", "branch", "loop", "compensate", "output"}, []string{"model", "approvers", "uses", "task"}},
		{"agent body", "workflow w {\n  agent a {\n    |\n  }\n}", []string{"model", "prompt", "routes", "default", "temperature", "with"}, []string{"run", "approvers", "branch"}},
		{"human body", "workflow w {\n  human a {\n    |\n  }\n}", []string{"approvers", "on_timeout", "on_reject", "prompt"}, []string{"run", "model", "with"}},
		{"flow body", "workflow w {\n  flow a {\n    |\n  }\n}", []string{"uses", "with", "for_each"}, []string{"run", "model"}},
		{"items already given are not offered", "workflow w {\n  task a {\n    run \"noop\"\n    timeout 3s\n    |\n  }\n}", []string{"with", "retry"}, []string{"run", "timeout"}},
		{"the item being typed is offered", "workflow w {\n  task a {\n    ru|\n  }\n}", []string{"run"}, nil},
		{"after a complete setting", "workflow w {\n  task a {\n    timeout 30s |\n  }\n}", []string{"run", "retry"}, []string{"timeout"}},
		{"retry block", "workflow w {\n  task a {\n    run \"noop\"\n    retry { attempts 3  | }\n  }\n}", []string{"backoff", "delay", "max_delay"}, []string{"run", "while", "attempts"}},
		{"backoff values", "workflow w {\n  task a {\n    run \"noop\"\n    retry { attempts 3  backoff | }\n  }\n}", []string{"fixed", "linear", "exponential"}, []string{"attempts"}},
		{"loop block", "workflow w {\n  task a {\n    run \"noop\"\n    loop {\n      |\n    }\n  }\n}", []string{"while", "max", "back_to", "exhausted"}, nil},
		{"back_to", "workflow w {\n  task a { run \"noop\" }\n  task b after a {\n    run \"noop\"\n    loop { while true  max 3  back_to | }\n  }\n}", []string{"a"}, []string{"b", "while"}},
		{"compensate block", "workflow w {\n  task a {\n    run \"noop\"\n    compensate { | }\n  }\n}", []string{"run", "with"}, []string{"retry"}},
		{"branch block", "workflow w {\n  task a {\n    run \"noop\"\n    branch {\n      |\n    }\n  }\n}", []string{"when", "else"}, nil},
		{"on_timeout values", "workflow w {\n  human h {\n    approvers [\"a@x\"]\n    on_timeout |\n  }\n}", []string{"approve", "reject", "fail"}, nil},
		{"after", "workflow w {\n  task a { run \"noop\" }\n  task x { run \"noop\" }\n  task b after |{ run \"noop\" }\n}", []string{"a", "x"}, []string{"b", "run"}},
		{"after, second id", "workflow w {\n  task a { run \"noop\" }\n  task x { run \"noop\" }\n  task b after a, |\n}", []string{"x"}, []string{"a", "b"}},
		{"after the node id", "workflow w {\n  task a { run \"noop\" }\n  task b |\n}", []string{"after", "join"}, nil},
		{"join mode", "workflow w {\n  task a { run \"noop\" }\n  task b after a join |{ run \"noop\" }\n}", []string{"all", "any", "settled", "first"}, nil},
		{"loop node fields", "workflow w {\n  task a {\n    run \"cel\"\n    with { n = 1 }\n    loop { while output.n < 3  max 5 }\n  }\n  task b after a { run \"cel\"  with { x = a.| } }\n}", []string{"output", "iteration"}, nil},
		{"on_error node fields", "workflow w {\n  task a { run \"noop\"  on_error => b }\n  task b { run \"cel\"  with { x = a.| } }\n}", []string{"output", "error"}, []string{"iteration"}},
		{"plain node fields", "workflow w {\n  task a { run \"noop\" }\n  task b after a { run \"cel\"  with { x = a.| } }\n}", []string{"output"}, []string{"iteration", "error"}},
		{"on_error targets", "workflow w {\n  task a {\n    run \"noop\"\n    on_error => |\n  }\n  task fix { run \"noop\" }\n}", []string{"fix"}, []string{"a", "run"}},
		{"routes", "workflow w {\n  agent a {\n    model \"m\"\n    prompt \"p\"\n    routes x, |\n  }\n  task x { run \"noop\" }\n  task y { run \"noop\" }\n}", []string{"y"}, []string{"x", "a"}},
		{"branch targets", "workflow w {\n  task a {\n    run \"noop\"\n    branch { when true => | }\n  }\n  task t { run \"noop\" }\n}", []string{"t"}, nil},
		{"handler names in run", handlerSvc + "workflow w {\n  task a {\n    run \"|\"\n  }\n}", []string{"svc", "cel", "echo", "http", "noop", "exec"}, []string{"task"}},
		{"handler names, typing", handlerSvc + "workflow w {\n  task a {\n    run \"ht|\n  }\n}", []string{"http"}, nil},
		{"config fields", "workflow w {\n  task a {\n    run \"http\"\n    with { | }\n  }\n}", []string{"url", "method", "headers", "body", "timeout"}, []string{"run", "input"}},
		{"config fields not set yet", "workflow w {\n  task a {\n    run \"http\"\n    with { url = \"https://x\"  | }\n  }\n}", []string{"method"}, []string{"url"}},
		{"config fields of a declared handler", handlerSvc + "workflow w {\n  task a {\n    run \"svc\"\n    with {\n      |\n    }\n  }\n}", []string{"key", "n"}, nil},
		{"input fields", "workflow w {\n  input { name: string  count?: int }\n  task a {\n    run \"cel\"\n    with { m = input.| }\n  }\n}", []string{"name", "count"}, []string{"a", "run"}},
		{"input fields, half-typed file", "workflow w {\n  input { name: string  count?: int }\n  task a {\n    run \"cel\"\n    with { m = input.|", []string{"name", "count"}, nil},
		{"node then output", handlerSvc + "workflow w {\n  task a { run \"svc\" with { key = \"k\" } }\n  task b after a { run \"cel\" with { x = a.| } }\n}", []string{"output"}, nil},
		{"output fields", handlerSvc + "workflow w {\n  task a { run \"svc\" with { key = \"k\" } }\n  task b after a { run \"cel\" with { x = a.output.| } }\n}", []string{"v", "s", "deep", "items"}, []string{"key"}},
		{"output fields, half-typed", handlerSvc + "workflow w {\n  task a { run \"svc\" with { key = \"k\" } }\n  task b after a {\n    run \"cel\"\n    when a.output.|", []string{"v", "s", "deep"}, nil},
		{"nested output fields", handlerSvc + "workflow w {\n  task a { run \"svc\" with { key = \"k\" } }\n  task b after a { run \"cel\" with { x = a.output.deep.inner.| } }\n}", []string{"leaf"}, []string{"v"}},
		{"fields of an open handler's output", "workflow w {\n  task a { run \"cel\" with { total = 1  label = 'x' } }\n  task b after a { run \"cel\" with { x = a.output.| } }\n}", []string{"total", "label"}, nil},
		{"fields of a declared output", "workflow w {\n  agent q { model \"m\"  prompt \"p\"  output { score: int  why: string } }\n  task b after q { run \"cel\" with { x = q.output.| } }\n}", []string{"score", "why"}, []string{"route"}},
		{"template expression", handlerSvc + "workflow w {\n  task a { run \"svc\" with { key = \"k\" } }\n  agent q after a {\n    model \"m\"\n    prompt \"Route {{ a.output.| }}\"\n  }\n}", []string{"v", "s"}, nil},
		{"template, half-typed", handlerSvc + "workflow w {\n  task a { run \"svc\" with { key = \"k\" } }\n  agent q after a {\n    model \"m\"\n    prompt \"Route {{ a.output.s|", []string{"s", "v"}, nil},
		{"template in with", "workflow w {\n  input { id: string }\n  task a { run \"cel\" with { key = \"item-{{ input.| }}\" } }\n}", []string{"id"}, nil},
		{"self output in branch", handlerSvc + "workflow w {\n  task a {\n    run \"svc\"\n    with { key = \"k\" }\n    branch { when output.| }\n  }\n}", []string{"v", "s"}, nil},
		{"scope at an operand", "workflow w {\n  input { id: string }\n  task a { run \"noop\" }\n  task b after a {\n    run \"noop\"\n    when |\n  }\n}", []string{"input", "a", "has", "size", "true", "run"}, []string{"b", "output"}},
		{"scope after an operator", "workflow w {\n  input { n: int }\n  task a { run \"noop\"  when input.n > | }\n}", []string{"input", "int", "run"}, []string{"attempts", "with"}},
		{"run fields", "workflow w {\n  task a { run \"cel\"  with { x = run.| } }\n}", []string{"id"}, []string{"status", "duration"}},
		{"finally items", "workflow w {\n  task a { run \"noop\" }\n  finally {\n    |\n  }\n}", []string{"run", "with", "retry"}, []string{"attempts", "when"}},
		{"finally run fields", "workflow w {\n  task a { run \"noop\" }\n  finally {\n    run \"cel\"\n    with { s = run.| }\n  }\n}", []string{"id", "status", "error", "duration", "failed_nodes", "ended_at"}, nil},
		{"finally config fields", "workflow w {\n  task a { run \"noop\" }\n  finally {\n    run \"http\"\n    with { | }\n  }\n}", []string{"url", "method", "headers"}, []string{"run"}},
		{"member functions of a string", "workflow w {\n  input { name: string }\n  task a { run \"cel\"  with { x = input.name.| } }\n}", []string{"startsWith", "contains", "upperAscii", "size"}, []string{"name", "filter"}},
		{"macros on a list", handlerSvc + "workflow w {\n  task a { run \"svc\" with { key = \"k\" } }\n  task b after a { run \"cel\" with { x = a.output.items.| } }\n}", []string{"exists", "all", "filter", "map", "size"}, []string{"startsWith"}},
		{"math namespace", "workflow w {\n  task a { run \"cel\"  with { x = math.| } }\n}", []string{"greatest", "least"}, nil},
		{"url namespace", "workflow w {\n  task a { run \"cel\"  with { x = \"https://x/{{ url.| }}\" } }\n}", []string{"pathEscape", "queryEscape"}, nil},
		{"for_each variable", "workflow w {\n  input { ids: list<string> }\n  task a {\n    run \"cel\"\n    for_each id in input.ids\n    with { x = | }\n  }\n}", []string{"id", "input"}, nil},
		{"for_each source", "workflow w {\n  input { ids: list<string> }\n  task a {\n    run \"cel\"\n    for_each id in |\n  }\n}", []string{"input"}, nil},
		{"workflow output", "workflow w {\n  task a { run \"cel\" with { v = 1 } }\n  output { r = a.output.| }\n}", []string{"v"}, nil},
		{"types in input", "workflow w {\n  input { x: | }\n}", []string{"string", "int", "number", "bool", "list", "map"}, []string{"task"}},
		{"type arguments", "workflow w {\n  input { x: list<| }\n}", []string{"string", "int"}, nil},
		{"handler body", "handler \"h\" {\n  |\n}\nworkflow w { task a { run \"h\" } }", []string{"config", "output", "description"}, []string{"run"}},
		{"in a comment", "workflow w {\n  // tas|\n}", nil, []string{"task"}},
		{"in a block comment", "workflow w {\n  /* task | */\n}", nil, []string{"task"}},
		{"in a string", "workflow w {\n  task a { description \"ta| \" run \"noop\" }\n}", nil, []string{"task", "run"}},
		{"non-ASCII before the cursor", "workflow w {\n  task a { description \"日本😀\"  ti| }\n}", []string{"timeout"}, nil},
		{"after a closed block", "workflow w {\n  task a {\n    run \"noop\"\n    retry { attempts 2 }\n    |\n  }\n}", []string{"timeout", "with"}, []string{"retry", "attempts"}},
		{"after a node", "workflow w {\n  task a { run \"noop\" }\n  |\n}", []string{"task", "output"}, []string{"run"}},
		{"with block in a broken node", "workflow w {\n  task a {\n    run \"http\"\n    with { url = 'x'\n      |", []string{"method", "headers"}, []string{"url"}},
		{"a number", "workflow w {\n  task a { run \"noop\"  timeout 3| }\n}", nil, []string{"run"}},
	}
	c := newTestClient(t, Options{}, nil)
	c.initialize()
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			uri := "file:///c" + strings.Repeat("x", i) + ".wf"
			labels, _ := completeLabels(t, c, uri, tc.src)
			for _, w := range tc.want {
				if !slices.Contains(labels, w) {
					t.Errorf("missing %q in %v", w, labels)
				}
			}
			for _, w := range tc.notWant {
				if slices.Contains(labels, w) {
					t.Errorf("unexpected %q in %v", w, labels)
				}
			}
		})
	}
}

// TestCompletionReplacesWord: the text edit replaces the typed prefix, with
// UTF-16 columns after non-BMP text; in run "..." it replaces the string's
// content typed so far.
func TestCompletionReplacesWord(t *testing.T) {
	c := newTestClient(t, Options{}, nil)
	c.initialize()
	_, items := completeLabels(t, c, "file:///r1.wf", "workflow w {\n  task a { description \"😀\"  tim| }\n}")
	for _, it := range items {
		if it.Label == "timeout" {
			// `  task a { description "😀"  ` is 29 UTF-16 units.
			if it.TextEdit.Range.Start != pos(1, 29) || it.TextEdit.Range.End != pos(1, 32) {
				t.Errorf("timeout replaces %s, want 1:29-1:32", fmtRange(it.TextEdit.Range))
			}
		}
	}
	_, items = completeLabels(t, c, "file:///r2.wf", "workflow w {\n  task a { run \"ht| }\n}")
	for _, it := range items {
		if it.Label == "http" {
			if it.TextEdit.Range.Start != pos(1, 16) || it.TextEdit.NewText != "http" {
				t.Errorf("http edit = %+v", *it.TextEdit)
			}
		}
	}
}

// TestCompletionUsesLastCompiledInfo: while the latest text is not compiled
// yet, completion answers from the previous compilation.
func TestCompletionUsesLastCompiledInfo(t *testing.T) {
	c := newTestClient(t, Options{Debounce: 10_000_000_000}, nil) // changes are not compiled on their own
	c.initialize()
	uri := "file:///stale.wf"
	base := "workflow w {\n  input { region: string }\n  task a { run \"cel\" with { v = 1 } }\n}\n"
	c.open(uri, base)
	c.diagnostics(uri, 1)
	text, p := marked(t, "workflow w {\n  input { region: string }\n  task a { run \"cel\" with { v = 1 } }\n  task b after a { run \"cel\" with { x = input.| } }\n}\n")
	c.changeFull(uri, 2, text)
	var list struct {
		Items []completionItem `json:"items"`
	}
	c.mustCall("textDocument/completion", tdp(uri, p), &list)
	if len(list.Items) != 1 || list.Items[0].Label != "region" {
		t.Errorf("items = %+v", list.Items)
	}
	if c.srv.docs.get(uri).latest().compiled() {
		t.Errorf("completion compiled the latest snapshot")
	}
	var raw json.RawMessage
	c.mustCall("textDocument/hover", tdp(uri, pos(0, 0)), &raw) // hover needs the latest: compiles
	if !c.srv.docs.get(uri).latest().compiled() {
		t.Errorf("hover did not compile the latest snapshot")
	}
}

// TestCompletionStaleNodeNames: the compiled snapshot is an edit older than
// the text; a node name it has that the text no longer has (`shi`, while
// `ship` was typed) is not offered: after it, it would name the node
// itself (found by the VS Code end-to-end test, one run in three).
func TestCompletionStaleNodeNames(t *testing.T) {
	c := newTestClient(t, Options{Debounce: 10_000_000_000}, nil) // changes are not compiled on their own
	c.initialize()
	uri := "file:///stale2.wf"
	c.open(uri, "workflow w {\n  task charge { run \"noop\" }\n  task shi { run \"noop\" }\n}\n")
	c.diagnostics(uri, 1)
	text, p := marked(t, "workflow w {\n  task charge { run \"noop\" }\n  task ship after | { run \"noop\" }\n}\n")
	c.changeFull(uri, 2, text)
	var list struct {
		Items []completionItem `json:"items"`
	}
	c.mustCall("textDocument/completion", tdp(uri, p), &list)
	var got []string
	for _, it := range list.Items {
		got = append(got, it.Label)
	}
	if len(got) != 1 || got[0] != "charge" {
		t.Errorf("items = %q, want only charge", got)
	}
}

// TestCompletionTriggers: after a space only node ids and values pop up,
// after a quote only handler names.
func TestCompletionTriggers(t *testing.T) {
	c := newTestClient(t, Options{}, nil)
	c.initialize()
	ask := func(uri, src, trigger string) []string {
		text, p := marked(t, src)
		c.open(uri, text)
		params := tdp(uri, p)
		params["context"] = map[string]any{"triggerKind": 2, "triggerCharacter": trigger}
		var list struct {
			Items []completionItem `json:"items"`
		}
		c.mustCall("textDocument/completion", params, &list)
		var labels []string
		for _, it := range list.Items {
			labels = append(labels, it.Label)
		}
		return labels
	}
	nodes := "workflow w {\n  task a { run \"noop\" }\n"
	if got := ask("file:///t1.wf", nodes+"  task b after | { run \"noop\" }\n}", " "); !slices.Equal(got, []string{"a"}) {
		t.Errorf("after `after `: %v", got)
	}
	if got := ask("file:///t2.wf", nodes+"  task b { run \"noop\"  when 1 + | }\n}", " "); len(got) != 0 {
		t.Errorf("space in an expression: %v", got)
	}
	if got := ask("file:///t3.wf", nodes+"  task b { run \"noop\"  retry { attempts 2  backoff | } }\n}", " "); len(got) != 3 {
		t.Errorf("space after backoff: %v", got)
	}
	if got := ask("file:///t4.wf", nodes+"  task b { run \"|\" }\n}", "\""); !slices.Contains(got, "http") {
		t.Errorf("quote in run: %v", got)
	}
	if got := ask("file:///t5.wf", nodes+"  task b { description \"| }\n}", "\""); len(got) != 0 {
		t.Errorf("quote elsewhere: %v", got)
	}
	if got := ask("file:///t6.wf", nodes+"  task b { run \"noop\"  when a.| }\n}", "."); !slices.Contains(got, "output") {
		t.Errorf("dot: %v", got)
	}
}

// sortedLabels returns the labels in the order the editor shows them (by
// sortText).
func sortedLabels(items []completionItem) []string {
	items = slices.Clone(items)
	slices.SortStableFunc(items, func(a, b completionItem) int { return strings.Compare(a.SortText, b.SortText) })
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.Label
	}
	return out
}

// TestCompletionGraph: node ids are offered only where the compiler
// accepts them: an expression reads ancestors (WF4003), nearest first;
// `after` and targets never close a cycle; back_to names an ancestor.
func TestCompletionGraph(t *testing.T) {
	c := newTestClient(t, Options{}, nil)
	c.initialize()
	// lead.wf's agent prompt: qualify runs after score's branch, score
	// after enrich; the other four nodes run after qualify or beside it.
	src := strings.Replace(lead, "prompt \"Route 😀 {{", "prompt \"Route {{ | }} 😀 {{", 1)
	labels, items := completeLabels(t, c, "file:///g1.wf", src)
	for _, bad := range []string{"enterprise_sales", "standard_sales", "manual_review", "nurture_campaign", "qualify"} {
		if slices.Contains(labels, bad) {
			t.Errorf("prompt offers %s, which is not an ancestor of qualify", bad)
		}
	}
	var nodes []string
	for _, l := range sortedLabels(items) {
		if l == "score" || l == "enrich" {
			nodes = append(nodes, l)
		}
	}
	if !slices.Equal(nodes, []string{"score", "enrich"}) {
		t.Errorf("ancestors in order %v, want [score enrich] (nearest first)", nodes)
	}

	nodes4 := "  task a { run \"noop\" }\n  task b after a { run \"noop\" }\n  task c after b { run \"noop\" }\n  task d { run \"noop\" }\n"
	cases := []struct {
		name    string
		src     string
		want    []string
		notWant []string
	}{
		{"after: no descendant", "workflow w {\n" + nodes4 + "  task e after d { run \"noop\" }\n  task a2 after d, | { run \"noop\" }\n}", []string{"a", "b", "c", "e"}, []string{"a2", "d"}},
		{"after: descendants of the node", "workflow w {\n  task a after d, | { run \"noop\" }\n  task b after a { run \"noop\" }\n  task c after b { run \"noop\" }\n  task d { run \"noop\" }\n  task x { run \"noop\" }\n}", []string{"x"}, []string{"a", "b", "c", "d"}},
		{"on_error: no ancestor", "workflow w {\n" + nodes4 + "  task e after c {\n    run \"noop\"\n    on_error => |\n  }\n}", []string{"d"}, []string{"a", "b", "c", "e"}},
		{"branch: no ancestor", "workflow w {\n" + nodes4 + "  task e after c {\n    run \"noop\"\n    branch { when true => d, | }\n  }\n}", nil, []string{"a", "b", "c", "d", "e"}},
		{"routes: no ancestor", "workflow w {\n" + nodes4 + "  agent e after c {\n    model \"m\"\n    prompt \"p\"\n    routes |\n  }\n}", []string{"d"}, []string{"a", "b", "c", "e"}},
		{"back_to: ancestors only", "workflow w {\n" + nodes4 + "  task e after c {\n    run \"noop\"\n    loop { while true  max 3  back_to | }\n  }\n}", []string{"a", "b", "c"}, []string{"d", "e"}},
		{"expression: ancestors only", "workflow w {\n" + nodes4 + "  task e after c { run \"noop\"  when | }\n}", []string{"a", "b", "c"}, []string{"d", "e"}},
		{"expression in a node being written", "workflow w {\n" + nodes4 + "  task e after b {\n    run \"cel\"\n    with { x = |", []string{"a", "b"}, []string{"c", "d", "e"}},
		{"workflow output: every node", "workflow w {\n" + nodes4 + "  output { r = | }\n}", []string{"a", "b", "c", "d"}, nil},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			labels, _ := completeLabels(t, c, "file:///g"+strings.Repeat("x", i)+".wf", tc.src)
			for _, w := range tc.want {
				if !slices.Contains(labels, w) {
					t.Errorf("missing %q in %v", w, labels)
				}
			}
			for _, w := range tc.notWant {
				if slices.Contains(labels, w) {
					t.Errorf("unexpected %q in %v", w, labels)
				}
			}
		})
	}
	// Targets: the nodes below first, nearest first.
	_, items = completeLabels(t, c, "file:///g-order.wf", "workflow w {\n  task p { run \"noop\" }\n  task a {\n    run \"noop\"\n    on_error => |\n  }\n  task n1 { run \"noop\" }\n  task n2 { run \"noop\" }\n}")
	if got := sortedLabels(items); !slices.Equal(got, []string{"n1", "n2", "p"}) {
		t.Errorf("on_error targets in order %v, want [n1 n2 p]", got)
	}
}

// TestCompletionNoise: what cannot be written is not offered: cel-go's
// internal functions, `in` (an operator), items already given in a block, a
// second workflow.
func TestCompletionNoise(t *testing.T) {
	cases := []struct {
		name    string
		src     string
		want    []string
		notWant []string
	}{
		{"math internals", "workflow w {\n  task a { run \"cel\"  with { x = math.| } }\n}", []string{"greatest", "least", "abs"}, []string{"@max", "@min"}},
		{"in is an operator", "workflow w {\n  task a { run \"cel\"  with { x = | } }\n}", []string{"size", "has"}, []string{"in"}},
		{"retry items given", "workflow w {\n  task a {\n    run \"noop\"\n    retry { attempts 3  backoff linear  | }\n  }\n}", []string{"delay", "max_delay"}, []string{"attempts", "backoff"}},
		{"retry items given after the cursor", "workflow w {\n  task a {\n    run \"noop\"\n    retry { | attempts 3 }\n  }\n}", []string{"delay", "backoff"}, []string{"attempts"}},
		{"loop items given", "workflow w {\n  task a {\n    run \"noop\"\n    loop {\n      while true\n      max 3\n      |\n    }\n  }\n}", []string{"back_to", "exhausted"}, []string{"while", "max"}},
		{"branch rules repeat", "workflow w {\n  task a {\n    run \"noop\"\n    branch {\n      when true => b\n      |\n    }\n  }\n  task b { run \"noop\" }\n}", []string{"when", "else"}, nil},
		{"one workflow", "workflow w {\n  task a { run \"noop\" }\n}\n|", []string{"handler", "import"}, []string{"workflow"}},
		{"the first workflow", "|", []string{"workflow"}, nil},
		{"macro variable", handlerSvc + "workflow w {\n  task a { run \"svc\" with { key = \"k\" } }\n  task b after a { run \"cel\" with { x = a.output.items.exists(e, e.| } }\n}", []string{"startsWith", "size"}, []string{"exists"}},
		{"macro variable, object elements", "workflow w {\n  agent q { model \"m\"  prompt \"p\"  output { rows: list<{ id: string  n: int }> } }\n  task b after q { run \"cel\" with { x = q.output.rows.filter(r, r.n > 1 && r.| } }\n}", []string{"id", "n"}, nil},
		{"nested macro variables", "workflow w {\n  agent q { model \"m\"  prompt \"p\"  output { rows: list<{ tags: list<{ k: string }> }> } }\n  task b after q { run \"cel\" with { x = q.output.rows.all(r, r.tags.exists(t, t.| )) } }\n}", []string{"k"}, nil},
		{"macro variable in scope", "workflow w {\n  input { names: list<string> }\n  task a { run \"cel\"  with { x = input.names.exists(n, size(|) > 2) } }\n}", []string{"n", "input"}, nil},
		{"macro variable in a template", "workflow w {\n  input { names: list<string> }\n  agent q { model \"m\"  prompt \"{{ input.names.map(n, n.| }}\" }\n}", []string{"upperAscii"}, nil},
	}
	c := newTestClient(t, Options{}, nil)
	c.initialize()
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			labels, _ := completeLabels(t, c, "file:///n"+strings.Repeat("x", i)+".wf", tc.src)
			for _, w := range tc.want {
				if !slices.Contains(labels, w) {
					t.Errorf("missing %q in %v", w, labels)
				}
			}
			for _, w := range tc.notWant {
				if slices.Contains(labels, w) {
					t.Errorf("unexpected %q in %v", w, labels)
				}
			}
		})
	}
}

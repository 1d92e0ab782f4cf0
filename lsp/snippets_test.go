package lsp

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	protocol "github.com/tliron/glsp/protocol_3_16"

	"github.com/wfc-lang/wfc/compiler"
)

// initializeSnippets initializes c as a client with or without
// completion snippets.
func (c *testClient) initializeSnippets(snippets bool) {
	c.t.Helper()
	var raw any
	c.mustCall("initialize", map[string]any{
		"processId": nil,
		"capabilities": map[string]any{"textDocument": map[string]any{
			"completion": map[string]any{"completionItem": map[string]any{"snippetSupport": snippets}},
		}},
	}, &raw)
	c.notify("initialized", map[string]any{})
}

// snippetContexts place a snippet of each block in a file (%s is the
// snippet): the plain text of every snippet must compile there.
var snippetContexts = map[string]string{
	"top":      "%s\n",
	"workflow": "workflow w {\n  %s\n  task target { run \"noop\" }\n  task other { run \"noop\" }\n}\n",
	"node":     "workflow w {\n  input { items: list<string> }\n  task n {\n    run \"echo\"\n    %s\n  }\n  task target { run \"noop\" }\n  task other { run \"noop\" }\n}\n",
	"handler":  "handler \"h\" {\n  %s\n}\nworkflow w { task t { run \"noop\" } }\n",
}

// TestSnippetsCompile: the plain text of every snippet (each placeholder's
// default), written where completion offers it, compiles without errors,
// and its snippet form has tab stops.
func TestSnippetsCompile(t *testing.T) {
	files := map[string]string{
		"child.wf": "workflow c { task t { run \"noop\" } }",
		"lib.wf":   "handler \"svc\" { config { x: int } }",
	}
	for key, body := range snippets {
		head, name, _ := strings.Cut(key, ":")
		ctx, ok := snippetContexts[head]
		if !ok {
			t.Fatalf("%s: no context for block %s", key, head)
		}
		if !snippetPlaceholder.MatchString(body) {
			t.Errorf("%s: no tab stop in %q", key, body)
		}
		plain := plainSnippet(body)
		if strings.Contains(plain, "$") {
			t.Errorf("%s: plain text %q keeps a tab stop", key, plain)
		}
		src := fmt.Sprintf(ctx, strings.ReplaceAll(plain, "\n", "\n    "))
		switch {
		case head == "top" && name != "workflow":
			src += "workflow w { task t { run \"noop\" } }\n"
		case key == "node:output":
			// echo's output mirrors its with: the declared field must be set.
			src = strings.Replace(src, "run \"echo\"", "run \"echo\"\n    with { field = \"\" }", 1)
		case key == "node:branch" || key == "node:loop":
			src = strings.Replace(src, "run \"echo\"", "run \"echo\"\n    with { ok = true  again = false }", 1)
		}
		res := compiler.Compile("/p/t.wf", []byte(src), compiler.Config{NoOptimize: true, ReadFile: func(p string) ([]byte, error) {
			if b, ok := files[strings.TrimPrefix(p, "/p/")]; ok {
				return []byte(b), nil
			}
			return nil, fmt.Errorf("no file %s", p)
		}})
		if res.Diags.HasErrors() {
			t.Errorf("%s: the plain snippet does not compile:\n%s\n%v", key, src, res.Diags)
		}
	}
}

// snippetLabels returns the labels of the snippet items of a completion.
func snippetLabels(items []protocol.CompletionItem) []string {
	var out []string
	for _, it := range items {
		if it.Kind != nil && *it.Kind == protocol.CompletionItemKindSnippet {
			out = append(out, it.Label)
		}
	}
	slices.Sort(out)
	return out
}

// TestSnippetCompletionLegal: snippets are offered only where their
// keyword is legal: declarations at the top level (no second workflow),
// node kinds and blocks in a workflow body, in a node body the blocks its
// kind accepts and does not have yet.
func TestSnippetCompletionLegal(t *testing.T) {
	c := newTestClient(t, Options{}, nil)
	c.initializeSnippets(true)
	cases := []struct {
		src  string
		want []string
	}{
		{"|", []string{"handler", "import", "workflow"}},
		{"import \"x.wf\"\n|\nworkflow w { task t { run \"noop\" } }\n", []string{"handler", "import"}},
		{"workflow w {\n  |\n}\n", []string{"agent", "finally", "flow", "handler", "human", "input", "output", "task"}},
		{"workflow w {\n  task t {\n    run \"noop\"\n    |\n  }\n}\n", []string{"branch", "compensate", "for_each", "loop", "on_error", "output", "retry", "with"}},
		{"workflow w {\n  task t {\n    run \"noop\"\n    retry { attempts 2 }\n    |\n  }\n}\n", []string{"branch", "compensate", "for_each", "loop", "on_error", "output", "with"}},
		{"workflow w {\n  agent a {\n    model \"m\"\n    |\n  }\n}\n", []string{"on_error", "output", "retry", "with"}},
		{"workflow w {\n  human h {\n    |\n  }\n}\n", []string{"on_error", "output", "retry"}},
		{"workflow w {\n  flow f {\n    |\n  }\n}\n", []string{"branch", "compensate", "for_each", "loop", "on_error", "output", "retry", "with"}},
		{"handler \"h\" {\n  |\n}\n", []string{"config", "output"}},
		// Not where a keyword is not: in an expression, a retry block, a with.
		{"workflow w {\n  task t {\n    run \"noop\"\n    when |\n  }\n}\n", nil},
		{"workflow w {\n  task t {\n    run \"noop\"\n    retry { | }\n  }\n}\n", nil},
		{"workflow w {\n  task t {\n    run \"http\"\n    with { | }\n  }\n}\n", nil},
	}
	for i, tc := range cases {
		text, p := marked(t, tc.src)
		uri := fmt.Sprintf("file:///snip%d.wf", i)
		c.open(uri, text)
		c.diagnostics(uri, 1)
		var list protocol.CompletionList
		c.mustCall("textDocument/completion", tdp(uri, p), &list)
		if got := snippetLabels(list.Items); !slices.Equal(got, tc.want) {
			t.Errorf("%q: snippets = %v, want %v", tc.src, got, tc.want)
		}
	}
}

// TestSnippetFormat: a client with snippetSupport gets snippet syntax; one
// without gets the placeholders' defaults as plain text. Lines after the
// first are indented like the cursor's line.
func TestSnippetFormat(t *testing.T) {
	src := "workflow w {\n  task t {\n    run \"noop\"\n    re|\n  }\n}\n"
	text, p := marked(t, src)
	for _, support := range []bool{true, false} {
		c := newTestClient(t, Options{}, nil)
		c.initializeSnippets(support)
		uri := "file:///fmt.wf"
		c.open(uri, text)
		c.diagnostics(uri, 1)
		var list protocol.CompletionList
		c.mustCall("textDocument/completion", tdp(uri, p), &list)
		var retry *protocol.CompletionItem
		for i, it := range list.Items {
			if it.Label == "retry" && *it.Kind == protocol.CompletionItemKindSnippet {
				retry = &list.Items[i]
			}
		}
		if retry == nil {
			t.Fatalf("snippetSupport %v: no retry snippet in %+v", support, list.Items)
		}
		got := retry.TextEdit.(protocol.TextEdit).NewText
		want := "retry {\n      attempts ${1:3}\n      backoff ${2|exponential,fixed,linear|}\n      delay ${3:1s}\n    }$0"
		format := protocol.InsertTextFormatSnippet
		if !support {
			want = "retry {\n      attempts 3\n      backoff exponential\n      delay 1s\n    }"
			format = protocol.InsertTextFormatPlainText
		}
		if got != want {
			t.Errorf("snippetSupport %v: text = %q, want %q", support, got, want)
		}
		if retry.InsertTextFormat == nil || *retry.InsertTextFormat != format {
			t.Errorf("snippetSupport %v: insertTextFormat = %v, want %v", support, retry.InsertTextFormat, format)
		}
		if retry.InsertTextMode == nil || *retry.InsertTextMode != protocol.InsertTextModeAsIs {
			t.Errorf("insertTextMode = %v, want asIs", retry.InsertTextMode)
		}
		if !support {
			// The text applied where it was offered compiles.
			m := NewMapper(sourceFile(text))
			r := m.ByteRange(protocol.Range{Start: protocol.Position{Line: 3, Character: 4}, End: p})
			out := text[:r.Start] + got + text[r.End:]
			if diags := compileSnippet(out); diags.HasErrors() {
				t.Errorf("after the plain snippet:\n%s\n%v", out, diags)
			}
		}
	}
}

// TestSnippetForNewBlockItem: a keyword added to the tables later whose
// form opens a block gets a block snippet without an entry in snippets.
func TestSnippetForNewBlockItem(t *testing.T) {
	if got := snippetFor("node", word{name: "tools", form: "tools { name … }"}); got != "tools {\n  $0\n}" {
		t.Errorf("snippet of a new block item = %q", got)
	}
	if got := snippetFor("node", word{name: "max_tool_calls", form: "max_tool_calls N"}); got != "" {
		t.Errorf("snippet of a setting = %q, want none", got)
	}
}

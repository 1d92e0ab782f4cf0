package lsp

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	protocol "github.com/tliron/glsp/protocol_3_16"

	"github.com/wfc-lang/wfc/compiler"
	"github.com/wfc-lang/wfc/lang/source"
)

// lead is examples/lead.wf with non-ASCII text in a comment and a string,
// so positions after them are checked in UTF-16.
const lead = `workflow lead_qualification {
  version "1.0" // é 日本 😀
  deadline 72h

  input {
    lead_id: string
  }

  output {
    route = has(qualify.output) ? "agent" : "rules"
  }

  handler "crm.lookup" {
    description "Looks a lead up in the CRM."
    config { lead_id: string }
    output { name: string  employees: int  revenue: number }
  }

  task enrich {
    run "crm.lookup"
    with { lead_id = input.lead_id }
    retry { attempts 3  backoff exponential  delay 1s }
    timeout 30s
  }

  task score after enrich {
    run "cel"
    with { score = enrich.output.employees > 500 ? 90 : 40 }
    branch {
      when output.score >= 80 && enrich.output.revenue > 100000.0 => qualify
      else => nurture_campaign
    }
  }

  agent qualify {
    model "gpt-4o"
    prompt "Route 😀 {{ enrich.output.name }} ({{ enrich.output.revenue }})"
    routes enterprise_sales, standard_sales
    default => manual_review
  }

  human enterprise_sales {
    approvers ["sales-manager@example.com"]
    timeout 48h
    on_timeout reject
    on_reject => manual_review
  }

  task standard_sales   { run "noop" }
  task manual_review join settled { run "noop" }
  task nurture_campaign { run "noop" }
}
`

// at returns the LSP position of the n-th (0-based) occurrence of needle in
// src, plus delta bytes.
func at(t testing.TB, src, needle string, n, delta int) protocol.Position {
	t.Helper()
	off := -1
	for i := 0; i <= n; i++ {
		k := strings.Index(src[off+1:], needle)
		if k < 0 {
			t.Fatalf("occurrence %d of %q not found", n, needle)
		}
		off += 1 + k
	}
	return NewMapper(source.NewFile("", []byte(src))).Position(off + delta)
}

func openLead(t *testing.T) (*testClient, string) {
	c := newTestClient(t, Options{}, nil)
	c.initialize()
	uri := "file:///lead.wf"
	c.open(uri, lead)
	if d := c.diagnostics(uri, 1); len(d) != 0 {
		for _, x := range d {
			t.Logf("%s %s", x.Code, x.Message)
		}
	}
	return c, uri
}

func hoverAt(t *testing.T, c *testClient, uri string, p protocol.Position) (string, *protocol.Range) {
	t.Helper()
	var h *struct {
		Contents protocol.MarkupContent `json:"contents"`
		Range    *protocol.Range        `json:"range"`
	}
	c.mustCall("textDocument/hover", tdp(uri, p), &h)
	if h == nil {
		return "", nil
	}
	return h.Contents.Value, h.Range
}

func TestHover(t *testing.T) {
	c, uri := openLead(t)
	cases := []struct {
		name string
		pos  protocol.Position
		want []string
	}{
		{"node id in after", at(t, lead, "after enrich", 0, 6), []string{"task enrich", "runs handler `crm.lookup`", "Looks a lead up", "enrich.output {", "employees: int"}},
		{"node declaration", at(t, lead, "task score", 0, 5), []string{"task score after enrich", "score: int"}},
		{"join settled", at(t, lead, "task manual_review", 0, 5), []string{"**join settled**: waits until `qualify` and `enterprise_sales` have all settled"}},
		{"node in an expression", at(t, lead, "enrich.output.employees", 0, 2), []string{"task enrich"}},
		{"node in a template after an emoji", at(t, lead, "enrich.output.name", 0, 1), []string{"task enrich"}},
		{"output field", at(t, lead, "employees > 500", 0, 3), []string{"enrich.output.employees: int", "task enrich"}},
		{"field in a template", at(t, lead, "revenue }}", 0, 2), []string{"enrich.output.revenue: number"}},
		{"input use", at(t, lead, "input.lead_id", 0, 8), []string{"input.lead_id: string", "required"}},
		{"input declaration", at(t, lead, "lead_id: string\n  }", 0, 1), []string{"input.lead_id: string"}},
		{"handler use", at(t, lead, `run "crm.lookup"`, 0, 7), []string{`handler "crm.lookup"`, "config {", "lead_id: string", "output {", "revenue: number"}},
		{"built-in handler", at(t, lead, `run "cel"`, 0, 6), []string{`handler "cel"`, "built in", "one field per `with` entry"}},
		{"agent routes target", at(t, lead, "standard_sales\n", 0, 2), []string{"task standard_sales", "runs handler `noop`"}},
		{"agent node output", at(t, lead, "qualify.output)", 0, 1), []string{"agent qualify", "route: string", "text: string"}},
		{"CEL type of a sub-expression", at(t, lead, "> 500", 0, 0), []string{"type `bool`"}},
		{"CEL type of a literal", at(t, lead, "100000.0", 0, 2), []string{"type `number`"}},
		{"keyword", at(t, lead, "retry {", 0, 1), []string{"retry { attempts N", "Retry the node"}},
		{"keyword in a block", at(t, lead, "backoff exponential", 0, 1), []string{"backoff fixed|linear|exponential"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			text, _ := hoverAt(t, c, uri, tc.pos)
			for _, w := range tc.want {
				if !strings.Contains(text, w) {
					t.Errorf("hover at %v = %q, missing %q", tc.pos, text, w)
				}
			}
		})
	}
	// Nothing to say on whitespace.
	if text, _ := hoverAt(t, c, uri, pos(3, 0)); text != "" {
		t.Errorf("hover on a blank line = %q", text)
	}
	// The range is the symbol, in UTF-16 after the emoji.
	p := at(t, lead, "enrich.output.name", 0, 0)
	_, r := hoverAt(t, c, uri, p)
	if r == nil || r.Start != p || r.End.Character != p.Character+6 {
		t.Errorf("hover range = %v, want %v + 6", r, p)
	}
}

func TestHoverOptionalInputAndHalfTypedFile(t *testing.T) {
	c := newTestClient(t, Options{}, nil)
	c.initialize()
	uri := "file:///h.wf"
	src := "workflow w {\n  input { region?: string  n: int = 3 }\n  task a { run \"cel\" with { x = input.region  y = input.n } }\n  task b after a { when a.output."
	c.open(uri, src)
	text, _ := hoverAt(t, c, uri, at(t, src, "region  y", 0, 1))
	if !strings.Contains(text, "input.region?: string") || !strings.Contains(text, "has(input.region)") {
		t.Errorf("optional input hover = %q", text)
	}
	text, _ = hoverAt(t, c, uri, at(t, src, "n  y = input.n", 0, 13))
	if !strings.Contains(text, "default `3`") {
		t.Errorf("input with default hover = %q", text)
	}
	text, _ = hoverAt(t, c, uri, at(t, src, "after a", 0, 6))
	if !strings.Contains(text, "x: string") {
		t.Errorf("hover in a broken file = %q", text)
	}
}

func locations(t *testing.T, c *testClient, method, uri string, p protocol.Position, extra map[string]any) []protocol.Location {
	t.Helper()
	params := tdp(uri, p)
	for k, v := range extra {
		params[k] = v
	}
	var locs []protocol.Location
	c.mustCall(method, params, &locs)
	return locs
}

func TestDefinition(t *testing.T) {
	c, uri := openLead(t)
	cases := []struct {
		name string
		from protocol.Position
		to   protocol.Position
	}{
		{"after", at(t, lead, "after enrich", 0, 7), at(t, lead, "task enrich", 0, 5)},
		{"expression", at(t, lead, "enrich.output.employees", 0, 0), at(t, lead, "task enrich", 0, 5)},
		{"template after an emoji", at(t, lead, "enrich.output.name", 0, 3), at(t, lead, "task enrich", 0, 5)},
		{"branch target", at(t, lead, "=> qualify", 0, 4), at(t, lead, "agent qualify", 0, 6)},
		{"default target", at(t, lead, "default => manual_review", 0, 11), at(t, lead, "task manual_review", 0, 5)},
		{"routes", at(t, lead, "enterprise_sales,", 0, 0), at(t, lead, "human enterprise_sales", 0, 6)},
		{"input", at(t, lead, "input.lead_id", 0, 6), at(t, lead, "lead_id: string\n  }", 0, 0)},
		{"handler", at(t, lead, `run "crm.lookup"`, 0, 4), at(t, lead, `handler "crm.lookup"`, 0, 8)},
		{"output field", at(t, lead, "employees > 500", 0, 0), at(t, lead, "employees: int", 0, 0)},
		{"open handler field", at(t, lead, "output.score >=", 0, 7), pos(0, 0)}, // output.score is the node's own output: no ref
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			locs := locations(t, c, "textDocument/definition", uri, tc.from, nil)
			if tc.to == pos(0, 0) {
				return
			}
			if len(locs) != 1 || locs[0].URI != uri || locs[0].Range.Start != tc.to {
				t.Errorf("definition from %v = %+v, want %v", tc.from, locs, tc.to)
			}
		})
	}
	if locs := locations(t, c, "textDocument/definition", uri, at(t, lead, `run "cel"`, 0, 5), nil); len(locs) != 0 {
		t.Errorf("definition of a built-in handler = %v, want none", locs)
	}
}

func TestDefinitionInImport(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "lib.wf"), []byte("// lib\nhandler \"svc\" { output { v: int } }\n"), 0o644)
	path := filepath.Join(dir, "main.wf")
	src := "import \"lib.wf\"\nworkflow w { task a { run \"svc\" } }\n"
	os.WriteFile(path, []byte(src), 0o644)
	c := newTestClient(t, Options{}, nil)
	c.initialize()
	uri := pathToURI(path)
	c.open(uri, src)
	locs := locations(t, c, "textDocument/definition", uri, at(t, src, `"svc"`, 0, 1), nil)
	if len(locs) != 1 || locs[0].URI != pathToURI(filepath.Join(dir, "lib.wf")) || locs[0].Range.Start != pos(1, 8) {
		t.Errorf("definition in import = %+v", locs)
	}
}

func rangesOf(locs []protocol.Location) []string {
	var out []string
	for _, l := range locs {
		out = append(out, fmtRange(l.Range))
	}
	sort.Strings(out)
	return out
}

func TestReferences(t *testing.T) {
	c, uri := openLead(t)
	// enrich: declaration, after, 2 in with/branch expressions, 2 in the template.
	locs := locations(t, c, "textDocument/references", uri, at(t, lead, "task enrich", 0, 6), map[string]any{"context": map[string]any{"includeDeclaration": true}})
	if len(locs) != 6 {
		t.Errorf("references of enrich = %v, want 6", rangesOf(locs))
	}
	want := []protocol.Position{at(t, lead, "enrich.output.name", 0, 0), at(t, lead, "enrich.output.revenue }}", 0, 0), at(t, lead, "after enrich", 0, 6)}
	for _, w := range want {
		found := false
		for _, l := range locs {
			found = found || l.Range.Start == w
		}
		if !found {
			t.Errorf("references of enrich miss %v: %v", w, rangesOf(locs))
		}
	}
	locs = locations(t, c, "textDocument/references", uri, at(t, lead, "task enrich", 0, 6), map[string]any{"context": map[string]any{"includeDeclaration": false}})
	if len(locs) != 5 {
		t.Errorf("references without declaration = %d, want 5", len(locs))
	}
	// manual_review: default and on_reject, plus the declaration.
	locs = locations(t, c, "textDocument/references", uri, at(t, lead, "manual_review", 0, 0), map[string]any{"context": map[string]any{"includeDeclaration": true}})
	if len(locs) != 3 {
		t.Errorf("references of manual_review = %v", rangesOf(locs))
	}
	// A field: revenue in the branch and in the template.
	locs = locations(t, c, "textDocument/references", uri, at(t, lead, "revenue > 100000", 0, 0), map[string]any{"context": map[string]any{"includeDeclaration": true}})
	if len(locs) != 3 { // declaration in the handler's output, branch, template
		t.Errorf("references of enrich.output.revenue = %v", rangesOf(locs))
	}
	var hl []protocol.DocumentHighlight
	c.mustCall("textDocument/documentHighlight", tdp(uri, at(t, lead, "task enrich", 0, 6)), &hl)
	if len(hl) != 6 {
		t.Errorf("highlights = %d, want 6", len(hl))
	}
}

// applyEdits applies text edits (non-overlapping) to src.
func applyEdits(t *testing.T, src string, edits []protocol.TextEdit) string {
	t.Helper()
	m := NewMapper(source.NewFile("", []byte(src)))
	sort.Slice(edits, func(i, j int) bool { return m.Offset(edits[i].Range.Start) > m.Offset(edits[j].Range.Start) })
	out := src
	for _, e := range edits {
		r := m.ByteRange(e.Range)
		out = out[:r.Start] + e.NewText + out[r.End:]
	}
	return out
}

func TestRename(t *testing.T) {
	c, uri := openLead(t)
	p := at(t, lead, "enrich.output.name", 0, 2)
	var prep struct {
		Range       protocol.Range `json:"range"`
		Placeholder string         `json:"placeholder"`
	}
	c.mustCall("textDocument/prepareRename", tdp(uri, p), &prep)
	if prep.Placeholder != "enrich" || prep.Range.Start != at(t, lead, "enrich.output.name", 0, 0) {
		t.Errorf("prepareRename = %+v", prep)
	}
	params := tdp(uri, p)
	params["newName"] = "lookup"
	var edit struct {
		Changes map[string][]protocol.TextEdit `json:"changes"`
	}
	c.mustCall("textDocument/rename", params, &edit)
	got := applyEdits(t, lead, edit.Changes[uri])
	want := strings.ReplaceAll(lead, "enrich", "lookup")
	if got != want {
		t.Errorf("rename result:\n%s", got)
	}
	// The renamed file compiles without diagnostics.
	c.changeFull(uri, 2, got)
	if d := c.diagnostics(uri, 2); len(d) != 0 {
		t.Errorf("after rename: %v", d)
	}

	// An input, from its declaration.
	params = tdp(uri, at(t, got, "lead_id: string\n  }", 0, 0))
	params["newName"] = "lead"
	c.mustCall("textDocument/rename", params, &edit)
	got2 := applyEdits(t, got, edit.Changes[uri])
	if !strings.Contains(got2, "lead: string\n") || !strings.Contains(got2, "lead_id = input.lead }") || !strings.Contains(got2, "config { lead_id: string }") {
		t.Errorf("input rename:\n%s", got2)
	}

	refuse := []struct {
		name, newName string
		p             protocol.Position
	}{
		{"reserved word", "when", at(t, got, "task score", 0, 5)},
		{"invalid identifier", "9lives", at(t, got, "task score", 0, 5)},
		{"not ASCII", "scoré", at(t, got, "task score", 0, 5)},
		{"existing node", "qualify", at(t, got, "task score", 0, 5)},
		{"handler", "x", at(t, got, `run "crm.lookup"`, 0, 5)},
	}
	for _, r := range refuse {
		params := tdp(uri, r.p)
		params["newName"] = r.newName
		if err := c.call("textDocument/rename", params, nil); err == nil {
			t.Errorf("%s: rename to %q was accepted", r.name, r.newName)
		}
	}
	// prepareRename on a keyword: nothing to rename.
	var raw json.RawMessage
	c.mustCall("textDocument/prepareRename", tdp(uri, at(t, got, "timeout 30s", 0, 1)), &raw)
	if string(raw) != "null" {
		t.Errorf("prepareRename on a keyword = %s", raw)
	}
	// A file with syntax errors refuses: references in the broken part
	// would be missed.
	c.changeFull(uri, 3, got+"\ntask {")
	if err := c.call("textDocument/prepareRename", tdp(uri, at(t, got, "task score", 0, 5)), nil); err == nil || !strings.Contains(err.Message, "syntax errors") {
		t.Errorf("prepareRename with syntax errors: %v", err)
	}
}

func TestDocumentSymbols(t *testing.T) {
	c, uri := openLead(t)
	var syms []protocol.DocumentSymbol
	c.mustCall("textDocument/documentSymbol", map[string]any{"textDocument": map[string]any{"uri": uri}}, &syms)
	if len(syms) != 1 || syms[0].Name != "lead_qualification" {
		t.Fatalf("symbols = %+v", syms)
	}
	var names []string
	for _, ch := range syms[0].Children {
		names = append(names, ch.Name)
	}
	want := "input output crm.lookup enrich score qualify enterprise_sales standard_sales manual_review nurture_campaign"
	if strings.Join(names, " ") != want {
		t.Errorf("children = %v, want %s", names, want)
	}
	in := syms[0].Children[0]
	if len(in.Children) != 1 || in.Children[0].Name != "lead_id" || *in.Children[0].Detail != "string" {
		t.Errorf("input children = %+v", in.Children)
	}
	score := syms[0].Children[4]
	if *score.Detail != `task · run "cel"` || score.SelectionRange.Start != at(t, lead, "task score", 0, 5) {
		t.Errorf("score = %+v", score)
	}
	// Flat symbols for a client without hierarchical support.
	c2 := newTestClient(t, Options{}, nil)
	c2.mustCall("initialize", map[string]any{"capabilities": map[string]any{}}, nil)
	c2.open(uri, lead)
	var flat []protocol.SymbolInformation
	c2.mustCall("textDocument/documentSymbol", map[string]any{"textDocument": map[string]any{"uri": uri}}, &flat)
	if len(flat) < 12 || flat[4].Name != "route" || flat[4].ContainerName == nil || *flat[4].ContainerName != "output" {
		t.Errorf("flat symbols = %+v", flat)
	}
}

func TestDocumentSymbolsBrokenFile(t *testing.T) {
	c := newTestClient(t, Options{}, nil)
	c.initialize()
	uri := "file:///broken.wf"
	c.open(uri, "workflow w {\n  task a { run \"noop\" }\n  task b after {\n  task c { run }\n")
	var syms []protocol.DocumentSymbol
	c.mustCall("textDocument/documentSymbol", map[string]any{"textDocument": map[string]any{"uri": uri}}, &syms)
	if len(syms) != 1 || len(syms[0].Children) < 2 {
		t.Errorf("symbols of a broken file = %+v", syms)
	}
}

// decodeTokens turns semantic token data into "line:col text type" strings.
func decodeTokens(t *testing.T, src string, data []uint32) []string {
	t.Helper()
	lines := strings.Split(src, "\n")
	var out []string
	var line, col uint32
	for i := 0; i+5 <= len(data); i += 5 {
		if data[i] > 0 {
			col = 0
		}
		line += data[i]
		col += data[i+1]
		length := data[i+2]
		units := []rune(lines[line])
		// columns are UTF-16: walk runes
		var u, start uint32
		startRune, endRune := -1, -1
		for k, r := range units {
			if u == col {
				startRune = k
			}
			if u == col+length {
				endRune = k
			}
			n := uint32(1)
			if r >= 0x10000 {
				n = 2
			}
			u += n
			_ = start
		}
		if u == col+length {
			endRune = len(units)
		}
		if startRune < 0 || endRune < 0 {
			t.Fatalf("token %d:%d+%d does not fall on characters of %q", line, col, length, lines[line])
		}
		out = append(out, string(units[startRune:endRune])+"="+string(tokenTypeList[data[i+3]]))
	}
	return out
}

func TestSemanticTokens(t *testing.T) {
	c, uri := openLead(t)
	var st struct {
		Data []uint32 `json:"data"`
	}
	c.mustCall("textDocument/semanticTokens/full", map[string]any{"textDocument": map[string]any{"uri": uri}}, &st)
	toks := decodeTokens(t, lead, st.Data)
	joined := "\n" + strings.Join(toks, "\n") + "\n"
	for _, w := range []string{
		"workflow=keyword", "lead_qualification=class", "version=keyword", `"1.0"=string`, "// é 日本 😀=comment",
		"72h=number", "lead_id=parameter", "string=type", "handler=keyword", `"crm.lookup"=class`, "task=keyword",
		"enrich=function", "after=keyword", "retry=keyword", "3=number", "exponential=enumMember", "employees=property",
		"{{=macro", "}}=macro", `"Route 😀 =string`, "input=variable", "when=keyword", "else=keyword", "reject=enumMember",
		"qualify=function", "routes=keyword", "=>=", // not a token
	} {
		if w == "=>=" {
			if strings.Contains(joined, "\n=>=") {
				t.Errorf("=> is a token")
			}
			continue
		}
		if !strings.Contains(joined, "\n"+w+"\n") {
			t.Errorf("missing token %s", w)
		}
	}
	// Tokens are sorted and do not overlap (decodeTokens checked they fall
	// on characters).
	var line, col, end uint32
	for i := 0; i+5 <= len(st.Data); i += 5 {
		if st.Data[i] > 0 {
			line += st.Data[i]
			col, end = st.Data[i+1], 0
		} else {
			col += st.Data[i+1]
		}
		if col < end {
			t.Fatalf("token at %d:%d overlaps the previous one", line, col)
		}
		end = col + st.Data[i+2]
	}
}

func TestFoldingRanges(t *testing.T) {
	c := newTestClient(t, Options{}, nil)
	c.initialize()
	uri := "file:///fold.wf"
	src := "// a\n// b\n// c\nworkflow w {\n  task a {\n    run \"noop\"\n  }\n  /* long\n     comment */\n  task b { run \"noop\" }\n}\n"
	c.open(uri, src)
	var fr []protocol.FoldingRange
	c.mustCall("textDocument/foldingRange", map[string]any{"textDocument": map[string]any{"uri": uri}}, &fr)
	var got []string
	for _, f := range fr {
		k := ""
		if f.Kind != nil {
			k = *f.Kind
		}
		got = append(got, strings.TrimSpace(strings.Join([]string{itoa(f.StartLine) + "-" + itoa(f.EndLine), k}, " ")))
	}
	sort.Strings(got)
	want := []string{"0-2 comment", "3-9", "4-5", "7-8 comment"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("folding ranges = %v, want %v", got, want)
	}
}

func itoa(n uint32) string { return strconv.Itoa(int(n)) }

func TestCodeActions(t *testing.T) {
	c := newTestClient(t, Options{}, nil)
	c.initialize()
	uri := "file:///fix.wf"
	src := "workflow w {\n  task fetch_user { run \"noop\" }\n  task b after fetch_usr { run \"noop\" }\n  task d { run \"nop\" }\n}\n"
	c.open(uri, src)
	diags := c.diagnostics(uri, 1)
	if len(diags) < 2 {
		t.Fatalf("diagnostics = %v", diags)
	}
	var actions []struct {
		Title       string           `json:"title"`
		Kind        string           `json:"kind"`
		Diagnostics []testDiagnostic `json:"diagnostics"`
		Edit        struct {
			Changes map[string][]protocol.TextEdit `json:"changes"`
		} `json:"edit"`
	}
	c.mustCall("textDocument/codeAction", map[string]any{
		"textDocument": map[string]any{"uri": uri},
		"range":        protocol.Range{Start: at(t, src, "fetch_usr", 0, 2), End: at(t, src, "fetch_usr", 0, 2)},
		"context":      map[string]any{"diagnostics": []any{}},
	}, &actions)
	if len(actions) != 1 || actions[0].Kind != "quickfix" || actions[0].Diagnostics[0].Code != "WF1001" {
		t.Fatalf("actions = %+v", actions)
	}
	fixed := applyEdits(t, src, actions[0].Edit.Changes[uri])
	if !strings.Contains(fixed, "after fetch_user {") {
		t.Errorf("fix = %q", fixed)
	}
	// The whole file: both fixes.
	c.mustCall("textDocument/codeAction", map[string]any{
		"textDocument": map[string]any{"uri": uri},
		"range":        protocol.Range{Start: pos(0, 0), End: pos(5, 0)},
		"context":      map[string]any{"diagnostics": []any{}},
	}, &actions)
	if len(actions) != 2 {
		t.Errorf("actions for the file = %+v", actions)
	}
	fixed = applyEdits(t, src, append(actions[0].Edit.Changes[uri], actions[1].Edit.Changes[uri]...))
	c.changeFull(uri, 2, fixed)
	if d := c.diagnostics(uri, 2); len(d) != 0 {
		t.Errorf("after both fixes: %v\n%s", d, fixed)
	}
	// Only refactorings asked for: none.
	c.mustCall("textDocument/codeAction", map[string]any{
		"textDocument": map[string]any{"uri": uri},
		"range":        protocol.Range{Start: pos(0, 0), End: pos(5, 0)},
		"context":      map[string]any{"diagnostics": []any{}, "only": []string{"refactor"}},
	}, &actions)
	if len(actions) != 0 {
		t.Errorf("refactor actions = %+v", actions)
	}
}

func TestJoinRule(t *testing.T) {
	for _, c := range []struct {
		join    string
		sources []string
		want    string
	}{
		{"all", []string{"a"}, ""},
		{"all", []string{"a", "b", "c"}, "**join all**: runs only when `a`, `b` and `c` have each sent a real token"},
		{"", []string{"a", "b"}, "**join all**"},
		{"any", []string{"a", "b"}, "**join any**: runs at the first real token from `a` or `b`"},
		{"settled", []string{"a", "b"}, "**join settled**: waits until `a` and `b` have all settled"},
	} {
		got := joinRule(&compiler.NodeInfo{Join: c.join, Sources: c.sources})
		if c.want == "" && got != "" || !strings.Contains(got, c.want) {
			t.Errorf("joinRule(%s, %v) = %q, want %q", c.join, c.sources, got, c.want)
		}
	}
}

// TestHoverCEL: inside an expression the hover is the innermost
// sub-expression under the cursor, with its own type: a field its declared
// type, `output` its fields, has() a bool, a macro variable its element.
func TestHoverCEL(t *testing.T) {
	c, uri := openLead(t)
	cases := []struct {
		name string
		pos  protocol.Position
		want string
	}{
		{"own output field", at(t, lead, "output.score >=", 0, 8), "```wf\nscore.output.score: int\n```\nfield of the output of task score"},
		{"the dot of a select", at(t, lead, "output.score >=", 0, 6), "```cel\noutput\n```\ntype `{ score: int }`"},
		{"own output", at(t, lead, "output.score >=", 0, 2), "```cel\noutput\n```\ntype `{ score: int }`"},
		{"has", at(t, lead, "has(qualify", 0, 1), "```cel\nhas(qualify.output)\n```\ntype `bool`"},
		{"an operator", at(t, lead, ">= 80", 0, 0), "```cel\noutput.score >= 80\n```\ntype `bool`"},
		{"the other side of &&", at(t, lead, "> 100000.0", 0, 0), "```cel\nenrich.output.revenue > 100000.0\n```\ntype `bool`"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if text, _ := hoverAt(t, c, uri, tc.pos); text != tc.want {
				t.Errorf("hover = %q, want %q", text, tc.want)
			}
		})
	}
	src := "workflow w {\n  input { rows: list<{ id: string  n: int }>  m: map<int> }\n  task a {\n    run \"cel\"\n    with {\n      x = input.rows.exists(r, r.n > size(input.rows) && r.id.startsWith(\"a\"))\n      y = math.greatest(1, input.rows[0].n)\n    }\n  }\n}\n"
	c.open("file:///cel.wf", src)
	macro := []struct {
		name string
		pos  protocol.Position
		want string
	}{
		{"macro variable declared", at(t, src, "exists(r", 0, 7), "```cel\nr\n```\ntype `{ id: string  n: int }`"},
		{"macro variable used", at(t, src, "r.n >", 0, 0), "```cel\nr\n```\ntype `{ id: string  n: int }`"},
		{"field of a macro variable", at(t, src, "r.n >", 0, 2), "```cel\nr.n\n```\ntype `int`"},
		{"the macro", at(t, src, "exists(r", 0, 2), "```cel\ninput.rows.exists(r, r.n > size(input.rows) && r.id.startsWith(\"a\"))\n```\ntype `bool`"},
		{"a function", at(t, src, "size(", 0, 1), "```cel\nsize(input.rows)\n```\ntype `int`"},
		{"a member function", at(t, src, "startsWith", 0, 3), "```cel\nr.id.startsWith(\"a\")\n```\ntype `bool`"},
		{"an index", at(t, src, "[0]", 0, 1), "```cel\n0\n```\ntype `int`"},
		{"an indexed element", at(t, src, "[0]", 0, 3), "```cel\ninput.rows[0]\n```\ntype `{ id: string  n: int }`"},
		{"a namespaced macro", at(t, src, "greatest", 0, 2), "```cel\nmath.greatest(1, input.rows[0].n)\n```\ntype `int`"},
	}
	for _, tc := range macro {
		t.Run(tc.name, func(t *testing.T) {
			if text, _ := hoverAt(t, c, "file:///cel.wf", tc.pos); text != tc.want {
				t.Errorf("hover = %q, want %q", text, tc.want)
			}
		})
	}
}

// TestFieldNavigation: output fields are symbols everywhere: the node's own
// output (output.f in branch, loop, compensate), nested fields, and at
// their declaration, where they can be renamed.
func TestFieldNavigation(t *testing.T) {
	c, uri := openLead(t)
	// Definition of output.score: the with entry of the cel handler.
	locs := locations(t, c, "textDocument/definition", uri, at(t, lead, "output.score >=", 0, 8), nil)
	if len(locs) != 1 || locs[0].Range.Start != at(t, lead, "score = enrich", 0, 0) {
		t.Errorf("definition of output.score = %+v", locs)
	}
	// Hover at a declaration.
	if text, _ := hoverAt(t, c, uri, at(t, lead, "revenue: number", 0, 1)); !strings.Contains(text, "enrich.output.revenue: number") {
		t.Errorf("hover on a field declaration = %q", text)
	}
	rename := func(src string, p protocol.Position, newName string) (string, *rpcError) {
		params := tdp(uri, p)
		params["newName"] = newName
		var edit struct {
			Changes map[string][]protocol.TextEdit `json:"changes"`
		}
		if err := c.call("textDocument/rename", params, &edit); err != nil {
			return "", err
		}
		return applyEdits(t, src, edit.Changes[uri]), nil
	}
	// At the declaration of a handler's output field: the schema, the
	// branch and the template.
	got, err := rename(lead, at(t, lead, "revenue: number", 0, 2), "turnover")
	if err != nil {
		t.Fatalf("rename at the declaration: %v", err.Message)
	}
	if want := strings.ReplaceAll(lead, "revenue", "turnover"); got != want {
		t.Errorf("rename of revenue:\n%s", got)
	}
	// At a with entry of an open handler, and its own-output use.
	got, err = rename(lead, at(t, lead, "score = enrich", 0, 1), "rating")
	if err != nil {
		t.Fatalf("rename of a with entry: %v", err.Message)
	}
	if !strings.Contains(got, "with { rating = enrich") || !strings.Contains(got, "when output.rating >= 80") {
		t.Errorf("rename of score's field:\n%s", got)
	}
	c.changeFull(uri, 2, got)
	if d := c.diagnostics(uri, 2); len(d) != 0 {
		t.Errorf("after the rename: %v", d)
	}
	// From a use.
	got2, err := rename(got, at(t, got, "output.rating", 0, 8), "grade")
	if err != nil || !strings.Contains(got2, "with { grade = enrich") {
		t.Errorf("rename from a use: %v\n%s", err, got2)
	}
	// Refused: a name taken, a built-in handler's output.
	if _, err := rename(got, at(t, got, "employees > 500", 0, 1), "name"); err == nil || !strings.Contains(err.Message, "already exists") {
		t.Errorf("rename to an existing field: %v", err)
	}

	// Nested fields.
	src := "workflow w {\n  agent q {\n    model \"m\"\n    prompt \"p\"\n    output { deep: { inner: { leaf: bool } } }\n  }\n  task b after q { run \"cel\"  with { x = q.output.deep.inner.leaf } }\n}\n"
	nuri := "file:///nested.wf"
	c.open(nuri, src)
	if text, _ := hoverAt(t, c, nuri, at(t, src, "leaf }", 0, 1)); !strings.Contains(text, "q.output.deep.inner.leaf: bool") {
		t.Errorf("hover on a nested field = %q", text)
	}
	locs = locations(t, c, "textDocument/definition", nuri, at(t, src, "leaf }", 0, 1), nil)
	if len(locs) != 1 || locs[0].Range.Start != at(t, src, "leaf: bool", 0, 0) {
		t.Errorf("definition of a nested field = %+v", locs)
	}
	locs = locations(t, c, "textDocument/definition", nuri, at(t, src, "inner.leaf }", 0, 1), nil)
	if len(locs) != 1 || locs[0].Range.Start != at(t, src, "inner: {", 0, 0) {
		t.Errorf("definition of a nested field = %+v", locs)
	}
}

// TestLocalNavigation: for_each variables, the workflow's output entries,
// import paths and a flow node's output fields have hover and definition.
func TestLocalNavigation(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "lib.wf"), []byte("handler \"svc\" { output { v: int } }\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "child.wf"), []byte("workflow child {\n  input { n: int }\n  task t { run \"cel\"  with { v = input.n } }\n  output { total = t.output.v }\n}\n"), 0o644)
	src := "import \"lib.wf\"\nworkflow w {\n  input { ids: list<string> }\n  task a {\n    run \"cel\"\n    for_each i, id in input.ids\n    with { x = id + string(i) }\n  }\n  flow f after a { uses \"child.wf\"  with { n = 1 } }\n  task b after f { run \"cel\"  with { y = f.output.total } }\n  output { count = size(a.output) }\n}\n"
	path := filepath.Join(dir, "main.wf")
	os.WriteFile(path, []byte(src), 0o644)
	c := newTestClient(t, Options{}, nil)
	c.initialize()
	uri := pathToURI(path)
	c.open(uri, src)
	if d := c.diagnostics(uri, 1); len(d) != 0 {
		t.Fatalf("diagnostics: %v", d)
	}
	hovers := []struct {
		name string
		pos  protocol.Position
		want string
	}{
		{"for_each variable", at(t, src, "id in", 0, 1), "id: string"},
		{"for_each variable used", at(t, src, "id + string", 0, 1), "for_each variable"},
		{"for_each index", at(t, src, "i, id", 0, 0), "i: int"},
		{"workflow output", at(t, src, "count =", 0, 1), "output.count: int"},
		{"import path", at(t, src, "\"lib.wf\"", 0, 2), "handlers `svc`"},
		{"flow output field", at(t, src, "total }", 0, 1), "f.output.total: int"},
	}
	for _, h := range hovers {
		if text, _ := hoverAt(t, c, uri, h.pos); !strings.Contains(text, h.want) {
			t.Errorf("%s: hover = %q, want %q", h.name, text, h.want)
		}
	}
	defs := []struct {
		name string
		from protocol.Position
		uri  string
		to   protocol.Position
	}{
		{"for_each variable", at(t, src, "id + string", 0, 1), uri, at(t, src, "id in", 0, 0)},
		{"for_each index", at(t, src, "i) }", 0, 0), uri, at(t, src, "i, id", 0, 0)},
		{"import path", at(t, src, "\"lib.wf\"", 0, 2), pathToURI(filepath.Join(dir, "lib.wf")), pos(0, 0)},
		{"flow output field", at(t, src, "total }", 0, 1), pathToURI(filepath.Join(dir, "child.wf")), pos(3, 11)},
	}
	for _, d := range defs {
		locs := locations(t, c, "textDocument/definition", uri, d.from, nil)
		if len(locs) != 1 || locs[0].URI != d.uri || locs[0].Range.Start != d.to {
			t.Errorf("%s: definition = %+v, want %s %v", d.name, locs, d.uri, d.to)
		}
	}
}

package lsp

import (
	"os"
	"strings"
	"testing"
)

// nvimScript opens a file, waits for the diagnostics, asks for hover,
// definition, completion and formatting, and applies the formatting edits.
const nvimScript = `
  local bufnr = open(dir .. "/flow.wf")
  result.filetype = vim.bo[bufnr].filetype
  result.got_diagnostics = vim.wait(15000, function() return #vim.diagnostic.get(bufnr) > 0 end, 20)
  result.diagnostics = diags(bufnr)
  local td = { uri = vim.uri_from_bufnr(bufnr) }
  result.hover = req(bufnr, "textDocument/hover", { textDocument = td, position = find(bufnr, "after enrich", 7) })
  result.definition = req(bufnr, "textDocument/definition", { textDocument = td, position = find(bufnr, "enrich.output.employees", 1) })
  result.completion = req(bufnr, "textDocument/completion", { textDocument = td, position = find(bufnr, "employees > 500", 0) })
  local edits = req(bufnr, "textDocument/formatting", { textDocument = td, options = { tabSize = 2, insertSpaces = true } })
  result.format_edits = edits and #edits or -1
  if edits then vim.lsp.util.apply_text_edits(edits, bufnr, "utf-16") end
  result.formatted = table.concat(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false), "\n") .. "\n"
  result.stopped = stop()
`

// TestNeovim: diagnostics (columns after non-ASCII text), hover,
// definition, completion and formatting in Neovim.
func TestNeovim(t *testing.T) {
	// An error after CJK and emoji text on the same line: Neovim converts
	// the UTF-16 column back to bytes.
	src := strings.Replace(lead, `    run "cel"`, `    description "日本😀" run "cell"`, 1)
	var res struct {
		Filetype       string `json:"filetype"`
		GotDiagnostics bool   `json:"got_diagnostics"`
		Diagnostics    []struct {
			Lnum, Col int
			Message   string
			Code      string
			Source    string
		} `json:"diagnostics"`
		Hover struct {
			Contents struct{ Value string } `json:"contents"`
		} `json:"hover"`
		Definition []struct {
			Range struct {
				Start struct{ Line, Character int } `json:"start"`
			} `json:"range"`
		} `json:"definition"`
		Completion struct {
			Items []struct{ Label string } `json:"items"`
		} `json:"completion"`
		FormatEdits int    `json:"format_edits"`
		Formatted   string `json:"formatted"`
		Stopped     bool   `json:"stopped"`
	}
	runNvim(t, map[string]string{"flow.wf": src}, nvimScript, &res)
	if res.Filetype != "wf" {
		t.Errorf("filetype = %q", res.Filetype)
	}
	if !res.GotDiagnostics || len(res.Diagnostics) != 1 {
		t.Fatalf("diagnostics in nvim = %+v", res.Diagnostics)
	}
	d := res.Diagnostics[0]
	line := strings.Split(src, "\n")[d.Lnum]
	if d.Code != "WF1003" || d.Source != "wfc" || !strings.Contains(d.Message, `unknown handler "cell"`) || d.Col != strings.Index(line, `"cell"`) {
		t.Errorf("diagnostic in nvim = %+v (line %q)", d, line)
	}
	if !strings.Contains(res.Hover.Contents.Value, "task enrich") {
		t.Errorf("hover in nvim = %q", res.Hover.Contents.Value)
	}
	if len(res.Definition) != 1 || res.Definition[0].Range.Start.Line != int(at(t, src, "task enrich", 0, 0).Line) {
		t.Errorf("definition in nvim = %+v", res.Definition)
	}
	labels := map[string]bool{}
	for _, it := range res.Completion.Items {
		labels[it.Label] = true
	}
	if !labels["employees"] || !labels["revenue"] {
		t.Errorf("completion in nvim = %v", res.Completion.Items)
	}
	t.Logf("nvim applied %d formatting edits", res.FormatEdits)
	if res.Formatted != formatted(t, src) {
		t.Errorf("buffer after formatting in nvim (%d edits):\n%s", res.FormatEdits, res.Formatted)
	}
	if !res.Stopped {
		t.Errorf("the client did not stop the server")
	}
}

// docSnippet returns the first ```lua block after marker in the file.
func docSnippet(t *testing.T, path, marker string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	k := strings.Index(doc, marker)
	if k < 0 {
		t.Fatalf("%s has no %q", path, marker)
	}
	doc = doc[k:]
	start := strings.Index(doc, "```lua\n")
	end := strings.Index(doc[start+7:], "```")
	if start < 0 || end < 0 {
		t.Fatalf("no lua block after %q in %s", marker, path)
	}
	return doc[start+7 : start+7+end]
}

package lsp

import (
	"strings"
	"testing"
)

// nvimWorkspaceScript: main.wf runs a handler its import lib.wf does not
// declare yet; the script opens both, declares the handler in lib.wf's
// buffer without saving, and waits for main.wf's diagnostics to go away;
// then asks for main.wf's document links and for workspace symbols.
const nvimWorkspaceScript = `
  local mainbuf = open(dir .. "/main.wf")
  result.main_before = vim.wait(15000, function() return #vim.diagnostic.get(mainbuf) > 0 end, 20)
  local libbuf = open(dir .. "/lib.wf")
  vim.api.nvim_buf_set_lines(libbuf, -1, -1, false, { 'handler "svc" { output { v: int } }' })
  result.main_fixed = vim.wait(15000, function() return #vim.diagnostic.get(mainbuf) == 0 end, 20)
  -- lib.wf's own diagnostics were published before main.wf's re-check.
  result.lib_diagnostics = #vim.diagnostic.get(libbuf)
  result.links = req(mainbuf, "textDocument/documentLink", { textDocument = { uri = vim.uri_from_bufnr(mainbuf) } })
  result.symbols = req(mainbuf, "workspace/symbol", { query = "svc" })
  stop()
`

// TestNeovimImports runs Neovim headless with the configuration of
// docs/editors.md on two files, one importing the other.
func TestNeovimImports(t *testing.T) {
	var res struct {
		MainBefore     bool `json:"main_before"`
		LibDiagnostics int  `json:"lib_diagnostics"`
		MainFixed      bool `json:"main_fixed"`
		Links          []struct {
			Target string `json:"target"`
		} `json:"links"`
		Symbols []struct {
			Name     string `json:"name"`
			Location struct {
				URI string `json:"uri"`
			} `json:"location"`
		} `json:"symbols"`
	}
	runNvim(t, map[string]string{
		"main.wf": "import \"lib.wf\"\nworkflow w {\n  task a { run \"svc\" }\n}\n",
		"lib.wf":  "handler \"other\" { }\n",
	}, nvimWorkspaceScript, &res)
	if !res.MainBefore {
		t.Errorf("main.wf had no diagnostics before the handler was declared")
	}
	if res.LibDiagnostics != 0 {
		t.Errorf("lib.wf (a library) has %d diagnostics, want none", res.LibDiagnostics)
	}
	if !res.MainFixed {
		t.Errorf("main.wf was not re-checked after lib.wf changed in the editor")
	}
	if len(res.Links) != 1 || !strings.HasSuffix(res.Links[0].Target, "/lib.wf") {
		t.Errorf("document links in nvim = %+v", res.Links)
	}
	if len(res.Symbols) != 1 || res.Symbols[0].Name != "svc" || !strings.HasSuffix(res.Symbols[0].Location.URI, "/lib.wf") {
		t.Errorf("workspace symbols in nvim = %+v", res.Symbols)
	}
}

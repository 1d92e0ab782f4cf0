package lsp

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// nvimScript drives Neovim's built-in LSP client against `wfc lsp`. The
// client is started by the configuration of docs/editors.md (loaded as
// init.lua): the script opens a file, waits for the client to attach and for
// the diagnostics, asks for hover, definition, completion and formatting,
// applies the formatting edits, and writes what it saw as JSON.
const nvimScript = `
local file, out = os.getenv("WF_FILE"), os.getenv("OUT_FILE")
local result = {}
local ok, err = pcall(function()
  vim.cmd("edit " .. file)
  local bufnr = vim.api.nvim_get_current_buf()
  result.filetype = vim.bo[bufnr].filetype
  local client_id
  vim.wait(15000, function()
    client_id = next(vim.lsp.buf_get_clients(bufnr))
    return client_id ~= nil
  end, 20)
  assert(client_id, "no language client attached to the buffer")
  result.got_diagnostics = vim.wait(15000, function() return #vim.diagnostic.get(bufnr) > 0 end, 20)
  local diags = {}
  for _, d in ipairs(vim.diagnostic.get(bufnr)) do
    table.insert(diags, { lnum = d.lnum, col = d.col, message = d.message, code = d.code, source = d.source, severity = d.severity })
  end
  result.diagnostics = diags
  local uri = vim.uri_from_bufnr(bufnr)
  local function req(method, params)
    local res = vim.lsp.buf_request_sync(bufnr, method, params, 15000)
    if not res or not res[client_id] then return nil end
    return res[client_id].result
  end
  local lines = vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)
  local function find(needle, delta)
    for i, l in ipairs(lines) do
      local c = l:find(needle, 1, true)
      if c then return { line = i - 1, character = c - 1 + (delta or 0) } end
    end
  end
  local td = { uri = uri }
  result.hover = req("textDocument/hover", { textDocument = td, position = find("after enrich", 7) })
  result.definition = req("textDocument/definition", { textDocument = td, position = find("enrich.output.employees", 1) })
  result.completion = req("textDocument/completion", { textDocument = td, position = find("employees > 500", 0) })
  local edits = req("textDocument/formatting", { textDocument = td, options = { tabSize = 2, insertSpaces = true } })
  result.format_edits = edits and #edits or -1
  if edits then vim.lsp.util.apply_text_edits(edits, bufnr, "utf-16") end
  result.formatted = table.concat(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false), "\n") .. "\n"
  vim.lsp.stop_client(client_id)
  result.stopped = vim.wait(5000, function() return vim.lsp.client_is_stopped(client_id) end, 20)
end)
result.ok = ok
result.err = err and tostring(err) or nil
vim.fn.writefile({ vim.fn.json_encode(result) }, out)
vim.cmd("qa!")
`

// TestNeovim runs a real third-party client, Neovim headless, against the
// real binary. It is skipped when nvim is not installed, unless CI=true.
func TestNeovim(t *testing.T) {
	nvim, err := exec.LookPath("nvim")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("nvim is not installed (apt-get install -y neovim)")
		}
		t.Skip("nvim is not installed")
	}
	bin := wfcBinary(t)
	dir := t.TempDir()
	init := filepath.Join(dir, "init.lua")
	os.WriteFile(init, []byte(docSnippet(t, "../docs/editors.md", "<!-- tested by lsp/nvim_test.go")), 0o644)
	// An error after CJK and emoji text on the same line: Neovim converts
	// the UTF-16 column back to bytes.
	src := strings.Replace(lead, `    run "cel"`, `    description "日本😀" run "cell"`, 1)
	file := filepath.Join(dir, "flow.wf")
	script := filepath.Join(dir, "t.lua")
	out := filepath.Join(dir, "out.json")
	os.WriteFile(file, []byte(src), 0o644)
	os.WriteFile(script, []byte(nvimScript), 0o644)
	cmd := exec.Command(nvim, "--headless", "-u", init, "-i", "NONE", "-n", "-c", "luafile "+script)
	// The configuration runs `wfc` from PATH.
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"), "WF_FILE="+file, "OUT_FILE="+out, "HOME="+dir, "XDG_STATE_HOME="+dir, "XDG_CACHE_HOME="+dir)
	cmd.Dir = dir
	done := make(chan []byte, 1)
	go func() {
		b, _ := cmd.CombinedOutput()
		done <- b
	}()
	select {
	case b := <-done:
		t.Logf("nvim output: %s", b)
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		t.Fatal("nvim did not finish")
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("no result from nvim: %v", err)
	}
	var res struct {
		OK             bool   `json:"ok"`
		Filetype       string `json:"filetype"`
		Err            string `json:"err"`
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
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatalf("bad result %s: %v", raw, err)
	}
	if !res.OK {
		t.Fatalf("nvim script failed: %s", res.Err)
	}
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

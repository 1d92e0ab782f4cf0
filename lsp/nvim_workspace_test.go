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

// nvimWorkspaceScript: main.wf runs a handler its import lib.wf does not
// declare yet; the script opens both, declares the handler in lib.wf's
// buffer without saving, and waits for main.wf's diagnostics to go away;
// then asks for main.wf's document links and for workspace symbols.
const nvimWorkspaceScript = `
local main, lib, out = os.getenv("MAIN_FILE"), os.getenv("LIB_FILE"), os.getenv("OUT_FILE")
local result = {}
local ok, err = pcall(function()
  vim.cmd("edit " .. main)
  local mainbuf = vim.api.nvim_get_current_buf()
  local client_id
  vim.wait(15000, function()
    client_id = next(vim.lsp.buf_get_clients(mainbuf))
    return client_id ~= nil
  end, 20)
  assert(client_id, "no language client attached to main.wf")
  result.main_before = vim.wait(15000, function() return #vim.diagnostic.get(mainbuf) > 0 end, 20)
  vim.cmd("edit " .. lib)
  local libbuf = vim.api.nvim_get_current_buf()
  vim.wait(15000, function() return next(vim.lsp.buf_get_clients(libbuf)) ~= nil end, 20)
  vim.api.nvim_buf_set_lines(libbuf, -1, -1, false, { 'handler "svc" { output { v: int } }' })
  result.main_fixed = vim.wait(15000, function() return #vim.diagnostic.get(mainbuf) == 0 end, 20)
  -- lib.wf's own diagnostics were published before main.wf's re-check.
  result.lib_diagnostics = #vim.diagnostic.get(libbuf)
  local function req(bufnr, method, params)
    local res = vim.lsp.buf_request_sync(bufnr, method, params, 15000)
    if not res or not res[client_id] then return nil end
    return res[client_id].result
  end
  result.links = req(mainbuf, "textDocument/documentLink", { textDocument = { uri = vim.uri_from_bufnr(mainbuf) } })
  result.symbols = req(mainbuf, "workspace/symbol", { query = "svc" })
  vim.lsp.stop_client(client_id)
  vim.wait(5000, function() return vim.lsp.client_is_stopped(client_id) end, 20)
end)
result.ok = ok
result.err = err and tostring(err) or nil
vim.fn.writefile({ vim.fn.json_encode(result) }, out)
vim.cmd("qa!")
`

// TestNeovimImports runs Neovim headless with the configuration of
// docs/editors.md on two files, one importing the other.
func TestNeovimImports(t *testing.T) {
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
	main, lib := filepath.Join(dir, "main.wf"), filepath.Join(dir, "lib.wf")
	os.WriteFile(main, []byte("import \"lib.wf\"\nworkflow w {\n  task a { run \"svc\" }\n}\n"), 0o644)
	os.WriteFile(lib, []byte("handler \"other\" { }\n"), 0o644)
	script, out := filepath.Join(dir, "t.lua"), filepath.Join(dir, "out.json")
	os.WriteFile(script, []byte(nvimWorkspaceScript), 0o644)
	cmd := exec.Command(nvim, "--headless", "-u", init, "-i", "NONE", "-n", "-c", "luafile "+script)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"), "MAIN_FILE="+main, "LIB_FILE="+lib, "OUT_FILE="+out, "HOME="+dir, "XDG_STATE_HOME="+dir, "XDG_CACHE_HOME="+dir)
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
		Err            string `json:"err"`
		MainBefore     bool   `json:"main_before"`
		LibDiagnostics int    `json:"lib_diagnostics"`
		MainFixed      bool   `json:"main_fixed"`
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
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatalf("bad result %s: %v", raw, err)
	}
	if !res.OK {
		t.Fatalf("nvim script failed: %s", res.Err)
	}
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

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

// The Neovim tests run a real third-party client, Neovim headless, with the
// configuration of docs/editors.md (as init.lua) against the real `wfc`
// binary. runNvim is their one harness: it writes the project's files,
// runs a Lua script body inside nvimPrelude, and decodes the `result`
// table the script fills.

// nvimPrelude wraps a script body. It gives the body:
//   - dir: the project directory; result: the table written as JSON;
//   - open(path): edit a file and wait for the client to attach (the
//     client's id is then in client_id);
//   - req(bufnr, method, params): a request, its result or nil;
//   - find(bufnr, needle, delta): the position of the first occurrence of
//     needle (plus delta characters) in the buffer;
//   - settle(bufnr): wait until the server has published the diagnostics
//     of the buffer's current version;
//   - diags(bufnr): the buffer's diagnostics as plain tables;
//   - stop(): stop the client and wait for it.
const nvimPrelude = `
local dir, out = os.getenv("WF_DIR"), os.getenv("OUT_FILE")
local result = {}
local client_id
local published = {}
do
  local orig = vim.lsp.handlers["textDocument/publishDiagnostics"]
  vim.lsp.handlers["textDocument/publishDiagnostics"] = function(err, res, ctx, config)
    if res and res.version then published[res.uri] = res.version end
    return orig(err, res, ctx, config)
  end
end
local function open(path)
  vim.cmd("edit " .. path)
  local bufnr = vim.api.nvim_get_current_buf()
  vim.wait(15000, function()
    local id = next(vim.lsp.buf_get_clients(bufnr))
    if id then client_id = id end
    return id ~= nil
  end, 20)
  assert(next(vim.lsp.buf_get_clients(bufnr)), "no language client attached to " .. path)
  return bufnr
end
local function req(bufnr, method, params)
  local res = vim.lsp.buf_request_sync(bufnr, method, params, 15000)
  if not res or not res[client_id] then return nil end
  return res[client_id].result
end
local function find(bufnr, needle, delta)
  for i, l in ipairs(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)) do
    local c = l:find(needle, 1, true)
    if c then return { line = i - 1, character = c - 1 + (delta or 0) } end
  end
end
local function settle(bufnr)
  local uri = vim.uri_from_bufnr(bufnr)
  return vim.wait(15000, function() return published[uri] == vim.lsp.util.buf_versions[bufnr] end, 10)
end
local function diags(bufnr)
  local list = {}
  for _, d in ipairs(vim.diagnostic.get(bufnr)) do
    table.insert(list, { lnum = d.lnum, col = d.col, message = d.message, code = d.code, source = d.source, severity = d.severity })
  end
  return list
end
local function stop()
  vim.lsp.stop_client(client_id)
  return vim.wait(5000, function() return vim.lsp.client_is_stopped(client_id) end, 20)
end
local ok, err = pcall(function()
%s
end)
result.ok = ok
result.err = err and tostring(err) or nil
vim.fn.writefile({ vim.fn.json_encode(result) }, out)
vim.cmd("qa!")
`

// runNvim writes files (relative names) into a new project directory,
// runs body in a headless Neovim there and decodes the script's result
// into result. It skips the test when nvim is not installed, unless
// CI=true. It returns the project directory.
func runNvim(t *testing.T, files map[string]string, body string, result any) string {
	t.Helper()
	nvim, err := exec.LookPath("nvim")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("nvim is not installed (apt-get install -y neovim)")
		}
		t.Skip("nvim is not installed")
	}
	bin := wfcBinary(t)
	dir := t.TempDir()
	write := func(name, text string) {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("init.lua", docSnippet(t, "../docs/editors.md", "<!-- tested by lsp/nvim_test.go"))
	for name, text := range files {
		write(name, text)
	}
	write("t.lua", strings.Replace(nvimPrelude, "%s", body, 1))
	out := filepath.Join(dir, "out.json")
	cmd := exec.Command(nvim, "--headless", "-u", filepath.Join(dir, "init.lua"), "-i", "NONE", "-n", "-c", "luafile "+filepath.Join(dir, "t.lua"))
	// The configuration runs `wfc` from PATH.
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"WF_DIR="+dir, "OUT_FILE="+out, "HOME="+dir, "XDG_STATE_HOME="+dir, "XDG_CACHE_HOME="+dir, "XDG_CONFIG_HOME="+dir)
	cmd.Dir = dir
	done := make(chan []byte, 1)
	go func() {
		b, _ := cmd.CombinedOutput()
		done <- b
	}()
	select {
	case b := <-done:
		if len(b) > 0 {
			t.Logf("nvim output: %s", b)
		}
	case <-time.After(3 * time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatal("nvim did not finish")
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("no result from nvim: %v", err)
	}
	var status struct {
		OK  bool   `json:"ok"`
		Err string `json:"err"`
	}
	if err := json.Unmarshal(raw, &status); err != nil {
		t.Fatalf("bad result %s: %v", raw, err)
	}
	if !status.OK {
		t.Fatalf("nvim script failed: %s", status.Err)
	}
	if err := json.Unmarshal(raw, result); err != nil {
		t.Fatalf("bad result %s: %v", raw, err)
	}
	return dir
}

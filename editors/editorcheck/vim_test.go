package editorcheck

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// probe is a place in a sample file and the innermost syntax group
// expected there ("": none, as for a parameter named like a keyword):
// the column of the first byte of needle (plus delta) on the first line
// that holds it after the first line that holds near.
type probe struct {
	near, needle string
	delta        int
	want         string
}

type pos struct{ Line, Col int }

func locate(t *testing.T, src string, p probe) pos {
	t.Helper()
	lines := strings.Split(src, "\n")
	start := 0
	if p.near != "" {
		start = -1
		for i, l := range lines {
			if strings.Contains(l, p.near) {
				start = i
				break
			}
		}
		if start < 0 {
			t.Fatalf("sample has no %q", p.near)
		}
	}
	for i := start; i < len(lines); i++ {
		if c := strings.Index(lines[i], p.needle); c >= 0 {
			return pos{i + 1, c + 1 + p.delta}
		}
	}
	t.Fatalf("sample has no %q after %q", p.needle, p.near)
	return pos{}
}

// The sample: the VS Code grammar's snapshot test of every construct.
const sample = "../vscode/tests/snap/orders.wf"

var vimProbes = []probe{
	{"", "// Order fulfilment", 0, "wfLineComment"},
	{"", "import", 0, "wfDeclaration"},
	{"", `"handlers.wf"`, 3, "wfString"},
	{"", "handler \"mail", 0, "wfDeclaration"},
	{"", "config {", 0, "wfItem"},
	{"config {", "string", 0, "wfType"},
	{"", "workflow order", 0, "wfDeclaration"},
	{"", "order_fulfilment", 0, "wfWorkflowName"},
	{"", `"""Charges`, 5, "wfString"},
	{`"""Charges`, "refunds it", 0, "wfString"}, // second line of a triple-quoted string
	{"", "deadline 24h", 0, "wfItem"},
	{"", "24h", 1, "wfDuration"},
	{"", "max_hops 500", 9, "wfNumber"},
	{"input {", "rush?", 0, ""}, // a field: no keyword here
	{"input {", "false", 0, "wfLiteral"},
	{"input {", "list<", 0, "wfType"},
	{"output {", "input.order_id", 0, "wfScope"},
	{"output {", "has(ship", 0, "wfMacro"},
	{"", "/* Charge first", 3, "wfBlockComment"},
	{"task charge", "task charge", 0, "wfNodeKind"},
	{"task charge", "charge {", 0, "wfNodeName"},
	{"task charge", `"http"`, 0, "wfBuiltinHandler"},
	{"task charge", "{{ input.order_id }}", 0, "wfTemplateDelim"},
	{"task charge", "{{ input.order_id }}", 3, "wfScope"}, // CEL inside a template
	{"task charge", "{{ input.order_id }}", 8, "wfTemplateDQ"},
	{"task charge", "order_id }}/charge", 11, "wfString"}, // after the template
	{"task charge", "timeout = duration", 0, ""},          // a parameter, not the item
	{"task charge", "backoff exponential", 8, "wfBackoff"},
	{"task charge", "delay 500ms", 6, "wfDuration"},
	{"task charge", "=> notify_ops", 0, "wfArrow"},
	{"task charge", "=> notify_ops", 3, "wfNodeRef"},
	{"compensate {", `r"https`, 0, "wfQuote"},
	{"compensate {", `r"https`, 2, "wfRawString"},
	{"compensate {", "{{ output.status }}", 3, "wfScope"},
	{"task reserve", "after charge", 0, "wfNodeHeader"},
	{"task reserve", "after charge", 6, "wfNodeRef"},
	{"task reserve", "for_each", 0, "wfItem"},
	{"task reserve", "parallel 10", 9, "wfNumber"},
	{"human review", "on_timeout approve", 11, "wfOnTimeout"},
	{"human review", "{{ size(reserve.output) }}", 3, "wfTemplateDQ"},
	{"agent pick", `'''Pick`, 4, "wfString"},
	{"agent pick", "{{ input.rush }}", 3, "wfScope"}, // a template in a '''string'''
	{"agent pick", "0.2", 0, "wfNumber"},
	{"flow ship", "join any", 0, "wfNodeHeader"},
	{"flow ship", "join any", 5, "wfJoinMode"},
	{"flow ship", "after pick_carrier", 0, "wfNodeHeader"},
	{"flow ship", "after pick_carrier", 6, "wfNodeRef"},
	{"agent pick", "routes ship, ship_express", 13, "wfNodeRef"},
	{"task ship_express", "run \"sleep\"", 0, "wfItem"},
	{"flow ship", "uses", 0, "wfItem"},
	{"flow ship", "back_to ship", 8, "wfNodeRef"},
	{"task ship_express", "'1h30m'", 1, "wfString"},
	{"task ship_express", "exists(k", 0, "wfMacro"},
	{"task ship_express", "else => done", 0, "wfItem"},
	{"task notify_ops", "{{ run.id }}", 3, "wfRunMeta"},
	{"task notify_ops", "join settled", 5, "wfJoinMode"},
	{"", "// the end", 0, "wfLineComment"},
}

// vimLuaScript writes, for each position, the syntax groups there from the
// outermost to the innermost.
const vimLuaScript = `
local out = {}
local ok, err = pcall(function()
  vim.cmd("edit " .. vim.fn.fnameescape(os.getenv("WF_FILE")))
  -- An error in a syntax file loaded by :edit is only printed; sourcing it
  -- again here makes it an error of this script.
  vim.cmd("unlet! b:current_syntax | syntax clear | runtime syntax/wf.vim")
  out.filetype = vim.bo.filetype
  out.syntax = vim.bo.syntax
  out.commentstring = vim.bo.commentstring
  out.shiftwidth = vim.bo.shiftwidth
  out.groups = {}
  for _, p in ipairs(vim.fn.json_decode(os.getenv("PROBES"))) do
    local names = {}
    for _, id in ipairs(vim.fn.synstack(p.Line, p.Col)) do
      table.insert(names, vim.fn.synIDattr(id, "name"))
    end
    table.insert(out.groups, names)
  end
end)
out.ok = ok
out.err = err and tostring(err) or nil
vim.fn.writefile({ vim.fn.json_encode(out) }, os.getenv("OUT_FILE"))
vim.cmd("qa!")
`

type nvimResult struct {
	OK            bool       `json:"ok"`
	Err           string     `json:"err"`
	Filetype      string     `json:"filetype"`
	Syntax        string     `json:"syntax"`
	Commentstring string     `json:"commentstring"`
	Shiftwidth    int        `json:"shiftwidth"`
	Groups        [][]string `json:"groups"`
}

// runNvim starts a headless Neovim with the docs' configuration (init.lua)
// and runs the Lua script on file.
func runNvim(t *testing.T, init, file, script string, env ...string) nvimResult {
	t.Helper()
	return runEditor(t, "nvim", "neovim", "init.lua", init, "t.lua", script, file, env,
		func(init, script string) []string {
			return []string{"--headless", "-u", init, "-i", "NONE", "-n", "-c", "luafile " + script}
		})
}

// runVim starts Vim in silent Ex mode with the docs' configuration (vimrc)
// and sources the Vim script on file.
func runVim(t *testing.T, init, file, script string, env ...string) nvimResult {
	t.Helper()
	return runEditor(t, "vim", "vim-nox", "vimrc", init, "t.vim", script, file, env,
		func(init, script string) []string {
			return []string{"-N", "-u", init, "-i", "NONE", "-n", "-es", "-S", script}
		})
}

func runEditor(t *testing.T, bin, pkg, initName, init, scriptName, script, file string, env []string, args func(init, script string) []string) nvimResult {
	t.Helper()
	path, err := exec.LookPath(bin)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not installed (apt-get install -y %s)", bin, pkg)
		}
		t.Skipf("%s is not installed", bin)
	}
	dir := t.TempDir()
	initPath, scriptPath, out := filepath.Join(dir, initName), filepath.Join(dir, scriptName), filepath.Join(dir, "out.json")
	os.WriteFile(initPath, []byte(init), 0o644)
	os.WriteFile(scriptPath, []byte(script), 0o644)
	cmd := exec.Command(path, args(initPath, scriptPath)...)
	cmd.Env = append(os.Environ(), append(env, "WF_FILE="+file, "OUT_FILE="+out, "HOME="+dir, "XDG_CONFIG_HOME="+dir, "XDG_DATA_HOME="+dir, "XDG_STATE_HOME="+dir, "XDG_CACHE_HOME="+dir)...)
	cmd.Dir = dir
	done := make(chan []byte, 1)
	go func() {
		b, _ := cmd.CombinedOutput()
		done <- b
	}()
	select {
	case b := <-done:
		if len(b) > 0 {
			t.Logf("%s output: %s", bin, b)
		}
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		t.Fatalf("%s did not finish", bin)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("no result from %s: %v", bin, err)
	}
	var res nvimResult
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatalf("bad result %s: %v", raw, err)
	}
	if !res.OK {
		t.Fatalf("%s script failed: %s", bin, res.Err)
	}
	return res
}

// vimInit is a configuration of docs/editors.md, the first lang block after
// marker, with the clone's path in place of ~/src/wfc.
func vimInit(t *testing.T, marker, lang string) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	snippet := docBlock(t, marker, lang)
	if !strings.Contains(snippet, "~/src/wfc") {
		t.Fatalf("the recipe after %q does not name ~/src/wfc:\n%s", marker, snippet)
	}
	return strings.ReplaceAll(snippet, "~/src/wfc", root)
}

// vimScript is vimLuaScript for Vim.
const vimScript = `
let s:out = {}
try
  execute 'edit ' . fnameescape($WF_FILE)
  unlet! b:current_syntax
  syntax clear
  runtime syntax/wf.vim
  let s:out.filetype = &filetype
  let s:out.syntax = &syntax
  let s:out.commentstring = &commentstring
  let s:out.shiftwidth = &shiftwidth
  let s:out.groups = []
  for s:p in json_decode($PROBES)
    call add(s:out.groups, map(synstack(s:p.Line, s:p.Col), 'synIDattr(v:val, "name")'))
  endfor
  let s:out.ok = v:true
catch
  let s:out.ok = v:false
  let s:out.err = v:throwpoint . ': ' . v:exception
endtry
call writefile([json_encode(s:out)], $OUT_FILE)
qa!
`

// TestVimSyntax opens a sample in headless Neovim with editors/vim on the
// runtime path, as docs/editors.md says, and checks the syntax groups at
// keywords, node ids, strings, templates and the CEL inside them,
// comments, numbers and durations.
func TestVimSyntax(t *testing.T) {
	checkVimSyntax(t, func(file string, env ...string) nvimResult {
		return runNvim(t, vimInit(t, "<!-- tested by editors/editorcheck/vim_test.go (Neovim)", "lua"), file, vimLuaScript, env...)
	})
}

// TestVimSyntaxVim is TestVimSyntax in Vim, with the docs' vimrc.
func TestVimSyntaxVim(t *testing.T) {
	checkVimSyntax(t, func(file string, env ...string) nvimResult {
		return runVim(t, vimInit(t, "<!-- tested by editors/editorcheck/vim_test.go (Vim)", "vim"), file, vimScript, env...)
	})
}

func checkVimSyntax(t *testing.T, run func(file string, env ...string) nvimResult) {
	t.Helper()
	src, err := os.ReadFile(sample)
	if err != nil {
		t.Fatal(err)
	}
	file, err := filepath.Abs(sample)
	if err != nil {
		t.Fatal(err)
	}
	ps := make([]pos, len(vimProbes))
	for i, p := range vimProbes {
		ps[i] = locate(t, string(src), p)
	}
	pj, _ := json.Marshal(ps)
	res := run(file, "PROBES="+string(pj))
	if res.Filetype != "wf" || res.Syntax != "wf" {
		t.Errorf("filetype %q, syntax %q; want wf (ftdetect/wf.vim, syntax/wf.vim)", res.Filetype, res.Syntax)
	}
	if res.Commentstring != "// %s" || res.Shiftwidth != 2 {
		t.Errorf("commentstring %q, shiftwidth %d; want // %%s and 2 (ftplugin/wf.vim)", res.Commentstring, res.Shiftwidth)
	}
	if len(res.Groups) != len(vimProbes) {
		t.Fatalf("%d results for %d probes", len(res.Groups), len(vimProbes))
	}
	for i, p := range vimProbes {
		got := res.Groups[i]
		inner := ""
		if len(got) > 0 {
			inner = got[len(got)-1]
		}
		if inner != p.want {
			t.Errorf("%q+%d (line %d, col %d): groups %v, want %q innermost", p.needle, p.delta, ps[i].Line, ps[i].Col, got, p.want)
		}
	}
}

// docBlock returns the first ```lang block after marker in docs/editors.md.
func docBlock(t *testing.T, marker, lang string) string {
	t.Helper()
	b, err := os.ReadFile("../../docs/editors.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	k := strings.Index(doc, marker)
	if k < 0 {
		t.Fatalf("docs/editors.md has no %q", marker)
	}
	doc = doc[k:]
	open := "```" + lang + "\n"
	start := strings.Index(doc, open)
	if start < 0 {
		t.Fatalf("no %s block after %q in docs/editors.md", lang, marker)
	}
	doc = doc[start+len(open):]
	end := strings.Index(doc, "```")
	if end < 0 {
		t.Fatalf("unterminated %s block after %q in docs/editors.md", lang, marker)
	}
	return doc[:end]
}

package lsp

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	protocol "github.com/tliron/glsp/protocol_3_16"

	"github.com/wfc-lang/wfc/compiler"
	"github.com/wfc-lang/wfc/lang/diag"
)

// The "how we will know": a headless Neovim, configured as
// docs/editors.md says, opens a project of three files and a workflow is
// typed into an empty main.wf step by step. At each step the script asks
// what the test says (completion at the cursor, hover, the diagnostics,
// the quick fixes) and the test checks the answers: completion offers what
// is legal there and nothing the compiler would reject, hover shows the
// type under the cursor, editing the imported lib.wf in another buffer
// updates main.wf's diagnostics, and every quick fix (and "fix all")
// leaves a file that compiles.

// A typingStep is one step of the script. Text is the buffer's whole
// new text with `|` at the cursor; the script applies only the part that
// changed, as typing would.
type typingStep struct {
	name string
	buf  string // "main" (default) or "lib"
	text string

	complete bool     // ask for completion at the cursor
	want     []string // labels completion must offer
	not      []string // labels it must not offer
	ids      []string // when set: exactly the node ids (kind Function) it must offer

	hover     string // ask for hover at the first occurrence of this text…
	hoverAt   int    // …plus this many characters
	hoverWant string // the hover must contain this

	calls     string   // ask for the incoming calls of the node at the first occurrence of this text
	callsWant []string // the callers, "name (detail)"

	waitMain string // wait until main.wf has an error ("error") or none ("clean")
	fixes    bool   // apply each quick fix in turn, and "fix all"
	noFix    bool   // …and there must be none
	clean    bool   // the buffer must have no error diagnostics
}

// typingLua runs the steps of steps.json (see typingStep; positions and
// edits computed by the test) and records the answers.
const typingLua = `
  local steps = vim.fn.json_decode(table.concat(vim.fn.readfile(dir .. "/steps.json"), "\n"))
  local bufs = { main = open(dir .. "/main.wf") }
  result.steps = {}
  for _, s in ipairs(steps) do
    local r = { name = s.name }
    local b = bufs[s.buf]
    if not b then
      b = open(dir .. "/" .. s.buf .. ".wf")
      bufs[s.buf] = b
    end
    local uri = vim.uri_from_bufnr(b)
    local e = s.edit
    if e then
      vim.api.nvim_buf_set_text(b, e.sl, e.sc, e.el, e.ec, vim.split(e.text, "\n", true))
    end
    r.settled = settle(b)
    if s.complete then
      local res = req(b, "textDocument/completion", { textDocument = { uri = uri }, position = s.cursor })
      r.completion = {}
      for _, it in ipairs((res and (res.items or res)) or {}) do
        table.insert(r.completion, { label = it.label, kind = it.kind, sort = it.sortText or it.label })
      end
    end
    if s.hover then
      local res = req(b, "textDocument/hover", { textDocument = { uri = uri }, position = s.hover })
      r.hover = res and res.contents and res.contents.value or ""
    end
    if s.calls then
      local items = req(b, "textDocument/prepareCallHierarchy", { textDocument = { uri = uri }, position = s.calls }) or {}
      r.calls = {}
      if items[1] then
        for _, call in ipairs(req(b, "callHierarchy/incomingCalls", { item = items[1] }) or {}) do
          table.insert(r.calls, call.from.name .. " (" .. (call.from.detail or "") .. ")")
        end
      end
    end
    if s.wait_main ~= "" then
      local mb = bufs.main
      r.waited = vim.wait(15000, function()
        local errors = 0
        for _, d in ipairs(vim.diagnostic.get(mb)) do
          if d.severity == vim.diagnostic.severity.ERROR then errors = errors + 1 end
        end
        if s.wait_main == "error" then return errors > 0 end
        return errors == 0
      end, 20)
      r.main_diags = diags(mb)
    end
    r.diags = diags(b)
    if s.fixes then
      local orig = vim.api.nvim_buf_get_lines(b, 0, -1, false)
      local function actions(only)
        local ctx = { diagnostics = {} }
        if only then ctx.only = only end
        return req(b, "textDocument/codeAction", {
          textDocument = { uri = uri },
          range = { start = { line = 0, character = 0 }, ["end"] = { line = #orig, character = 0 } },
          context = ctx,
        }) or {}
      end
      local function apply(a)
        vim.lsp.util.apply_workspace_edit(a.edit, "utf-16")
        local text = table.concat(vim.api.nvim_buf_get_lines(b, 0, -1, false), "\n") .. "\n"
        vim.api.nvim_buf_set_lines(b, 0, -1, false, orig)
        settle(b)
        return { title = a.title, text = text }
      end
      r.fixes = {}
      for _, a in ipairs(actions(nil)) do
        table.insert(r.fixes, apply(a))
      end
      r.fix_all = {}
      for _, a in ipairs(actions({ "source.fixAll" })) do
        table.insert(r.fix_all, apply(a))
      end
    end
    table.insert(result.steps, r)
  end
  stop()
`

type typingEdit struct {
	SL, SC, EL, EC int
	Text           string
}

func (e typingEdit) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]any{"sl": e.SL, "sc": e.SC, "el": e.EL, "ec": e.EC, "text": e.Text})
}

// lineCol returns the 0-based line and byte column of off in s.
func lineCol(s string, off int) (int, int) {
	line := strings.Count(s[:off], "\n")
	return line, off - (strings.LastIndex(s[:off], "\n") + 1)
}

// typingEditOf is the edit that turns old into new: the part between their
// common prefix and common suffix.
func typingEditOf(old, new string) *typingEdit {
	if old == new {
		return nil
	}
	p := 0
	for p < len(old) && p < len(new) && old[p] == new[p] {
		p++
	}
	q := 0
	for q < len(old)-p && q < len(new)-p && old[len(old)-1-q] == new[len(new)-1-q] {
		q++
	}
	sl, sc := lineCol(old, p)
	el, ec := lineCol(old, len(old)-q)
	return &typingEdit{SL: sl, SC: sc, EL: el, EC: ec, Text: new[p : len(new)-q]}
}

const typingLib = `handler "crm.lookup" {
  config { lead_id: string }
  output { name: string  employees: int }
}
`

const typingChild = "workflow child {\n  input { n: int }\n  task t { run \"noop\" }\n}\n"

// typingWorkflow is the workflow the steps end with (before the fixes).
const typingWorkflow = `import "lib.wf"

workflow lead {
  input {
    lead_id: string
  }

  task enrich {
    run "crm.lookup"
    with { lead_id = input.lead_id }
  }

  task score after enrich {
    run "cel"
    with { big = enrich.output.employees > 500 }
    branch {
      when output.big => sales
      else => nurture
    }
  }

  task sales {
    run "echo"
    with { m = "{{ enrich.output.name }}" }
  }

  task nurture { run "noop" }
}
`

func typingSteps() []typingStep {
	wf := typingWorkflow
	// cut returns wf up to the end of the first occurrence of upto,
	// followed by tail (and the cursor there, unless tail has one).
	cut := func(upto, tail string) string {
		k := strings.Index(wf, upto)
		if k < 0 {
			panic("no " + upto)
		}
		if strings.Contains(tail, "|") {
			return wf[:k+len(upto)] + tail
		}
		return wf[:k+len(upto)] + "|" + tail
	}
	body := "\n}\n"
	return []typingStep{
		{name: "empty file", text: "|", complete: true,
			want: []string{"workflow", "import", "handler"}, not: []string{"task", "run", "input"}},
		{name: "import path", text: `import "|"`, complete: true, want: []string{"lib.wf", "child.wf"}},
		{name: "workflow body", text: "import \"lib.wf\"\n\nworkflow lead {\n  |\n}\n", complete: true,
			want: []string{"task", "agent", "human", "flow", "input", "output", "finally"}, not: []string{"workflow", "import", "run", "attempts"}},
		{name: "run handler", text: cut("task enrich {\n    run \"", "\"\n  }"+body), complete: true,
			want: []string{"crm.lookup", "noop", "http"}, not: []string{"enrich", "lead_id"}},
		{name: "with fields", text: cut("task enrich {\n    run \"crm.lookup\"\n    with { ", " }\n  }"+body), complete: true,
			want: []string{"lead_id"}, not: []string{"name", "employees", "run", "retry"}},
		{name: "input fields", text: cut("with { lead_id = input.", " }\n  }"+body), complete: true,
			want: []string{"lead_id"}, not: []string{"name", "enrich"}},
		{name: "node body", text: cut("with { lead_id = input.lead_id }\n", "    |\n  }"+body), complete: true,
			want: []string{"retry", "timeout", "on_error", "when", "branch", "loop"}, not: []string{"run", "with", "task", "model", "attempts"}},
		{name: "after", text: cut("task score after ", body), complete: true, ids: []string{"enrich"}},
		{name: "output fields", text: cut("with { big = enrich.output.", " }\n  }"+body), complete: true,
			want: []string{"name", "employees"}, not: []string{"lead_id", "big"}},
		{name: "hover on a field", text: cut("with { big = enrich.output.employees > 500 }\n", "  }"+body),
			hover: "employees > 500", hoverAt: 2, hoverWant: "int"},
		{name: "branch targets", text: cut("when output.big => ", "\n    }\n  }\n\n  task sales { run \"noop\" }\n\n  task nurture { run \"noop\" }"+body),
			complete: true, ids: []string{"sales", "nurture"}},
		{name: "template: ancestors only", text: cut("with { m = \"{{ ", " }}\" }\n  }\n\n  task nurture { run \"noop\" }"+body),
			complete: true, ids: []string{"score", "enrich"}, not: []string{"nurture", "sales", "output"}},
		{name: "done", text: wf, hover: "task score after enrich", hoverAt: 17, hoverWant: "task enrich", clean: true,
			calls: "task nurture", callsWant: []string{`score (task · run "cel" · default)`}},
		// The import changes in its own buffer (unsaved): main.wf follows.
		{name: "import changes", buf: "lib", text: strings.Replace(typingLib, "employees", "staff", 1), waitMain: "error"},
		{name: "import restored", buf: "lib", text: typingLib, waitMain: "clean"},
		// One error at a time, each with its quick fixes.
		{name: "misspelt node", text: strings.Replace(wf, "{{ enrich.output", "{{ enrch.output", 1), fixes: true},
		{name: "misspelt handler", text: strings.Replace(wf, "crm.lookup\"\n", "crm.lokup\"\n", 1), fixes: true},
		{name: "missing run", text: strings.Replace(wf, "task nurture { run \"noop\" }", "task nurture { }", 1), fixes: true},
		{name: "missing with field", text: strings.Replace(wf, "    with { lead_id = input.lead_id }\n", "", 1), fixes: true},
		{name: "not an ancestor", text: strings.Replace(wf, "task nurture { run \"noop\" }", "task nurture { run \"noop\" }\n\n  task report {\n    run \"echo\"\n    with { s = sales.output.m }\n  }", 1), fixes: true},
		// nurture and sales are the exclusive targets of score's branch:
		// `after sales` (the compiler's hint) would make nurture wait for
		// a node that never runs with it (WF4006), so no fix is offered.
		{name: "no wrong fix", text: strings.Replace(wf, "task nurture { run \"noop\" }", "task nurture {\n    run \"echo\"\n    with { s = sales.output.m }\n  }", 1), fixes: true, noFix: true},
		{name: "several at once", text: strings.Replace(strings.Replace(wf, "{{ enrich.output", "{{ enrch.output", 1), "task nurture { run \"noop\" }", "task nurture { }", 1), fixes: true},
	}
}

func TestNeovimTypesAWorkflow(t *testing.T) {
	steps := typingSteps()
	texts := map[string]string{"main": "", "lib": typingLib}
	var script []map[string]any
	var plain []string // the text of each step, without the cursor
	for _, s := range steps {
		buf := s.buf
		if buf == "" {
			buf = "main"
		}
		text, cur := s.text, -1
		if k := strings.Index(text, "|"); k >= 0 && !strings.Contains(text, "||") {
			text, cur = text[:k]+text[k+1:], k
		}
		step := map[string]any{"name": s.name, "buf": buf, "complete": s.complete, "fixes": s.fixes, "wait_main": s.waitMain}
		if e := typingEditOf(texts[buf], text); e != nil {
			step["edit"] = e
		}
		texts[buf] = text
		plain = append(plain, text)
		if cur >= 0 {
			l, c := lineCol(text, cur)
			step["cursor"] = protocol.Position{Line: uint32(l), Character: uint32(c)}
		} else if s.complete {
			t.Fatalf("%s: completion without a cursor", s.name)
		}
		if s.hover != "" {
			k := strings.Index(text, s.hover)
			if k < 0 {
				t.Fatalf("%s: no %q", s.name, s.hover)
			}
			l, c := lineCol(text, k+s.hoverAt)
			step["hover"] = protocol.Position{Line: uint32(l), Character: uint32(c)}
		}
		if s.calls != "" {
			k := strings.Index(text, s.calls)
			if k < 0 {
				t.Fatalf("%s: no %q", s.name, s.calls)
			}
			l, c := lineCol(text, k+len(s.calls)-1)
			step["calls"] = protocol.Position{Line: uint32(l), Character: uint32(c)}
		}
		script = append(script, step)
	}
	stepsJSON, err := json.Marshal(script)
	if err != nil {
		t.Fatal(err)
	}
	type item struct {
		Label string `json:"label"`
		Kind  int    `json:"kind"`
		Sort  string `json:"sort"`
	}
	type testDiag struct {
		Code     string `json:"code"`
		Message  string `json:"message"`
		Severity int    `json:"severity"`
	}
	var res struct {
		Steps []struct {
			Name       string      `json:"name"`
			Settled    bool        `json:"settled"`
			Completion []item      `json:"completion"`
			Hover      string      `json:"hover"`
			Calls      []string    `json:"calls"`
			Waited     bool        `json:"waited"`
			MainDiags  []testDiag  `json:"main_diags"`
			Diags      []testDiag  `json:"diags"`
			Fixes      []typingFix `json:"fixes"`
			FixAll     []typingFix `json:"fix_all"`
		} `json:"steps"`
	}
	dir := runNvim(t, map[string]string{
		"main.wf": "", "lib.wf": typingLib, "sub/child.wf": typingChild, "child.wf": typingChild,
		"steps.json": string(stepsJSON),
	}, typingLua, &res)
	if len(res.Steps) != len(steps) {
		t.Fatalf("nvim ran %d steps of %d", len(res.Steps), len(steps))
	}
	compile := func(src string) diag.List {
		return compiler.Compile(filepath.Join(dir, "main.wf"), []byte(src), compiler.Config{NoOptimize: true, ReadFile: func(p string) ([]byte, error) {
			if filepath.Base(p) == "lib.wf" {
				return []byte(typingLib), nil // the buffer's text at the end, as on disk
			}
			return os.ReadFile(p)
		}}).Diags
	}
	errorsOf := func(ds []testDiag) []testDiag {
		var out []testDiag
		for _, d := range ds {
			if d.Severity == 1 {
				out = append(out, d)
			}
		}
		return out
	}
	// The node ids of the workflow (CEL functions are of kind Function too).
	nodeNames := map[string]bool{"enrich": true, "score": true, "sales": true, "nurture": true}
	for i, s := range steps {
		got := res.Steps[i]
		if !got.Settled {
			t.Errorf("%s: the server published no diagnostics for the buffer's version", s.name)
		}
		labels := map[string]bool{}
		var ids []string
		// The client shows the items in sortText order.
		slices.SortStableFunc(got.Completion, func(a, b item) int { return strings.Compare(a.Sort, b.Sort) })
		for _, it := range got.Completion {
			labels[it.Label] = true
			if it.Kind == int(protocol.CompletionItemKindFunction) && nodeNames[it.Label] {
				ids = append(ids, it.Label)
			}
		}
		for _, w := range s.want {
			if !labels[w] {
				t.Errorf("%s: completion lacks %q: %v", s.name, w, got.Completion)
			}
		}
		for _, w := range s.not {
			if labels[w] {
				t.Errorf("%s: completion offers %q, which is not legal there: %v", s.name, w, got.Completion)
			}
		}
		if s.ids != nil && !slices.Equal(ids, s.ids) {
			t.Errorf("%s: node ids offered = %v, want %v (in that order)", s.name, ids, s.ids)
		}
		if s.hover != "" && !strings.Contains(got.Hover, s.hoverWant) {
			t.Errorf("%s: hover = %q, want it to contain %q", s.name, got.Hover, s.hoverWant)
		}
		if s.calls != "" && !slices.Equal(got.Calls, s.callsWant) {
			t.Errorf("%s: incoming calls = %q, want %q", s.name, got.Calls, s.callsWant)
		}
		if s.clean && len(errorsOf(got.Diags)) > 0 {
			t.Errorf("%s: errors in the buffer: %+v", s.name, got.Diags)
		}
		if s.waitMain != "" && !got.Waited {
			t.Errorf("%s: main.wf's diagnostics did not become %s: %+v", s.name, s.waitMain, got.MainDiags)
		}
		if !s.fixes {
			continue
		}
		if len(errorsOf(got.Diags)) == 0 {
			t.Errorf("%s: no error to fix: %+v", s.name, got.Diags)
		}
		if diags := compile(plain[i]); !diags.HasErrors() {
			t.Errorf("%s: the step's text compiles already", s.name)
		}
		if s.noFix {
			if len(got.Fixes)+len(got.FixAll) != 0 {
				t.Errorf("%s: fixes offered: %+v %+v", s.name, got.Fixes, got.FixAll)
			}
			continue
		}
		if len(got.Fixes) == 0 || len(got.FixAll) != 1 {
			t.Errorf("%s: %d quick fixes and %d fix-all actions, want some and one", s.name, len(got.Fixes), len(got.FixAll))
		}
		all := got.Fixes
		if strings.HasPrefix(s.name, "several") {
			all = got.FixAll // each quick fix there fixes one of two errors
		}
		for _, f := range all {
			if diags := compile(f.Text); diags.HasErrors() {
				t.Errorf("%s: after %q the file does not compile:\n%s\n%v", s.name, f.Title, f.Text, diags)
			}
		}
		t.Logf("%s: %d quick fixes (%s), fix all", s.name, len(got.Fixes), fixTitles(got.Fixes))
	}
}

// A typingFix is a code action the script applied, and the text after it.
type typingFix struct {
	Title string `json:"title"`
	Text  string `json:"text"`
}

func fixTitles(fs []typingFix) string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Title)
	}
	return strings.Join(out, "; ")
}

package editorcheck

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the generated keyword blocks of the editor files")

const (
	keywordsFile = "../vscode/keywords.json"
	vimFile      = "../vim/syntax/wf.vim"
	emacsFile    = "../emacs/wf-mode.el"
)

// A role is how an editor highlights a set of words: the Vim syntax group
// and the Emacs variable that hold them, and where the word is a keyword.
type role struct {
	vim, emacs string
	// groups of keywords.json whose words have this role; a word takes the
	// first role that lists it (task is a node kind, not an item).
	groups []string
	// vimPattern builds the Vim pattern from the alternation of the words.
	vimPattern func(words string) string
	// vimNext is what may follow a match (:syn-nextgroup): a name after its
	// keyword is matched this way, which is faster than a lookbehind.
	vimNext string
	doc     string
}

// Lookbehinds are bounded (\@20<=): unbounded ones made highlighting a
// large file several times slower.
//
// notKeyword follows a word that is a keyword only where it is not a
// parameter, a field, a member or a call (docs/language.md §2.5), and
// notMember precedes it.
const (
	notMember  = `\.\@1<!\<`
	notKeyword = `\>\%(\s*\%(=[=>]\@!\|?\|:\|\.\|(\)\)\@!`
)

func plain(w string) string { return notMember + w + notKeyword }
func after(kw string) func(string) string {
	return func(w string) string { return `\%(\<` + kw + `\s\+\)\@20<=` + w + `\>` }
}

// roles lists every group of keywords.json: a group missing here fails
// TestGenerated, so a new group gets a place in every editor.
var roles = []role{
	{vim: "wfDeclaration", emacs: "wf-mode-declarations", groups: []string{"declarations"}, vimPattern: plain, vimNext: "wfWorkflowName", doc: "top-level declarations"},
	{vim: "wfNodeKind", emacs: "wf-mode-node-kinds", groups: []string{"nodeKinds"}, vimPattern: plain, vimNext: "wfNodeName,wfReservedName", doc: "kinds of node"},
	{vim: "wfNodeHeader", emacs: "wf-mode-node-header", groups: []string{"nodeHeader"}, vimPattern: plain, doc: "words of a node's header"},
	{vim: "wfItem", emacs: "wf-mode-items", groups: []string{"workflowItems", "handlerItems", "nodeItems", "forEach", "branchRules", "retryItems", "loopItems", "compensateItems"}, vimPattern: plain, doc: "items of blocks"},
	{vim: "wfType", emacs: "wf-mode-types", groups: []string{"types"}, vimPattern: plain, doc: "types of fields"},
	{vim: "wfLiteral", emacs: "wf-mode-literals", groups: []string{"literals"}, vimPattern: func(w string) string { return notMember + w + `\>` }, doc: "literals"},
	{vim: "wfJoinMode", emacs: "wf-mode-join-modes", groups: []string{"joinModes"}, vimPattern: after("join"), doc: "values of join"},
	{vim: "wfBackoff", emacs: "wf-mode-backoffs", groups: []string{"backoff"}, vimPattern: after("backoff"), doc: "values of backoff"},
	{vim: "wfOnTimeout", emacs: "wf-mode-on-timeout", groups: []string{"onTimeout"}, vimPattern: after("on_timeout"), doc: "values of on_timeout"},
	{vim: "wfScope", emacs: "wf-mode-scope-names", groups: []string{"scopeNames"}, vimPattern: func(w string) string { return notMember + w + `\>\ze\s*\.` }, doc: "names an expression reads from"},
	{vim: "wfMacro", emacs: "wf-mode-macros", groups: []string{"celMacros"}, vimPattern: func(w string) string { return `\<` + w + `\ze\s*(` }, doc: "CEL macros"},
	{vim: "wfBuiltinHandler", emacs: "wf-mode-builtin-handlers", groups: []string{"builtinHandlers"}, vimPattern: func(w string) string { return `\%(\<run\s\+\)\@20<="` + w + `"` }, doc: "built-in handlers"},
	{vim: "wfReservedName", emacs: "wf-mode-reserved-names", groups: []string{"reservedNames"}, doc: "names a node may not have"},
}

type group struct {
	name  string
	words []string
}

// loadGroups reads keywords.json in its order.
func loadGroups(t *testing.T) []group {
	t.Helper()
	b, err := os.ReadFile(keywordsFile)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("keywords.json: not an object")
	}
	var gs []group
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		name := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(name, "$") {
			continue
		}
		var words []string
		if err := json.Unmarshal(v, &words); err != nil {
			t.Fatalf("keywords.json %s: %v", name, err)
		}
		gs = append(gs, group{name, words})
	}
	return gs
}

// roleWords returns the words of each role, in keywords.json's order,
// each word in the first role (of those with the same kind of context)
// that claims it.
func roleWords(t *testing.T) [][]string {
	t.Helper()
	gs := loadGroups(t)
	byName := map[string][]string{}
	for _, g := range gs {
		byName[g.name] = g.words
	}
	claimed := map[string]bool{}
	for _, g := range gs {
		n := 0
		for _, r := range roles {
			if slices.Contains(r.groups, g.name) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("keywords.json group %q is in %d roles of editors/editorcheck/gen_test.go (want 1): give it one", g.name, n)
		}
	}
	out := make([][]string, len(roles))
	for i, r := range roles {
		var ws []string
		for _, gn := range r.groups {
			words, ok := byName[gn]
			if !ok {
				t.Errorf("roles name group %q, which keywords.json does not have", gn)
			}
			for _, w := range words {
				if slices.Contains(ws, w) {
					continue
				}
				// Words of the plain roles (anywhere a keyword may stand)
				// go to the first one only.
				if r.vimPattern != nil && isPlain(r) {
					if claimed[w] {
						continue
					}
					claimed[w] = true
				}
				ws = append(ws, w)
			}
		}
		out[i] = ws
	}
	return out
}

func isPlain(r role) bool {
	switch r.vim {
	case "wfDeclaration", "wfNodeKind", "wfNodeHeader", "wfItem", "wfType":
		return true
	}
	return false
}

func alt(words []string) string {
	return `\%(` + strings.Join(words, `\|`) + `\)`
}

func genVim(t *testing.T) string {
	words := roleWords(t)
	var b strings.Builder
	for i, r := range roles {
		fmt.Fprintf(&b, "\" %s: %s\n", r.doc, strings.Join(r.groups, ", "))
		if r.vimPattern == nil {
			continue
		}
		next := ""
		if r.vimNext != "" {
			next = " nextgroup=" + r.vimNext + " skipwhite"
		}
		fmt.Fprintf(&b, "syn match %s #%s#%s\n", r.vim, r.vimPattern(alt(words[i])), next)
	}
	// The name after a node kind (task fetch) is the node's; a reserved
	// word there is an error (WF1005), and wins, being defined last.
	fmt.Fprintf(&b, "syn match wfNodeName contained #\\h\\w*#\n")
	for i, r := range roles {
		if r.vim == "wfReservedName" {
			fmt.Fprintf(&b, "syn match wfReservedName contained #%s\\>#\n", alt(words[i]))
		}
	}
	return b.String()
}

func genEmacs(t *testing.T) string {
	words := roleWords(t)
	var b strings.Builder
	for i, r := range roles {
		q := make([]string, len(words[i]))
		for j, w := range words[i] {
			q[j] = `"` + w + `"`
		}
		fmt.Fprintf(&b, "(defconst %s\n  '(%s)\n  \"The %s.\n%s.\")\n", r.emacs, strings.Join(q, " "), r.doc, wrap("keywords.json: "+strings.Join(r.groups, ", "), 72))
	}
	return b.String()
}

// wrap breaks text into lines of at most width bytes at spaces (Emacs
// warns about docstrings wider than 80 columns).
func wrap(text string, width int) string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(text) {
		if line != "" && len(line)+1+len(w) > width {
			lines = append(lines, line)
			line = w
			continue
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	return strings.Join(append(lines, line), "\n")
}

// splice replaces the lines between the BEGIN and END markers of a file.
func splice(t *testing.T, path, comment, body string) (old, new string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	begin := strings.Index(src, comment+" BEGIN generated")
	end := strings.Index(src, comment+" END generated")
	if begin < 0 || end < begin {
		t.Fatalf("%s has no %q … %q block", path, comment+" BEGIN generated", comment+" END generated")
	}
	begin += strings.IndexByte(src[begin:], '\n') + 1
	return src, src[:begin] + body + src[end:]
}

func TestGenerated(t *testing.T) {
	for _, f := range []struct {
		path, comment string
		gen           func(*testing.T) string
	}{
		{vimFile, `"`, genVim},
		{emacsFile, ";;", genEmacs},
	} {
		old, new := splice(t, f.path, f.comment, f.gen(t))
		if old == new {
			continue
		}
		if *update {
			if err := os.WriteFile(f.path, []byte(new), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("rewrote %s", f.path)
			continue
		}
		t.Errorf("%s is out of date with %s: run go test ./editors/editorcheck -run TestGenerated -update", f.path, keywordsFile)
	}
}

// handWritten are the keywords that the hand-written patterns of the editor
// files name (a node reference after `after`, a builtin handler after
// `run`, …): each must still be a keyword, or those patterns are stale.
var handWritten = []string{"after", "back_to", "routes", "run", "workflow", "join", "backoff", "on_timeout", "task", "agent", "human", "flow"}

func TestHandWrittenWords(t *testing.T) {
	all := map[string]bool{}
	for _, g := range loadGroups(t) {
		for _, w := range g.words {
			all[w] = true
		}
	}
	for _, w := range handWritten {
		if !all[w] {
			t.Errorf("%q is no longer in keywords.json: update the hand-written patterns of %s and %s that name it", w, vimFile, emacsFile)
		}
	}
}

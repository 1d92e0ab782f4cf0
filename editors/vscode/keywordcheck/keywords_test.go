package keywordcheck

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/wfc-lang/wfc/compiler"
	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/lang"
	"github.com/wfc-lang/wfc/lang/diag"
)

// The repository root, from this package's directory (go test runs there).
const root = "../../.."

type keywords map[string][]string

func loadKeywords(t *testing.T) keywords {
	t.Helper()
	b, err := os.ReadFile("../keywords.json")
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatalf("keywords.json: %v", err)
	}
	kw := keywords{}
	for k, v := range raw {
		if strings.HasPrefix(k, "$") {
			continue
		}
		var words []string
		if err := json.Unmarshal(v, &words); err != nil {
			t.Fatalf("keywords.json %s: %v", k, err)
		}
		kw[k] = words
	}
	return kw
}

func (kw keywords) group(t *testing.T, name string) []string {
	t.Helper()
	w, ok := kw[name]
	if !ok {
		t.Fatalf("keywords.json has no group %q", name)
	}
	return w
}

func (kw keywords) all() map[string]bool {
	m := map[string]bool{}
	for _, ws := range kw {
		for _, w := range ws {
			m[w] = true
		}
	}
	return m
}

func sorted(xs []string) []string {
	out := slices.Clone(xs)
	slices.Sort(out)
	return slices.Compact(out)
}

func sameSet(a, b []string) bool { return slices.Equal(sorted(a), sorted(b)) }

func wantSame(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !sameSet(got, want) {
		t.Errorf("%s:\n  keywords.json: %v\n  Go / docs:     %v", what, sorted(got), sorted(want))
	}
}

// ---- reading the compiler's unexported keyword lists from its source ----

func parseGo(t *testing.T, rel string) *ast.File {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(root, rel), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func strLit(e ast.Expr) (string, bool) {
	bl, ok := e.(*ast.BasicLit)
	if !ok || bl.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(bl.Value)
	return s, err == nil
}

// stringLists returns every []string{"a", "b", …} literal under n.
func stringLists(n ast.Node) [][]string {
	var out [][]string
	ast.Inspect(n, func(n ast.Node) bool {
		cl, ok := n.(*ast.CompositeLit)
		if !ok {
			return true
		}
		at, ok := cl.Type.(*ast.ArrayType)
		if !ok || at.Len != nil {
			return true
		}
		if id, ok := at.Elt.(*ast.Ident); !ok || id.Name != "string" {
			return true
		}
		var list []string
		for _, e := range cl.Elts {
			s, ok := strLit(e)
			if !ok {
				return true
			}
			list = append(list, s)
		}
		out = append(out, list)
		return true
	})
	return out
}

func funcDecl(t *testing.T, f *ast.File, name string) *ast.FuncDecl {
	t.Helper()
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == name {
			return fd
		}
	}
	t.Fatalf("no func %s in the compiler source (renamed? update this test)", name)
	return nil
}

// varLit returns the composite literal a package-level var is set to.
func varLit(t *testing.T, f *ast.File, name string) *ast.CompositeLit {
	t.Helper()
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.VAR {
			continue
		}
		for _, sp := range gd.Specs {
			vs := sp.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if n.Name == name && i < len(vs.Values) {
					if cl, ok := vs.Values[i].(*ast.CompositeLit); ok {
						return cl
					}
				}
			}
		}
	}
	t.Fatalf("no var %s = {…} in the compiler source (renamed? update this test)", name)
	return nil
}

func mapKeys(cl *ast.CompositeLit) []string {
	var keys []string
	for _, e := range cl.Elts {
		if kv, ok := e.(*ast.KeyValueExpr); ok {
			if s, ok := strLit(kv.Key); ok {
				keys = append(keys, s)
			}
		}
	}
	return keys
}

// wantOneOf checks that group equals one of the []string literals of a
// compiler function (the list it accepts or suggests from).
func wantOneOf(t *testing.T, what string, group []string, lists [][]string) {
	t.Helper()
	for _, l := range lists {
		if sameSet(group, l) {
			return
		}
	}
	t.Errorf("%s: keywords.json has %v, but no list in the compiler equals it; its lists: %v", what, sorted(group), lists)
}

// ---- reading docs/language.md ----

func docLines(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "docs/language.md"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(string(b), "\n")
}

// tableAfter returns the cells of the first table after the first line that
// contains marker (header and separator rows dropped).
func tableAfter(t *testing.T, lines []string, marker string) [][]string {
	t.Helper()
	start := slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, marker) })
	if start < 0 {
		t.Fatalf("docs/language.md: no %q", marker)
	}
	var rows [][]string
	in := false
	for _, l := range lines[start+1:] {
		if !strings.HasPrefix(l, "|") {
			if in {
				break
			}
			continue
		}
		in = true
		l = strings.ReplaceAll(l, `\|`, "\x00")
		cells := strings.Split(strings.Trim(l, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(strings.ReplaceAll(cells[i], "\x00", "|"))
		}
		rows = append(rows, cells)
	}
	if len(rows) < 3 {
		t.Fatalf("docs/language.md: no table after %q", marker)
	}
	return rows[2:]
}

var codeWord = regexp.MustCompile("`([a-z_]+)")

// words returns the first word of each `code span` in a cell.
func words(cell string) []string {
	var out []string
	for _, m := range codeWord.FindAllStringSubmatch(cell, -1) {
		out = append(out, m[1])
	}
	return out
}

func column(rows [][]string, col int) []string {
	var out []string
	for _, r := range rows {
		out = append(out, words(r[col])...)
	}
	return out
}

// ---- the checks ----

func TestKeywordsMatchCompiler(t *testing.T) {
	kw := loadKeywords(t)
	items := parseGo(t, "compiler/items.go")
	declare := parseGo(t, "compiler/declare.go")

	wantSame(t, "nodeItems vs compiler itemKinds", kw.group(t, "nodeItems"), mapKeys(varLit(t, items, "itemKinds")))
	wantSame(t, "workflowItems vs compiler workflowItems", kw.group(t, "workflowItems"), stringLists(varLit(t, declare, "workflowItems"))[0])
	wantSame(t, "reservedNames vs compiler reserved", kw.group(t, "reservedNames"), mapKeys(varLit(t, declare, "reserved")))
	wantOneOf(t, "retryItems (retryBlock)", kw.group(t, "retryItems"), stringLists(funcDecl(t, items, "retryBlock")))
	wantOneOf(t, "backoff (retryBlock)", kw.group(t, "backoff"), stringLists(funcDecl(t, items, "retryBlock")))
	wantOneOf(t, "loopItems (loopBlock)", kw.group(t, "loopItems"), stringLists(funcDecl(t, items, "loopBlock")))
	wantOneOf(t, "compensateItems (compensateBlock)", kw.group(t, "compensateItems"), stringLists(funcDecl(t, items, "compensateBlock")))
	wantOneOf(t, "onTimeout (nodeItem)", kw.group(t, "onTimeout"), stringLists(funcDecl(t, items, "nodeItem")))
	wantOneOf(t, "handlerItems (declareHandler)", kw.group(t, "handlerItems"), stringLists(funcDecl(t, declare, "declareHandler")))
	wantOneOf(t, "nodeKinds (declareNode)", kw.group(t, "nodeKinds"), stringLists(funcDecl(t, declare, "declareNode")))
	wantOneOf(t, "types (typeDepth)", kw.group(t, "types"), stringLists(funcDecl(t, declare, "typeDepth")))

	// Exported constants of the IR.
	wantSame(t, "joinModes vs ir.Join*", kw.group(t, "joinModes"), []string{ir.JoinAll, ir.JoinAny, ir.JoinSettled, ir.JoinFirst})
	wantSame(t, "backoff vs ir.Backoff*", kw.group(t, "backoff"), []string{ir.BackoffFixed, ir.BackoffLinear, ir.BackoffExponential})
	wantSame(t, "onTimeout vs ir.Timeout*", kw.group(t, "onTimeout"), []string{ir.TimeoutApprove, ir.TimeoutReject, ir.TimeoutFail})
	wantSame(t, "types vs ir.Kind*", kw.group(t, "types"), []string{ir.KindString, ir.KindInt, ir.KindNumber, ir.KindBool, ir.KindDuration, ir.KindAny, ir.KindList, ir.KindMap, ir.KindSecret})

	var builtins []string
	for name := range compiler.Builtins() {
		builtins = append(builtins, name)
	}
	wantSame(t, "builtinHandlers vs compiler.Builtins()", kw.group(t, "builtinHandlers"), builtins)

	// Scope names, literals and CEL macros are reserved names.
	reserved := map[string]bool{}
	for _, w := range kw.group(t, "reservedNames") {
		reserved[w] = true
	}
	for _, g := range []string{"scopeNames", "literals", "celMacros", "nodeKinds", "declarations", "nodeHeader"} {
		for _, w := range kw.group(t, g) {
			if !reserved[w] {
				t.Errorf("%s: %q is not a reserved name in the compiler", g, w)
			}
		}
	}
}

// Every keyword the parser's grammar spells out is in keywords.json, in the
// group that says where it is used.
func TestKeywordsMatchGrammar(t *testing.T) {
	kw := loadKeywords(t)
	all := kw.all()
	quoted := map[string]bool{}
	for _, m := range regexp.MustCompile(`"([a-z_]+)"`).FindAllStringSubmatch(lang.Grammar(), -1) {
		quoted[m[1]] = true
	}
	if len(quoted) == 0 {
		t.Fatal("lang.Grammar() has no quoted keywords")
	}
	for w := range quoted {
		if !all[w] {
			t.Errorf("the parser's grammar uses keyword %q, which keywords.json lacks", w)
		}
	}
	for _, g := range []string{"declarations", "nodeHeader", "forEach", "branchRules"} {
		for _, w := range kw.group(t, g) {
			if !quoted[w] {
				t.Errorf("%s: %q is not a keyword of the parser's grammar (lang.Grammar())", g, w)
			}
		}
	}
}

func TestKeywordsMatchDocs(t *testing.T) {
	kw := loadKeywords(t)
	lines := docLines(t)

	wantSame(t, "workflowItems vs docs §3.3 Workflow body", kw.group(t, "workflowItems"), column(tableAfter(t, lines, "**Workflow body.**"), 0))
	nodeRows := tableAfter(t, lines, "**Node items**")
	wantSame(t, "nodeItems vs docs §3.3 Node items", kw.group(t, "nodeItems"), func() []string {
		var out []string
		for _, r := range nodeRows {
			out = append(out, words(r[0])[0])
		}
		return out
	}())
	for _, r := range nodeRows {
		if w := words(r[0]); w[0] == "on_timeout" {
			vals := strings.Split(strings.TrimSuffix(strings.Fields(strings.Trim(r[0], "`"))[1], "`"), "|")
			wantSame(t, "onTimeout vs docs §3.3", kw.group(t, "onTimeout"), vals)
		}
	}

	nested := map[string][]string{}
	block := ""
	for _, r := range tableAfter(t, lines, "**Nested blocks.**") {
		if w := words(r[0]); len(w) > 0 {
			block = w[0]
		}
		item := words(r[1])[0]
		nested[block] = append(nested[block], item)
		if block == "retry" && item == "backoff" {
			wantSame(t, "backoff vs docs §3.3", kw.group(t, "backoff"), words(r[2]))
		}
	}
	wantSame(t, "retryItems vs docs §3.3", kw.group(t, "retryItems"), nested["retry"])
	wantSame(t, "loopItems vs docs §3.3", kw.group(t, "loopItems"), nested["loop"])
	wantSame(t, "compensateItems vs docs §3.3", kw.group(t, "compensateItems"), nested["compensate"])
	wantSame(t, "branchRules vs docs §3.3", kw.group(t, "branchRules"), nested["branch"])

	wantSame(t, "types vs docs §5.1", kw.group(t, "types"), column(tableAfter(t, lines, "### 5.1 Type expressions"), 0))
	wantSame(t, "builtinHandlers vs docs §4.2", kw.group(t, "builtinHandlers"), column(tableAfter(t, lines, "**Built-in handlers**"), 0))

	// §2.5: the reserved names block.
	i := slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, "**reserved names**") })
	if i < 0 || !strings.HasPrefix(lines[i+2], "```") {
		t.Fatal("docs/language.md: no reserved names block after **reserved names**")
	}
	var reserved []string
	for _, l := range lines[i+3:] {
		if strings.HasPrefix(l, "```") {
			break
		}
		reserved = append(reserved, strings.Fields(l)...)
	}
	wantSame(t, "reservedNames vs docs §2.5", kw.group(t, "reservedNames"), reserved)

	// §6.1: "the standard definitions and macros (`has`, `all`, …)".
	m := regexp.MustCompile("macros\\s+\\((`has`[^)]*)\\)").FindStringSubmatch(strings.Join(lines, " "))
	if m == nil {
		t.Fatal("docs/language.md: no \"macros (`has`, …)\" in §6.1")
	}
	wantSame(t, "celMacros vs docs §6.1", kw.group(t, "celMacros"), words(m[1]))
}

// The grammar tests' snapshot sources are real workflows: they compile
// without errors, so the highlighting they pin down is that of valid wf.
func TestSnapshotSourcesCompile(t *testing.T) {
	files, err := filepath.Glob("../tests/snap/*.wf")
	if err != nil || len(files) == 0 {
		t.Fatalf("no snapshot sources: %v", err)
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		res := compiler.Compile(f, src, compiler.Config{})
		for _, d := range res.Diags {
			if d.Severity == diag.Error {
				t.Errorf("%s: %s", filepath.Base(f), d.Error())
			}
		}
	}
}

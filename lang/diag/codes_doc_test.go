package diag

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// languageDoc is the normative spec; its diagnostics table must list
// exactly the registered codes with their default severities.
const languageDoc = "../../docs/language.md"

// docRow is one row of the diagnostics table: | Code | Severity | Meaning |.
type docRow struct {
	line     int
	code     Code
	severity string
	meaning  string
}

var codePattern = regexp.MustCompile(`^WF[0-9]{4}$`)

// docTable returns the rows of every table in doc whose header is
// | Code | Severity | Meaning |.
func docTable(t *testing.T, doc string) []docRow {
	t.Helper()
	var rows []docRow
	lines := strings.Split(strings.ReplaceAll(doc, "\r\n", "\n"), "\n")
	tables := 0
	for i := 0; i < len(lines); i++ {
		if !isHeader(cells(lines[i])) {
			continue
		}
		tables++
		i += 2 // the header and the |---| delimiter row
		for ; i < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[i]), "|"); i++ {
			c := cells(lines[i])
			if len(c) != 3 {
				t.Errorf("%s:%d: diagnostics table row has %d cells, want 3: %s", languageDoc, i+1, len(c), lines[i])
				continue
			}
			code := strings.Trim(c[0], "`")
			if !codePattern.MatchString(code) {
				t.Errorf("%s:%d: %q is not a diagnostic code (WFnnnn)", languageDoc, i+1, c[0])
				continue
			}
			rows = append(rows, docRow{line: i + 1, code: Code(code), severity: c[1], meaning: c[2]})
		}
	}
	if tables == 0 {
		t.Fatalf("%s has no table with the header | Code | Severity | Meaning |", languageDoc)
	}
	return rows
}

func isHeader(c []string) bool {
	return len(c) == 3 && c[0] == "Code" && c[1] == "Severity" && c[2] == "Meaning"
}

// cells splits a Markdown table row into trimmed cells; an escaped \| stays
// inside its cell.
func cells(line string) []string {
	line = strings.TrimSpace(line)
	if !strings.HasPrefix(line, "|") || !strings.HasSuffix(line, "|") || len(line) < 2 {
		return nil
	}
	line = strings.ReplaceAll(line[1:len(line)-1], `\|`, "\x00")
	parts := strings.Split(line, "|")
	for i, p := range parts {
		parts[i] = strings.TrimSpace(strings.ReplaceAll(p, "\x00", "|"))
	}
	return parts
}

// TestCodesDocumented keeps docs/language.md §10 and the registry equal:
// every registered code appears exactly once with its default severity, and
// the table lists no other code.
func TestCodesDocumented(t *testing.T) {
	b, err := os.ReadFile(languageDoc)
	if err != nil {
		t.Fatal(err)
	}
	rows := docTable(t, string(b))
	documented := map[Code]docRow{}
	for _, r := range rows {
		if prev, dup := documented[r.code]; dup {
			t.Errorf("%s:%d: %s is listed twice (first on line %d)", languageDoc, r.line, r.code, prev.line)
			continue
		}
		documented[r.code] = r
		if r.meaning == "" {
			t.Errorf("%s:%d: %s has no meaning", languageDoc, r.line, r.code)
		}
		if !r.code.Known() {
			t.Errorf("%s:%d: %s is documented but not registered in codes.go", languageDoc, r.line, r.code)
		}
	}
	for _, c := range Codes() {
		r, ok := documented[c.Code]
		if !ok {
			t.Errorf("%s (%s, %q) is registered but missing from the diagnostics table of %s", c.Code, c.Severity, c.Title, languageDoc)
			continue
		}
		if r.severity != c.Severity.String() {
			t.Errorf("%s:%d: %s has severity %q in the doc, %q in codes.go", languageDoc, r.line, c.Code, r.severity, c.Severity)
		}
	}
}

// TestDocMentionsOnlyKnownCodes catches prose that names a code the registry
// does not have (a typo, or a code that was never added).
func TestDocMentionsOnlyKnownCodes(t *testing.T) {
	b, err := os.ReadFile(languageDoc)
	if err != nil {
		t.Fatal(err)
	}
	mention := regexp.MustCompile(`\bWF[0-9]{4}\b`)
	for i, line := range strings.Split(string(b), "\n") {
		for _, m := range mention.FindAllString(line, -1) {
			if !Code(m).Known() {
				t.Errorf("%s:%d: mentions %s, which is not a registered code", languageDoc, i+1, m)
			}
		}
	}
}

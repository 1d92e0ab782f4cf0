package lsp

// Completion has to understand text the parser could not read: the half-typed
// item under the cursor. It reads that text, from the start of the item the
// syntax tree locates to the cursor, with this small scanner. It only needs
// to know where strings, comments and brackets are and what the last few
// tokens were; it never builds a tree.

type ltokKind int

const (
	lWord ltokKind = iota
	lNumber
	lString
	lPunct
)

type ltok struct {
	kind  ltokKind
	text  string
	start int // offset in the scanned text
	open  bool
}

// localScan is the result of scanning the text before the cursor.
type localScan struct {
	toks      []ltok
	inComment bool
	inString  *ltok // the unterminated string the cursor is in
}

var twoCharPunct = map[string]bool{"=>": true, "==": true, "!=": true, "<=": true, ">=": true, "&&": true, "||": true}

func scanLocal(text string) localScan {
	var sc localScan
	i := 0
	for i < len(text) {
		c := text[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '/' && i+1 < len(text) && text[i+1] == '/':
			for i < len(text) && text[i] != '\n' {
				i++
			}
			if i == len(text) {
				sc.inComment = true
			}
		case c == '/' && i+1 < len(text) && text[i+1] == '*':
			end := indexFrom(text, "*/", i+2)
			if end < 0 {
				sc.inComment = true
				return sc
			}
			i = end + 2
		case isStringStart(text, i):
			t, next := scanString(text, i)
			sc.toks = append(sc.toks, t)
			if t.open {
				sc.inString = &sc.toks[len(sc.toks)-1]
				return sc
			}
			i = next
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(text) && text[i+1] >= '0' && text[i+1] <= '9':
			j := i + 1
			for j < len(text) && (isIdentByte(text[j]) || text[j] == '.' || text[j] >= 0x80) {
				j++
			}
			sc.toks = append(sc.toks, ltok{kind: lNumber, text: text[i:j], start: i})
			i = j
		case isIdentByte(c):
			j := i + 1
			for j < len(text) && isIdentByte(text[j]) {
				j++
			}
			sc.toks = append(sc.toks, ltok{kind: lWord, text: text[i:j], start: i})
			i = j
		default:
			if i+1 < len(text) && twoCharPunct[text[i:i+2]] {
				sc.toks = append(sc.toks, ltok{kind: lPunct, text: text[i : i+2], start: i})
				i += 2
				continue
			}
			if c >= 0x80 {
				// Stray non-ASCII outside strings: skip the whole rune.
				j := i + 1
				for j < len(text) && text[j]&0xC0 == 0x80 {
					j++
				}
				i = j
				continue
			}
			sc.toks = append(sc.toks, ltok{kind: lPunct, text: text[i : i+1], start: i})
			i++
		}
	}
	return sc
}

func indexFrom(s, sub string, from int) int {
	if from > len(s) {
		return -1
	}
	for k := from; k+len(sub) <= len(s); k++ {
		if s[k:k+len(sub)] == sub {
			return k
		}
	}
	return -1
}

// isStringStart reports whether a string literal starts at i: a quote,
// possibly after r/b prefixes that are not part of a longer word.
func isStringStart(text string, i int) bool {
	if i > 0 && isIdentByte(text[i-1]) {
		return false
	}
	j := i
	for j < len(text) && j-i < 2 && (text[j] == 'r' || text[j] == 'R' || text[j] == 'b' || text[j] == 'B') {
		j++
	}
	return j < len(text) && (text[j] == '"' || text[j] == '\'')
}

// scanString reads a string literal starting at i (prefixes included).
func scanString(text string, i int) (ltok, int) {
	j := i
	raw := false
	for text[j] != '"' && text[j] != '\'' {
		if text[j] == 'r' || text[j] == 'R' {
			raw = true
		}
		j++
	}
	q := text[j]
	triple := j+2 < len(text) && text[j+1] == q && text[j+2] == q
	k := j + 1
	if triple {
		k = j + 3
	}
	for k < len(text) {
		c := text[k]
		switch {
		case c == '\\' && !raw:
			k += 2
			continue
		case c == '\n' && !triple:
			// An unterminated one-line string ends at the line.
			return ltok{kind: lString, text: text[i:k], start: i}, k
		case c == q && (!triple || k+2 < len(text) && text[k+1] == q && text[k+2] == q):
			end := k + 1
			if triple {
				end = k + 3
			}
			return ltok{kind: lString, text: text[i:end], start: i}, end
		}
		k++
	}
	return ltok{kind: lString, text: text[i:], start: i, open: true}, len(text)
}

// stringBody returns the offset in t.text where the string's content starts.
func stringBody(t ltok) int {
	j := 0
	for j < len(t.text) && t.text[j] != '"' && t.text[j] != '\'' {
		j++
	}
	if j+2 < len(t.text) && t.text[j+1] == t.text[j] && t.text[j+2] == t.text[j] {
		return j + 3
	}
	return j + 1
}

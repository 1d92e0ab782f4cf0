// Package diag defines the one Diagnostic type that every stage of wfc
// reports — lexer, parser, compiler passes, IR checks — and renders it as
// text (file:line:col with a source excerpt) or JSON. The CLI, --json and the
// language server all show the same values.
package diag

import (
	"cmp"
	"slices"

	"github.com/wfc-lang/wfc/lang/source"
)

// Severity orders diagnostics from most to least serious.
type Severity int

const (
	Error Severity = iota + 1
	Warning
	Info
)

func (s Severity) String() string {
	switch s {
	case Error:
		return "error"
	case Warning:
		return "warning"
	case Info:
		return "info"
	}
	return "unknown"
}

// MarshalText makes severities read as words in JSON.
func (s Severity) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText is the inverse of MarshalText.
func (s *Severity) UnmarshalText(b []byte) error {
	switch string(b) {
	case "error":
		*s = Error
	case "warning":
		*s = Warning
	default:
		*s = Info
	}
	return nil
}

// A Related is a secondary location that explains a diagnostic
// ("first defined here", "cycle continues here").
type Related struct {
	Span    source.Span `json:"span"`
	Message string      `json:"message"`
}

// A Fix is a text edit that resolves a diagnostic; the LSP offers it as a
// code action.
type Fix struct {
	Title   string      `json:"title"`
	Span    source.Span `json:"span"`
	NewText string      `json:"new_text"`
}

// A Diagnostic is one problem found in a source file.
type Diagnostic struct {
	Code     Code        `json:"code"`
	Severity Severity    `json:"severity"`
	Span     source.Span `json:"span"`
	Message  string      `json:"message"`
	Hint     string      `json:"hint,omitempty"`
	Related  []Related   `json:"related,omitempty"`
	Fixes    []Fix       `json:"fixes,omitempty"`
}

func (d Diagnostic) Error() string {
	return d.Span.String() + ": " + d.Severity.String() + "[" + string(d.Code) + "]: " + d.Message
}

// List is a collection of diagnostics.
type List []Diagnostic

// HasErrors reports whether any diagnostic is an error.
func (l List) HasErrors() bool {
	for _, d := range l {
		if d.Severity == Error {
			return true
		}
	}
	return false
}

// Count returns how many diagnostics have severity s.
func (l List) Count(s Severity) int {
	n := 0
	for _, d := range l {
		if d.Severity == s {
			n++
		}
	}
	return n
}

// Sorted returns l sorted by file, position, severity and code, with exact
// duplicates (same code, span and message) removed.
func (l List) Sorted() List {
	out := slices.Clone(l)
	slices.SortStableFunc(out, func(a, b Diagnostic) int {
		return cmp.Or(
			cmp.Compare(a.Span.File, b.Span.File),
			cmp.Compare(a.Span.Start.Offset, b.Span.Start.Offset),
			cmp.Compare(a.Severity, b.Severity),
			cmp.Compare(a.Code, b.Code),
			cmp.Compare(a.Message, b.Message),
		)
	})
	return slices.CompactFunc(out, func(a, b Diagnostic) bool {
		return a.Code == b.Code && a.Span == b.Span && a.Message == b.Message
	})
}

// A Reporter collects diagnostics for one file.
type Reporter struct {
	File  *source.File
	Diags List
}

// Add records a diagnostic at r.
func (rp *Reporter) Add(code Code, r source.Range, msg string) *Diagnostic {
	rp.Diags = append(rp.Diags, Diagnostic{Code: code, Severity: code.Severity(), Span: rp.File.Span(r), Message: msg})
	return &rp.Diags[len(rp.Diags)-1]
}

// WithHint sets the hint and returns d for chaining.
func (d *Diagnostic) WithHint(h string) *Diagnostic { d.Hint = h; return d }

// WithRelated adds a related location.
func (d *Diagnostic) WithRelated(s source.Span, msg string) *Diagnostic {
	d.Related = append(d.Related, Related{Span: s, Message: msg})
	return d
}

// WithFix adds a fix.
func (d *Diagnostic) WithFix(title string, s source.Span, text string) *Diagnostic {
	d.Fixes = append(d.Fixes, Fix{Title: title, Span: s, NewText: text})
	return d
}

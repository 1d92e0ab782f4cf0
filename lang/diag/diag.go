// Package diag defines the one Diagnostic type that every stage of wfc
// reports — lexer, parser, compiler passes, IR checks — and renders it as
// text (file:line:col with a source excerpt) or JSON. The CLI, --json and the
// language server all show the same values.
package diag

import (
	"cmp"
	"fmt"
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
	// Hidden, on a TooManyDiags only, counts the diagnostics it stands
	// for by severity, so that totals (List.Count) stay exact.
	Hidden *Hidden `json:"hidden,omitempty"`
}

// Hidden counts the diagnostics of a file that are not shown.
type Hidden struct {
	Errors   int `json:"errors"`
	Warnings int `json:"warnings"`
	Infos    int `json:"infos"`
}

func (h *Hidden) add(s Severity) {
	switch s {
	case Error:
		h.Errors++
	case Warning:
		h.Warnings++
	default:
		h.Infos++
	}
}

func (h *Hidden) count(s Severity) int {
	switch s {
	case Error:
		return h.Errors
	case Warning:
		return h.Warnings
	}
	return h.Infos
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
		switch {
		case d.Hidden != nil:
			n += d.Hidden.count(s) // the diagnostics it stands for
		case d.Severity == s:
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

// MaxPerFile is how many diagnostics of one file are shown: errors first,
// then warnings and infos, each kind from the start of the file; then one
// TooManyDiags saying how many more there are (like Go's "too many errors"
// after 10, or clang's -ferror-limit). 4 MiB of random bytes would
// otherwise make about 290,000 (110 MB of text, 1 GiB of memory).
const MaxPerFile = 100

// maxKept is how many diagnostics a Reporter keeps; past it, it only counts
// them. It is more than MaxPerFile because the first ones reported (the
// lexer's) are not always the first in the file.
const maxKept = 10 * MaxPerFile

// A Reporter collects diagnostics for one file. It keeps at most maxKept of
// them (Diags; an error takes the place of a warning or info when it is
// full) and counts the others; List returns what is shown.
type Reporter struct {
	File  *source.File
	Diags List

	dropped    int      // diagnostics not kept: Diags was full
	droppedSev Severity // the most serious of them
	droppedBy  Hidden   // them by severity
	minor      int      // warnings and infos in Diags
	scratch    Diagnostic
}

// Add records a diagnostic at r. Past maxKept it may return a throwaway
// diagnostic (so that the caller's WithHint and the like still work).
func (rp *Reporter) Add(code Code, r source.Range, msg string) *Diagnostic {
	d := Diagnostic{Code: code, Severity: code.Severity(), Span: rp.File.Span(r), Message: msg}
	if len(rp.Diags) < maxKept {
		if d.Severity != Error {
			rp.minor++
		}
		rp.Diags = append(rp.Diags, d)
		return &rp.Diags[len(rp.Diags)-1]
	}
	if d.Severity == Error && rp.minor > 0 {
		// Full: the error takes the place of the last warning or info.
		for i := len(rp.Diags) - 1; i >= 0; i-- {
			if rp.Diags[i].Severity != Error {
				rp.drop(rp.Diags[i].Severity)
				rp.minor--
				rp.Diags[i] = d
				return &rp.Diags[i]
			}
		}
	}
	rp.drop(d.Severity)
	rp.scratch = d
	return &rp.scratch
}

func (rp *Reporter) drop(sev Severity) {
	rp.dropped++
	rp.droppedBy.add(sev)
	if rp.droppedSev == 0 || sev < rp.droppedSev {
		rp.droppedSev = sev
	}
}

// List returns the diagnostics to show: Diags sorted, without exact
// duplicates, and past MaxPerFile cut to the first MaxPerFile (errors
// first) and a TooManyDiags at the position of the first one left out.
func (rp *Reporter) List() List {
	l := rp.Diags.Sorted()
	if len(l) <= MaxPerFile && rp.dropped == 0 {
		return l
	}
	// Sorted orders by position first; the stable sort keeps that order
	// within each severity.
	bySev := slices.Clone(l)
	slices.SortStableFunc(bySev, func(a, b Diagnostic) int { return cmp.Compare(a.Severity, b.Severity) })
	more, sev := rp.dropped, rp.droppedSev
	hidden := rp.droppedBy
	for _, d := range bySev[MaxPerFile:] {
		more++
		hidden.add(d.Severity)
		if sev == 0 || d.Severity < sev {
			sev = d.Severity
		}
	}
	// Diags holds maxKept > MaxPerFile before any is dropped, so the
	// first one left out is in bySev.
	first := bySev[MaxPerFile]
	shown := List(bySev[:MaxPerFile]).Sorted()
	return append(shown, Diagnostic{Code: TooManyDiags, Severity: sev, Span: first.Span, Hidden: &hidden,
		Message: fmt.Sprintf("too many diagnostics: %d more not shown (the first %d of a file are)", more, MaxPerFile)})
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

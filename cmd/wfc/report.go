package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/lang/diag"
	"github.com/wfc-lang/wfc/lang/source"
)

// A report is the --json document of build and check:
//
//	{"files": [{"file": ..., "diagnostics": [...]}], "errors": N, "warnings": N}
//
// A file that could not be read has "error" and an empty diagnostics list
// (always a list, so that readers can range over it) and counts as one
// error. Fields are only ever added.
type report struct {
	Files    []fileReport `json:"files"`
	Errors   int          `json:"errors"`
	Warnings int          `json:"warnings"`
	// RequiredInputs is set by `build --goal`.
	RequiredInputs []requiredInput `json:"required_inputs,omitzero"`
}

// A fileReport holds the diagnostics of one file named on the command line
// (and of the files it imports).
type fileReport struct {
	File        string    `json:"file"`
	Error       string    `json:"error,omitempty"`
	Diagnostics diag.List `json:"diagnostics"`
}

// A requiredInput is a workflow input that the --goal nodes read.
type requiredInput struct {
	Name     string          `json:"name"`
	Type     string          `json:"type"`
	Required bool            `json:"required"`
	Default  json.RawMessage `json:"default,omitempty"`
}

func (r *report) addFile(name string, diags diag.List) {
	if diags == nil {
		diags = diag.List{}
	}
	r.Files = append(r.Files, fileReport{File: name, Diagnostics: diags})
	r.Errors += diags.Count(diag.Error)
	r.Warnings += diags.Count(diag.Warning)
}

func (r *report) addReadError(name string, err error) {
	r.Files = append(r.Files, fileReport{File: name, Error: err.Error(), Diagnostics: diag.List{}})
	r.Errors++
}

// write writes the report to w. It returns exitOK; exitInternal when the
// report cannot be encoded (reported on standard error: a bug in wfc); or
// exitFailed when it cannot be written.
func (r *report) write(env *Env, cmd string, w io.Writer) int {
	if r.Files == nil {
		r.Files = []fileReport{}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		return encodeError(env, cmd, "the report", err)
	}
	if _, err := w.Write(b.Bytes()); err != nil {
		return exitFailed
	}
	return exitOK
}

// exitFor returns the exit code for diagnostics: 1 with errors, 3 when one
// of them is the compiler's internal error (WF9001, a bug in wfc), else 0.
func exitFor(diags diag.List) int {
	code := exitOK
	for _, d := range diags {
		switch {
		case d.Code == diag.Internal:
			return exitInternal
		case d.Severity == diag.Error:
			code = exitFailed
		}
	}
	return code
}

// writeSummary writes "2 errors, 1 warning" when there are errors.
func writeSummary(w io.Writer, errors, warnings int, suffix string) {
	if errors == 0 {
		return
	}
	s := plural(errors, "error")
	if warnings > 0 {
		s += ", " + plural(warnings, "warning")
	}
	fmt.Fprintf(w, "%s%s\n", s, suffix)
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// goalInputs describes the inputs named in required (Result.RequiredInputs)
// using the workflow's declarations, in declaration order.
func goalInputs(w *ir.Workflow, required []string) []requiredInput {
	need := map[string]bool{}
	for _, name := range required {
		need[name] = true
	}
	out := make([]requiredInput, 0, len(required))
	for _, decl := range w.Inputs {
		if need[decl.Name] {
			out = append(out, requiredInput{Name: decl.Name, Type: decl.Type.String(), Required: decl.Required, Default: decl.Default})
			delete(need, decl.Name)
		}
	}
	for _, name := range required { // not declared: cannot happen in valid IR
		if need[name] {
			out = append(out, requiredInput{Name: name, Type: "unknown", Required: true})
		}
	}
	return out
}

// writeGoalInputs writes the inputs that the goals need, as a table:
//
//	inputs needed by --goal score:
//	  lead_id  string  required
//	  region   string  optional (default "eu")
func writeGoalInputs(w io.Writer, goals []string, ins []requiredInput) {
	var b strings.Builder
	what := "--goal " + strings.Join(goals, ", ")
	if len(ins) == 0 {
		fmt.Fprintf(&b, "%s needs no inputs\n", what)
		io.WriteString(w, b.String())
		return
	}
	fmt.Fprintf(&b, "inputs needed by %s:\n", what)
	nameW, typeW := 0, 0
	for _, in := range ins {
		nameW, typeW = max(nameW, len(in.Name)), max(typeW, len(in.Type))
	}
	for _, in := range ins {
		status := "required"
		if !in.Required {
			status = "optional"
			if len(in.Default) > 0 {
				status += " (default " + string(in.Default) + ")"
			}
		}
		fmt.Fprintf(&b, "  %-*s  %-*s  %s\n", nameW, in.Name, typeW, in.Type, status)
	}
	io.WriteString(w, b.String())
}

// mergeFiles adds the sources in from to into, for rendering excerpts.
func mergeFiles(into, from map[string]*source.File) {
	for k, v := range from {
		if _, ok := into[k]; !ok {
			into[k] = v
		}
	}
}

// writeJSON writes v to standard output as indented JSON and a newline.
// It never drops an error: one in encoding v (what names it in the
// message) is a bug in wfc, reported on standard error with exit code 3;
// one in writing is exit code 1.
func writeJSON(env *Env, cmd, what string, v any) int {
	// Not HTML-escaped: a result's "a & b" stays that, not "a \u0026 b".
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return encodeError(env, cmd, what, err)
	}
	b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	if _, err := fmt.Fprintf(env.Stdout, "%s\n", b); err != nil {
		fmt.Fprintf(env.Stderr, "wfc %s: writing %s: %v\n", cmd, what, err)
		return exitFailed
	}
	return exitOK
}

// encodeError reports that what cannot be encoded as JSON and returns
// exitInternal.
func encodeError(env *Env, cmd, what string, err error) int {
	fmt.Fprintf(env.Stderr, "wfc %s: internal error: cannot encode %s as JSON: %v\n", cmd, what, err)
	return exitInternal
}

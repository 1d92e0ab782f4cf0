package format

import (
	"errors"
	"fmt"

	"github.com/rogpeppe/go-internal/diff"

	"github.com/wfc-lang/wfc/lang"
	"github.com/wfc-lang/wfc/lang/ast"
	"github.com/wfc-lang/wfc/lang/diag"
	"github.com/wfc-lang/wfc/lang/source"
)

// ErrSyntax is returned (wrapped) by Source for a file with syntax errors;
// the diagnostics say what they are.
var ErrSyntax = errors.New("file has syntax errors; not formatted")

// ErrInternal is returned (wrapped) by Source when the printer failed or
// its output would not parse to the same tree: a bug in the formatter, which
// then leaves the file alone.
var ErrInternal = errors.New("internal formatter error")

// Source formats the .wf file src named name. It returns the formatted
// text, the diagnostics of the parser (which, for a file that is formatted,
// are not errors) and nil; or, when the file has syntax errors, nil, the
// diagnostics and an error wrapping ErrSyntax.
//
// Source checks its own work: the output must parse without errors to the
// same tree as src (positions aside), with the same comments. If it does
// not, Source returns an error wrapping ErrInternal rather than a text that
// would change the meaning of the file.
func Source(name string, src []byte) ([]byte, diag.List, error) {
	f, diags := lang.ParseFile(source.NewFile(name, src))
	if diags.HasErrors() {
		return nil, diags, fmt.Errorf("%s: %w", name, ErrSyntax)
	}
	out, err := render(f, src)
	if err != nil {
		return nil, diags, fmt.Errorf("%s: %w: %v", name, ErrInternal, err)
	}
	g, gdiags := lang.ParseFile(source.NewFile(name, out))
	if gdiags.HasErrors() {
		return nil, diags, fmt.Errorf("%s: %w: the output does not parse: %v", name, ErrInternal, gdiags[0])
	}
	if msg := equal(f, g); msg != "" {
		return nil, diags, fmt.Errorf("%s: %w: the output parses differently: %s", name, ErrInternal, msg)
	}
	return out, diags, nil
}

// File returns the canonical text of the parsed file f, whose source is src
// (f must have been parsed from src: its ranges index it, and its comments
// are printed from f.Comments). A file with syntax errors is not formatted:
// when f has a *ast.Bad item, or does not account for every token of src,
// File returns src unchanged. It never panics: the language server calls it
// on whatever the user is typing.
func File(f *ast.File, src []byte) (out []byte) {
	defer func() {
		if r := recover(); r != nil {
			out = src
		}
	}()
	out, err := render(f, src)
	if err != nil {
		return src
	}
	return out
}

// render runs the printer, turning a panic (a tree that does not match its
// source) into an error.
func render(f *ast.File, src []byte) (out []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			if pe, ok := r.(printError); ok {
				out, err = nil, pe
				return
			}
			panic(r)
		}
	}()
	p := newPrinter(src, f.Comments)
	p.file(f)
	return p.out, nil
}

// Diff returns the unified diff that turns a into b, the original and the
// formatted text of the file name, or "" when they are equal. The headers
// name the files name+".orig" and name, as gofmt -d does.
func Diff(name string, a, b []byte) string {
	return string(diff.Diff(name+".orig", a, name, b))
}

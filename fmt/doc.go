// Package format prints .wf files in their canonical layout, the one
// `wfc fmt` writes and the language server applies. It is imported as
// github.com/wfc-lang/wfc/fmt; the package is named format so it does not
// clash with the standard library's fmt.
//
// Source formats a file's text, or returns its syntax errors: a file that
// does not parse is never formatted. File prints an already parsed tree.
// Diff renders the unified diff between a file and its formatted text.
//
// The printer walks the syntax tree and emits its tokens in source order
// with canonical spacing; the comments of ast.File.Comments are interleaved
// by position, the way go/printer does it: before each token, every comment
// that starts before it is printed, on the same line when it was on the
// same line as the token before it, on its own line otherwise. So every
// comment stays between the same two tokens it was written between, and
// formatting is idempotent. Blank lines between the items of a block are
// kept as paragraph breaks (collapsed to one); expressions are copied as
// written. docs/formatting.md lists the rules, with examples.
package format

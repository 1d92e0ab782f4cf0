// Package lang is the front end of wfc: a hand-written lexer feeding a
// parser for the grammar of lang.Grammar(), producing the syntax tree of
// package lang/ast with exact byte ranges and every comment kept.
//
// The grammar is defined with participle (grammar.go). A hand-written
// recursive-descent parser for the same grammar (fast.go) builds the same
// grammar values about ten times faster; it fails exactly where participle
// would, and a differential test and the fuzzer hold it to that. Files that
// parse take the fast path only; participle is used for error messages.
//
// ParseFile never fails outright: it always returns a tree, with *ast.Bad
// items where input did not parse, and diagnostics for every error it found.
// When the file does not parse, the parser re-parses it declaration by
// declaration, a broken workflow item by item, and a broken node item by
// item, so one mistake does not hide the rest of the file. Participle's
// messages are rewritten into human ones.
//
// Expressions are CEL. The grammar only finds where an expression ends (the
// first token that cannot continue it); cel-go parses and checks the text in
// the compiler, and positions are mapped back by byte offset.
package lang

// Package keywordcheck holds only a test: it checks editors/vscode/keywords.json,
// the keyword list the VS Code grammar is generated from, against the keywords
// the compiler and parser accept (their source, exported constants and
// lang.Grammar()) and against docs/language.md. It lives in the Go module so
// that `go test ./...` runs it.
package keywordcheck

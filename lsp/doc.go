// Package lsp is the language server of wfc: `wfc lsp` speaks the Language
// Server Protocol over standard input and output.
//
// The server reuses the front end: every version of an open document is an
// immutable snapshot whose text is parsed by lang.ParseFile and compiled by
// compiler.CompileFile with the configuration `wfc check` uses, once, on
// first use. Diagnostics are the compiler's; hover, definition, references,
// rename, symbols and semantic tokens read the syntax tree and the
// compiler's side tables (compiler.Info: nodes, inputs, handlers, references,
// expression types); formatting is package format's. Completion reads the
// syntax tree of the latest text and, where the parser could not read the
// text before the cursor, that text itself; names and types come from the
// latest compiled snapshot, so typing never waits for a compilation;
// signature help reads the text the same way. Code actions are the
// compiler's fixes (diag.Fix), one by one or all at once (source.fixAll).
//
// The workspace is the open documents and the files they read (workspace.go):
// imports and child flows open in the editor are read from their latest
// text, and a change to one re-checks the open documents that read it.
//
// Positions are byte offsets everywhere in wfc; Mapper converts them to the
// protocol's UTF-16 positions and back at the edge.
//
// Requests are answered one at a time, in order, on the goroutine that reads
// them; diagnostics are computed on other goroutines after a short delay
// (Options.Debounce) and are never published for a version older than one
// already published. A panic in a handler becomes an error response and the
// server carries on. The transport (jsonrpc.go) is wfc's own; protocol types
// and method dispatch are github.com/tliron/glsp's (LSP 3.16).
package lsp

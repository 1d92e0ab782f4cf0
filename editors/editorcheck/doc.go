// Package editorcheck holds only tests: they keep the editor support files
// outside VS Code (editors/vim, editors/emacs) in step with
// editors/vscode/keywords.json, the single list of the language's keywords,
// and check the Vim syntax in a headless Neovim and the Emacs mode in a
// batch Emacs. The keyword blocks of editors/vim/syntax/wf.vim and
// editors/emacs/wf-mode.el are generated from keywords.json:
//
//	go test ./editors/editorcheck -run TestGenerated -update
//
// rewrites them; without -update the test fails when they are out of date.
// It lives in the Go module so that `go test ./...` runs it.
package editorcheck

" Vim/Neovim filetype settings for wf workflows: comments and indentation
" as `wfc fmt` writes them (two spaces, C-style comments).
if exists("b:did_ftplugin")
  finish
endif
let b:did_ftplugin = 1

setlocal commentstring=//\ %s
setlocal comments=s1:/*,mb:*,ex:*/,://
setlocal formatoptions-=t formatoptions+=croql
setlocal expandtab shiftwidth=2 softtabstop=2 tabstop=2
" Indent after an opening brace, dedent a closing one; no C rules (a wf
" item needs no semicolon), and no words that indent the next line.
setlocal autoindent smartindent cinwords=

let b:undo_ftplugin = "setlocal commentstring< comments< formatoptions< expandtab< shiftwidth< softtabstop< tabstop< autoindent< smartindent< cinwords<"

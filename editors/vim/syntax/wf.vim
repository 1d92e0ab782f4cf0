" Vim syntax file
" Language:    wf (workflows compiled by wfc)
" Filenames:   *.wf
" Maintainer:  the wfc project (editors/vim in github.com/wfc-lang/wfc)
"
" Works with Vim 8 and Neovim 0.7 and later; lsp/.. is not needed for it.
" The lexer reserves no word (docs/language.md §2.5): a keyword is one only
" where the grammar expects it, so words followed by `=`, `:`, `?`, `.` or
" `(` (a parameter, a field, a member, a call) and words after a `.` are
" not highlighted as keywords. The keyword lists come from
" editors/vscode/keywords.json, the single source of the language's
" keywords; the block between BEGIN and END below is generated from it and
" editors/editorcheck fails when it is out of date.

if exists("b:current_syntax")
  finish
endif

let s:cpo_save = &cpo
set cpo&vim

syn case match
syn sync fromstart

" ---- comments -------------------------------------------------------------
syn keyword wfTodo contained TODO FIXME XXX NOTE
syn match   wfLineComment "//.*$" contains=wfTodo,@Spell
syn region  wfBlockComment start="/\*" end="\*/" contains=wfTodo,@Spell

" ---- numbers and durations ------------------------------------------------
" A duration is a number with a unit and may chain units: 48h, 1m30s, 500ms.
syn match wfNumber   "\%(\w\|\.\)\@1<!\%(\d\+\%(\.\d\+\)\=\|\.\d\+\)\%([eE][+-]\=\d\+\)\=[uU]\=\>"
syn match wfNumber   "\%(\w\|\.\)\@1<!0[xX]\x\+[uU]\=\>"
syn match wfDuration "\%(\w\|\.\)\@1<!\%(\d\+\%(\.\d\+\)\=\|\.\d\+\)\%(ns\|us\|µs\|ms\|s\|m\|h\)\%(\%(\d\+\%(\.\d*\)\=\|\.\d\+\)\%(ns\|us\|µs\|ms\|s\|m\|h\)\)*\>"

" ---- operators ------------------------------------------------------------
syn match wfOperator "&&\|||\|[=!<>]=\|[<>!?]\|[-+*%]\|/[/*]\@!"
syn match wfArrow    "=>"
syn match wfRunMeta  "\.\@1<!\<run\ze\s*\."

" ---- strings --------------------------------------------------------------
" Double and single quotes, triple quotes ("""…""", '''…''') that may span
" lines, an r/R prefix for raw strings (no escapes) and b/B for bytes. Every
" kind may hold {{ }} templates, whose insides are CEL.
syn match wfEscape contained +\\\%([abfnrtv\\'"`?]\|x\x\{2}\|[0-3]\o\{2}\|u\x\{4}\|U\x\{8}\)+
syn match wfEscapeError contained +\\.\=+

syn region wfString    matchgroup=wfQuote start=+\w\@1<![bB]\{0,2}"+ skip=+\\\\\|\\"+ end=+"+ end=+$+ contains=wfEscape,wfEscapeError,wfTemplateDQ,@Spell
syn region wfString    matchgroup=wfQuote start=+\w\@1<![bB]\{0,2}'+ skip=+\\\\\|\\'+ end=+'+ end=+$+ contains=wfEscape,wfEscapeError,wfTemplateSQ,@Spell
syn region wfRawString matchgroup=wfQuote start=+\w\@1<!\%([rR][rRbB]\=\|[bB][rR]\)"+ end=+"+ end=+$+ contains=wfTemplateDQ,@Spell
syn region wfRawString matchgroup=wfQuote start=+\w\@1<!\%([rR][rRbB]\=\|[bB][rR]\)'+ end=+'+ end=+$+ contains=wfTemplateSQ,@Spell
syn region wfString    matchgroup=wfQuote start=+\w\@1<![bB]\{0,2}"""+ skip=+\\\\\|\\"+ end=+"""+ contains=wfEscape,wfEscapeError,wfTemplateTDQ,@Spell
syn region wfString    matchgroup=wfQuote start=+\w\@1<![bB]\{0,2}'''+ skip=+\\\\\|\\'+ end=+'''+ contains=wfEscape,wfEscapeError,wfTemplateTSQ,@Spell
syn region wfRawString matchgroup=wfQuote start=+\w\@1<!\%([rR][rRbB]\=\|[bB][rR]\)"""+ end=+"""+ contains=wfTemplateTDQ,@Spell
syn region wfRawString matchgroup=wfQuote start=+\w\@1<!\%([rR][rRbB]\=\|[bB][rR]\)'''+ end=+'''+ contains=wfTemplateTSQ,@Spell

" Strings inside a template use the other quote; a template ends at `}}` or
" where its string ends.
syn region wfTemplateDQ  contained matchgroup=wfTemplateDelim start=+{{+ end=+}}+ end=+\ze"+ end=+$+ contains=@wfCel,wfCelStringSQ
syn region wfTemplateSQ  contained matchgroup=wfTemplateDelim start=+{{+ end=+}}+ end=+\ze'+ end=+$+ contains=@wfCel,wfCelStringDQ
syn region wfTemplateTDQ contained matchgroup=wfTemplateDelim start=+{{+ end=+}}+ end=+\ze"""+ contains=@wfCel,wfCelStringSQ,wfCelStringDQ
syn region wfTemplateTSQ contained matchgroup=wfTemplateDelim start=+{{+ end=+}}+ end=+\ze'''+ contains=@wfCel,wfCelStringSQ,wfCelStringDQ
syn region wfCelStringDQ contained matchgroup=wfQuote start=+\w\@1<![rRbB]\{0,2}"+ skip=+\\\\\|\\"+ end=+"+ end=+$+ contains=wfEscape
syn region wfCelStringSQ contained matchgroup=wfQuote start=+\w\@1<![rRbB]\{0,2}'+ skip=+\\\\\|\\'+ end=+'+ end=+$+ contains=wfEscape

" BEGIN generated from editors/vscode/keywords.json (go test ./editors/editorcheck -update); do not edit
" top-level declarations: declarations
syn match wfDeclaration #\.\@1<!\<\%(import\|handler\|workflow\)\>\%(\s*\%(=[=>]\@!\|?\|:\|\.\|(\)\)\@!# nextgroup=wfWorkflowName skipwhite
" kinds of node: nodeKinds
syn match wfNodeKind #\.\@1<!\<\%(task\|agent\|human\|flow\)\>\%(\s*\%(=[=>]\@!\|?\|:\|\.\|(\)\)\@!# nextgroup=wfNodeName,wfReservedName skipwhite
" words of a node's header: nodeHeader
syn match wfNodeHeader #\.\@1<!\<\%(after\|join\)\>\%(\s*\%(=[=>]\@!\|?\|:\|\.\|(\)\)\@!#
" items of blocks: workflowItems, handlerItems, nodeItems, forEach, branchRules, retryItems, loopItems, compensateItems
syn match wfItem #\.\@1<!\<\%(version\|description\|deadline\|max_hops\|max_fanout\|max_input_bytes\|max_output_bytes\|max_state_bytes\|input\|output\|finally\|config\|when\|retry\|timeout\|on_error\|run\|with\|for_each\|branch\|loop\|compensate\|model\|temperature\|prompt\|routes\|default\|approvers\|on_timeout\|on_reject\|uses\|dispatch\|escalate_to\|escalate_after\|max_routes\|tools\|max_tool_calls\|max_tokens\|in\|parallel\|tolerate\|else\|attempts\|backoff\|delay\|max_delay\|on\|except\|while\|max\|back_to\|exhausted\)\>\%(\s*\%(=[=>]\@!\|?\|:\|\.\|(\)\)\@!#
" types of fields: types
syn match wfType #\.\@1<!\<\%(string\|int\|number\|bool\|duration\|any\|list\|map\|secret\)\>\%(\s*\%(=[=>]\@!\|?\|:\|\.\|(\)\)\@!#
" literals: literals
syn match wfLiteral #\.\@1<!\<\%(true\|false\|null\)\>#
" values of join: joinModes
syn match wfJoinMode #\%(\<join\s\+\)\@20<=\%(all\|any\|settled\|first\)\>#
" values of backoff: backoff
syn match wfBackoff #\%(\<backoff\s\+\)\@20<=\%(fixed\|linear\|exponential\)\>#
" values of on_timeout: onTimeout
syn match wfOnTimeout #\%(\<on_timeout\s\+\)\@20<=\%(approve\|reject\|fail\)\>#
" names an expression reads from: scopeNames
syn match wfScope #\.\@1<!\<\%(input\|output\)\>\ze\s*\.#
" CEL macros: celMacros
syn match wfMacro #\<\%(has\|all\|exists\|exists_one\|map\|filter\)\ze\s*(#
" built-in handlers: builtinHandlers
syn match wfBuiltinHandler #\%(\<run\s\+\)\@20<="\%(noop\|echo\|cel\|fail\|sleep\|http\|exec\|wait\|signal\)"#
" names a node may not have: reservedNames
syn match wfNodeName contained #\h\w*#
syn match wfReservedName contained #\%(input\|output\|workflow\|task\|agent\|human\|flow\|handler\|import\|after\|join\|when\|else\|while\|loop\|in\|true\|false\|null\|as\|break\|const\|continue\|for\|function\|if\|let\|package\|namespace\|return\|var\|void\|has\|all\|exists\|exists_one\|map\|filter\|run\)\>#
" END generated

" The workflow's name (after `workflow`: wfDeclaration's nextgroup).
syn match wfWorkflowName contained "\h\w*"

" Node ids a node refers to: after `after`, `=>`, `back_to` and `routes`.
syn match wfNodeRef "\%(\%(=>\s*\|\<\%(after\|back_to\|routes\)\s\+\)\%(\h\w*\s*,\s*\)*\)\@80<=\<\h\w*"

" CEL inside {{ }} templates: literals, names, calls and operators, but no
" wf keywords.
syn cluster wfCel contains=wfNumber,wfDuration,wfLiteral,wfScope,wfMacro,wfRunMeta,wfOperator

" ---- default colours ------------------------------------------------------
hi def link wfTodo           Todo
hi def link wfLineComment    Comment
hi def link wfBlockComment   Comment
hi def link wfNumber         Number
hi def link wfDuration       Number
hi def link wfOperator       Operator
hi def link wfArrow          Operator
hi def link wfRunMeta        Special
hi def link wfString         String
hi def link wfRawString      String
hi def link wfCelStringDQ    String
hi def link wfCelStringSQ    String
hi def link wfQuote          String
hi def link wfEscape         SpecialChar
hi def link wfEscapeError    Error
hi def link wfTemplateDelim  PreProc
hi def link wfTemplateDQ     Special
hi def link wfTemplateSQ     Special
hi def link wfTemplateTDQ    Special
hi def link wfTemplateTSQ    Special
hi def link wfDeclaration    Structure
hi def link wfNodeKind       StorageClass
hi def link wfNodeHeader     Keyword
hi def link wfItem           Keyword
hi def link wfType           Type
hi def link wfLiteral        Constant
hi def link wfJoinMode       Constant
hi def link wfBackoff        Constant
hi def link wfOnTimeout      Constant
hi def link wfScope          Special
hi def link wfMacro          Function
hi def link wfBuiltinHandler Function
hi def link wfNodeName       Function
hi def link wfWorkflowName   Function
hi def link wfNodeRef        Identifier
hi def link wfReservedName   Error

let b:current_syntax = "wf"

let &cpo = s:cpo_save
unlet s:cpo_save

;;; wf-mode.el --- Major mode for wf workflows -*- lexical-binding: t -*-

;; URL: https://github.com/wfc-lang/wfc (editors/emacs)
;; Package-Requires: ((emacs "27.1"))
;; Keywords: languages

;;; Commentary:

;; Syntax highlighting, comments and indentation for .wf files (workflows
;; compiled by wfc), and the `wfc lsp' language server through eglot.
;; docs/editors.md has the recipe:
;;
;;   (add-to-list 'load-path "/path/to/wfc/editors/emacs")
;;   (require 'wf-mode)
;;   (add-hook 'wf-mode-hook #'eglot-ensure)
;;
;; The lexer reserves no word (docs/language.md §2.5): a keyword is one only
;; where the grammar expects it, so a word followed by `=', `:', `?', `.' or
;; `(' (a parameter, a field, a member, a call) or after a `.' is not
;; highlighted as a keyword.  The word lists come from
;; editors/vscode/keywords.json; the block between BEGIN and END below is
;; generated from it, and editors/editorcheck fails when it is out of date.

;;; Code:

(require 'rx)

(defgroup wf nil
  "Major mode for wf workflows."
  :group 'languages
  :prefix "wf-mode-")

(defcustom wf-mode-indent-offset 2
  "Indentation of a block's items, as `wfc fmt' writes them."
  :type 'integer
  :safe #'integerp)

(defface wf-mode-template-face
  '((t :inherit font-lock-preprocessor-face))
  "Face of {{ }} templates inside strings.")

;; BEGIN generated from editors/vscode/keywords.json (go test ./editors/editorcheck -update); do not edit
(defconst wf-mode-declarations
  '("import" "handler" "workflow")
  "The top-level declarations.
keywords.json: declarations.")
(defconst wf-mode-node-kinds
  '("task" "agent" "human" "flow")
  "The kinds of node.
keywords.json: nodeKinds.")
(defconst wf-mode-node-header
  '("after" "join")
  "The words of a node's header.
keywords.json: nodeHeader.")
(defconst wf-mode-items
  '("version" "description" "deadline" "max_hops" "max_fanout" "max_input_bytes" "max_output_bytes" "max_state_bytes" "input" "output" "finally" "config" "when" "retry" "timeout" "on_error" "run" "with" "for_each" "branch" "loop" "compensate" "model" "temperature" "prompt" "routes" "default" "approvers" "on_timeout" "on_reject" "uses" "dispatch" "escalate_to" "escalate_after" "max_routes" "tools" "max_tool_calls" "max_tokens" "in" "parallel" "tolerate" "else" "attempts" "backoff" "delay" "max_delay" "on" "except" "while" "max" "back_to" "exhausted")
  "The items of blocks.
keywords.json: workflowItems, handlerItems, nodeItems, forEach,
branchRules, retryItems, loopItems, compensateItems.")
(defconst wf-mode-types
  '("string" "int" "number" "bool" "duration" "any" "list" "map" "secret")
  "The types of fields.
keywords.json: types.")
(defconst wf-mode-literals
  '("true" "false" "null")
  "The literals.
keywords.json: literals.")
(defconst wf-mode-join-modes
  '("all" "any" "settled" "first")
  "The values of join.
keywords.json: joinModes.")
(defconst wf-mode-backoffs
  '("fixed" "linear" "exponential")
  "The values of backoff.
keywords.json: backoff.")
(defconst wf-mode-on-timeout
  '("approve" "reject" "fail")
  "The values of on_timeout.
keywords.json: onTimeout.")
(defconst wf-mode-scope-names
  '("input" "output")
  "The names an expression reads from.
keywords.json: scopeNames.")
(defconst wf-mode-macros
  '("has" "all" "exists" "exists_one" "map" "filter")
  "The CEL macros.
keywords.json: celMacros.")
(defconst wf-mode-builtin-handlers
  '("noop" "echo" "cel" "fail" "sleep" "http" "exec" "wait" "signal")
  "The built-in handlers.
keywords.json: builtinHandlers.")
(defconst wf-mode-reserved-names
  '("input" "output" "workflow" "task" "agent" "human" "flow" "handler" "import" "after" "join" "when" "else" "while" "loop" "in" "true" "false" "null" "as" "break" "const" "continue" "for" "function" "if" "let" "package" "namespace" "return" "var" "void" "has" "all" "exists" "exists_one" "map" "filter" "run")
  "The names a node may not have.
keywords.json: reservedNames.")
;; END generated

(defvar wf-mode-syntax-table
  (let ((st (make-syntax-table)))
    (modify-syntax-entry ?_ "_" st)
    (modify-syntax-entry ?/ ". 124b" st)
    (modify-syntax-entry ?* ". 23" st)
    (modify-syntax-entry ?\n "> b" st)
    (modify-syntax-entry ?\" "\"" st)
    (modify-syntax-entry ?' "\"" st)
    (modify-syntax-entry ?\\ "\\" st)
    (dolist (c '(?+ ?- ?% ?< ?> ?= ?! ?& ?| ??))
      (modify-syntax-entry c "." st))
    st)
  "Syntax table of `wf-mode': // and /* */ comments, \"…\" and '…' strings.
A triple-quoted string reads as an empty string followed by a string, which
highlights the same.")

(defun wf-mode--keyword-matcher (words)
  "A font-lock matcher for WORDS where they are keywords.
It skips a word after a `.' or before `=', `:', `?', `.' or `('."
  (let ((re (concat "\\_<" (regexp-opt words t) "\\_>")))
    (lambda (limit)
      (let (found)
        (while (and (not found) (re-search-forward re limit t))
          (unless (save-match-data
                    (or (eq (char-before (match-beginning 0)) ?.)
                        (looking-at "[ \t]*\\(?:=[^=>]\\|[?:.(]\\)")
                        (nth 8 (save-excursion (syntax-ppss (match-beginning 0))))))
            (setq found t)))
        found))))

(defun wf-mode--template-matcher (limit)
  "A font-lock matcher for {{ … }} templates inside strings, up to LIMIT."
  (let (found)
    (while (and (not found)
                (re-search-forward "{{\\(?:[^}\"'\n]\\|}[^}\"'\n]\\)*\\(?:}}\\)?" limit t))
      (when (save-match-data (nth 3 (save-excursion (syntax-ppss (match-beginning 0)))))
        (setq found t)))
    found))

(defconst wf-mode--duration-re
  (let ((num "\\(?:[0-9]+\\(?:\\.[0-9]+\\)?\\|\\.[0-9]+\\)")
        (unit "\\(?:ns\\|us\\|µs\\|ms\\|s\\|m\\|h\\)"))
    (concat "\\_<" num unit "\\(?:" num unit "\\)*\\_>"))
  "A duration: 48h, 1m30s, 500ms.")

(defun wf-mode--after (keyword words)
  "A regexp for WORDS after KEYWORD, the word in group 1."
  (concat "\\_<" keyword "[ \t]+" (regexp-opt words t) "\\_>"))

(defconst wf-mode-font-lock-keywords
  `(;; Templates first, over the string face.
    (wf-mode--template-matcher 0 'wf-mode-template-face t)
    ;; A node's name; a reserved word there is an error (WF1005).
    (,(concat "\\_<" (regexp-opt wf-mode-node-kinds) "[ \t]+"
              (regexp-opt wf-mode-reserved-names t) "\\_>")
     1 font-lock-warning-face)
    (,(concat "\\_<" (regexp-opt wf-mode-node-kinds) "[ \t]+\\([A-Za-z_][A-Za-z0-9_]*\\)")
     1 font-lock-function-name-face)
    ("\\_<workflow[ \t]+\\([A-Za-z_][A-Za-z0-9_]*\\)" 1 font-lock-function-name-face)
    (,(wf-mode--after "join" wf-mode-join-modes) 1 font-lock-constant-face)
    (,(wf-mode--after "backoff" wf-mode-backoffs) 1 font-lock-constant-face)
    (,(wf-mode--after "on_timeout" wf-mode-on-timeout) 1 font-lock-constant-face)
    (,(wf-mode--keyword-matcher wf-mode-declarations) 0 font-lock-keyword-face)
    (,(wf-mode--keyword-matcher wf-mode-node-kinds) 0 font-lock-keyword-face)
    (,(wf-mode--keyword-matcher wf-mode-node-header) 0 font-lock-keyword-face)
    (,(wf-mode--keyword-matcher wf-mode-items) 0 font-lock-builtin-face)
    (,(wf-mode--keyword-matcher wf-mode-types) 0 font-lock-type-face)
    (,(concat "\\(?:^\\|[^.]\\)\\_<" (regexp-opt wf-mode-literals t) "\\_>") 1 font-lock-constant-face)
    (,(concat "\\(?:^\\|[^.]\\)\\_<" (regexp-opt wf-mode-scope-names t) "[ \t]*\\.") 1 font-lock-variable-name-face)
    (,(concat "\\_<" (regexp-opt wf-mode-macros t) "[ \t]*(") 1 font-lock-builtin-face)
    (,wf-mode--duration-re . font-lock-constant-face)
    ("\\_<\\(?:0[xX][0-9A-Fa-f]+\\|[0-9]+\\(?:\\.[0-9]+\\)?\\(?:[eE][-+]?[0-9]+\\)?\\)[uU]?\\_>" . font-lock-constant-face)
    ("=>" . font-lock-keyword-face))
  "Highlighting of `wf-mode'.")

(defun wf-mode-indent-line ()
  "Indent the current line by the depth of the braces, brackets and parens."
  (interactive)
  (let* ((ppss (save-excursion (syntax-ppss (line-beginning-position))))
         (depth (car ppss))
         (closing (save-excursion
                    (back-to-indentation)
                    (looking-at "[]})]")))
         (col (* wf-mode-indent-offset (max 0 (if closing (1- depth) depth))))
         (offset (- (current-column) (current-indentation))))
    (unless (nth 3 ppss)                ; leave multi-line strings alone
      (indent-line-to col)
      (when (> offset 0) (forward-char offset)))))

;;;###autoload
(define-derived-mode wf-mode prog-mode "wf"
  "Major mode for wf workflows (.wf files).
\\{wf-mode-map}"
  :syntax-table wf-mode-syntax-table
  (setq-local font-lock-defaults '(wf-mode-font-lock-keywords))
  (setq-local comment-start "// ")
  (setq-local comment-end "")
  (setq-local comment-start-skip "\\(?://+\\|/\\*+\\)\\s-*")
  (setq-local indent-line-function #'wf-mode-indent-line)
  (setq-local indent-tabs-mode nil)
  (setq-local tab-width wf-mode-indent-offset))

;;;###autoload
(add-to-list 'auto-mode-alist '("\\.wf\\'" . wf-mode))

;; The language server: `wfc lsp' (docs/editors.md).
(defvar eglot-server-programs)
(with-eval-after-load 'eglot
  (add-to-list 'eglot-server-programs '(wf-mode "wfc" "lsp")))

(provide 'wf-mode)
;;; wf-mode.el ends here

package editorcheck

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var emacsProbes = []probe{
	{"", "// Order fulfilment", 3, "font-lock-comment-face"},
	{"", "import", 0, "font-lock-keyword-face"},
	{"", `"handlers.wf"`, 3, "font-lock-string-face"},
	{"", "config {", 0, "font-lock-builtin-face"},
	{"config {", "string", 0, "font-lock-type-face"},
	{"", "workflow order", 0, "font-lock-keyword-face"},
	{"", "order_fulfilment", 0, "font-lock-function-name-face"},
	{`"""Charges`, "refunds it", 0, "font-lock-string-face"},
	{"", "deadline 24h", 9, "font-lock-constant-face"},
	{"", "max_hops 500", 9, "font-lock-constant-face"},
	{"input {", "rush?", 0, ""},
	{"input {", "false", 0, "font-lock-constant-face"},
	{"output {", "input.order_id", 0, "font-lock-variable-name-face"},
	{"output {", "has(ship", 0, "font-lock-builtin-face"},
	{"", "/* Charge first", 3, "font-lock-comment-face"},
	{"task charge", "task charge", 0, "font-lock-keyword-face"},
	{"task charge", "charge {", 0, "font-lock-function-name-face"},
	{"task charge", "{{ input.order_id }}", 3, "wf-mode-template-face"},
	{"task charge", "order_id }}/charge", 11, "font-lock-string-face"},
	{"task charge", "timeout = duration", 0, ""},
	{"task charge", "backoff exponential", 8, "font-lock-constant-face"},
	{"task charge", "delay 500ms", 6, "font-lock-constant-face"},
	{"task charge", "=> notify_ops", 0, "font-lock-keyword-face"},
	{"human review", "on_timeout approve", 11, "font-lock-constant-face"},
	{"agent pick", "{{ input.rush }}", 3, "wf-mode-template-face"},
	{"flow ship", "join any", 5, "font-lock-constant-face"},
	{"flow ship", "uses", 0, "font-lock-builtin-face"},
}

// emacsScript evaluates the docs' configuration, opens the sample, and
// prints the mode, the comment syntax, whether indenting the whole (fmt
// canonical) file changes it, the eglot server entry, and the face at each
// probe, one JSON object.
const emacsScript = `
(require 'json)
;; eglot is not loaded here: the mode adds its entry when eglot is provided.
(defvar eglot-server-programs nil)
(let* ((file (getenv "WF_FILE"))
       (probes (json-parse-string (getenv "PROBES") :object-type 'alist))
       faces orig)
  (with-temp-buffer
    (insert (getenv "WF_INIT"))
    (eval-buffer))
  (find-file file)
  (font-lock-ensure)
  (setq faces
        (mapcar (lambda (p)
                  (goto-char (point-min))
                  (forward-line (1- (alist-get 'Line p)))
                  (forward-char (1- (alist-get 'Col p)))
                  (let ((f (get-text-property (point) 'face)))
                    (format "%s" (if (listp f) (car f) f))))
                probes))
  (setq orig (buffer-string))
  (indent-region (point-min) (point-max))
  ;; Provided outside a file, so the after-load forms run now.
  (let ((load-file-name nil)) (provide 'eglot))
  (princ (json-encode
          (list (cons 'mode (symbol-name major-mode))
                (cons 'comment comment-start)
                (cons 'indent_keeps (if (equal orig (buffer-string)) t :json-false))
                (cons 'eglot (format "%S" (assq 'wf-mode eglot-server-programs)))
                (cons 'faces (vconcat faces))))))
`

// TestEmacsMode loads editors/emacs/wf-mode.el as docs/editors.md says in a
// batch Emacs, opens the sample and checks the faces at keywords, node ids,
// strings, templates, comments, numbers and durations, the comment syntax,
// the indentation and the eglot entry, and byte-compiles the mode.
func TestEmacsMode(t *testing.T) {
	emacs, err := exec.LookPath("emacs")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("emacs is not installed (apt-get install -y emacs-nox)")
		}
		t.Skip("emacs is not installed")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	init := docBlock(t, "<!-- tested by editors/editorcheck/emacs_test.go", "elisp")
	if !strings.Contains(init, "~/src/wfc") {
		t.Fatalf("the Emacs recipe does not name ~/src/wfc:\n%s", init)
	}
	init = strings.ReplaceAll(init, "~/src/wfc", root)
	src, err := os.ReadFile(sample)
	if err != nil {
		t.Fatal(err)
	}
	file, _ := filepath.Abs(sample)
	ps := make([]pos, len(emacsProbes))
	for i, p := range emacsProbes {
		ps[i] = locate(t, string(src), p) // the sample is ASCII: bytes are characters
	}
	pj, _ := json.Marshal(ps)
	dir := t.TempDir()
	script := filepath.Join(dir, "t.el")
	os.WriteFile(script, []byte(emacsScript), 0o644)
	cmd := exec.Command(emacs, "--batch", "-Q", "-l", script)
	cmd.Env = append(os.Environ(), "HOME="+dir, "WF_FILE="+file, "WF_INIT="+init, "PROBES="+string(pj))
	cmd.Dir = dir
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("emacs: %v\n%s", err, stderr.String())
		}
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		t.Fatal("emacs did not finish")
	}
	var res struct {
		Mode        string   `json:"mode"`
		Comment     string   `json:"comment"`
		IndentKeeps bool     `json:"indent_keeps"`
		Eglot       string   `json:"eglot"`
		Faces       []string `json:"faces"`
	}
	if err := json.Unmarshal([]byte(stdout.String()), &res); err != nil {
		t.Fatalf("bad result %q: %v\n%s", stdout.String(), err, stderr.String())
	}
	if res.Mode != "wf-mode" || res.Comment != "// " {
		t.Errorf("mode %q, comment-start %q; want wf-mode and \"// \"", res.Mode, res.Comment)
	}
	if !res.IndentKeeps {
		t.Errorf("indent-region changed the canonical layout of %s", sample)
	}
	if res.Eglot != `(wf-mode "wfc" "lsp")` {
		t.Errorf("eglot-server-programs entry %s; want (wf-mode \"wfc\" \"lsp\")", res.Eglot)
	}
	if len(res.Faces) != len(emacsProbes) {
		t.Fatalf("%d faces for %d probes", len(res.Faces), len(emacsProbes))
	}
	// The mode byte-compiles without warnings (a free variable or a
	// misspelt function is a warning).
	el := filepath.Join(dir, "wf-mode.el")
	b, err := os.ReadFile(emacsFile)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(el, b, 0o644)
	bc := exec.Command(emacs, "--batch", "-Q", "--eval", "(setq byte-compile-error-on-warn t)", "-f", "batch-byte-compile", el)
	bc.Env = append(os.Environ(), "HOME="+dir)
	if out, err := bc.CombinedOutput(); err != nil {
		t.Errorf("byte-compiling wf-mode.el: %v\n%s", err, out)
	}
	for i, p := range emacsProbes {
		want := p.want
		if want == "" {
			want = "nil"
		}
		if res.Faces[i] != want {
			t.Errorf("%q+%d (line %d, col %d): face %s, want %s", p.needle, p.delta, ps[i].Line, ps[i].Col, res.Faces[i], want)
		}
	}
}

package compiler

import (
	"strings"
	"testing"

	"github.com/wfc-lang/wfc/lang/diag"
)

// wantErrorCode compiles src and checks its errors: none when code is "",
// else one of that code among them. label names the case in failures.
func wantErrorCode(t *testing.T, label, src string, code diag.Code) {
	t.Helper()
	res := Compile("w.wf", []byte(src), Config{})
	var codes []string
	for _, d := range res.Diags {
		if d.Severity == diag.Error {
			codes = append(codes, string(d.Code)+": "+d.Message)
		}
	}
	if code == "" {
		if len(codes) > 0 {
			t.Errorf("%s: %v", label, codes)
		}
		return
	}
	if !strings.Contains(strings.Join(codes, "\n"), string(code)+":") {
		t.Errorf("%s: got %v, want %s", label, codes, code)
	}
}

// wantDiag compiles src and checks that a diagnostic of code says sub.
func wantDiag(t *testing.T, src string, code diag.Code, sub string) {
	t.Helper()
	res := Compile("w.wf", []byte(src), Config{})
	for _, d := range res.Diags {
		if d.Code == code && strings.Contains(d.Message, sub) {
			return
		}
	}
	t.Errorf("%s: no %s saying %q in %v", src, code, sub, res.Diags)
}

package lsp

import (
	"testing"

	format "github.com/wfc-lang/wfc/fmt"
)

// formatted is what formatting should produce for src: format.Source's
// output, or src itself when it does not format.
func formatted(t *testing.T, src string) string {
	t.Helper()
	out, _, err := format.Source("t.wf", []byte(src))
	if err != nil {
		return src
	}
	return string(out)
}

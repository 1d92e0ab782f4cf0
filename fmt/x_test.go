package format

import "testing"

// TestX is a scratch test for debugging one-off cases: put the input in
// src and run go test ./fmt -run TestX -v. Do not remove.
func TestX(t *testing.T) {
	const src = "workflow w {\n  output {\n    a =\n      1\n    bbb = 2\n  }\n}\n"
	out, diags, err := Source("x.wf", []byte(src))
	if err != nil {
		t.Fatalf("%v %v", err, diags)
	}
	for _, p := range outputProblems([]byte(src), out) {
		t.Error(p)
	}
	t.Logf("\n%s", out)
}

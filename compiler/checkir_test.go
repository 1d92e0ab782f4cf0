package compiler

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/lang/diag"
)

// TestCheckIRAgreesWithBuild: every workflow that builds without errors
// passes CheckIR (no false alarm on what a build accepted).
func TestCheckIRAgreesWithBuild(t *testing.T) {
	var files []string
	for _, pat := range []string{"../examples/*.wf", "../examples/ported/*.wf", "../testdata/golden/compiler/*.wf"} {
		m, _ := filepath.Glob(pat)
		files = append(files, m...)
	}
	if len(files) < 10 {
		t.Fatalf("only %d workflows found", len(files))
	}
	checked := 0
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		res := Compile(f, src, Config{})
		if res.IR == nil || res.Diags.HasErrors() {
			continue
		}
		checked++
		for _, d := range CheckIR(res.IR) {
			t.Errorf("%s: %s", f, d.Error())
		}
	}
	if checked < 10 {
		t.Errorf("only %d workflows built", checked)
	}
}

// TestCheckIRFinds: what a patch may break that ir.Validate cannot see.
func TestCheckIRFinds(t *testing.T) {
	src := `workflow w {
  input { n: int }
  task a {
    run "echo"
    with { x = input.n }
  }
  task b after a {
    run "echo"
    when a.output.x > 1
    with { y = a.output.x }
  }
  task c after b {
    run "sleep"
    with { duration = "1s" }
  }
}
`
	res := Compile("w.wf", []byte(src), Config{})
	if res.Diags.HasErrors() {
		t.Fatalf("base does not build: %v", res.Diags)
	}
	if ds := CheckIR(res.IR); len(ds) > 0 {
		t.Fatalf("base: %v", ds)
	}
	cases := []struct{ name, patch, code, msg string }{
		{"type break", `[{"op":"test","path":"/nodes/1/id","value":"b"},{"op":"replace","path":"/nodes/1/when/cel","value":"a.output.x + 1"}]`, string(diag.NotBool), "/nodes/1/when: a condition must be bool"},
		{"unknown name", `[{"op":"test","path":"/nodes/1/id","value":"b"},{"op":"replace","path":"/nodes/1/when/cel","value":"nosuch.output"}]`, string(diag.TypeError), "/nodes/1/when"},
		{"not upstream", `[{"op":"test","path":"/nodes/0/id","value":"a"},{"op":"add","path":"/nodes/0/when","value":{"cel":"c.output != null"}}]`, string(diag.TypeError), "reads c, which is not upstream of a"},
		{"config type", `[{"op":"test","path":"/nodes/2/id","value":"c"},{"op":"replace","path":"/nodes/2/with/0/value","value":{"expr":{"cel":"true"}}}]`, string(diag.ConfigType), "field \"duration\""},
		{"unknown config", `[{"op":"test","path":"/nodes/2/id","value":"c"},{"op":"replace","path":"/nodes/2/with/0/name","value":"durations"}]`, string(diag.UnknownConfig), "takes no field \"durations\""},
	}
	for _, c := range cases {
		w, err := ir.ApplyPatch(res.IR, []byte(c.patch))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		ds := CheckIR(w)
		found := false
		for _, d := range ds {
			if string(d.Code) == c.code && strings.Contains(d.Message, c.msg) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: diagnostics %v, want %s %q", c.name, ds, c.code, c.msg)
		}
	}
}

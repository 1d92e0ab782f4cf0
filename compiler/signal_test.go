package compiler

import (
	"strings"
	"testing"

	"github.com/wfc-lang/wfc/lang/diag"
)

// TestSignalConfig: the built-in signal needs a name; its output is the
// payload, typed by the node's declared output (else any).
func TestSignalConfig(t *testing.T) {
	cases := []struct {
		body string
		code diag.Code // "" for no error
	}{
		{`run "signal"  with { name = "reply" }`, ""},
		{`run "signal"  with { name = "reply"  correlation = "o-${input.id}" }  timeout 1h  output { text: string }`, ""},
		{`run "signal"`, diag.MissingConfig},
		{`run "signal"  with { name = 3 }`, diag.ConfigType},
		{`run "signal"  with { name = "a"  corr = "x" }`, diag.UnknownConfig},
	}
	for _, c := range cases {
		src := "workflow w {\n  input { id: string }\n  task a { " + c.body + " }\n  task b after a { run \"echo\"  with { t = a.output.text } }\n}\n"
		res := Compile("w.wf", []byte(src), Config{})
		var codes []string
		for _, d := range res.Diags {
			if d.Severity == diag.Error {
				codes = append(codes, string(d.Code)+": "+d.Message)
			}
		}
		if c.code == "" {
			if len(codes) > 0 {
				t.Errorf("%s: %v", c.body, codes)
			}
			continue
		}
		if !strings.Contains(strings.Join(codes, "\n"), string(c.code)+":") {
			t.Errorf("%s: got %v, want %s", c.body, codes, c.code)
		}
	}
}

// TestSignalWhereNot: signal runs only as a task's own handler.
func TestSignalWhereNot(t *testing.T) {
	for _, src := range []string{
		"workflow w {\n  task a {\n    for_each x in [1, 2]\n    run \"signal\"\n    with { name = \"s\" }\n  }\n}\n",
		"workflow w {\n  task a {\n    run \"noop\"\n    compensate { run \"signal\"  with { name = \"s\" } }\n  }\n}\n",
		"workflow w {\n  task a { run \"noop\" }\n  finally { run \"signal\"  with { name = \"s\" } }\n}\n",
	} {
		res := Compile("w.wf", []byte(src), Config{})
		found := false
		for _, d := range res.Diags {
			if d.Code == diag.BadValue && strings.Contains(d.Message, "handler \"signal\" cannot run") {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: %v", src, res.Diags)
		}
	}
}

package compiler

import (
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
		wantErrorCode(t, c.body, src, c.code)
	}
}

// TestSignalWhereNot: signal runs only as a task's own handler.
func TestSignalWhereNot(t *testing.T) {
	for _, src := range []string{
		"workflow w {\n  task a {\n    for_each x in [1, 2]\n    run \"signal\"\n    with { name = \"s\" }\n  }\n}\n",
		"workflow w {\n  task a {\n    run \"noop\"\n    compensate { run \"signal\"  with { name = \"s\" } }\n  }\n}\n",
		"workflow w {\n  task a { run \"noop\" }\n  finally { run \"signal\"  with { name = \"s\" } }\n}\n",
	} {
		wantDiag(t, src, diag.BadValue, "handler \"signal\" cannot run")
	}
}

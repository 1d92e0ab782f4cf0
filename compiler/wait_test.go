package compiler

import (
	"testing"

	"github.com/wfc-lang/wfc/lang/diag"
)

// TestWaitConfig: the built-in wait takes exactly one of for and until.
func TestWaitConfig(t *testing.T) {
	cases := []struct {
		with string
		code diag.Code // "" for no error
	}{
		{`with { for = "336h" }`, ""},
		{`with { for = duration("1s") }`, ""},
		{`with { until = "2026-12-01T09:00:00Z" }`, ""},
		{`with { until = a.output.until }`, ""},
		{``, diag.MissingConfig},
		{`with { }`, diag.MissingConfig},
		{`with { for = "1s"  until = "2026-12-01T09:00:00Z" }`, diag.BadValue},
		{`with { for = 3 }`, diag.ConfigType},
		{`with { until = 3 }`, diag.ConfigType},
		{`with { at = "1s" }`, diag.UnknownConfig},
	}
	for _, c := range cases {
		src := "workflow w {\n  task a { run \"wait\" with { for = \"1s\" } }\n  task b after a { run \"wait\" " + c.with + " }\n}\n"
		wantErrorCode(t, c.with, src, c.code)
	}
}

// TestWaitWhereNot: wait runs only as a task's own handler.
func TestWaitWhereNot(t *testing.T) {
	for _, src := range []string{
		"workflow w {\n  task a {\n    for_each x in [1, 2]\n    run \"wait\"\n    with { for = \"1s\" }\n  }\n}\n",
		"workflow w {\n  task a {\n    run \"noop\"\n    compensate { run \"wait\" }\n  }\n}\n",
		"workflow w {\n  task a { run \"noop\" }\n  finally { run \"wait\"  with { for = \"1s\" } }\n}\n",
	} {
		wantDiag(t, src, diag.BadValue, "the runtime parks only a task's own execution")
	}
}

package cellib

import (
	"testing"

	"github.com/google/cel-go/cel"
)

func TestLimitURLFunctions(t *testing.T) {
	env, err := cel.NewEnv(append(Options(), cel.Variable("s", cel.StringType))...)
	if err != nil {
		t.Fatal(err)
	}
	for src, want := range map[string]string{
		`url.pathEscape(s)`:                "a%2Fb%20c%3F&=%C3%A9",
		`url.queryEscape(s)`:               "a%2Fb+c%3F%26%3D%C3%A9",
		`"https://x/" + url.pathEscape(s)`: "https://x/a%2Fb%20c%3F&=%C3%A9",
		`s.upperAscii()`:                   "A/B C?&=é", // the strings extension is there too
	} {
		ast, iss := env.Compile(src)
		if iss.Err() != nil {
			t.Fatalf("%s: %v", src, iss.Err())
		}
		prg, err := env.Program(ast)
		if err != nil {
			t.Fatal(err)
		}
		out, _, err := prg.Eval(map[string]any{"s": "a/b c?&=é"})
		if err != nil || out.Value() != want {
			t.Errorf("%s = %v (%v), want %q", src, out, err, want)
		}
	}
	if _, iss := env.Compile(`url.pathEscape(1)`); iss.Err() == nil {
		t.Error("url.pathEscape(1) type-checks")
	}
}

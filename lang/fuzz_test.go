package lang

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// fuzzSeeds are the inputs of the unit tests, the golden parse inputs, and
// any .wf file under ../testdata/golden.
func fuzzSeeds(f *testing.F) {
	f.Add(leadWF)
	for _, s := range []string{
		"", "workflow", "workflow w {", "workflow w { task a { run",
		`workflow w { task a { when (a } task b { run "x" } }`,
		`workflow w { task a { run "x" } } }`,
		"\xef\xbb\xbfworkflow w {\r\n task a { run \"x\" }\r\n}",
		"workflow w { task a { prompt \"{{ a }\" } }",
		"workflow w { task a { with { x = '''a\n{{ b }}''' } } }",
		"/* unterminated", "\"unterminated", "a\x00b\xff",
	} {
		f.Add(s)
	}
	var files []string
	for _, pat := range []string{"testdata/parse/*.wf", "../testdata/golden/*.wf", "../testdata/golden/*/*.wf", "../testdata/golden/*/*/*.wf"} {
		m, _ := filepath.Glob(pat)
		files = append(files, m...)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err == nil && len(b) <= 64<<10 {
			f.Add(string(b))
		}
	}
}

// FuzzParse: the parser never panics or hangs, every diagnostic and every
// node range lies inside the file (Start <= End, children inside parents),
// node ranges start and end at tokens, line:col agree with offsets,
// messages name no grammar internals, and the fast path gives exactly what
// participle alone gives.
//
//	go test ./lang -run '^$' -fuzz FuzzParse -fuzztime 3m
func FuzzParse(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, src string) {
		start := time.Now()
		file, _, diags := ParseString("fuzz.wf", src)
		// Linear-ish: even pathological inputs of a fuzzer's size parse
		// fast. A slow parse is timed again, so that a pause of the machine
		// (the fuzzer's workers share it) is not taken for a hang.
		limit := time.Second + time.Duration(len(src))*20*time.Microsecond
		if d := time.Since(start); d > limit {
			start = time.Now()
			ParseString("fuzz.wf", src)
			if d2 := time.Since(start); d2 > limit {
				t.Errorf("parse took %v and %v for %d bytes", d, d2, len(src))
			}
		}
		for _, p := range treeProblems(src, file, diags, true) {
			t.Error(p)
		}
		// The fast path never changes the result.
		if msg := fastDisagrees(src); msg != "" {
			t.Error(msg)
		}
	})
}

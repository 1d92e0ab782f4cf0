package lang

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wfc-lang/wfc/lang/gen"
	"github.com/wfc-lang/wfc/lang/source"
)

// TestFastPathAgrees: the fast path gives exactly participle's tree and
// diagnostics on the test inputs and generated workflows, and it does take
// the inputs that parse.
func TestFastPathAgrees(t *testing.T) {
	var inputs []string
	files, _ := filepath.Glob("testdata/parse/*.wf")
	for _, name := range files {
		b, _ := os.ReadFile(name)
		inputs = append(inputs, string(b))
	}
	for _, shape := range gen.Shapes {
		inputs = append(inputs, gen.Workflow(shape, 50, 2))
	}
	inputs = append(inputs,
		`workflow w { task a { with => b } }`,                            // with as a goto key
		`workflow w { task a { for_each x in y parallel { run "x" } } }`, // parallel block
		`workflow w { handler x }`,                                       // handler as a setting
		`workflow w { input x }`,                                         // input as a setting
		`workflow w { handler x { } }`,                                   // handler as a node kind
		`workflow w { task a { routes a, } }`,
		`workflow w { task a { approvers [1, 2,] x [] y [-1, "s", [z]] } }`,
		`workflow w { human a { escalate_to ["x", 'y',] escalate_after 1h } human b { escalate_to input.x + ["y"] } human c { escalate_to [] } }`,
		`workflow w { agent a { routes b, c  max_routes 2  tools [execute_pipeline, search_tools,]  max_tool_calls 5  max_tokens 4000 } }`,
		`workflow w { input { a: map<string, list<{ b?: int }>> = {} } }`,
		`workflow w { task a after b, c join any { branch { when x => a, b; else => c } } }`,
		`workflow w { task a { when x > 1; timeout -5 } }`,
	)
	for _, src := range inputs {
		if msg := fastDisagrees(src); msg != "" {
			t.Error(msg)
		}
	}
	// The fast path must not give up on valid input.
	for _, src := range inputs[:len(files)+len(gen.Shapes)] {
		toks := scan(source.NewFile("t.wf", []byte(src)), nil).toks
		if _, ok := (&fastParser{toks: toks}).file(); !ok && !strings.Contains(src, "err_") {
			if _, _, d := ParseString("t.wf", src); !d.HasErrors() {
				t.Errorf("fast path gave up on valid input:\n%s", src)
			}
		}
	}
}

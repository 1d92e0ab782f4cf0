package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/wfc-lang/wfc/compiler"
	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/runtime/bench"
)

// The benchmark embeds the IR of its workflows (the runtime does not import
// the compiler); this keeps that IR equal to what `go generate` in
// runtime/bench builds from the sources today.
func TestBenchWorkflowsUpToDate(t *testing.T) {
	dir := filepath.Join("..", "..", "runtime", "bench")
	for _, shape := range bench.Shapes {
		name := "workflows/" + shape + ".wf"
		src, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		res := compiler.Compile(name, src, compiler.Config{})
		if res.IR == nil {
			t.Fatalf("%s does not compile: %v", name, res.Diags)
		}
		want, err := ir.Marshal(res.IR)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(dir, "workflows", shape+".ir.json"))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("workflows/%s.ir.json is stale: run go generate in runtime/bench", shape)
		}
	}
}

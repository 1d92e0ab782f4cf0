package compiler

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// celChain is a chain of n cel tasks, each with an expression that has a
// constant part to fold; with reads, each also reads the task before it.
func celChain(n int, reads bool) []byte {
	var b strings.Builder
	b.WriteString("workflow many {\n  input { n: int }\n")
	for i := range n {
		after, prev := "", "0"
		if i > 0 {
			after = fmt.Sprintf("after t%d ", i-1)
			if reads {
				prev = fmt.Sprintf("size(t%d.output.x)", i-1)
			}
		}
		fmt.Fprintf(&b, "  task t%d %s{ run \"cel\" with { x = input.n + %d * 2 + %s > 3 ? \"a\" : \"b\" } }\n", i, after, i, prev)
	}
	b.WriteString("}\n")
	return []byte(b.String())
}

// Constant folding evaluated each expression with every node declared as
// an unknown variable: O(nodes) per expression, 100 KiB per node at 9,990
// nodes (1.3 GiB). It must cost about the same per node at any size: the
// allocations of building 2,000 nodes are about four times those of 500
// (they were about eight times).
func TestLimitFoldLinear(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles 2,500 nodes twice")
	}
	for _, reads := range []bool{false, true} {
		allocs := func(n int) float64 {
			src := celChain(n, reads)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			r := Compile("m.wf", src, Config{})
			runtime.ReadMemStats(&after)
			if r.IR == nil {
				t.Fatalf("%d nodes: %v", n, r.Diags)
			}
			return float64(after.TotalAlloc - before.TotalAlloc)
		}
		small, big := allocs(500), allocs(2000)
		if r := big / small; r > 5 {
			t.Errorf("reads %v: %.0f MB allocated for 2,000 nodes, %.0f MB for 500: ratio %.1f, want about 4", reads, big/1e6, small/1e6, r)
		} else if testing.Verbose() {
			t.Logf("reads %v: %.0f MB allocated for 2,000 nodes, %.0f MB for 500: ratio %.1f", reads, big/1e6, small/1e6, r)
		}
	}
}

// Folding still folds: the constant part of an expression that reads a
// node and the input is replaced by its value.
func TestLimitFoldStillFolds(t *testing.T) {
	r := Compile("m.wf", celChain(3, true), Config{})
	if r.IR == nil {
		t.Fatalf("%v", r.Diags)
	}
	got := ""
	for _, n := range r.IR.Nodes {
		if n.ID == "t2" {
			for _, v := range n.With {
				if v.Value.Expr != nil {
					got = v.Value.Expr.CEL
				}
			}
		}
	}
	if want := `(input.n + 4 + size(t1.output.x) > 3) ? "a" : "b"`; got != want {
		t.Errorf("t2's expression is %q, want %q", got, want)
	}
}

// BenchmarkLimitBuild compiles the 9,990-node chain of cel tasks of the
// process-level limits suite, as wfc check does (no folding) and as wfc
// build does; with reads, each expression also reads the node before.
func BenchmarkLimitBuild(b *testing.B) {
	for _, reads := range []bool{false, true} {
		src := celChain(9990, reads)
		for _, c := range []struct {
			name string
			cfg  Config
		}{{"check", Config{NoOptimize: true}}, {"build", Config{}}} {
			b.Run(fmt.Sprintf("reads=%v/%s", reads, c.name), func(b *testing.B) {
				b.ReportAllocs()
				cpu := cpuNanos()
				for b.Loop() {
					Compile("m.wf", src, c.cfg)
				}
				b.ReportMetric(float64(cpuNanos()-cpu)/float64(b.N)/1e6, "cpu-ms/op")
			})
		}
	}
}

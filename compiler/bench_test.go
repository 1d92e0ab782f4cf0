package compiler

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/wfc-lang/wfc/lang/diag"
	"github.com/wfc-lang/wfc/lang/gen"
)

// BenchmarkCompile compiles generated workflows of 100, 1,000 and 10,000
// nodes in three shapes; ns/node and lines/s make sizes comparable.
func BenchmarkCompile(b *testing.B) {
	for _, shape := range gen.Shapes {
		for _, n := range []int{100, 1000, 10000} {
			src := []byte(gen.Workflow(shape, n, 1))
			lines := strings.Count(string(src), "\n")
			// The 10,000-wide fan-out declares max_fanout (lang/gen does).
			cfg := Config{}
			b.Run(fmt.Sprintf("%s/%d", shape, n), func(b *testing.B) {
				if r := Compile("bench.wf", src, cfg); r.Diags.HasErrors() {
					for _, d := range r.Diags {
						if d.Severity == diag.Error {
							b.Fatalf("generated workflow does not compile: %v", d)
						}
					}
				}
				b.ReportAllocs()
				b.ResetTimer()
				cpu := cpuNanos()
				for i := 0; i < b.N; i++ {
					Compile("bench.wf", src, cfg)
				}
				cpu = cpuNanos() - cpu
				b.StopTimer()
				// CPU time (GC included) is steadier than wall time on a
				// shared machine; the compiler is single-threaded.
				b.ReportMetric(float64(cpu)/float64(b.N)/1e6, "cpu-ms/op")
				per := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
				b.ReportMetric(per/float64(n), "ns/node")
				b.ReportMetric(float64(lines)/(per/1e9), "lines/s")
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				b.ReportMetric(float64(ms.HeapSys)/(1<<20), "heapMiB")
			})
		}
	}
}

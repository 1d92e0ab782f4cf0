package lang

import (
	"fmt"
	goparser "go/parser"
	"go/token"
	"strings"
	"sync"
	"testing"

	"github.com/wfc-lang/wfc/lang/gen"
	"github.com/wfc-lang/wfc/lang/source"
)

// BenchmarkParse parses generated workflows of 100, 1,000 and 10,000 nodes
// in three shapes, and, for each, a generated Go file with the same number
// of lines with go/parser (ParseComments). Metrics: lines/s of both, and in
// the .wf benchmark "%go" = its lines/s as a percentage of go/parser's on
// the file of the same length (measured just before it), ns/node, ns/line.
// The same figures from process CPU time (user+system, GC included) are
// reported as cpu-ns/op, cpu-lines/s and %go-cpu: on a machine shared with
// other work they are much steadier than wall time.
//
//	go test ./lang -run '^$' -bench BenchmarkParse -benchmem
func BenchmarkParse(b *testing.B) {
	for _, shape := range gen.Shapes {
		for _, n := range []int{100, 1000, 10000} {
			src := sync.OnceValue(func() string { return gen.Workflow(shape, n, 1) })
			lines := func() int { return strings.Count(src(), "\n") }
			goSrc := sync.OnceValue(func() string { return gen.GoFile(lines(), 1) })
			var goRate, goCPURate float64
			b.Run(fmt.Sprintf("%s/%d/go", shape, n), func(b *testing.B) {
				src := goSrc()
				goLines := strings.Count(src, "\n")
				b.SetBytes(int64(len(src)))
				b.ReportAllocs()
				cpu := cpuNanos()
				for b.Loop() {
					if _, err := goparser.ParseFile(token.NewFileSet(), "gen.go", src, goparser.ParseComments); err != nil {
						b.Fatal(err)
					}
				}
				cpu = cpuNanos() - cpu
				goRate = float64(goLines) * float64(b.N) / b.Elapsed().Seconds()
				goCPURate = float64(goLines) * float64(b.N) / (float64(cpu) / 1e9)
				b.ReportMetric(goRate, "lines/s")
				b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
				b.ReportMetric(goCPURate, "cpu-lines/s")
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(goLines), "ns/line")
			})
			b.Run(fmt.Sprintf("%s/%d/wf", shape, n), func(b *testing.B) {
				src, lines := src(), lines()
				b.SetBytes(int64(len(src)))
				b.ReportAllocs()
				cpu := cpuNanos()
				for b.Loop() {
					if _, _, diags := ParseString("gen.wf", src); len(diags) > 0 {
						b.Fatal(diags[0].Error())
					}
				}
				cpu = cpuNanos() - cpu
				cpuRate := float64(lines) * float64(b.N) / (float64(cpu) / 1e9)
				b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
				b.ReportMetric(cpuRate, "cpu-lines/s")
				if goCPURate > 0 {
					b.ReportMetric(100*cpuRate/goCPURate, "%go-cpu")
				}
				rate := float64(lines) * float64(b.N) / b.Elapsed().Seconds()
				b.ReportMetric(rate, "lines/s")
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(lines), "ns/line")
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/node")
				if goRate > 0 {
					b.ReportMetric(100*rate/goRate, "%go")
				}
			})
		}
	}
}

// withError returns the dag workflow of n nodes with a syntax error in its
// middle node (a setting without its value), which sends the parse down the
// participle path and its recovery.
func withError(n int) string {
	src := gen.Workflow("dag", n, 1)
	mid := fmt.Sprintf("  task n%d ", n/2)
	i := strings.Index(src, mid)
	if i < 0 {
		mid = fmt.Sprintf("  agent n%d ", n/2)
		i = strings.Index(src, mid)
	}
	j := i + strings.Index(src[i:], "{\n") + 2
	return src[:j] + "    timeout\n" + src[j:]
}

// BenchmarkParseError measures a file with one syntax error: the fast path
// gives up and participle parses the file, then recovery re-parses the
// broken workflow item by item.
func BenchmarkParseError(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("dag/%d", n), func(b *testing.B) {
			src := withError(n)
			lines := strings.Count(src, "\n")
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			cpu := cpuNanos()
			for b.Loop() {
				if _, _, diags := ParseString("gen.wf", src); len(diags) != 1 {
					b.Fatalf("diagnostics: %v", diags)
				}
			}
			cpu = cpuNanos() - cpu
			b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(lines)*float64(b.N)/(float64(cpu)/1e9), "cpu-lines/s")
			b.ReportMetric(float64(lines)*float64(b.N)/b.Elapsed().Seconds(), "lines/s")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/node")
		})
	}
}

// TestParseScalesLinearly compares the allocations (a deterministic stand-in
// for time) of parsing 1,000 and 10,000 nodes, on the fast path and on the
// error path: ten times the nodes must cost about ten times as much.
func TestParseScalesLinearly(t *testing.T) {
	if testing.Short() {
		t.Skip("parses 10,000-node files")
	}
	allocs := func(src string) float64 {
		return testing.AllocsPerRun(2, func() { ParseString("gen.wf", src) })
	}
	for _, c := range []struct {
		name       string
		small, big string
	}{
		{"chain", gen.Workflow("chain", 1000, 1), gen.Workflow("chain", 10000, 1)},
		{"fanout", gen.Workflow("fanout", 1000, 1), gen.Workflow("fanout", 10000, 1)},
		{"dag", gen.Workflow("dag", 1000, 1), gen.Workflow("dag", 10000, 1)},
		{"error", withError(1000), withError(10000)},
	} {
		small, big := allocs(c.small), allocs(c.big)
		bytes := float64(len(c.big)) / float64(len(c.small))
		if r := big / small; r > 1.25*bytes || r < 0.75*bytes {
			t.Errorf("%s: %.0f allocations for 10,000 nodes, %.0f for 1,000: ratio %.1f, file sizes ratio %.1f", c.name, big, small, r, bytes)
		}
	}
}

// BenchmarkParseParticiple parses the dag workflows with participle alone
// (no fast path), the parser as it was before the fast path; for comparison.
func BenchmarkParseParticiple(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("dag/%d", n), func(b *testing.B) {
			src := gen.Workflow("dag", n, 1)
			lines := strings.Count(src, "\n")
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			cpu := cpuNanos()
			for b.Loop() {
				if _, diags := parseFile(source.NewFile("gen.wf", []byte(src)), false); len(diags) > 0 {
					b.Fatal(diags[0].Error())
				}
			}
			cpu = cpuNanos() - cpu
			b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(lines)*float64(b.N)/(float64(cpu)/1e9), "cpu-lines/s")
			b.ReportMetric(float64(lines)*float64(b.N)/b.Elapsed().Seconds(), "lines/s")
		})
	}
}

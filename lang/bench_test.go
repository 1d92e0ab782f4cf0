package lang

import (
	"fmt"
	goparser "go/parser"
	"go/token"
	"strings"
	"testing"

	"github.com/wfc-lang/wfc/lang/gen"
)

// BenchmarkParse parses generated workflows of 100, 1,000 and 10,000 nodes
// in three shapes, and, for each, a generated Go file with the same number
// of lines with go/parser (ParseComments). Metrics: lines/s of both, and in
// the .wf benchmark "%go" = its lines/s as a percentage of go/parser's on
// the file of the same length (measured just before it), ns/node, ns/line.
//
//	go test ./lang -run '^$' -bench BenchmarkParse -benchmem
func BenchmarkParse(b *testing.B) {
	for _, shape := range gen.Shapes {
		for _, n := range []int{100, 1000, 10000} {
			src := gen.Workflow(shape, n, 1)
			lines := strings.Count(src, "\n")
			goSrc := gen.GoFile(lines, 1)
			goLines := strings.Count(goSrc, "\n")
			var goRate float64
			b.Run(fmt.Sprintf("%s/%d/go", shape, n), func(b *testing.B) {
				b.SetBytes(int64(len(goSrc)))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := goparser.ParseFile(token.NewFileSet(), "gen.go", goSrc, goparser.ParseComments); err != nil {
						b.Fatal(err)
					}
				}
				goRate = float64(goLines) * float64(b.N) / b.Elapsed().Seconds()
				b.ReportMetric(goRate, "lines/s")
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(goLines), "ns/line")
			})
			b.Run(fmt.Sprintf("%s/%d/wf", shape, n), func(b *testing.B) {
				b.SetBytes(int64(len(src)))
				b.ReportAllocs()
				for b.Loop() {
					if _, _, diags := ParseString("gen.wf", src); len(diags) > 0 {
						b.Fatal(diags[0].Error())
					}
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

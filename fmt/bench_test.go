package format

import (
	"fmt"
	goformat "go/format"
	"strings"
	"testing"

	"github.com/wfc-lang/wfc/lang"
	"github.com/wfc-lang/wfc/lang/gen"
)

// genLines returns a generated "dag" workflow of about lines lines (the
// smallest node count that reaches it).
func genLines(lines int) string {
	n := lines / 5
	for {
		src := gen.Workflow("dag", n, 1)
		if strings.Count(src, "\n") >= lines {
			return src
		}
		n += max(1, (lines-strings.Count(src, "\n"))/6)
	}
}

// BenchmarkFormat formats generated workflows of about 1,000 and 5,000
// lines with Source (parse, print, and the re-parse that checks the
// output), and, in the same run, a generated Go file of the same number of
// lines with go/format.Source (gofmt's parse and print). Metrics: lines/s
// of both in wall time and in process CPU time (steadier on a busy
// machine), and in the wf benchmarks "%gofmt" and "%gofmt-cpu", its rates as
// a percentage of gofmt's on the file of the same length, measured just
// before it.
//
//	go test ./fmt -run '^$' -bench BenchmarkFormat -benchmem
func BenchmarkFormat(b *testing.B) {
	for _, size := range []int{1000, 5000} {
		src := genLines(size)
		lines := strings.Count(src, "\n")
		goSrc := gen.GoFile(lines, 1)
		var goRate, goCPURate float64
		b.Run(fmt.Sprintf("%d/gofmt", size), func(b *testing.B) {
			in := []byte(goSrc)
			goLines := strings.Count(goSrc, "\n")
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			cpu := cpuNanos()
			for b.Loop() {
				if _, err := goformat.Source(in); err != nil {
					b.Fatal(err)
				}
			}
			cpu = cpuNanos() - cpu
			goRate = float64(goLines) * float64(b.N) / b.Elapsed().Seconds()
			b.ReportMetric(goRate, "lines/s")
			if cpu > 0 {
				goCPURate = float64(goLines) * float64(b.N) / (float64(cpu) / 1e9)
				b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
				b.ReportMetric(goCPURate, "cpu-lines/s")
			}
		})
		b.Run(fmt.Sprintf("%d/wf", size), func(b *testing.B) {
			in := []byte(src)
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			cpu := cpuNanos()
			for b.Loop() {
				if _, _, err := Source("gen.wf", in); err != nil {
					b.Fatal(err)
				}
			}
			cpu = cpuNanos() - cpu
			rate := float64(lines) * float64(b.N) / b.Elapsed().Seconds()
			b.ReportMetric(rate, "lines/s")
			if goRate > 0 {
				b.ReportMetric(100*rate/goRate, "%gofmt")
			}
			if cpu > 0 {
				cpuRate := float64(lines) * float64(b.N) / (float64(cpu) / 1e9)
				b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
				b.ReportMetric(cpuRate, "cpu-lines/s")
				if goCPURate > 0 {
					b.ReportMetric(100*cpuRate/goCPURate, "%gofmt-cpu")
				}
			}
		})
	}
}

// BenchmarkPrint measures the printer alone (File on a parsed tree) on the
// generated workflow of about 5,000 lines.
func BenchmarkPrint(b *testing.B) {
	src := []byte(genLines(5000))
	f, _, _ := lang.ParseString("gen.wf", string(src))
	lines := strings.Count(string(src), "\n")
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		File(f, src)
	}
	b.ReportMetric(float64(lines)*float64(b.N)/b.Elapsed().Seconds(), "lines/s")
}

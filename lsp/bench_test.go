package lsp

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	protocol "github.com/tliron/glsp/protocol_3_16"

	"github.com/wfc-lang/wfc/lang/gen"
	"github.com/wfc-lang/wfc/lang/source"
)

// The latency benchmarks drive an in-process server over JSON-RPC (pipes,
// framing and JSON included) on generated workflows of about 1,000 and
// 5,000 lines, and report the 50th and 99th percentiles of the per-request
// wall time, and the process CPU time per operation (steadier on a busy
// machine). Run them with enough iterations for a p99:
//
//	go test ./lsp -run '^$' -bench . -benchtime 200x

// genLines returns a generated "dag" workflow of at least lines lines.
func genLines(lines int) string {
	n := lines / 5
	for {
		src := gen.Workflow("dag", n, 1)
		if strings.Count(src, "\n") >= lines {
			return src
		}
		n += max(1, n/20)
	}
}

var benchSizes = []int{1000, 5000}

// latencies records one duration per iteration and reports percentiles.
type latencies struct {
	b   *testing.B
	d   []time.Duration
	cpu int64
}

func newLatencies(b *testing.B) *latencies {
	b.ResetTimer()
	return &latencies{b: b, cpu: cpuNanos()}
}

func (l *latencies) add(d time.Duration) { l.d = append(l.d, d) }

func (l *latencies) report() {
	cpu := cpuNanos() - l.cpu
	l.b.StopTimer()
	slices.Sort(l.d)
	pct := func(p float64) float64 {
		if len(l.d) == 0 {
			return 0
		}
		i := int(math.Ceil(p*float64(len(l.d)))) - 1
		return float64(l.d[max(0, min(i, len(l.d)-1))].Microseconds()) / 1000
	}
	l.b.ReportMetric(pct(0.50), "p50-ms")
	l.b.ReportMetric(pct(0.99), "p99-ms")
	l.b.ReportMetric(float64(cpu)/float64(l.b.N)/1e6, "cpu-ms/op")
}

func benchClient(b *testing.B, opts Options, src string) (*testClient, string) {
	c := newTestClient(b, opts, nil)
	c.initialize()
	uri := "file:///bench.wf"
	c.open(uri, src)
	c.diagnostics(uri, 1)
	return c, uri
}

// BenchmarkDiagnostics: from sending a one-character change to receiving
// the diagnostics of that version, with no debounce delay (the editor adds
// Options.Debounce after the last keystroke).
func BenchmarkDiagnostics(b *testing.B) {
	for _, lines := range benchSizes {
		b.Run(fmt.Sprintf("lines=%d", lines), func(b *testing.B) {
			src := genLines(lines)
			c, uri := benchClient(b, Options{Debounce: -1}, src)
			at := NewMapper(sourceFileOf(src)).Position(strings.Index(src, "deadline 72h") + len("deadline 7"))
			l := newLatencies(b)
			for i := 0; i < b.N; i++ {
				digit := string(rune('3' + i%2))
				start := time.Now()
				c.changeRange(uri, i+2, protocol.Range{Start: at, End: protocol.Position{Line: at.Line, Character: at.Character + 1}}, digit)
				c.diagnostics(uri, i+2)
				l.add(time.Since(start))
			}
			l.report()
		})
	}
}

// BenchmarkCompletion: after each one-character edit, completion of
// `node.output.` fields in a with block. Completion parses the new text and
// takes names and types from the last compilation.
func BenchmarkCompletion(b *testing.B) {
	for _, lines := range benchSizes {
		b.Run(fmt.Sprintf("lines=%d", lines), func(b *testing.B) {
			src := genLines(lines)
			c, uri := benchClient(b, Options{Debounce: time.Hour}, src)
			m := NewMapper(sourceFileOf(src))
			k := strings.LastIndex(src, ".output.") + len(".output.")
			p := m.Position(k)
			edit := m.Position(strings.Index(src, "deadline 72h") + len("deadline 7"))
			l := newLatencies(b)
			for i := 0; i < b.N; i++ {
				c.changeRange(uri, i+2, protocol.Range{Start: edit, End: protocol.Position{Line: edit.Line, Character: edit.Character + 1}}, string(rune('3'+i%2)))
				var list struct {
					Items []completionItem `json:"items"`
				}
				start := time.Now()
				c.mustCall("textDocument/completion", tdp(uri, p), &list)
				l.add(time.Since(start))
				if len(list.Items) == 0 {
					b.Fatal("no completion items")
				}
			}
			l.report()
		})
	}
}

// BenchmarkCompletionScope: after each one-character edit, completion of
// the names an expression of the last nodes may start with: inputs, the
// node's ancestors (a walk of the graph, ranked), CEL's functions.
func BenchmarkCompletionScope(b *testing.B) {
	for _, lines := range benchSizes {
		b.Run(fmt.Sprintf("lines=%d", lines), func(b *testing.B) {
			src := genLines(lines)
			c, uri := benchClient(b, Options{Debounce: time.Hour}, src)
			m := NewMapper(sourceFileOf(src))
			k := strings.LastIndex(src, ".output.")
			for k > 0 && isIdentByte(src[k-1]) {
				k--
			}
			p := m.Position(k)
			edit := m.Position(strings.Index(src, "deadline 72h") + len("deadline 7"))
			l := newLatencies(b)
			for i := 0; i < b.N; i++ {
				c.changeRange(uri, i+2, protocol.Range{Start: edit, End: protocol.Position{Line: edit.Line, Character: edit.Character + 1}}, string(rune('3'+i%2)))
				var list struct {
					Items []completionItem `json:"items"`
				}
				start := time.Now()
				c.mustCall("textDocument/completion", tdp(uri, p), &list)
				l.add(time.Since(start))
				if len(list.Items) < 10 {
					b.Fatalf("%d completion items", len(list.Items))
				}
			}
			l.report()
		})
	}
}

// BenchmarkHover and BenchmarkDefinition: requests on a node reference in
// an expression near the end of a compiled document.
func BenchmarkHover(b *testing.B) { benchPositionRequest(b, "textDocument/hover") }

func BenchmarkDefinition(b *testing.B) { benchPositionRequest(b, "textDocument/definition") }

func benchPositionRequest(b *testing.B, method string) {
	for _, lines := range benchSizes {
		b.Run(fmt.Sprintf("lines=%d", lines), func(b *testing.B) {
			src := genLines(lines)
			c, uri := benchClient(b, Options{}, src)
			k := strings.LastIndex(src, ".output.")
			for k > 0 && isIdentByte(src[k-1]) {
				k--
			}
			p := NewMapper(sourceFileOf(src)).Position(k + 1)
			l := newLatencies(b)
			for i := 0; i < b.N; i++ {
				var res any
				start := time.Now()
				c.mustCall(method, tdp(uri, p), &res)
				l.add(time.Since(start))
				if res == nil {
					b.Fatalf("%s: no result", method)
				}
			}
			l.report()
		})
	}
}

// BenchmarkFormatting formats a 5,000-line document whose indentation was
// removed (so the edit is large).
func BenchmarkFormatting(b *testing.B) {
	src := genLines(5000)
	messy := strings.ReplaceAll(src, "\n  ", "\n")
	c, uri := benchClient(b, Options{}, messy)
	l := newLatencies(b)
	for i := 0; i < b.N; i++ {
		var edits []protocol.TextEdit
		start := time.Now()
		c.mustCall("textDocument/formatting", map[string]any{"textDocument": map[string]any{"uri": uri}, "options": map[string]any{"tabSize": 2, "insertSpaces": true}}, &edits)
		l.add(time.Since(start))
		if len(edits) != 1 {
			b.Fatalf("edits = %d", len(edits))
		}
	}
	l.report()
}

// BenchmarkSemanticTokens and BenchmarkDocumentSymbols, for reference.
func BenchmarkSemanticTokens(b *testing.B) {
	benchDocRequest(b, "textDocument/semanticTokens/full")
}

func BenchmarkDocumentSymbols(b *testing.B) { benchDocRequest(b, "textDocument/documentSymbol") }

func benchDocRequest(b *testing.B, method string) {
	for _, lines := range benchSizes {
		b.Run(fmt.Sprintf("lines=%d", lines), func(b *testing.B) {
			c, uri := benchClient(b, Options{}, genLines(lines))
			l := newLatencies(b)
			for i := 0; i < b.N; i++ {
				start := time.Now()
				c.mustCall(method, map[string]any{"textDocument": map[string]any{"uri": uri}}, nil)
				l.add(time.Since(start))
			}
			l.report()
		})
	}
}

func sourceFileOf(src string) *source.File { return source.NewFile("", []byte(src)) }

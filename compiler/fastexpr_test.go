package compiler

import (
	"bytes"
	"cmp"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/lang/diag"
	"github.com/wfc-lang/wfc/lang/gen"
)

// fastExprCases are expressions around the fast paths' edges: each is put
// in a workflow where `a` and `b` are typed nodes, `b` has a loop (so
// `output` is in scope in its while) and `c` a for_each.
var fastExprCases = []string{
	"a.output.v + 3", "a.output.v+3", "a.output.v  -  0", "a.output.v * 12", "a.output.v > 42",
	"a.output.v >= 7", "a.output.v < 1", "a.output.v <= 999999999999999999", "a.output.v == 2",
	"a.output.v != 2", "a.output.v + 9999999999999999999", "a.output.v + 07", "a.output.v / 2",
	"a.output.f + 1", "a.output.f > 1", "a.output.s + 1", "a.output.s == 1", "a.output.m.k + 1",
	"a.output.d.k + 1", "a.output.o.v + 1", "a.output.o.zz + 1", "a.output.vv + 1", "a.outptu.v + 1",
	"input.limit * 2", "input.limit > 3", "input.opt + 1", "input.nope + 1", "zz.output.v + 1",
	"a.output.items + 1", "a.output.v + 1u", "a.output.v + -1", "a.output.v + 1.0", "a.output.in + 1",
	"a.output.v\t+ 1", "a.output.v +\n1", "a.output.v > 1 && a.output.v < 5", "1 + a.output.v",
	"a.output.v", "input.limit", "a.output.o.v", "a.output.m.k", "a.output", "a.output.v + 3 ",
	"0", "7", "42", "007", "-1", "123456789012345678", "1234567890123456789", "1u", "0x10", "1.0", " 5", "5 ",
}

const fastExprWorkflow = `handler "svc" {
  config { key: string  n?: any }
  output { v: int  f: number  s: string  in: int  items: list<int>  m: map<string, int>  d: map<string, any>  o: { v: int } }
}
workflow w {
  input { id: string  limit: int = 10  opt?: int }
  task a { run "svc"  with { key = input.id } }
  task b after a {
    run "svc"
    with { key = "k"  n = %[1]s }
    when %[1]s
    loop { while output.v + 1 > 2 && output.in == 3  max 5  back_to b }
  }
  task c after b {
    run "svc"
    for_each it in a.output.items
    with { key = "x"  n = it + 1 }
  }
  task d after c {
    run "svc"
    with { key = "k" n = %[1]s }
    loop { while output.v != 200  max 2  back_to d }
    branch { when output.in >= %[2]d => e  else => e }
  }
  task e after d { run "svc"  with { key = "{{ a.output.s }}" } }
  output { r = %[1]s }
}
`

// TestFastExprsAgree compiles workflows with and without the fast paths of
// fastexpr.go and requires the same diagnostics, IR, expression types,
// references and (for expressions other than plain chains, whose
// sub-expression ranges are each prefix rather than cel-go's dots) hover
// sub-expressions.
func TestFastExprsAgree(t *testing.T) {
	srcs := map[string]string{}
	for i, c := range fastExprCases {
		srcs[fmt.Sprintf("case%d %q", i, c)] = fmt.Sprintf(fastExprWorkflow, c, i)
	}
	for _, shape := range gen.Shapes {
		srcs[shape] = gen.Workflow(shape, 300, 1)
	}
	golden, _ := filepath.Glob(filepath.Join(goldenDir, "*.wf"))
	for _, path := range golden {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		srcs[filepath.Base(path)] = string(src)
	}
	for name, src := range srcs {
		t.Run(name, func(t *testing.T) {
			cfg := Config{ReadFile: func(p string) ([]byte, error) { return nil, fmt.Errorf("no imports here") }}
			if strings.HasSuffix(name, ".wf") {
				cfg.ReadFile = func(p string) ([]byte, error) { return os.ReadFile(filepath.Join(goldenDir, p)) }
			}
			for _, noOpt := range []bool{false, true} {
				cfg.NoOptimize = noOpt
				cfg.celOnly = false
				fast := describeResult(t, Compile(name, []byte(src), cfg))
				cfg.celOnly = true
				slow := describeResult(t, Compile(name, []byte(src), cfg))
				if fast != slow {
					t.Errorf("fast paths change the result (NoOptimize %v):\n--- with\n%s\n--- without\n%s", noOpt, fast, slow)
				}
			}
		})
	}
}

// describeResult renders what a compilation produced, with order-free
// parts sorted.
func describeResult(t *testing.T, r *Result) string {
	var b bytes.Buffer
	if err := diag.WriteText(&b, r.Diags, r.Files); err != nil {
		t.Fatal(err)
	}
	if r.IR != nil {
		j, err := ir.Marshal(r.IR)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(j)
	}
	var exprs []string
	for e, in := range r.Info.Exprs {
		line := fmt.Sprintf("expr %d-%d %q: %s", e.Start, e.End, e.Text, in.Type.String())
		if !isChain(e.Text) {
			subs := slices.Clone(in.Subexprs)
			slices.SortFunc(subs, func(x, y SubExpr) int {
				return cmp.Or(cmp.Compare(x.Range.Start, y.Range.Start), cmp.Compare(x.Range.End, y.Range.End), strings.Compare(x.Type, y.Type))
			})
			line += fmt.Sprint(subs)
		}
		exprs = append(exprs, line)
	}
	slices.Sort(exprs)
	refs := slices.Clone(r.Info.Refs)
	slices.SortFunc(refs, func(x, y Ref) int {
		return cmp.Or(cmp.Compare(x.Range.Start, y.Range.Start), cmp.Compare(x.Kind, y.Kind))
	})
	return b.String() + "\n" + strings.Join(exprs, "\n") + "\n" + fmt.Sprint(refs)
}

// TestSplitMatchesRegexp checks the hand-written scanners against the
// regular expressions they replace, on random strings over an alphabet
// that makes near misses likely.
func TestSplitMatchesRegexp(t *testing.T) {
	chainRE := regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$`)
	binaryRE := regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+)( *)(==|!=|<=|>=|<|>|\+|-|\*)( *)(0|[1-9][0-9]{0,17})$`)
	const alphabet = "aZ_09.. =!<>+-*/\t@[`{"
	r := rand.New(rand.NewPCG(1, 2))
	matched := 0
	for range 300000 {
		b := make([]byte, r.IntN(12))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		if r.IntN(3) == 0 {
			b = append([]byte("a.b"), b...)
		}
		if r.IntN(4) == 0 {
			b = append(b, []byte(" + 1234567890123456789"[:r.IntN(23)])...)
		}
		text := string(b)
		if got, want := isChain(text), chainRE.MatchString(text); got != want {
			t.Fatalf("isChain(%q) = %v, regexp says %v", text, got, want)
		}
		chain, opStart, opEnd, lit, ok := splitBinary(text)
		m := binaryRE.FindStringSubmatchIndex(text)
		if ok != (m != nil) {
			t.Fatalf("splitBinary(%q) ok = %v, regexp says %v", text, ok, m != nil)
		}
		if ok {
			matched++
		}
		if ok && (chain != m[3] || opStart != m[6] || opEnd != m[7] || lit != m[10]) {
			t.Fatalf("splitBinary(%q) = %d %d %d %d, regexp says %v", text, chain, opStart, opEnd, lit, m)
		}
	}
	if matched < 1000 {
		t.Errorf("only %d random strings were binary expressions: the test hardly tests", matched)
	}
	t.Logf("%d binary expressions", matched)
}

package compiler

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/lang/diag"
)

const flowChild = `workflow child {
  input { n: int }
  output { v = a.output.v }
  task a { run "cel"  with { v = input.n + 1 } }
}
`

func flowParent(nodes int) string {
	var b strings.Builder
	b.WriteString("workflow parent {\n  input { n: int }\n")
	for i := range nodes {
		fmt.Fprintf(&b, "  flow f%d { uses \"lib/child.wf\"  with { n = input.n } }\n", i)
	}
	b.WriteString("}\n")
	return b.String()
}

func mustCompile(t *testing.T, path string, cfg Config) *Result {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r := Compile(path, src, cfg)
	if r.Diags.HasErrors() {
		t.Fatalf("%s: %v", path, r.Diags)
	}
	return r
}

// TestFlowChildEmbedded: the built IR holds the compiled child, so changing
// or removing the child's file after the build changes nothing in it, and
// validating or decoding it reads no file. Rebuilding picks up the change,
// in the child's hash and so in the parent's.
func TestFlowChildEmbedded(t *testing.T) {
	dir := t.TempDir()
	childPath := filepath.Join(dir, "lib", "child.wf")
	parentPath := filepath.Join(dir, "parent.wf")
	if err := os.MkdirAll(filepath.Dir(childPath), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(childPath, []byte(flowChild), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(parentPath, []byte(flowParent(1)), 0o644); err != nil {
		t.Fatal(err)
	}
	r := mustCompile(t, parentPath, Config{})
	built, err := ir.Marshal(r.IR)
	if err != nil {
		t.Fatal(err)
	}
	hash, _ := ir.Hash(r.IR)
	if len(r.IR.Children) != 1 || r.IR.Nodes[0].Flow.Hash != r.IR.Children[0].Hash {
		t.Fatalf("want the child embedded once, under the hash the flow node references; got %d children", len(r.IR.Children))
	}
	if c := r.IR.Children[0].Workflow; c.Name != "child" || c.Node("a") == nil {
		t.Fatalf("embedded child is not the compiled child.wf: %+v", c)
	}

	// Change the child, then remove it: the built IR stands on its own.
	changed := strings.Replace(flowChild, "input.n + 1", "input.n + 2", 1)
	if err := os.WriteFile(childPath, []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	again, err := ir.Marshal(r.IR)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(built, again) {
		t.Errorf("the built IR changed with the child's file")
	}
	if err := os.Remove(childPath); err != nil {
		t.Fatal(err)
	}
	w, err := ir.Decode(built)
	if err != nil {
		t.Fatalf("decoding the built IR without the child's file: %v", err)
	}
	if ps := ir.Validate(w); len(ps) > 0 {
		t.Fatalf("validating the built IR without the child's file: %v", ir.Problems(ps))
	}
	if h, _ := ir.Hash(w); h != hash {
		t.Errorf("hash changed across Marshal/Decode: %s, %s", hash, h)
	}
	if got := w.Children[0].Workflow.Node("a").With[0].Value.Expr.CEL; got != "input.n + 1" {
		t.Errorf("embedded child: a.with.v = %q, want the child as it was at build time", got)
	}

	// A rebuild embeds the changed child: new child hash, new parent hash.
	if err := os.WriteFile(childPath, []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	r2 := mustCompile(t, parentPath, Config{})
	if r2.IR.Children[0].Hash == r.IR.Children[0].Hash {
		t.Errorf("the changed child kept its hash")
	}
	if h2, _ := ir.Hash(r2.IR); h2 == hash {
		t.Errorf("the parent's hash did not change with its child")
	}
}

// TestFlowChildEmbeddedOnce: many flow nodes running the same child embed
// it once, so the IR grows by a flow node per node, not by a child.
func TestFlowChildEmbeddedOnce(t *testing.T) {
	var big strings.Builder
	big.WriteString("workflow child {\n  input { n: int }\n  output { v = t0.output.v }\n")
	for i := range 50 {
		fmt.Fprintf(&big, "  task t%d { run \"cel\"  with { v = input.n + %d } }\n", i, i)
	}
	big.WriteString("}\n")
	files := map[string]string{"lib/child.wf": big.String()}
	read := func(p string) ([]byte, error) {
		if s, ok := files[p]; ok {
			return []byte(s), nil
		}
		return nil, os.ErrNotExist
	}
	size := func(nodes int) int {
		r := Compile("parent.wf", []byte(flowParent(nodes)), Config{ReadFile: read})
		if r.Diags.HasErrors() {
			t.Fatal(r.Diags)
		}
		if len(r.IR.Children) != 1 {
			t.Fatalf("%d flow nodes: %d children, want 1", nodes, len(r.IR.Children))
		}
		b, err := ir.Marshal(r.IR)
		if err != nil {
			t.Fatal(err)
		}
		return len(b)
	}
	one, many := size(1), size(200)
	c := Compile("lib/child.wf", []byte(files["lib/child.wf"]), Config{})
	child, err := ir.Marshal(c.IR)
	if err != nil {
		t.Fatal(err)
	}
	perNode := (many - one) / 199
	if perNode > 2000 || perNode > len(child)/10 {
		t.Errorf("each flow node adds %d bytes of IR (1 node: %d bytes, 200: %d; the child: %d): is the child embedded per node?", perNode, one, many, len(child))
	}
	t.Logf("IR of 1 flow node: %d bytes, of 200: %d; the child alone: %d", one, many, len(child))
}

// TestFlowDepthLimit: flows nested MaxImportDepth deep compile into IR
// that ir.Validate accepts (ir.MaxFlowDepth is the same limit); one more
// level is WF1011.
func TestFlowDepthLimit(t *testing.T) {
	if ir.MaxFlowDepth != MaxImportDepth {
		t.Fatalf("ir.MaxFlowDepth %d, compiler MaxImportDepth %d", ir.MaxFlowDepth, MaxImportDepth)
	}
	files := map[string]string{}
	// c1 runs c2 ... runs c(n), which runs nothing.
	mk := func(n int) {
		clear(files)
		for i := 1; i <= n; i++ {
			src := fmt.Sprintf("workflow c%d { task a { run \"noop\" } }\n", i)
			if i < n {
				src = fmt.Sprintf("workflow c%d { flow a { uses \"c%d.wf\" } }\n", i, i+1)
			}
			files[fmt.Sprintf("c%d.wf", i)] = src
		}
	}
	read := func(p string) ([]byte, error) {
		if s, ok := files[p]; ok {
			return []byte(s), nil
		}
		return nil, os.ErrNotExist
	}
	main := []byte("workflow root { flow a { uses \"c1.wf\" } }\n")
	mk(MaxImportDepth)
	r := Compile("root.wf", main, Config{ReadFile: read})
	if r.Diags.HasErrors() {
		t.Fatalf("%d nested flows: %v", MaxImportDepth, r.Diags)
	}
	if len(r.IR.Children) != MaxImportDepth {
		t.Errorf("%d children, want %d", len(r.IR.Children), MaxImportDepth)
	}
	if ps := ir.Validate(r.IR); len(ps) > 0 {
		t.Errorf("%d nested flows: %v", MaxImportDepth, ir.Problems(ps))
	}
	mk(MaxImportDepth + 1)
	r = Compile("root.wf", main, Config{ReadFile: read})
	if !r.Diags.HasErrors() || r.Diags[0].Code != diag.ImportError {
		t.Errorf("%d nested flows: want WF1011, got %v", MaxImportDepth+1, r.Diags)
	}
}

// TestFlowIRTooLarge: when embedded children make the IR larger than
// ir.Decode accepts, the build fails with WF3008 instead of writing a
// document no runtime reads.
func TestFlowIRTooLarge(t *testing.T) {
	read := func(p string) ([]byte, error) { return []byte(flowChild), nil }
	r := Compile("parent.wf", []byte(flowParent(1)), Config{ReadFile: read})
	if r.Diags.HasErrors() {
		t.Fatal(r.Diags)
	}
	b, err := ir.Marshal(r.IR)
	if err != nil {
		t.Fatal(err)
	}
	defer func(old int) { maxIRSize = old }(maxIRSize)
	maxIRSize = len(b)
	if r := Compile("parent.wf", []byte(flowParent(1)), Config{ReadFile: read}); r.Diags.HasErrors() {
		t.Fatalf("at the limit: %v", r.Diags)
	}
	maxIRSize = len(b) - 1
	r = Compile("parent.wf", []byte(flowParent(1)), Config{ReadFile: read})
	if len(r.Diags) != 1 || r.Diags[0].Code != diag.TooMany || !strings.Contains(r.Diags[0].Message, "1 embedded child workflows is") {
		t.Fatalf("past the limit: want one WF3008, got %v", r.Diags)
	}
}

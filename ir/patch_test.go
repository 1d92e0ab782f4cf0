package ir

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"strings"
	"testing"
)

func TestApplyPatch(t *testing.T) {
	base := sequence()
	if err := Analyze(base); err != nil {
		t.Fatal(err)
	}
	big := `{"op":"copy","from":"/nodes","path":"/description"}`
	copies := make([]string, 0, 300)
	for range 300 {
		copies = append(copies, `{"op":"copy","from":"/handlers","path":"/handlers/-"}`)
	}
	_ = big
	tests := []struct {
		name  string
		patch string
		op    int
		path  string // the pointer the error names
		msg   string // part of the message; "" means the patch applies
	}{
		{name: "add node and edge", patch: `[
			{"op":"add","path":"/nodes/-","value":{"id":"d","type":"task","handler":"noop","join":"all"}},
			{"op":"add","path":"/edges/-","value":{"from":"c","to":"d","kind":"after"}}]`},
		{name: "test then replace", patch: `[{"op":"test","path":"/nodes/1/id","value":"b"},{"op":"replace","path":"/nodes/1/timeout_ms","value":5}]`, op: 1, path: "/nodes/1/timeout_ms", msg: "no value"},
		{name: "test fails", patch: `[{"op":"test","path":"/nodes/1/id","value":"x"}]`, op: 0, path: "/nodes/1/id", msg: "test failed"},
		{name: "unknown path", patch: `[{"op":"remove","path":"/nodes/9"}]`, op: 0, path: "/nodes/9", msg: "remove"},
		{name: "unknown field", patch: `[{"op":"add","path":"/nodes/0/colour","value":"red"}]`, op: -1, path: "/nodes/0/colour", msg: "unknown field"},
		{name: "negative index", patch: `[{"op":"remove","path":"/nodes/-1"}]`, op: 0, path: "/nodes/-1", msg: "negative index"},
		{name: "negative from", patch: `[{"op":"copy","from":"/nodes/-2","path":"/nodes/-"}]`, op: 0, path: "/nodes/-2", msg: "negative index"},
		{name: "cycle", patch: `[{"op":"add","path":"/edges/-","value":{"from":"c","to":"a","kind":"after"}}]`, op: -1, msg: "cycle"},
		{name: "dangling edge", patch: `[{"op":"remove","path":"/nodes/2"}]`, op: -1, msg: "c"},
		{name: "bad op", patch: `[{"op":"merge","path":"/name"}]`, op: 0, path: "/name", msg: "unknown op"},
		{name: "no value", patch: `[{"op":"add","path":"/name"}]`, op: 0, path: "/name", msg: "needs a \"value\""},
		{name: "not a patch", patch: `{"op":"add"}`, op: -1, msg: "JSON array"},
		{name: "huge copy", patch: "[" + strings.Join(copies, ",") + "]", msg: "copies would add more than"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := mustHash(base)
			got, err := ApplyPatch(base, []byte(tc.patch))
			if mustHash(base) != before {
				t.Fatal("ApplyPatch modified its input")
			}
			if tc.msg == "" {
				if err != nil {
					t.Fatalf("ApplyPatch: %v", err)
				}
				if ps := Validate(got); len(ps) > 0 {
					t.Fatalf("result invalid: %v", Problems(ps))
				}
				return
			}
			var pe *PatchError
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v (%T), want a *PatchError", err, err)
			}
			if !strings.Contains(pe.Error(), tc.msg) {
				t.Errorf("err = %v, want it to contain %q", err, tc.msg)
			}
			if tc.name != "huge copy" && (pe.Op != tc.op || tc.path != "" && pe.Path != tc.path) {
				t.Errorf("err at op %d path %q, want op %d path %q (%v)", pe.Op, pe.Path, tc.op, tc.path, err)
			}
		})
	}
}

func TestApplyPatchLimits(t *testing.T) {
	base := sequence()
	ops := make([]string, MaxPatchOps+1)
	for i := range ops {
		ops[i] = `{"op":"test","path":"/name","value":"sequence"}`
	}
	if _, err := ApplyPatch(base, []byte("["+strings.Join(ops, ",")+"]")); err == nil || !strings.Contains(err.Error(), "operations, over the limit") {
		t.Errorf("too many ops: err = %v", err)
	}
	huge := `[{"op":"replace","path":"/description","value":"` + strings.Repeat("x", MaxPatchBytes) + `"}]`
	if _, err := ApplyPatch(base, []byte(huge)); err == nil || !strings.Contains(err.Error(), "bytes, over the limit") {
		t.Errorf("huge patch: err = %v", err)
	}
}

// diffCases are pairs of workflows whose diff is checked both ways.
func diffCases() [][2]*Workflow {
	seq, dia := sequence(), diamond()
	withD := sequence()
	withD.Nodes = append(withD.Nodes, task("d"))
	withD.Edges = append(withD.Edges, after("b", "d"))
	middle := sequence() // a node inserted in the middle, an edge re-routed
	middle.Nodes = []Node{task("a"), task("x"), task("b"), task("c")}
	middle.Edges = []Edge{after("a", "x"), after("x", "b"), after("b", "c")}
	changed := sequence()
	changed.Nodes[1].TimeoutMS = 1000
	changed.Nodes[2].When = celp("true")
	changed.Description = "now with a description"
	reordered := sequence()
	reordered.Nodes = []Node{task("c"), task("b"), task("a")}
	return [][2]*Workflow{{seq, withD}, {withD, seq}, {seq, middle}, {middle, seq}, {seq, changed}, {changed, seq},
		{seq, dia}, {dia, seq}, {seq, reordered}, {seq, seq}}
}

func TestDiffRoundTrip(t *testing.T) {
	lead, err := os.ReadFile("testdata/lead_qualification.json")
	if err != nil {
		t.Fatal(err)
	}
	lw, err := Decode(lead)
	if err != nil {
		t.Fatal(err)
	}
	cases := diffCases()
	lw2, _ := Decode(lead)
	lw2.Nodes = lw2.Nodes[:len(lw2.Nodes)-0]
	lw2.Description = "edited"
	lw2.Nodes[0].TimeoutMS = 12345
	cases = append(cases, [2]*Workflow{lw, lw2}, [2]*Workflow{lw2, lw})
	for i, c := range cases {
		t.Run(fmt.Sprintf("%d_%s_to_%s", i, c[0].Name, c[1].Name), func(t *testing.T) {
			patch, err := Diff(c[0], c[1])
			if err != nil {
				t.Fatal(err)
			}
			got, err := ApplyPatch(c[0], patch)
			if err != nil {
				t.Fatalf("applying the diff: %v\n%s", err, patch)
			}
			if mustHash(got) != mustHash(c[1]) {
				a, _ := Canonical(got)
				b, _ := Canonical(c[1])
				t.Fatalf("diff applied gives\n%s\nwant\n%s\npatch:\n%s", a, b, patch)
			}
			var ops []PatchOp
			if err := json.Unmarshal(patch, &ops); err != nil {
				t.Fatal(err)
			}
			if mustHash(c[0]) == mustHash(c[1]) && len(ops) != 0 {
				t.Errorf("equal workflows, diff %s", patch)
			}
			// Every index-based op on a node is preceded by a test of its id.
			for k, o := range ops {
				if strings.HasPrefix(o.Path, "/nodes/") && o.Path != "/nodes/-" && o.Op != "test" && o.Op != "add" {
					if k == 0 || ops[k-1].Op != "test" && !strings.HasPrefix(ops[k-1].Path, o.Path[:strings.LastIndexByte(o.Path+"/", '/')]) {
						t.Errorf("op %d %s %s has no test before it", k, o.Op, o.Path)
					}
				}
			}
		})
	}
}

// TestDiffReadable pins the shape of a small diff: the seed's example of a
// node added after another.
func TestDiffReadable(t *testing.T) {
	old := sequence()
	nw := sequence()
	nw.Nodes = append(nw.Nodes, task("send_email"))
	nw.Edges = append(nw.Edges, after("b", "send_email"))
	patch, err := Diff(old, nw)
	if err != nil {
		t.Fatal(err)
	}
	var ops []PatchOp
	if err := json.Unmarshal(patch, &ops); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range ops {
		got = append(got, o.Op+" "+o.Path)
	}
	want := "add /nodes/-,add /edges/-"
	if strings.Join(got, ",") != want {
		t.Errorf("diff ops = %v, want %s\n%s", got, want, patch)
	}
}

// FuzzApplyPatch applies random patches (and random mutations of valid
// ones) to a workflow: never a panic, and every accepted patch gives a
// valid IR.
func FuzzApplyPatch(f *testing.F) {
	for _, c := range diffCases() {
		p, _ := Diff(c[0], c[1])
		f.Add(p, int64(0))
	}
	f.Add([]byte(`[{"op":"move","from":"/nodes/0","path":"/nodes/-"}]`), int64(1))
	f.Add([]byte(`[{"op":"copy","from":"/edges","path":"/edges/-"}]`), int64(2))
	f.Fuzz(func(t *testing.T, patch []byte, seed int64) {
		base := diamond()
		if seed%3 == 1 {
			base = sequence()
		}
		r := rand.New(rand.NewSource(seed))
		if seed%2 == 0 && len(patch) > 0 {
			patch = append([]byte(nil), patch...)
			patch[r.Intn(len(patch))] = byte(r.Intn(128))
		}
		got, err := ApplyPatch(base, patch)
		if err != nil {
			var pe *PatchError
			if !errors.As(err, &pe) {
				t.Fatalf("error %T: %v", err, err)
			}
			return
		}
		if ps := Validate(got); len(ps) > 0 {
			t.Fatalf("accepted patch gives invalid IR: %v", Problems(ps))
		}
	})
}

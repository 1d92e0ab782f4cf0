package ir

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// facts is what Analyze derives for one node.
type facts struct {
	Deps, Dependents []string
	Join             *JoinInfo
	MaySkip          bool
	Entry, Terminal  bool
	LoopBody         []string
}

type graphFacts struct {
	Entries, Terminals, Order []string
	Nodes                     map[string]facts
}

func factsOf(w *Workflow) graphFacts {
	g := graphFacts{Entries: w.Entries, Terminals: w.Terminals, Order: w.Order, Nodes: map[string]facts{}}
	for _, n := range w.Nodes {
		g.Nodes[n.ID] = facts{n.Dependencies, n.Dependents, n.JoinInfo, n.MaySkip, n.Entry, n.Terminal, n.LoopBody}
	}
	return g
}

func ids(s string) []string { return strings.Fields(s) }

func ref(from, kind string, cond bool) EdgeRef {
	return EdgeRef{From: from, Kind: kind, Conditional: cond}
}

func TestAnalyze(t *testing.T) {
	tests := []struct {
		w    *Workflow
		want graphFacts
	}{{
		sequence(),
		graphFacts{ids("a"), ids("c"), ids("a b c"), map[string]facts{
			"a": {Dependents: ids("b"), Entry: true},
			"b": {Deps: ids("a"), Dependents: ids("c")},
			"c": {Deps: ids("b"), Terminal: true},
		}},
	}, {
		diamond(),
		graphFacts{ids("a"), ids("d"), ids("a b c d"), map[string]facts{
			"a": {Dependents: ids("b c"), Entry: true},
			"b": {Deps: ids("a"), Dependents: ids("d")},
			"c": {Deps: ids("a"), Dependents: ids("d")},
			"d": {Deps: ids("b c"), Terminal: true, Join: &JoinInfo{
				Mode: JoinAll, Expect: 2, Incoming: []EdgeRef{ref("b", EdgeAfter, false), ref("c", EdgeAfter, false)},
			}},
		}},
	}, {
		tripleFanIn(),
		graphFacts{ids("a b c"), ids("send"), ids("a b c merge send"), map[string]facts{
			"a": {Dependents: ids("merge"), Entry: true},
			"b": {Dependents: ids("merge"), Entry: true},
			"c": {Dependents: ids("merge"), Entry: true},
			"merge": {Deps: ids("a b c"), Dependents: ids("send"), Join: &JoinInfo{
				Mode: JoinAll, Expect: 3,
				Incoming: []EdgeRef{ref("a", EdgeAfter, false), ref("b", EdgeAfter, false), ref("c", EdgeAfter, false)},
			}},
			"send": {Deps: ids("merge"), Terminal: true},
		}},
	}, {
		// Every branch target may be skipped, but together they cover
		// every outcome of score (two rules and an else): done always runs.
		branchJoin(),
		graphFacts{ids("start"), ids("done"), ids("start score big small other done"), map[string]facts{
			"start": {Dependents: ids("score"), Entry: true},
			"score": {Deps: ids("start"), Dependents: ids("big small other")},
			"big":   {Deps: ids("score"), Dependents: ids("done"), MaySkip: true},
			"small": {Deps: ids("score"), Dependents: ids("done"), MaySkip: true},
			"other": {Deps: ids("score"), Dependents: ids("done"), MaySkip: true},
			"done": {Deps: ids("big small other"), Terminal: true, Join: &JoinInfo{
				Mode: JoinSettled, Expect: 3, Conditional: 3, Covered: true,
				Incoming: []EdgeRef{ref("big", EdgeAfter, true), ref("small", EdgeAfter, true), ref("other", EdgeAfter, true)},
			}},
		}},
	}, {
		// Loop edges are not forward: call_api depends on fetch only. done
		// follows a loop with an exhausted path, so it may be skipped.
		loop(),
		graphFacts{ids("fetch"), ids("dlq poll"), ids("fetch call_api check done dlq poll"), map[string]facts{
			"fetch":    {Dependents: ids("call_api"), Entry: true},
			"call_api": {Deps: ids("fetch"), Dependents: ids("check")},
			"check":    {Deps: ids("call_api"), Dependents: ids("done dlq"), LoopBody: ids("call_api check")},
			"done":     {Deps: ids("check"), Dependents: ids("poll"), MaySkip: true},
			"dlq":      {Deps: ids("check"), Terminal: true, MaySkip: true},
			"poll":     {Deps: ids("done"), Terminal: true, MaySkip: true, LoopBody: ids("poll")},
		}},
	}, {
		agentRoutes(),
		graphFacts{ids("enrich"), ids("enterprise standard manual summary"), ids("enrich qualify enterprise standard manual summary"), map[string]facts{
			"enrich":     {Dependents: ids("qualify"), Entry: true},
			"qualify":    {Deps: ids("enrich"), Dependents: ids("enterprise standard manual summary")},
			"enterprise": {Deps: ids("qualify"), Terminal: true, MaySkip: true},
			"standard":   {Deps: ids("qualify"), Terminal: true, MaySkip: true},
			"manual":     {Deps: ids("qualify"), Terminal: true, MaySkip: true},
			"summary":    {Deps: ids("qualify"), Terminal: true, MaySkip: true},
		}},
	}, {
		humanReject(),
		graphFacts{ids("order"), ids("ship refund"), ids("order approve ship refund"), map[string]facts{
			"order":   {Dependents: ids("approve"), Entry: true},
			"approve": {Deps: ids("order"), Dependents: ids("ship refund")},
			"ship":    {Deps: ids("approve"), Terminal: true, MaySkip: true},
			"refund":  {Deps: ids("approve"), Terminal: true, MaySkip: true},
		}},
	}, {
		// audit joins a conditional edge (receipt may be skipped when
		// charge fails over to notify) and a plain one, so it always runs.
		onError(),
		graphFacts{ids("charge log"), ids("notify audit"), ids("charge receipt notify log audit"), map[string]facts{
			"charge":  {Dependents: ids("receipt notify"), Entry: true},
			"receipt": {Deps: ids("charge"), Dependents: ids("audit"), MaySkip: true},
			"notify":  {Deps: ids("charge"), Terminal: true, MaySkip: true},
			"log":     {Dependents: ids("audit"), Entry: true},
			"audit": {Deps: ids("receipt log"), Terminal: true, Join: &JoinInfo{
				Mode: JoinAny, Expect: 2, Conditional: 1,
				Incoming: []EdgeRef{ref("receipt", EdgeAfter, true), ref("log", EdgeAfter, false)},
			}},
		}},
	}, {
		// d joins with all: c's skip skips it.
		when(),
		graphFacts{ids("a"), ids("d"), ids("a b c d"), map[string]facts{
			"a": {Dependents: ids("b d"), Entry: true},
			"b": {Deps: ids("a"), Dependents: ids("c"), MaySkip: true},
			"c": {Deps: ids("b"), Dependents: ids("d"), MaySkip: true},
			"d": {Deps: ids("a c"), Terminal: true, MaySkip: true, Join: &JoinInfo{
				Mode: JoinAll, Expect: 2, Conditional: 1,
				Incoming: []EdgeRef{ref("a", EdgeAfter, false), ref("c", EdgeAfter, true)},
			}},
		}},
	}, {
		// The same with join settled: a's real token always arrives.
		whenSettled(),
		graphFacts{ids("a"), ids("d"), ids("a b c d"), map[string]facts{
			"a": {Dependents: ids("b d"), Entry: true},
			"b": {Deps: ids("a"), Dependents: ids("c"), MaySkip: true},
			"c": {Deps: ids("b"), Dependents: ids("d"), MaySkip: true},
			"d": {Deps: ids("a c"), Terminal: true, Join: &JoinInfo{
				Mode: JoinSettled, Expect: 2, Conditional: 1,
				Incoming: []EdgeRef{ref("a", EdgeAfter, false), ref("c", EdgeAfter, true)},
			}},
		}},
	}, {
		leadQualification(),
		graphFacts{
			ids("enrich"),
			ids("enterprise_sales standard_sales manual_review nurture_campaign"),
			ids("enrich score qualify enterprise_sales standard_sales manual_review nurture_campaign"),
			map[string]facts{
				"enrich":           {Dependents: ids("score"), Entry: true},
				"score":            {Deps: ids("enrich"), Dependents: ids("qualify nurture_campaign")},
				"qualify":          {Deps: ids("score"), Dependents: ids("enterprise_sales standard_sales manual_review"), MaySkip: true},
				"enterprise_sales": {Deps: ids("qualify"), Dependents: ids("manual_review"), MaySkip: true, Terminal: true},
				"standard_sales":   {Deps: ids("qualify"), Terminal: true, MaySkip: true},
				"manual_review": {Deps: ids("qualify enterprise_sales"), Terminal: true, MaySkip: true, Join: &JoinInfo{
					Mode: JoinAll, Expect: 2, Conditional: 2,
					Incoming: []EdgeRef{ref("qualify", EdgeDefault, true), ref("enterprise_sales", EdgeReject, true)},
				}},
				"nurture_campaign": {Deps: ids("score"), Terminal: true, MaySkip: true},
			},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.w.Name, func(t *testing.T) {
			if err := Analyze(tt.w); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, factsOf(tt.w), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Analyze (-want +got):\n%s", diff)
			}
			if ps := Validate(tt.w); len(ps) > 0 {
				t.Errorf("Validate: %v", Problems(ps))
			}
		})
	}
}

func TestAnalyzeRecomputes(t *testing.T) {
	w := diamond()
	w.Order = ids("d c b a")
	w.Terminals = ids("a")
	w.Nodes[0].JoinInfo = &JoinInfo{Mode: JoinAny, Expect: 9}
	w.Nodes[0].LoopBody = ids("x")
	w.Nodes[0].MaySkip = true
	w.Nodes[3].Dependencies = ids("zz")
	fresh := diamond()
	for _, x := range []*Workflow{w, fresh} {
		if err := Analyze(x); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff(fresh, w); diff != "" {
		t.Errorf("stale derived fields survived Analyze (-want +got):\n%s", diff)
	}
	// A second run changes nothing.
	if err := Analyze(w); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(fresh, w); diff != "" {
		t.Errorf("Analyze is not idempotent (-want +got):\n%s", diff)
	}
}

func TestAnalyzeErrors(t *testing.T) {
	tests := []struct {
		name string
		w    *Workflow
		want string
	}{
		{"nil", nil, "nil workflow"},
		{"cycle", wf("c", []Node{task("a"), task("b"), task("c"), task("d")},
			[]Edge{after("a", "b"), after("b", "c"), after("c", "d"), after("d", "b")}),
			"forward edges form a cycle: b -> c -> d -> b"},
		{"cycle through a branch", wf("c", []Node{task("a"), task("b")},
			[]Edge{after("a", "b"), edge("b", "a", EdgeBranch)}),
			"cycle: a -> b -> a"},
		{"self edge", wf("c", []Node{task("a"), task("x")}, []Edge{after("a", "x"), after("x", "x")}),
			"cycle: x -> x"},
		{"unknown target", wf("u", []Node{task("a")}, []Edge{after("a", "zz")}),
			`edge 0 (a -> zz, after) names unknown node "zz"`},
		{"unknown source", wf("u", []Node{task("a")}, []Edge{after("a", "a"), after("", "a"), after("q", "a")}),
			`edge 1 ( -> a, after) names unknown node "" (and 1 more)`},
		{"duplicate id", wf("d", []Node{task("a"), task("a")}, nil),
			`nodes 0 and 1 have the same id "a"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.w != nil {
				tt.w.Order = ids("stale")
				for i := range tt.w.Nodes {
					tt.w.Nodes[i].Dependents = ids("stale")
				}
			}
			err := Analyze(tt.w)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Analyze error = %v, want it to contain %q", err, tt.want)
			}
			if tt.w != nil {
				if tt.w.Order != nil || tt.w.Nodes[0].Dependents != nil {
					t.Errorf("derived fields not cleared after an error")
				}
			}
		})
	}
}

func TestAnalyzeEmpty(t *testing.T) {
	w := &Workflow{}
	if err := Analyze(w); err != nil {
		t.Fatal(err)
	}
	if w.Order == nil || len(w.Order) != 0 || len(w.Entries) != 0 {
		t.Errorf("empty workflow: order %v entries %v", w.Order, w.Entries)
	}
}

func TestAnalyzeDuplicateEdges(t *testing.T) {
	// Exact duplicates count once; the same pair with another kind is a
	// second arrival.
	w := wf("dup", []Node{
		task("a", func(n *Node) { n.Branch = &Branch{Rules: []Rule{{When: cel("true"), Targets: ids("b")}}} }),
		task("b"),
	}, []Edge{after("a", "b"), after("a", "b"), edge("a", "b", EdgeBranch)})
	if err := Analyze(w); err != nil {
		t.Fatal(err)
	}
	b := w.Node("b")
	want := &JoinInfo{Mode: JoinAll, Expect: 2, Conditional: 2,
		Incoming: []EdgeRef{ref("a", EdgeAfter, true), ref("a", EdgeBranch, true)}}
	if diff := cmp.Diff(want, b.JoinInfo); diff != "" {
		t.Errorf("join info (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(ids("a"), b.Dependencies); diff != "" {
		t.Errorf("dependencies (-want +got):\n%s", diff)
	}
}

func TestAnalyzeDuplicateEdgeTerminal(t *testing.T) {
	// A dropped duplicate must not shift which edge kinds a node's
	// out-edges have: b leaves only on error, so it may end the run. (Once,
	// the kinds were read from w.Edges by the index of the deduplicated
	// list, and b looked like it had an after dependent.)
	w := wf("dup", []Node{
		task("a"),
		task("b", func(n *Node) { n.OnError = ids("c") }),
		task("c"),
	}, []Edge{after("a", "b"), after("a", "b"), edge("b", "c", EdgeError)})
	if err := Analyze(w); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"b", "c"}, w.Terminals); diff != "" {
		t.Errorf("terminals (-want +got):\n%s", diff)
	}
}

func TestAgentWithoutChoice(t *testing.T) {
	// An agent with neither routes nor default always passes a real token
	// to its after-dependents.
	w := wf("a", []Node{
		{ID: "ask", Type: NodeAgent, Join: JoinAll, Agent: &Agent{Model: "m", Prompt: Value{Const: []byte(`"hi"`)}}},
		task("use"),
	}, []Edge{after("ask", "use")})
	if err := Analyze(w); err != nil {
		t.Fatal(err)
	}
	if w.Node("use").MaySkip {
		t.Error("use after a choiceless agent should not be may_skip")
	}
	if ps := Validate(w); len(ps) > 0 {
		t.Error(Problems(ps))
	}
}

func TestHelpers(t *testing.T) {
	w := loop()
	if got := Index(w); got["dlq"] != 4 || len(got) != 6 {
		t.Errorf("Index = %v", got)
	}
	if Index(nil) == nil {
		t.Error("Index(nil) = nil map")
	}
	if n := w.Node("check"); n == nil || n.Loop == nil {
		t.Errorf("Node(check) = %v", n)
	}
	if w.Node("nope") != nil || (*Workflow)(nil).Node("a") != nil {
		t.Error("Node of an unknown id is not nil")
	}
	for kind, want := range map[string]bool{EdgeAfter: true, EdgeBranch: true, EdgeLoop: false, EdgeReject: true} {
		if Forward(kind) != want {
			t.Errorf("Forward(%q) = %v", kind, !want)
		}
	}
	set := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, id := range ids(s) {
			m[id] = true
		}
		return m
	}
	for _, tt := range []struct {
		w        *Workflow
		id, want string
	}{
		{w, "call_api", "fetch"}, // the loop edge from check does not count
		{w, "poll", "fetch call_api check done"},
		{w, "fetch", ""},
		{diamond(), "d", "a b c"},
		{nil, "d", ""},
	} {
		if diff := cmp.Diff(set(tt.want), Ancestors(tt.w, tt.id)); diff != "" {
			t.Errorf("Ancestors(%s) (-want +got):\n%s", tt.id, diff)
		}
	}
}

// TestTerminalEndsPath: a node is terminal when some outcome sends no real
// token forward.
func TestTerminalEndsPath(t *testing.T) {
	task := func(id string) Node { return Node{ID: id, Type: NodeTask, Handler: "noop", Join: JoinAll} }
	cases := []struct {
		name string
		n    Node
		out  []Edge
		want bool
	}{
		{"no out edges", task("a"), nil, true},
		{"after dependent", task("a"), []Edge{{"a", "x", EdgeAfter}}, false},
		{"only on_error", func() Node { n := task("a"); n.OnError = []string{"x"}; return n }(), []Edge{{"a", "x", EdgeError}}, true},
		{"on_error and after", func() Node { n := task("a"); n.OnError = []string{"y"}; return n }(), []Edge{{"a", "x", EdgeAfter}, {"a", "y", EdgeError}}, false},
		{"branch without else", func() Node {
			n := task("a")
			n.Branch = &Branch{Rules: []Rule{{When: Expr{CEL: "true"}, Targets: []string{"x"}}}}
			return n
		}(), []Edge{{"a", "x", EdgeBranch}}, true},
		{"branch with else", func() Node {
			n := task("a")
			n.Branch = &Branch{Rules: []Rule{{When: Expr{CEL: "true"}, Targets: []string{"x"}}}, Default: []string{"y"}}
			return n
		}(), []Edge{{"a", "x", EdgeBranch}, {"a", "y", EdgeDefault}}, false},
		{"agent with routes", Node{ID: "a", Type: NodeAgent, Join: JoinAll, Agent: &Agent{Model: "m", Routes: []string{"x"}}}, []Edge{{"a", "x", EdgeRoute}}, false},
		{"human approve path empty", Node{ID: "a", Type: NodeHuman, Join: JoinAll, Human: &Human{OnReject: []string{"x"}}}, []Edge{{"a", "x", EdgeReject}}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := &Workflow{IRVersion: Version, Name: "w", Nodes: []Node{c.n, task("x"), task("y")}, Edges: c.out}
			if err := Analyze(w); err != nil {
				t.Fatal(err)
			}
			if got := w.Nodes[0].Terminal; got != c.want {
				t.Errorf("terminal = %v, want %v", got, c.want)
			}
		})
	}
}

func TestTypeString(t *testing.T) {
	obj := &Type{Kind: KindObject, Fields: []Field{{Name: "id", Type: Type{Kind: KindString}}, {Name: "n", Type: Type{Kind: KindList, Elem: &Type{Kind: KindInt}}, Optional: true}}}
	for _, c := range []struct {
		t    *Type
		want string
	}{
		{nil, "any"},
		{&Type{Kind: KindInt}, "int"},
		{&Type{Kind: KindMap, Elem: &Type{Kind: KindString}}, "map<string>"},
		{&Type{Kind: KindObject}, "{}"},
		{obj, "{ id: string  n?: list<int> }"},
	} {
		if got := c.t.String(); got != c.want {
			t.Errorf("String() = %q, want %q", got, c.want)
		}
	}
}

// A join covers a branch only when every outcome surely reaches it.
func TestCoveredBranch(t *testing.T) {
	for _, c := range []struct {
		name    string
		mod     func(w *Workflow)
		covered bool
	}{
		{"rules and else", func(w *Workflow) {}, true},
		{"no else", func(w *Workflow) {
			w.Nodes[1].Branch.Default = nil
			w.Edges = slices.DeleteFunc(w.Edges, func(e Edge) bool { return e.Kind == EdgeDefault })
			w.Nodes = slices.DeleteFunc(w.Nodes, func(n Node) bool { return n.ID == "other" })
			w.Edges = slices.DeleteFunc(w.Edges, func(e Edge) bool { return e.From == "other" })
		}, false},
		{"a target with when", func(w *Workflow) { w.Nodes[2].When = &Expr{CEL: "input.x"} }, false},
		{"a target with on_error", func(w *Workflow) { w.Nodes[3].OnError = []string{"done"} }, false},
		{"the branch node may be skipped", func(w *Workflow) { w.Nodes[1].When = &Expr{CEL: "input.x"} }, false},
		{"the branch node has on_error", func(w *Workflow) { w.Nodes[1].OnError = []string{"big"} }, false},
		{"one target misses the join", func(w *Workflow) {
			w.Edges = slices.DeleteFunc(w.Edges, func(e Edge) bool { return e.From == "small" && e.To == "done" })
		}, false},
		{"targets several tasks down", func(w *Workflow) { chainBefore(w, "big", "big2", "big3"); chainBefore(w, "other", "other2") }, true},
		{"a task with when down a chain", func(w *Workflow) {
			chainBefore(w, "big", "big2", "big3")
			w.Nodes[len(w.Nodes)-2].When = &Expr{CEL: "input.x"}
		}, false},
		{"a task with on_error down a chain", func(w *Workflow) {
			chainBefore(w, "big", "big2", "big3")
			w.Nodes[len(w.Nodes)-1].OnError = []string{"done"}
		}, false},
		{"a join down a chain", func(w *Workflow) {
			chainBefore(w, "big", "big2")
			w.Edges = append(w.Edges, after("start", "big2"))
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := branchJoin()
			c.mod(w)
			if err := Analyze(w); err != nil {
				t.Fatal(err)
			}
			var done *Node
			for i := range w.Nodes {
				if w.Nodes[i].ID == "done" {
					done = &w.Nodes[i]
				}
			}
			if got := done.JoinInfo != nil && done.JoinInfo.Covered; got != c.covered || done.MaySkip == c.covered {
				t.Errorf("covered %v, may_skip %v; want covered %v", got, done.MaySkip, c.covered)
			}
		})
	}
}

// chainBefore puts new tasks ids, in a chain, between from and done.
func chainBefore(w *Workflow, from string, ids ...string) {
	for k, e := range w.Edges {
		if e.From == from && e.To == "done" {
			w.Edges[k].To = ids[0]
		}
	}
	for k, id := range ids {
		w.Nodes = append(w.Nodes, task(id))
		to := "done"
		if k+1 < len(ids) {
			to = ids[k+1]
		}
		w.Edges = append(w.Edges, after(id, to))
	}
}

// A node after x and on x's on_error path gets a real token whether x
// succeeded or failed: it is not skipped, whatever its join, unless a
// failure may go elsewhere or x may be skipped.
func TestAfterAndOnError(t *testing.T) {
	for _, c := range []struct {
		name    string
		mod     func(w *Workflow)
		maySkip bool
	}{
		{"join all", func(w *Workflow) {}, false},
		{"join any", func(w *Workflow) { w.Nodes[1].Join = JoinAny }, false},
		{"join settled", func(w *Workflow) { w.Nodes[1].Join = JoinSettled }, false},
		{"x may be skipped", func(w *Workflow) { w.Nodes[0].When = celp("input.go") }, true},
		{"a failure may go elsewhere", func(w *Workflow) {
			w.Nodes[0].OnError = []string{"n", "alert"}
			w.Nodes[0].ErrorRoutes = []ErrorRoute{{Codes: []string{"http.402"}, Targets: []string{"n"}}, {Targets: []string{"alert"}}}
			w.Nodes = append(w.Nodes, task("alert"))
			w.Edges = append(w.Edges, edge("x", "alert", EdgeError))
		}, true},
		{"every failure goes to n", func(w *Workflow) {
			w.Nodes[0].ErrorRoutes = []ErrorRoute{{Codes: []string{"http.402"}, Targets: []string{"n"}}, {Targets: []string{"n"}}}
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := wf("after_and_on_error",
				[]Node{task("x", func(n *Node) { n.OnError = []string{"n"} }), task("n")},
				[]Edge{after("x", "n"), edge("x", "n", EdgeError)})
			c.mod(w)
			if err := Analyze(w); err != nil {
				t.Fatal(err)
			}
			n := w.Nodes[1]
			if n.MaySkip != c.maySkip || n.JoinInfo.Covered == c.maySkip {
				t.Errorf("may_skip %v, covered %v; want may_skip %v", n.MaySkip, n.JoinInfo.Covered, c.maySkip)
			}
		})
	}
}

package ir

import (
	"encoding/json"
	"slices"
	"strings"
)

// Hand-built workflows shared by the tests. Each is valid; the tests that
// need an invalid one mutate a fresh copy.

var noop = Handler{Name: "noop", Builtin: true, Config: Type{Kind: KindObject}, Output: Type{Kind: KindObject}}

func wf(name string, nodes []Node, edges []Edge) *Workflow {
	return &Workflow{IRVersion: Version, Name: name, Handlers: []Handler{noop}, Nodes: nodes, Edges: edges}
}

func task(id string, opts ...func(*Node)) Node {
	n := Node{ID: id, Type: NodeTask, Handler: "noop", Join: JoinAll}
	for _, o := range opts {
		o(&n)
	}
	return n
}

func edge(from, to, kind string) Edge { return Edge{From: from, To: to, Kind: kind} }
func after(from, to string) Edge      { return edge(from, to, EdgeAfter) }
func cel(s string) Expr               { return Expr{CEL: s} }
func celp(s string) *Expr             { return &Expr{CEL: s} }

func sequence() *Workflow {
	return wf("sequence",
		[]Node{task("a"), task("b"), task("c")},
		[]Edge{after("a", "b"), after("b", "c")})
}

func diamond() *Workflow {
	return wf("diamond",
		[]Node{task("a"), task("b"), task("c"), task("d")},
		[]Edge{after("a", "b"), after("a", "c"), after("b", "d"), after("c", "d")})
}

func tripleFanIn() *Workflow {
	return wf("triple_fan_in",
		[]Node{task("a"), task("b"), task("c"), task("merge"), task("send")},
		[]Edge{after("a", "merge"), after("b", "merge"), after("c", "merge"), after("merge", "send")})
}

// branchJoin: start -> score, which branches to big or small (else other);
// done waits for all three.
func branchJoin() *Workflow {
	return wf("branch_join",
		[]Node{
			task("start"),
			task("score", func(n *Node) {
				n.Branch = &Branch{
					Rules: []Rule{
						{When: cel("output.score >= 80"), Targets: []string{"big"}},
						{When: cel("output.score >= 50"), Targets: []string{"small"}},
					},
					Default: []string{"other"},
				}
			}),
			task("big"), task("small"), task("other"), task("done", func(n *Node) { n.Join = JoinSettled }),
		},
		[]Edge{
			after("start", "score"),
			edge("score", "big", EdgeBranch), edge("score", "small", EdgeBranch), edge("score", "other", EdgeDefault),
			after("big", "done"), after("small", "done"), after("other", "done"),
		})
}

// loop: fetch -> call_api -> check, which loops back to call_api while the
// status is bad, goes to dlq when exhausted, and to done otherwise; retry
// loops on itself.
func loop() *Workflow {
	return wf("loop",
		[]Node{
			task("fetch"),
			task("call_api"),
			task("check", func(n *Node) {
				n.Loop = &Loop{While: cel("output.status != 200"), Max: 5, BackTo: "call_api", Exhausted: []string{"dlq"}}
			}),
			task("done"),
			task("dlq"),
			task("poll", func(n *Node) {
				n.Loop = &Loop{While: cel("!output.ready"), Max: 3, BackTo: "poll"}
			}),
		},
		[]Edge{
			after("fetch", "call_api"), after("call_api", "check"),
			edge("check", "call_api", EdgeLoop), edge("check", "dlq", EdgeExhausted),
			after("check", "done"), after("done", "poll"), edge("poll", "poll", EdgeLoop),
		})
}

// agentRoutes: enrich -> qualify, an agent that routes to enterprise or
// standard (else manual); summary runs after qualify.
func agentRoutes() *Workflow {
	return wf("agent_routes",
		[]Node{
			task("enrich"),
			{ID: "qualify", Type: NodeAgent, Join: JoinAll, Agent: &Agent{
				Model:  "gpt-4o",
				Prompt: Value{Template: []TemplatePart{{Text: "Qualify "}, {Expr: celp("enrich.output.name")}}},
				Routes: []string{"enterprise", "standard"}, Default: []string{"manual"},
			}},
			task("enterprise"), task("standard"), task("manual"), task("summary"),
		},
		[]Edge{
			after("enrich", "qualify"),
			edge("qualify", "enterprise", EdgeRoute), edge("qualify", "standard", EdgeRoute),
			edge("qualify", "manual", EdgeDefault), after("qualify", "summary"),
		})
}

// humanReject: approve waits for a human; ship on approval, refund on
// rejection.
func humanReject() *Workflow {
	return wf("human_reject",
		[]Node{
			task("order"),
			{ID: "approve", Type: NodeHuman, Join: JoinAll, Human: &Human{
				Approvers: []string{"ops@example.com"}, TimeoutMS: 3600_000, OnTimeout: TimeoutFail, OnReject: []string{"refund"},
			}},
			task("ship"), task("refund"),
		},
		[]Edge{after("order", "approve"), after("approve", "ship"), edge("approve", "refund", EdgeReject)})
}

// onError: charge falls back to notify; receipt after charge; audit waits
// for both receipt and a plain log step.
func onError() *Workflow {
	return wf("on_error",
		[]Node{
			task("charge", func(n *Node) {
				n.OnError = []string{"notify"}
				n.Retry = &Retry{Attempts: 3, Backoff: BackoffExponential, DelayMS: 1000, MaxDelayMS: 30_000}
				n.Compensate = &Compensate{Handler: "noop", With: []Param{{Name: "id", Value: Value{Expr: celp("output.id")}}}}
			}),
			task("receipt"), task("notify"), task("log"),
			task("audit", func(n *Node) { n.Join = JoinAny }),
		},
		[]Edge{
			edge("charge", "notify", EdgeError), after("charge", "receipt"),
			after("receipt", "audit"), after("log", "audit"),
		})
}

// when: b has a predicate, so c, which only follows b, may be skipped; d
// joins c and a plain a.
func when() *Workflow {
	return wf("when",
		[]Node{task("a"), task("b", func(n *Node) { n.When = celp("input.amount > 0") }), task("c"), task("d")},
		[]Edge{after("a", "b"), after("b", "c"), after("c", "d"), after("a", "d")})
}

func whenSettled() *Workflow {
	w := when()
	w.Name = "when_settled"
	w.Nodes[3].Join = JoinSettled
	return w
}

// leadQualification is seed 000's example as docs/language.md writes it.
func leadQualification() *Workflow {
	loc := func(line int) *Loc { return &Loc{File: "lead.wf", Line: line, Col: 3, EndLine: line, EndCol: 20} }
	temp := 0.3
	strType := Type{Kind: KindString}
	crmOut := Type{Kind: KindObject, Fields: []Field{
		{Name: "name", Type: strType}, {Name: "employees", Type: Type{Kind: KindInt}}, {Name: "revenue", Type: Type{Kind: KindNumber}},
	}}
	return &Workflow{
		IRVersion:   Version,
		Name:        "lead_qualification",
		Version:     "1.0",
		Description: "Qualify a lead by rules, then by an agent, with a human for big deals.",
		Source:      "lead.wf",
		Settings:    Settings{DeadlineMS: 72 * 3600_000},
		Inputs:      []Input{{Name: "lead_id", Type: strType, Required: true, Loc: loc(6)}},
		Outputs:     []Output{{Name: "route", Expr: Expr{CEL: `has(qualify.output) ? "agent" : "rules"`, Type: &strType}, Loc: loc(10)}},
		Handlers: []Handler{
			{Name: "cel", Builtin: true, Config: Type{Kind: KindMap, Elem: &Type{Kind: KindAny}}, Output: Type{Kind: KindMap, Elem: &Type{Kind: KindAny}}},
			{Name: "crm.lookup", Config: Type{Kind: KindObject, Fields: []Field{{Name: "lead_id", Type: strType}}}, Output: crmOut, Loc: loc(13)},
			noop,
		},
		Nodes: []Node{
			{ID: "enrich", Type: NodeTask, Handler: "crm.lookup", Join: JoinAll, Loc: loc(18),
				With:       []Param{{Name: "lead_id", Value: Value{Expr: &Expr{CEL: "input.lead_id", Type: &strType}}}},
				OutputType: &crmOut,
				Retry:      &Retry{Attempts: 3, Backoff: BackoffExponential, DelayMS: 1000},
				TimeoutMS:  30_000},
			{ID: "score", Type: NodeTask, Handler: "cel", Join: JoinAll, Loc: loc(25),
				With: []Param{{Name: "score", Value: Value{Expr: celp("enrich.output.employees > 500 ? 90 : 40")}}},
				Branch: &Branch{
					Rules:   []Rule{{When: cel("output.score >= 80 && enrich.output.revenue > 100000.0"), Targets: []string{"qualify"}}},
					Default: []string{"nurture_campaign"},
				}},
			{ID: "qualify", Type: NodeAgent, Join: JoinAll, Loc: loc(33), Agent: &Agent{
				Model: "gpt-4o", Temperature: &temp,
				Prompt: Value{Template: []TemplatePart{
					{Text: "Route lead "}, {Expr: celp("enrich.output.name")},
					{Text: " ("}, {Expr: celp("enrich.output.revenue")}, {Text: ")"},
				}},
				Routes:  []string{"enterprise_sales", "standard_sales"},
				Default: []string{"manual_review"},
			}},
			{ID: "enterprise_sales", Type: NodeHuman, Join: JoinAll, Loc: loc(40), Human: &Human{
				Approvers: []string{"sales-manager@example.com"}, TimeoutMS: 48 * 3600_000,
				OnTimeout: TimeoutReject, OnReject: []string{"manual_review"},
			}},
			{ID: "standard_sales", Type: NodeTask, Handler: "noop", Join: JoinAll, Loc: loc(47)},
			{ID: "manual_review", Type: NodeTask, Handler: "noop", Join: JoinAll, Loc: loc(48),
				With: []Param{{Name: "note", Value: Value{Const: json.RawMessage(`{"priority": 1.0, "tags": ["lead", "<review>"]}`)}}}},
			{ID: "nurture_campaign", Type: NodeTask, Handler: "noop", Join: JoinAll, Loc: loc(49)},
		},
		Edges: []Edge{
			after("enrich", "score"),
			edge("score", "qualify", EdgeBranch),
			edge("score", "nurture_campaign", EdgeDefault),
			edge("qualify", "enterprise_sales", EdgeRoute),
			edge("qualify", "standard_sales", EdgeRoute),
			edge("qualify", "manual_review", EdgeDefault),
			edge("enterprise_sales", "manual_review", EdgeReject),
		},
	}
}

// allWorkflows returns fresh copies of every hand-built workflow, by name.
func allWorkflows() map[string]*Workflow {
	m := map[string]*Workflow{}
	for _, w := range []*Workflow{
		sequence(), diamond(), tripleFanIn(), branchJoin(), loop(), agentRoutes(),
		humanReject(), onError(), when(), leadQualification(), flows(),
	} {
		m[w.Name] = w
	}
	return m
}

func flowNode(id, uses, hash string) Node {
	return Node{ID: id, Type: NodeFlow, Join: JoinAll, Flow: &Flow{Uses: uses, Hash: hash,
		With: []Param{{Name: "n", Value: Value{Expr: celp("1")}}}}}
}

func mustHash(w *Workflow) string {
	h, err := Hash(w)
	if err != nil {
		panic(err)
	}
	return h
}

// flows runs embedded children: leaf directly and through mid, which runs
// it twice; each child is embedded once, in hash order.
func flows() *Workflow {
	leaf := wf("leaf", []Node{task("a")}, nil)
	leaf.Source = "leaf.wf"
	leaf.Inputs = []Input{{Name: "n", Type: Type{Kind: KindInt}, Required: true}}
	leaf.Outputs = []Output{{Name: "v", Expr: cel("input.n")}}
	hl := mustHash(leaf)
	mid := wf("mid", []Node{flowNode("x", "leaf.wf", hl), flowNode("y", "leaf.wf", hl)}, []Edge{after("x", "y")})
	mid.Handlers = []Handler{}
	mid.Inputs = leaf.Inputs
	hm := mustHash(mid)
	w := wf("flows", []Node{flowNode("m", "mid.wf", hm), flowNode("l", "leaf.wf", hl), task("end")},
		[]Edge{after("m", "end"), after("l", "end")})
	w.Children = []Child{{Hash: hl, Workflow: *leaf}, {Hash: hm, Workflow: *mid}}
	slices.SortFunc(w.Children, func(a, b Child) int { return strings.Compare(a.Hash, b.Hash) })
	return w
}

package runtime

import (
	"testing"

	"github.com/wfc-lang/wfc/ir"
)

// The flows of the design seeds (000: sequential, fan-out, triple fan-in,
// data enrichment; 003: predicates, for_each), on both backends.

func TestSequential(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		w := build(t, wfSpec{
			inputs:  []ir.Input{input("n", ir.KindInt), input("who", ir.KindString, `"world"`)},
			outputs: []ir.Output{output("total", "c.output.v"), output("greeting", "a.output.msg")},
			nodes: []*nodeSpec{
				task("a", "cel", with("v", cexpr("input.n + 1")), with("msg", tmpl("hello ", &ir.Expr{CEL: "input.who"}, " #", &ir.Expr{CEL: "input.n"}))),
				task("b", "cel", after("a"), with("v", cexpr("a.output.v * 2"))),
				task("c", "echo", after("b"), with("v", cexpr("b.output.v + 3"))),
			},
		})
		st := v.run(w, map[string]any{"n": 4})
		if st.State != RunCompleted {
			t.Fatalf("state %s: %s", st.State, dump(st))
		}
		if got := string(st.Result); got != `{"total":13,"greeting":"hello world #4"}` {
			t.Errorf("result %s", got)
		}
	})
}

func TestFanOutAndTripleFanIn(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		// A -> (B, C, D) -> E (join all) -> F
		w := build(t, wfSpec{
			outputs: []ir.Output{output("sum", "e.output.sum")},
			nodes: []*nodeSpec{
				task("a", "cel", with("x", cexpr("1"))),
				task("b", "cel", after("a"), with("x", cexpr("a.output.x + 1"))),
				task("c", "cel", after("a"), with("x", cexpr("a.output.x + 2"))),
				task("d", "cel", after("a"), with("x", cexpr("a.output.x + 3"))),
				task("e", "count", after("b", "c", "d"), with("sum", cexpr("b.output.x + c.output.x + d.output.x"))),
				task("f", "noop", after("e")),
			},
		})
		st := v.run(w, nil)
		if st.State != RunCompleted || string(st.Result) != `{"sum":9}` {
			t.Fatalf("got %s %s", st.State, st.Result)
		}
		if n := v.callCount(st.RunID + "/e"); n != 1 {
			t.Errorf("join ran %d times", n)
		}
	})
}

func TestDataEnrichmentDiamond(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		w := build(t, wfSpec{
			inputs:  []ir.Input{input("city", ir.KindString)},
			outputs: []ir.Output{output("display", "display.output.text")},
			nodes: []*nodeSpec{
				task("start", "cel", with("city", cexpr("input.city"))),
				task("fetch_weather", "cel", after("start"), with("w", cexpr("'sunny in ' + start.output.city"))),
				task("fetch_traffic", "cel", after("start"), with("t", cexpr("'light'"))),
				task("fetch_news", "cel", after("start"), with("n", cexpr("['a', 'b']"))),
				task("combine", "cel", after("fetch_weather", "fetch_traffic", "fetch_news"),
					with("weather", cexpr("fetch_weather.output.w")),
					with("traffic", cexpr("fetch_traffic.output.t")),
					with("news", cexpr("size(fetch_news.output.n)"))),
				task("display", "cel", after("combine"),
					with("text", tmpl(&ir.Expr{CEL: "combine.output.weather"}, ", traffic ", &ir.Expr{CEL: "combine.output.traffic"}, ", news ", &ir.Expr{CEL: "combine.output.news"}))),
			},
		})
		st := v.run(w, map[string]any{"city": "NYC"})
		if got := string(st.Result); got != `{"display":"sunny in NYC, traffic light, news 2"}` {
			t.Fatalf("result %s (%s)", got, st.State)
		}
	})
}

func TestBranchWithDefault(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		w := build(t, wfSpec{
			inputs: []ir.Input{input("score", ir.KindInt)},
			outputs: []ir.Output{
				output("route", "has(high.output) ? 'high' : has(mid.output) ? 'mid' : has(low.output) ? 'low' : 'none'"),
				output("after", "has(done.output)"),
			},
			nodes: []*nodeSpec{
				task("score", "cel", with("s", cexpr("input.score")),
					branch([]string{"low"}, rule("output.s >= 80", "high"), rule("output.s >= 50", "mid"))),
				task("high", "noop"),
				task("mid", "noop"),
				task("low", "noop"),
				// a join after the branch: one real token, two skips
				// (join all would never run: the compiler refuses it)
				task("done", "noop", after("high", "mid", "low"), joinMode(ir.JoinSettled)),
			},
		})
		for _, c := range []struct {
			score int
			route string
		}{{90, "high"}, {60, "mid"}, {10, "low"}} {
			st := v.run(w, map[string]any{"score": c.score})
			want := `{"route":"` + c.route + `","after":true}`
			if string(st.Result) != want {
				t.Errorf("score %d: result %s, want %s", c.score, st.Result, want)
			}
			for _, n := range []string{"high", "mid", "low"} {
				want := NodeSkipped
				if n == c.route {
					want = NodeCompleted
				}
				if got := nodeState(st, n); got != want {
					t.Errorf("score %d: %s is %s, want %s", c.score, n, got, want)
				}
			}
		}
	})
}

func TestBranchWithoutElseSkipsJoin(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		// No rule true and no else: every target gets a skip, the join after
		// them is skipped, and the skip reaches the terminal node.
		w := build(t, wfSpec{
			nodes: []*nodeSpec{
				task("a", "noop", branch(nil, rule("false || 1 == 2", "x"), rule("1 > 2", "y"))),
				task("x", "noop"),
				task("y", "noop"),
				task("j", "noop", after("x", "y"), joinMode(ir.JoinSettled)),
				task("k", "noop", after("j")),
				task("side", "noop"),
				task("end", "noop", after("k", "side"), joinMode(ir.JoinSettled)),
				task("both", "noop", after("k", "side")), // join all: k's skip skips it
			},
		})
		st := v.run(w, nil)
		for n, want := range map[string]string{"x": NodeSkipped, "y": NodeSkipped, "j": NodeSkipped, "k": NodeSkipped, "side": NodeCompleted, "end": NodeCompleted, "both": NodeSkipped} {
			if got := nodeState(st, n); got != want {
				t.Errorf("%s is %s, want %s", n, got, want)
			}
		}
	})
}

func TestPredicates(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		w := build(t, wfSpec{
			inputs:  []ir.Input{input("amount", ir.KindNumber)},
			outputs: []ir.Output{output("charged", "has(charge.output)"), output("notified", "has(notify.output)")},
			nodes: []*nodeSpec{
				task("charge", "cel", when("input.amount > 0.0"), with("amount", cexpr("input.amount"))),
				task("receipt", "noop", after("charge")), // skipped with charge
				task("notify", "noop", after("receipt")),
				task("audit", "noop", after("charge"), joinAny(), after("log")),
				task("log", "noop"),
			},
		})
		st := v.run(w, map[string]any{"amount": 0})
		if string(st.Result) != `{"charged":false,"notified":false}` {
			t.Errorf("amount 0: %s", st.Result)
		}
		if nodeState(st, "audit") != NodeCompleted {
			t.Errorf("audit (join any with one real token) is %s", nodeState(st, "audit"))
		}
		st = v.run(w, map[string]any{"amount": 12.5})
		if string(st.Result) != `{"charged":true,"notified":true}` {
			t.Errorf("amount 12.5: %s", st.Result)
		}
	})
}

func TestForEach(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker()
		w := build(t, wfSpec{
			inputs:  []ir.Input{{Name: "users", Type: ir.Type{Kind: ir.KindList, Elem: &ir.Type{Kind: ir.KindString}}, Required: true}},
			outputs: []ir.Output{output("ids", "notify.output.map(o, o.id)"), output("n", "size(notify.output)")},
			nodes: []*nodeSpec{
				task("notify", "count", forEach("user", "input.users", 2),
					with("id", tmpl("msg-", &ir.Expr{CEL: "user"})), with("len", cexpr("size(user)"))),
				task("after", "noop", after("notify")),
			},
		})
		st := v.run(w, map[string]any{"users": []string{"alice", "bob", "charlie", "dave", "eve"}})
		if string(st.Result) != `{"ids":["msg-alice","msg-bob","msg-charlie","msg-dave","msg-eve"],"n":5}` {
			t.Fatalf("result %s (%s)", st.Result, st.State)
		}
		for i := 0; i < 5; i++ {
			if n := v.callCount(st.RunID + "/notify/" + string(rune('0'+i))); n != 1 {
				t.Errorf("item %d ran %d times", i, n)
			}
		}
		// An empty list runs nothing and outputs [].
		st = v.run(w, map[string]any{"users": []string{}})
		if string(st.Result) != `{"ids":[],"n":0}` {
			t.Errorf("empty: result %s", st.Result)
		}
	})
}

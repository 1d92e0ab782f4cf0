package ir

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestValidateValid(t *testing.T) {
	for name, w := range allWorkflows() {
		if ps := Validate(w); len(ps) > 0 {
			t.Errorf("%s: %v", name, Problems(ps))
		}
	}
}

// nodeOf returns the node with the given id, failing loudly if missing.
func nodeOf(w *Workflow, id string) *Node {
	n := w.Node(id)
	if n == nil {
		panic("no node " + id)
	}
	return n
}

func deepType(depth int) Type {
	t := Type{Kind: KindString}
	for range depth - 1 {
		inner := t
		t = Type{Kind: KindList, Elem: &inner}
	}
	return t
}

func TestValidateProblems(t *testing.T) {
	lead := leadQualification
	tests := []struct {
		name   string
		base   func() *Workflow
		mutate func(w *Workflow)
		path   string
		msg    string
	}{
		// Header.
		{"missing version", lead, func(w *Workflow) { w.IRVersion = "" }, "/ir_version", "missing ir_version"},
		{"unsupported version", lead, func(w *Workflow) { w.IRVersion = "2" }, "/ir_version", `unsupported ir_version "2"`},
		{"missing name", lead, func(w *Workflow) { w.Name = "" }, "/name", "missing workflow name"},
		{"negative deadline", lead, func(w *Workflow) { w.Settings.DeadlineMS = -1 }, "/settings/deadline_ms", "negative"},
		{"negative hops", lead, func(w *Workflow) { w.Settings.MaxHops = -1 }, "/settings/max_hops", "negative"},
		{"negative fanout", lead, func(w *Workflow) { w.Settings.MaxFanout = -1 }, "/settings/max_fanout", "negative"},
		{"negative input bytes", lead, func(w *Workflow) { w.Settings.MaxInputBytes = -1 }, "/settings/max_input_bytes", "must be 1 to 2147483647"},
		{"huge output bytes", lead, func(w *Workflow) { w.Settings.MaxOutputBytes = 1 << 31 }, "/settings/max_output_bytes", "must be 1 to 2147483647"},
		{"negative state bytes", lead, func(w *Workflow) { w.Settings.MaxStateBytes = -5 }, "/settings/max_state_bytes", "must be 1 to 2147483647"},

		// Inputs, outputs, types, values.
		{"bad input name", lead, func(w *Workflow) { w.Inputs[0].Name = "lead-id" }, "/inputs/0/name", `invalid input name "lead-id"`},
		{"duplicate input", lead, func(w *Workflow) { w.Inputs = append(w.Inputs, w.Inputs[0]) }, "/inputs/1/name", `duplicate input name "lead_id"`},
		{"bad type kind", lead, func(w *Workflow) { w.Inputs[0].Type.Kind = "text" }, "/inputs/0/type/kind", `invalid type kind "text"`},
		{"list without elem", lead, func(w *Workflow) { w.Inputs[0].Type = Type{Kind: KindList} }, "/inputs/0/type/elem", "a list type needs elem"},
		{"elem on a scalar", lead, func(w *Workflow) { w.Inputs[0].Type.Elem = &Type{Kind: KindInt} }, "/inputs/0/type/elem", "only list and map"},
		{"fields on a scalar", lead, func(w *Workflow) { w.Inputs[0].Type.Fields = []Field{{Name: "x", Type: Type{Kind: KindInt}}} }, "/inputs/0/type/fields", "only object types"},
		{"duplicate field", lead, func(w *Workflow) {
			f := &w.Handlers[1].Output.Fields
			*f = append(*f, (*f)[0])
		}, "/handlers/1/output/fields/3/name", `duplicate field name "name"`},
		{"nested bad type", lead, func(w *Workflow) { w.Handlers[0].Config.Elem.Kind = "" }, "/handlers/0/config/elem/kind", `invalid type kind ""`},
		{"type too deep", lead, func(w *Workflow) { w.Inputs[0].Type = deepType(MaxTypeDepth + 1) }, "/inputs/0/type" + strings.Repeat("/elem", MaxTypeDepth), "nested more than 64"},
		{"cyclic type", lead, func(w *Workflow) {
			t := &Type{Kind: KindList}
			t.Elem = t
			w.Inputs[0].Type = *t
		}, "/inputs/0/type" + strings.Repeat("/elem", MaxTypeDepth), "nested more than 64"},
		{"secret default not a name", lead, func(w *Workflow) {
			w.Inputs[0] = Input{Name: "tok", Type: Type{Kind: KindSecret}, Default: json.RawMessage(`"Bearer abc"`)}
		}, "/inputs/0/default", "must be a secret name"},
		{"secret default not a string", lead, func(w *Workflow) {
			w.Inputs[0] = Input{Name: "tok", Type: Type{Kind: KindSecret}, Default: json.RawMessage(`42`)}
		}, "/inputs/0/default", "must be a secret name"},
		{"secret with elem", lead, func(w *Workflow) {
			w.Inputs[0] = Input{Name: "tok", Type: Type{Kind: KindSecret, Elem: &Type{Kind: KindString}}}
		}, "/inputs/0/type", "a secret type has no elem or fields"},
		{"secret in a list", lead, func(w *Workflow) {
			w.Inputs[0].Type = Type{Kind: KindList, Elem: &Type{Kind: KindSecret}}
		}, "/inputs/0/type/elem/kind", `invalid type kind "secret"`},
		{"secret handler field", lead, func(w *Workflow) { w.Handlers[0].Config.Elem.Kind = KindSecret }, "/handlers/0/config/elem/kind", `invalid type kind "secret"`},
		{"required with default", lead, func(w *Workflow) { w.Inputs[0].Default = json.RawMessage(`"x"`) }, "/inputs/0/required", "cannot be required"},
		{"bad default", lead, func(w *Workflow) {
			w.Inputs[0].Default, w.Inputs[0].Required = json.RawMessage(`{`), false
		}, "/inputs/0/default", "invalid JSON value"},
		{"deep default", lead, func(w *Workflow) {
			w.Inputs[0].Default = json.RawMessage(strings.Repeat("[", MaxValueDepth+1) + strings.Repeat("]", MaxValueDepth+1))
			w.Inputs[0].Required = false
		}, "/inputs/0/default", "over the limit of 64"},
		{"bad output name", lead, func(w *Workflow) { w.Outputs[0].Name = "" }, "/outputs/0/name", "invalid output name"},
		{"empty expression", lead, func(w *Workflow) { w.Outputs[0].Expr.CEL = "  " }, "/outputs/0/expr/cel", "empty expression"},
		{"bad expression type", lead, func(w *Workflow) { w.Outputs[0].Expr.Type = &Type{Kind: "str"} }, "/outputs/0/expr/type/kind", `invalid type kind "str"`},

		// Handlers.
		{"handler without name", lead, func(w *Workflow) { w.Handlers[0].Name = "" }, "/handlers/0/name", "missing handler name"},
		{"duplicate handler", lead, func(w *Workflow) { w.Handlers[1].Name = "cel" }, "/handlers/1/name", `duplicate handler "cel"`},
		{"unsorted handlers", lead, func(w *Workflow) { w.Handlers[0], w.Handlers[1] = w.Handlers[1], w.Handlers[0] }, "/handlers/1/name", "sorted by name"},
		{"undeclared handler", lead, func(w *Workflow) { nodeOf(w, "enrich").Handler = "crm.fetch" }, "/nodes/0/handler", `handler "crm.fetch" is not declared`},

		// Nodes: ids and kinds.
		{"bad node id", lead, func(w *Workflow) { w.Nodes[6].ID = "9lives" }, "/nodes/6/id", `invalid node name "9lives"`},
		{"duplicate node id", lead, func(w *Workflow) { w.Nodes[6].ID = "enrich" }, "/nodes/6/id", `duplicate node name "enrich"`},
		{"bad node type", lead, func(w *Workflow) { w.Nodes[6].Type = "job" }, "/nodes/6/type", `invalid node type "job"`},
		{"task without handler", lead, func(w *Workflow) { w.Nodes[6].Handler = "" }, "/nodes/6/handler", "a task node needs handler"},
		{"task with agent", lead, func(w *Workflow) { w.Nodes[6].Agent = &Agent{Model: "m", Prompt: Value{Const: []byte(`1`)}} }, "/nodes/6/agent", "a task node cannot have agent"},
		{"agent without agent", lead, func(w *Workflow) {
			n := nodeOf(w, "qualify")
			n.Type, n.Agent = NodeAgent, nil
		}, "/nodes/2/agent", "an agent node needs agent"},
		{"agent with handler", lead, func(w *Workflow) { nodeOf(w, "qualify").Handler = "noop" }, "/nodes/2/handler", "an agent node cannot have handler"},
		{"agent with branch", lead, func(w *Workflow) {
			nodeOf(w, "qualify").Branch = &Branch{Rules: []Rule{{When: cel("true"), Targets: ids("standard_sales")}}}
		}, "/nodes/2/branch", "cannot also have a branch"},
		{"human with flow", lead, func(w *Workflow) { nodeOf(w, "enterprise_sales").Flow = &Flow{Uses: "x.wf"} }, "/nodes/3/flow", "a human node cannot have flow"},
		{"flow without flow", lead, func(w *Workflow) {
			n := nodeOf(w, "nurture_campaign")
			n.Type, n.Handler = NodeFlow, ""
		}, "/nodes/6/flow", "a flow node needs flow"},
		{"flow without uses", lead, func(w *Workflow) {
			n := nodeOf(w, "nurture_campaign")
			n.Type, n.Handler, n.Flow = NodeFlow, "", &Flow{}
		}, "/nodes/6/flow/uses", "missing uses"},

		// Flows and embedded children (the flows workflow: m runs mid, l
		// runs leaf, mid runs leaf twice).
		{"flow without hash", flows, func(w *Workflow) { nodeOf(w, "l").Flow.Hash = "" }, "/nodes/1/flow/hash", "missing hash"},
		{"flow with bad hash", flows, func(w *Workflow) { nodeOf(w, "l").Flow.Hash = "sha256:ABC" }, "/nodes/1/flow/hash", `invalid hash "sha256:ABC"`},
		{"flow of a missing child", flows, func(w *Workflow) { nodeOf(w, "l").Flow.Hash = "sha256:" + strings.Repeat("0", 64) }, "/nodes/1/flow/hash", "no embedded child workflow has hash sha256:000"},
		{"no children at all", flows, func(w *Workflow) { w.Children = nil }, "/nodes/0/flow/hash", "no embedded child workflow has hash"},
		{"child edited by hand", flows, func(w *Workflow) { childNamed(w, "leaf").Nodes[0].Handler = "other" }, "/children/0/hash", "is not the hash of the embedded workflow"},
		{"child problem", flows, func(w *Workflow) { childNamed(w, "leaf").Nodes[0].Join = "" }, "/children/0/workflow/nodes/0/join", `invalid join ""`},
		{"child's flow of a missing child", flows, func(w *Workflow) {
			childNamed(w, "mid").Nodes[1].Flow.Hash = "sha256:" + strings.Repeat("1", 64)
		}, "/children/1/workflow/nodes/1/flow/hash", "no embedded child workflow has hash"},
		{"child with children", flows, func(w *Workflow) {
			mid := childNamed(w, "mid")
			mid.Children = []Child{{Hash: w.Children[0].Hash, Workflow: w.Children[0].Workflow}}
		}, "/children/1/workflow/children", "cannot have children of its own"},
		{"child embedded twice", flows, func(w *Workflow) { w.Children = append(w.Children, w.Children[1]) }, "/children/2/hash", "embedded twice"},
		{"children unsorted", flows, func(w *Workflow) { w.Children[0], w.Children[1] = w.Children[1], w.Children[0] }, "/children/1/hash", "not sorted by hash"},
		{"child run by no flow node", flows, func(w *Workflow) {
			removeNode(w, "m")
		}, "/children/1", "no flow node runs child"},
		{"child without hash", flows, func(w *Workflow) { w.Children[0].Hash = "" }, "/children/0/hash", `invalid hash ""`},
		{"cycle of children", flows, func(w *Workflow) {
			// mid runs itself: the hashes cannot match, and the nesting has no end.
			mid := childNamed(w, "mid")
			mid.Nodes[1].Flow.Hash = w.Children[1].Hash
		}, "/children/0/workflow", "flows nested deeper than 16"}, // leaf, 17 deep through mid

		// Node options.
		{"bad join", lead, func(w *Workflow) { w.Nodes[5].Join = "" }, "/nodes/5/join", `invalid join ""`},
		{"empty when", lead, func(w *Workflow) { w.Nodes[5].When = &Expr{} }, "/nodes/5/when/cel", "empty expression"},
		{"bad for_each var", lead, func(w *Workflow) { w.Nodes[5].ForEach = &ForEach{Var: "a b", Items: cel("input.xs")} }, "/nodes/5/for_each/var", `invalid variable name "a b"`},
		{"negative parallel", lead, func(w *Workflow) { w.Nodes[5].ForEach = &ForEach{Var: "x", Items: cel("input.xs"), Parallel: -1} }, "/nodes/5/for_each/parallel", "negative"},
		{"zero attempts", lead, func(w *Workflow) { w.Nodes[0].Retry.Attempts = 0 }, "/nodes/0/retry/attempts", "1 to 1000"},
		// A hand-edited IR must not retry without end (issue #14 item 6).
		{"attempts past the limit", lead, func(w *Workflow) { w.Nodes[0].Retry.Attempts = 2147483647 }, "/nodes/0/retry/attempts", "1 to 1000"},
		{"huge expression", lead, func(w *Workflow) { w.Outputs[0].Expr.CEL = strings.Repeat("1+", 6000) + "1" }, "/outputs/0/expr/cel", "over the limit of 10000"},
		{"retry on and except", lead, func(w *Workflow) { w.Nodes[0].Retry.On, w.Nodes[0].Retry.Except = []string{"a"}, []string{"b"} }, "/nodes/0/retry/except", "not both"},
		{"bad error code", lead, func(w *Workflow) { w.Nodes[0].Retry.On = []string{"a b"} }, "/nodes/0/retry/on/0", "invalid error code"},
		{"bad backoff", lead, func(w *Workflow) { w.Nodes[0].Retry.Backoff = "random" }, "/nodes/0/retry/backoff", `invalid backoff "random"`},
		{"negative delay", lead, func(w *Workflow) { w.Nodes[0].Retry.DelayMS = -5 }, "/nodes/0/retry/delay_ms", "negative"},
		{"negative max delay", lead, func(w *Workflow) { w.Nodes[0].Retry.MaxDelayMS = -5 }, "/nodes/0/retry/max_delay_ms", "negative"},
		{"max delay below delay", lead, func(w *Workflow) { w.Nodes[0].Retry.MaxDelayMS = 10 }, "/nodes/0/retry/max_delay_ms", "less than the delay"},
		{"negative timeout", lead, func(w *Workflow) { w.Nodes[0].TimeoutMS = -1 }, "/nodes/0/timeout_ms", "negative"},
		{"bad with name", lead, func(w *Workflow) { w.Nodes[0].With[0].Name = "lead id" }, "/nodes/0/with/0/name", `invalid parameter name "lead id"`},
		{"duplicate with name", lead, func(w *Workflow) { w.Nodes[0].With = append(w.Nodes[0].With, w.Nodes[0].With[0]) }, "/nodes/0/with/1/name", "duplicate parameter name"},
		{"negative loc", lead, func(w *Workflow) { w.Nodes[0].Loc.Col = -1 }, "/nodes/0/loc", "negative line or column"},
		{"negative expr loc", lead, func(w *Workflow) { w.Outputs[0].Expr.Loc = &Loc{EndLine: -2} }, "/outputs/0/expr/loc", "negative"},
		{"bad output type", lead, func(w *Workflow) { w.Nodes[0].OutputType = &Type{Kind: KindMap} }, "/nodes/0/output_type/elem", "needs elem"},

		// Values.
		{"value with two", lead, func(w *Workflow) { w.Nodes[0].With[0].Value.Const = []byte(`"x"`) }, "/nodes/0/with/0/value", "exactly one of const, expr or template (found 2)"},
		{"value with none", lead, func(w *Workflow) { w.Nodes[0].With[0].Value = Value{} }, "/nodes/0/with/0/value", "(found 0)"},
		{"bad const", lead, func(w *Workflow) { w.Nodes[5].With[0].Value.Const = []byte(`{"a":}`) }, "/nodes/5/with/0/value/const", "invalid JSON value"},
		{"template part with both", lead, func(w *Workflow) { nodeOf(w, "qualify").Agent.Prompt.Template[0].Expr = celp("x") }, "/nodes/2/agent/prompt/template/0", "not both"},
		{"template part with neither", lead, func(w *Workflow) { nodeOf(w, "qualify").Agent.Prompt.Template[0].Text = "" }, "/nodes/2/agent/prompt/template/0", "needs text or expr"},
		{"template part empty expr", lead, func(w *Workflow) { nodeOf(w, "qualify").Agent.Prompt.Template[1].Expr.CEL = "" }, "/nodes/2/agent/prompt/template/1/expr/cel", "empty expression"},
		{"empty template", lead, func(w *Workflow) { nodeOf(w, "qualify").Agent.Prompt.Template = []TemplatePart{} }, "/nodes/2/agent/prompt/template", "empty template"},

		// Branches.
		{"branch without rules", lead, func(w *Workflow) {
			nodeOf(w, "score").Branch.Rules = nil
			w.Edges = w.Edges[:0:0]
			w.Edges = append(w.Edges, after("enrich", "score"), edge("score", "nurture_campaign", EdgeDefault),
				after("score", "qualify"), edge("qualify", "enterprise_sales", EdgeRoute), edge("qualify", "standard_sales", EdgeRoute),
				edge("qualify", "manual_review", EdgeDefault), edge("enterprise_sales", "manual_review", EdgeReject))
		}, "/nodes/1/branch/rules", "at least one rule"},
		{"empty rule condition", lead, func(w *Workflow) { nodeOf(w, "score").Branch.Rules[0].When.CEL = "" }, "/nodes/1/branch/rules/0/when/cel", "empty expression"},
		{"unknown branch target", lead, func(w *Workflow) {
			r := &nodeOf(w, "score").Branch.Rules[0]
			r.Targets = append(r.Targets, "nowhere")
		}, "/nodes/1/branch/rules/0/targets/1", `unknown node "nowhere"`},
		{"branch to itself", lead, func(w *Workflow) {
			r := &nodeOf(w, "score").Branch.Rules[0]
			r.Targets = append(r.Targets, "score")
		}, "/nodes/1/branch/rules/0/targets/1", "cannot route to itself"},
		{"duplicate target", lead, func(w *Workflow) {
			r := &nodeOf(w, "score").Branch.Rules[0]
			r.Targets = append(r.Targets, "qualify")
		}, "/nodes/1/branch/rules/0/targets/1", `duplicate target "qualify"`},
		{"unknown default", lead, func(w *Workflow) { nodeOf(w, "score").Branch.Default[0] = "gone" }, "/nodes/1/branch/default/0", `unknown node "gone"`},

		// Loops.
		{"zero loop max", loop, func(w *Workflow) { nodeOf(w, "check").Loop.Max = 0 }, "/nodes/2/loop/max", "1 to 1000000"},
		{"loop max past the limit", loop, func(w *Workflow) { nodeOf(w, "check").Loop.Max = 1 << 40 }, "/nodes/2/loop/max", "1 to 1000000"},
		{"empty while", loop, func(w *Workflow) { nodeOf(w, "check").Loop.While.CEL = "" }, "/nodes/2/loop/while/cel", "empty expression"},
		{"missing back_to", loop, func(w *Workflow) { nodeOf(w, "check").Loop.BackTo = "" }, "/nodes/2/loop/back_to", "missing back_to"},
		{"unknown back_to", loop, func(w *Workflow) { nodeOf(w, "check").Loop.BackTo = "nope" }, "/nodes/2/loop/back_to", `unknown node "nope"`},
		{"back_to not an ancestor", loop, func(w *Workflow) {
			nodeOf(w, "check").Loop.BackTo = "dlq"
			w.Edges[2].To = "dlq"
		}, "/nodes/2/loop/back_to", `back_to "dlq" must be the node itself or one of its forward ancestors`},
		{"unknown exhausted", loop, func(w *Workflow) { nodeOf(w, "check").Loop.Exhausted[0] = "void" }, "/nodes/2/loop/exhausted/0", `unknown node "void"`},

		// Error paths and compensation.
		{"unknown on_error", onError, func(w *Workflow) { w.Nodes[0].OnError[0] = "pager" }, "/nodes/0/on_error/0", `unknown node "pager"`},
		{"compensate without handler", onError, func(w *Workflow) { w.Nodes[0].Compensate.Handler = "" }, "/nodes/0/compensate/handler", "missing handler"},
		{"compensate undeclared", onError, func(w *Workflow) { w.Nodes[0].Compensate.Handler = "refund" }, "/nodes/0/compensate/handler", `handler "refund" is not declared`},
		{"compensate bad param", onError, func(w *Workflow) { w.Nodes[0].Compensate.With[0].Value.Expr = nil }, "/nodes/0/compensate/with/0/value", "(found 0)"},

		// Agents and humans.
		{"agent without model", lead, func(w *Workflow) { nodeOf(w, "qualify").Agent.Model = "" }, "/nodes/2/agent/model", "missing model"},
		{"negative temperature", lead, func(w *Workflow) { t := -0.5; nodeOf(w, "qualify").Agent.Temperature = &t }, "/nodes/2/agent/temperature", "non-negative"},
		{"NaN temperature", lead, func(w *Workflow) { t := math.NaN(); nodeOf(w, "qualify").Agent.Temperature = &t }, "/nodes/2/agent/temperature", "non-negative"},
		{"unknown route", lead, func(w *Workflow) { nodeOf(w, "qualify").Agent.Routes[1] = "vip" }, "/nodes/2/agent/routes/1", `unknown node "vip"`},
		{"empty approver", lead, func(w *Workflow) { nodeOf(w, "enterprise_sales").Human.Approvers[0] = "" }, "/nodes/3/human/approvers/0", "empty approver"},
		{"negative approval timeout", lead, func(w *Workflow) { nodeOf(w, "enterprise_sales").Human.TimeoutMS = -1 }, "/nodes/3/human/timeout_ms", "negative"},
		{"bad on_timeout", lead, func(w *Workflow) { nodeOf(w, "enterprise_sales").Human.OnTimeout = "escalate" }, "/nodes/3/human/on_timeout", `invalid on_timeout "escalate"`},
		{"unknown on_reject", lead, func(w *Workflow) { nodeOf(w, "enterprise_sales").Human.OnReject[0] = "x" }, "/nodes/3/human/on_reject/0", `unknown node "x"`},
		{"escalate_to without escalate_after_ms", lead, func(w *Workflow) { nodeOf(w, "enterprise_sales").Human.EscalateTo = []string{"cfo"} }, "/nodes/3/human/escalate_after_ms", "escalate_to needs escalate_after_ms"},
		{"escalate_to_expr without escalate_after_ms", lead, func(w *Workflow) { nodeOf(w, "enterprise_sales").Human.EscalateToExpr = &Expr{CEL: `["cfo"]`} }, "/nodes/3/human/escalate_after_ms", "escalate_to needs escalate_after_ms"},
		{"escalate_after_ms without escalate_to", lead, func(w *Workflow) { nodeOf(w, "enterprise_sales").Human.EscalateAfterMS = 1000 }, "/nodes/3/human/escalate_after_ms", "nobody to escalate to"},
		{"negative escalate_after_ms", lead, func(w *Workflow) {
			h := nodeOf(w, "enterprise_sales").Human
			h.EscalateTo, h.EscalateAfterMS = []string{"cfo"}, -1
		}, "/nodes/3/human/escalate_after_ms", "negative"},
		{"escalation after the timeout", lead, func(w *Workflow) {
			h := nodeOf(w, "enterprise_sales").Human
			h.EscalateTo, h.EscalateAfterMS = []string{"cfo"}, h.TimeoutMS
		}, "/nodes/3/human/escalate_after_ms", "must be below timeout_ms"},
		{"empty escalation approver", lead, func(w *Workflow) {
			h := nodeOf(w, "enterprise_sales").Human
			h.EscalateTo, h.EscalateAfterMS = []string{"cfo", ""}, 1000
		}, "/nodes/3/human/escalate_to/1", "empty approver"},
		{"escalate_to and escalate_to_expr", lead, func(w *Workflow) {
			h := nodeOf(w, "enterprise_sales").Human
			h.EscalateTo, h.EscalateToExpr, h.EscalateAfterMS = []string{"cfo"}, &Expr{CEL: `["cfo"]`}, 1000
		}, "/nodes/3/human/escalate_to_expr", "not both"},
		{"bad escalate_to_expr", lead, func(w *Workflow) {
			h := nodeOf(w, "enterprise_sales").Human
			h.EscalateToExpr, h.EscalateAfterMS = &Expr{CEL: " "}, 1000
		}, "/nodes/3/human/escalate_to_expr/cel", "empty expression"},

		// Edges.
		{"bad edge kind", lead, func(w *Workflow) { w.Edges[0].Kind = "then" }, "/edges/0/kind", `invalid edge kind "then"`},
		{"unknown edge source", lead, func(w *Workflow) { w.Edges[0].From = "ghost" }, "/edges/0/from", `unknown node "ghost"`},
		{"unknown edge target", lead, func(w *Workflow) { w.Edges[0].To = "ghost" }, "/edges/0/to", `unknown node "ghost"`},
		{"duplicate edge", lead, func(w *Workflow) { w.Edges = append(w.Edges, w.Edges[3]) }, "/edges/7", "duplicate of /edges/3"},
		{"self edge", lead, func(w *Workflow) { w.Edges = append(w.Edges, after("score", "score")) }, "/edges/7", "cannot go from a node to itself"},
		{"edge not implied", lead, func(w *Workflow) { w.Edges = append(w.Edges, edge("score", "standard_sales", EdgeBranch)) }, "/edges/7",
			`branch edge score -> standard_sales is not implied by the configuration of node "score"`},
		{"loop edge not implied", lead, func(w *Workflow) { w.Edges = append(w.Edges, edge("manual_review", "enrich", EdgeLoop)) }, "/edges/7", "loop edge manual_review -> enrich is not implied"},
		{"missing route edge", lead, func(w *Workflow) { w.Edges = append(w.Edges[:4:4], w.Edges[5:]...) }, "/nodes/2/agent/routes/1", "missing route edge qualify -> standard_sales in /edges"},
		{"missing default edge", lead, func(w *Workflow) { w.Edges = append(w.Edges[:2:2], w.Edges[3:]...) }, "/nodes/1/branch/default/0", "missing default edge score -> nurture_campaign"},
		{"missing loop edge", loop, func(w *Workflow) { w.Edges = append(w.Edges[:2:2], w.Edges[3:]...) }, "/nodes/2/loop/back_to", "missing loop edge check -> call_api"},
		{"missing reject edge", humanReject, func(w *Workflow) { w.Edges = w.Edges[:2] }, "/nodes/1/human/on_reject/0", "missing reject edge approve -> refund"},
		{"missing error edge", onError, func(w *Workflow) { w.Edges = w.Edges[1:] }, "/nodes/0/on_error/0", "missing error edge charge -> notify"},
		{"missing exhausted edge", loop, func(w *Workflow) { w.Edges = append(w.Edges[:3:3], w.Edges[4:]...) }, "/nodes/2/loop/exhausted/0", "missing exhausted edge check -> dlq"},
		{"edge kind swapped", lead, func(w *Workflow) { w.Edges[1].Kind = EdgeDefault }, "/edges/1", "default edge score -> qualify is not implied"},

		// The graph.
		{"cycle", diamond, func(w *Workflow) { w.Edges = append(w.Edges, after("d", "b")) }, "/edges/2", "forward edges form a cycle: b -> d -> b"},
		{"no nodes", diamond, func(w *Workflow) { w.Nodes, w.Edges = nil, nil }, "/nodes", "at least one node"},
		{"no terminal", diamond, func(w *Workflow) { w.Nodes, w.Edges = w.Nodes[:2], []Edge{after("a", "b"), after("b", "a")} }, "/nodes", "no terminal node"},
		{"too many nodes", sequence, func(w *Workflow) {
			for i := range MaxNodes {
				w.Nodes = append(w.Nodes, task(fmt.Sprintf("n%d", i)))
			}
		}, "/nodes", "10003 nodes, over the limit of 10000"},
		{"fan-out", sequence, func(w *Workflow) {
			for i := range MaxOutEdges {
				id := fmt.Sprintf("n%d", i)
				w.Nodes = append(w.Nodes, task(id))
				w.Edges = append(w.Edges, after("a", id))
			}
		}, "/nodes/0", "1001 forward out-edges, over the limit of 1000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := tt.base()
			tt.mutate(w)
			ps := Validate(w)
			for _, p := range ps {
				if p.Path == tt.path && strings.Contains(p.Message, tt.msg) {
					return
				}
			}
			t.Errorf("want problem %s: ...%s...; got %v", tt.path, tt.msg, Problems(ps))
		})
	}
}

// childNamed returns the embedded child with the given name. In flows(),
// leaf sorts first (by hash), then mid; childNamed checks that.
func childNamed(w *Workflow, name string) *Workflow {
	for i := range w.Children {
		if w.Children[i].Workflow.Name == name {
			return &w.Children[i].Workflow
		}
	}
	panic("no child " + name)
}

func removeNode(w *Workflow, id string) {
	w.Nodes = slices.DeleteFunc(w.Nodes, func(n Node) bool { return n.ID == id })
	w.Edges = slices.DeleteFunc(w.Edges, func(e Edge) bool { return e.From == id || e.To == id })
}

func TestValidateChildrenOrder(t *testing.T) {
	w := flows()
	if w.Children[0].Workflow.Name != "leaf" || w.Children[1].Workflow.Name != "mid" {
		t.Fatalf("the tests expect leaf, then mid, in hash order; got %s, %s", w.Children[0].Workflow.Name, w.Children[1].Workflow.Name)
	}
}

// TestValidateFlowDepth builds chains of children: 16 nested flows are
// valid, 17 are not.
func TestValidateFlowDepth(t *testing.T) {
	chain := func(depth int) *Workflow {
		var kids []Child
		child := wf("c0", []Node{task("a")}, nil)
		h := mustHash(child)
		kids = append(kids, Child{Hash: h, Workflow: *child})
		for i := 1; i < depth; i++ {
			child = wf(fmt.Sprintf("c%d", i), []Node{flowNode("f", "c.wf", h)}, nil)
			child.Handlers = []Handler{}
			h = mustHash(child)
			kids = append(kids, Child{Hash: h, Workflow: *child})
		}
		root := wf("root", []Node{flowNode("f", "c.wf", h)}, nil)
		root.Handlers = []Handler{}
		slices.SortFunc(kids, func(a, b Child) int { return strings.Compare(a.Hash, b.Hash) })
		root.Children = kids
		return root
	}
	if ps := Validate(chain(MaxFlowDepth)); len(ps) > 0 {
		t.Errorf("%d nested flows: %v", MaxFlowDepth, Problems(ps))
	}
	ps := Validate(chain(MaxFlowDepth + 1))
	if len(ps) != 1 || !strings.Contains(ps[0].Message, "flows nested deeper than 16") {
		t.Errorf("%d nested flows: want one problem, nested too deep; got %v", MaxFlowDepth+1, Problems(ps))
	}
}

// TestHashCoversChildren: a changed child changes the hash its flow node
// references, and so the parent's hash; a child extracted with its own
// descendants hashes to that reference.
func TestHashCoversChildren(t *testing.T) {
	w := flows()
	before := mustHash(w)
	// Re-embed an edited leaf the way a rebuild would: new hash everywhere.
	leaf := childNamed(w, "leaf")
	old := mustHash(leaf)
	leaf.Outputs[0].Expr = cel("input.n + 1")
	h := mustHash(leaf)
	for i := range w.Nodes {
		if f := w.Nodes[i].Flow; f != nil && f.Hash == old {
			f.Hash = h
		}
	}
	if after := mustHash(w); after == before {
		t.Errorf("the parent's hash did not change with its child's")
	}
	// Moving the child (its uses path, its source) changes nothing.
	w = flows()
	nodeOf(w, "l").Flow.Uses = "elsewhere/leaf.wf"
	childNamed(w, "leaf").Source = "elsewhere/leaf.wf"
	if mustHash(w) != mustHash(flows()) {
		t.Errorf("the uses path changed the hash")
	}
	// mid with its descendants, as a root of its own, hashes to what m
	// references, and is valid.
	w = flows()
	mid := *childNamed(w, "mid")
	mid.Children = []Child{w.Children[0]}
	if got, want := mustHash(&mid), nodeOf(w, "m").Flow.Hash; got != want {
		t.Errorf("extracted child hashes to %s, its parent references %s", got, want)
	}
	if ps := Validate(&mid); len(ps) > 0 {
		t.Errorf("extracted child: %v", Problems(ps))
	}
}

func TestValidateReportsAll(t *testing.T) {
	w := leadQualification()
	w.Name = ""
	w.Nodes[0].Join = "some"
	w.Edges[0].Kind = "bogus"
	want := []Problem{
		{"/name", "missing workflow name"},
		{"/nodes/0/join", `invalid join "some" (want all, any, settled or first)`},
		{"/edges/0/kind", `invalid edge kind "bogus"`},
	}
	if diff := cmp.Diff(want, Validate(w)); diff != "" {
		t.Errorf("Validate (-want +got):\n%s", diff)
	}
}

func TestValidateDoesNotModify(t *testing.T) {
	w := leadQualification()
	w.Edges = append(w.Edges, after("manual_review", "enrich")) // a cycle
	before := leadQualification()
	before.Edges = append(before.Edges, after("manual_review", "enrich"))
	Validate(w)
	if diff := cmp.Diff(before, w); diff != "" {
		t.Errorf("Validate modified its input (-before +after):\n%s", diff)
	}
}

func TestValidateNeverPanics(t *testing.T) {
	for _, w := range []*Workflow{
		nil,
		{},
		{Nodes: []Node{{}}},
		{Nodes: []Node{{Branch: &Branch{}, Loop: &Loop{}, Agent: &Agent{}, Human: &Human{}, Flow: &Flow{},
			Compensate: &Compensate{}, ForEach: &ForEach{}, Retry: &Retry{}, When: &Expr{}, OutputType: &Type{}}}},
		{Nodes: []Node{{With: []Param{{Value: Value{Template: []TemplatePart{{}}}}}}}},
		{Edges: []Edge{{}}, Inputs: []Input{{}}, Outputs: []Output{{}}, Handlers: []Handler{{}}},
	} {
		_ = Validate(w)
		_ = Analyze(w)
	}
}

func TestProblemsError(t *testing.T) {
	ps := Problems{{"/name", "missing workflow name"}, {"", "nil workflow"}}
	want := "ir: 2 problems:\n\t/name: missing workflow name\n\tnil workflow"
	if got := ps.Error(); got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if got := ps[:1].Error(); got != "ir: /name: missing workflow name" {
		t.Errorf("Error() = %q", got)
	}
}

package tools

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"unicode"
)

// searchTools scores every catalog entry by the query's words found in
// its name (worth more) and description, and returns the best.
func searchTools(ctx context.Context, env Env, raw json.RawMessage) (any, error) {
	var a struct {
		Query string `json:"query"`
		Kind  string `json:"kind"`
		Limit int    `json:"limit"`
	}
	if err := strictDecode(raw, &a); err != nil {
		return nil, errorf(CodeBadArgs, "%v", err)
	}
	if env.Catalog == nil {
		return nil, errorf(CodeUnavailable, "search_tools is not available in this deployment (no catalog)")
	}
	if a.Limit == 0 {
		a.Limit = 10
	}
	entries, err := env.Catalog.Entries(ctx)
	if err != nil {
		return nil, errorf(CodeFailed, "reading the catalog: %v", err)
	}
	words := tokens(a.Query)
	if len(words) == 0 {
		return nil, errorf(CodeBadArgs, "the query has no words")
	}
	type scored struct {
		e     CatalogEntry
		score int
	}
	var hits []scored
	for _, e := range entries {
		if a.Kind != "" && e.Kind != a.Kind {
			continue
		}
		name, desc := tokens(e.Name), tokens(e.Description)
		s := 0
		for _, w := range words {
			switch {
			case slices.Contains(name, w):
				s += 3
			case slices.ContainsFunc(name, func(n string) bool { return strings.HasPrefix(n, w) }):
				s += 2
			case slices.ContainsFunc(desc, func(d string) bool { return strings.HasPrefix(d, w) }):
				s++
			}
		}
		if s > 0 {
			hits = append(hits, scored{e, s})
		}
	}
	slices.SortStableFunc(hits, func(x, y scored) int {
		if x.score != y.score {
			return y.score - x.score
		}
		return strings.Compare(x.e.Name, y.e.Name)
	})
	out := []CatalogEntry{}
	for _, h := range hits[:min(len(hits), a.Limit)] {
		out = append(out, h.e)
	}
	return map[string]any{"matches": out, "total": len(hits)}, nil
}

// tokens splits s into lower-case words; snake_case and camelCase names
// split into their words too.
func tokens(s string) []string {
	var out []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			out = append(out, string(cur))
			cur = cur[:0]
		}
	}
	var prev rune
	for _, r := range s {
		switch {
		case unicode.IsUpper(r) && unicode.IsLower(prev):
			flush()
			cur = append(cur, unicode.ToLower(r))
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			cur = append(cur, unicode.ToLower(r))
		default:
			flush()
		}
		prev = r
	}
	flush()
	return out
}

// delegateToAgent starts a child through the Delegator, within the
// worker's allow-list of targets.
func (w *Worker) delegateToAgent(ctx context.Context, env Env, raw json.RawMessage) (any, error) {
	var a DelegateRequest
	if err := strictDecode(raw, &a); err != nil {
		return nil, errorf(CodeBadArgs, "%v", err)
	}
	if env.Delegator == nil {
		return nil, errorf(CodeUnavailable, "delegate_to_agent is not available in this deployment")
	}
	if len(w.delegate) > 0 && !slices.Contains(w.delegate, a.Kind+":"+a.Target) {
		return nil, errorf(CodeDenied, "%s %q is not among the targets this worker allows (--agent-delegate-allow): %s", a.Kind, a.Target, strings.Join(w.delegate, ", "))
	}
	if len(a.Inputs) == 0 {
		a.Inputs = json.RawMessage("{}")
	}
	res, err := env.Delegator.Delegate(ctx, a)
	if err != nil {
		if errors.Is(ctx.Err(), context.Canceled) {
			return nil, ctx.Err()
		}
		if ctx.Err() != nil && a.Wait {
			return nil, errorf(CodeTimeout, "the %s %q did not finish within the call's time bound; call again with wait: false to start it without waiting", a.Kind, a.Target)
		}
		return nil, errorf(CodeFailed, "delegating to %s %q: %v", a.Kind, a.Target, err)
	}
	return res, nil
}

// patchWorkflow checks that the patch only adds nodes, and edges that
// start at the agent or at a node the patch adds, then hands it to the
// Patcher (which does the full validation against the workflow).
func patchWorkflow(ctx context.Context, env Env, raw json.RawMessage) (any, error) {
	var a struct {
		Operations  []PatchOp `json:"operations"`
		Description string    `json:"description"`
	}
	if err := strictDecode(raw, &a); err != nil {
		return nil, errorf(CodeBadArgs, "%v", err)
	}
	if env.Patcher == nil {
		return nil, errorf(CodeUnavailable, "patch_workflow is not available in this deployment (live patching is not enabled); use the other tools, or finish and let the workflow continue")
	}
	if err := checkPatch(env.Node, a.Operations); err != nil {
		return nil, err
	}
	res, err := env.Patcher.Patch(ctx, env.Node, a.Operations, a.Description)
	if err != nil {
		return nil, errorf(CodeFailed, "the patch was refused: %v", err)
	}
	if len(res) == 0 {
		res = json.RawMessage(`{"applied": true}`)
	}
	return res, nil
}

// checkPatch is the shape patch_workflow allows: add ops on /nodes/- (a
// node with a new, well-formed id) and /edges/- (from the agent or a node
// of this patch, to a node of this patch, so that nothing upstream of the
// agent, nor any existing path, changes).
func checkPatch(agent string, ops []PatchOp) error {
	if agent == "" {
		return errorf(CodeUnavailable, "patch_workflow needs the agent's node id, which this execution lacks")
	}
	added := map[string]bool{}
	for i, op := range ops {
		if op.Op != "add" || op.Path != "/nodes/-" {
			continue
		}
		var n map[string]json.RawMessage
		if err := json.Unmarshal(op.Value, &n); err != nil {
			return errorf(CodeBadArgs, "operations[%d]: a node must be a JSON object", i)
		}
		var id string
		if err := json.Unmarshal(n["id"], &id); err != nil || !validNodeID(id) {
			return errorf(CodeBadArgs, "operations[%d]: the node needs an id of letters, digits and _ (starting with a letter or _)", i)
		}
		if added[id] || id == agent {
			return errorf(CodeBadArgs, "operations[%d]: node %q is added twice, or is the agent itself", i, id)
		}
		added[id] = true
	}
	for i, op := range ops {
		if op.Op != "add" {
			return errorf(CodeDenied, "operations[%d]: op %q; only \"add\" is allowed", i, op.Op)
		}
		switch op.Path {
		case "/nodes/-":
		case "/edges/-":
			var e struct {
				From string `json:"from"`
				To   string `json:"to"`
			}
			if err := json.Unmarshal(op.Value, &e); err != nil || e.From == "" || e.To == "" {
				return errorf(CodeBadArgs, "operations[%d]: an edge is {\"from\": ID, \"to\": ID}", i)
			}
			if e.From != agent && !added[e.From] {
				return errorf(CodeDenied, "operations[%d]: the edge starts at %q; edges may only start at this agent (%q) or at a node this patch adds", i, e.From, agent)
			}
			if !added[e.To] {
				return errorf(CodeDenied, "operations[%d]: the edge ends at %q, which this patch does not add; edges may only lead to added nodes", i, e.To)
			}
		default:
			return errorf(CodeDenied, "operations[%d]: path %q; only /nodes/- and /edges/- may be added to", i, op.Path)
		}
	}
	for id := range added {
		if !reachable(agent, id, ops) {
			return errorf(CodeDenied, "node %q is not connected downstream of the agent; add an edge to it from %q or from a node the patch adds", id, agent)
		}
	}
	return nil
}

func reachable(from, to string, ops []PatchOp) bool {
	seen := map[string]bool{from: true}
	frontier := []string{from}
	for len(frontier) > 0 {
		n := frontier[0]
		frontier = frontier[1:]
		if n == to {
			return true
		}
		for _, op := range ops {
			if op.Path != "/edges/-" {
				continue
			}
			var e struct{ From, To string }
			_ = json.Unmarshal(op.Value, &e)
			if e.From == n && !seen[e.To] {
				seen[e.To] = true
				frontier = append(frontier, e.To)
			}
		}
	}
	return false
}

func validNodeID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i, r := range id {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

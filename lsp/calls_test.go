package lsp

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	protocol "github.com/tliron/glsp/protocol_3_16"
)

const callsSrc = `workflow w {
  task enrich {
    run "noop"
    on_error => fallback
  }
  task score after enrich {
    run "cel"
    with { s = 1 }
    branch {
      when output.s > 0 => qualify
      else => fallback
    }
  }
  agent qualify {
    model "m"
    prompt "go"
    routes sales, fallback
  }
  task sales { run "noop" }
  task fallback join any { run "noop" }
  task again after sales {
    run "cel"
    with { n = score.output.s }
    loop { while output.n < 3  max 3  back_to sales }
  }
  flow child after again { uses "sub/child.wf"  with { n = 1 } }
}
`

// callNames is "name (detail)" of each item, sorted.
func callNames(items []protocol.CallHierarchyItem) []string {
	var out []string
	for _, it := range items {
		d := ""
		if it.Detail != nil {
			d = *it.Detail
		}
		out = append(out, it.Name+" ("+d+")")
	}
	slices.Sort(out)
	return out
}

// TestCallHierarchy: incoming calls of a node are its sources, by every
// kind of edge; outgoing calls its successors; a flow node calls its child
// workflow in another file, whose incoming calls are that flow node.
func TestCallHierarchy(t *testing.T) {
	dir := project(t, map[string]string{"sub/child.wf": childSrc, "main.wf": callsSrc})
	c := newTestClient(t, Options{}, nil)
	init := c.initialize()
	if init.Capabilities.CallHierarchyProvider != true {
		t.Errorf("callHierarchyProvider = %v", init.Capabilities.CallHierarchyProvider)
	}
	uri := pathToURI(filepath.Join(dir, "main.wf"))
	c.open(uri, callsSrc)
	c.diagnostics(uri, 1)

	prepare := func(p protocol.Position) []protocol.CallHierarchyItem {
		t.Helper()
		var items []protocol.CallHierarchyItem
		c.mustCall("textDocument/prepareCallHierarchy", tdp(uri, p), &items)
		return items
	}
	incoming := func(it protocol.CallHierarchyItem) ([]string, []protocol.CallHierarchyIncomingCall) {
		t.Helper()
		var calls []protocol.CallHierarchyIncomingCall
		c.mustCall("callHierarchy/incomingCalls", map[string]any{"item": it}, &calls)
		var items []protocol.CallHierarchyItem
		for _, c := range calls {
			items = append(items, c.From)
		}
		return callNames(items), calls
	}
	outgoing := func(it protocol.CallHierarchyItem) []string {
		t.Helper()
		var calls []protocol.CallHierarchyOutgoingCall
		c.mustCall("callHierarchy/outgoingCalls", map[string]any{"item": it}, &calls)
		var items []protocol.CallHierarchyItem
		for _, c := range calls {
			items = append(items, c.To)
		}
		return callNames(items)
	}

	// From the declaration, a name in a target list, an after list and an
	// expression: the same node.
	for _, p := range []protocol.Position{
		at(t, callsSrc, "fallback join", 0, 1),
		at(t, callsSrc, "fallback\n", 0, 2),
		at(t, callsSrc, "sales, fallback", 0, 10),
	} {
		items := prepare(p)
		if len(items) != 1 || items[0].Name != "fallback" {
			t.Fatalf("prepare at %v = %+v, want fallback", p, items)
		}
	}
	if items := prepare(at(t, callsSrc, "after enrich", 0, 7)); len(items) != 1 || items[0].Name != "enrich" {
		t.Errorf("prepare on an after name = %+v, want enrich", items)
	}
	if items := prepare(at(t, callsSrc, "score.output.s", 0, 1)); len(items) != 1 || items[0].Name != "score" {
		t.Errorf("prepare in an expression = %+v, want score", items)
	}
	if items := prepare(at(t, callsSrc, "run \"noop\"", 0, 1)); len(items) != 0 {
		t.Errorf("prepare on a keyword = %+v, want none", items)
	}

	fallback := prepare(at(t, callsSrc, "fallback join", 0, 0))[0]
	got, calls := incoming(fallback)
	want := []string{"enrich (task · run \"noop\" · on_error)", "qualify (agent · routes)", "score (task · run \"cel\" · default)"}
	if !slices.Equal(got, want) {
		t.Errorf("incoming(fallback) = %q, want %q", got, want)
	}
	m := NewMapper(sourceFile(callsSrc))
	for _, call := range calls {
		for _, r := range call.FromRanges {
			br := m.ByteRange(r)
			if callsSrc[br.Start:br.End] != "fallback" {
				t.Errorf("fromRange of %s = %q, want the name that makes the edge", call.From.Name, callsSrc[br.Start:br.End])
			}
		}
	}
	score := prepare(at(t, callsSrc, "score after", 0, 0))[0]
	if got, _ := incoming(score); !slices.Equal(got, []string{"enrich (task · run \"noop\" · after)"}) {
		t.Errorf("incoming(score) = %q", got)
	}
	if got := outgoing(score); !slices.Equal(got, []string{"fallback (task · run \"noop\" · default)", "qualify (agent · branch)"}) {
		t.Errorf("outgoing(score) = %q", got)
	}
	// The loop's back edge and the after edge both lead to sales.
	sales := prepare(at(t, callsSrc, "task sales", 0, 5))[0]
	if got, _ := incoming(sales); !slices.Equal(got, []string{"again (task · run \"cel\" · loop)", "qualify (agent · routes)"}) {
		t.Errorf("incoming(sales) = %q", got)
	}
	// Across files: the flow node calls the child workflow, and the child
	// workflow (not open) is called by it.
	flow := prepare(at(t, callsSrc, "flow child", 0, 5))[0]
	if got := outgoing(flow); !slices.Equal(got, []string{"c (workflow · child.wf)"}) {
		t.Fatalf("outgoing(child) = %q", got)
	}
	wf := prepare(at(t, callsSrc, "sub/child.wf", 0, 2))
	if len(wf) != 1 || wf[0].Name != "c" || !strings.HasSuffix(wf[0].URI, "/sub/child.wf") {
		t.Fatalf("prepare on the uses path = %+v", wf)
	}
	if got, _ := incoming(wf[0]); !slices.Equal(got, []string{"child (flow · uses)"}) {
		t.Errorf("incoming(c) = %q", got)
	}
	if got := outgoing(wf[0]); !slices.Equal(got, []string{"t (task · run \"noop\" · entry)"}) {
		t.Errorf("outgoing(c) = %q", got)
	}
	// The workflow of this file: its entry nodes.
	self := prepare(at(t, callsSrc, "workflow w", 0, 9))
	if len(self) != 1 || outgoing(self[0]) == nil || !slices.Equal(outgoing(self[0]), []string{"enrich (task · run \"noop\" · entry)"}) {
		t.Errorf("outgoing(w) = %q", outgoing(self[0]))
	}
	// A stale item (the node was renamed since) gets no calls, not an error.
	c.changeFull(uri, 2, strings.ReplaceAll(callsSrc, "fallback", "fb"))
	if got, _ := incoming(fallback); len(got) != 0 {
		t.Errorf("incoming of a node that no longer exists = %q", got)
	}
}

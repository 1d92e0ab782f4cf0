package lsp

import (
	"encoding/json"
	"slices"

	protocol "github.com/tliron/glsp/protocol_3_16"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/lang/ast"
)

// Inlay hints (LSP 3.17, which glsp does not know: handleMessage routes the
// method here and initialize adds inlayHintProvider): the types the
// compiler infers and the join mode it assumes, where the text does not
// say them.
//   - the type of each `with` entry of a node whose handler is open (cel,
//     echo) and that declares no `output`: `v: int = 2`;
//   - the types of a `for_each` variable and index: `for_each i: int, x: string in ...`;
//   - `join all` after the `after` list of a node that waits for two or
//     more nodes and writes no `join`.

const methodInlayHint = "textDocument/inlayHint"

type inlayHintParams struct {
	TextDocument protocol.TextDocumentIdentifier `json:"textDocument"`
	Range        protocol.Range                  `json:"range"`
}

type inlayHint struct {
	Position     protocol.Position `json:"position"`
	Label        string            `json:"label"`
	Kind         int               `json:"kind,omitempty"` // 1 type, 2 parameter
	PaddingLeft  bool              `json:"paddingLeft,omitempty"`
	PaddingRight bool              `json:"paddingRight,omitempty"`
	Tooltip      string            `json:"tooltip,omitempty"`
}

const inlayKindType = 1

func (s *server) inlayHints(raw json.RawMessage) ([]inlayHint, *rpcError) {
	var p inlayHintParams
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, &rpcError{Code: codeInvalidParams, Message: "invalid params: " + err.Error()}
	}
	out := []inlayHint{}
	snap := s.snapshotFor(p.TextDocument.URI)
	if snap == nil {
		return out, nil
	}
	res := snap.result()
	if res == nil || res.Info == nil {
		return out, nil
	}
	info := res.Info
	want := snap.m.ByteRange(p.Range)
	add := func(off int, label string, kind int, left bool, tip string) {
		if off < want.Start || off > want.End {
			return
		}
		out = append(out, inlayHint{Position: snap.m.Position(off), Label: label, Kind: kind, PaddingLeft: left, Tooltip: tip})
	}
	ids := make([]string, 0, len(info.Nodes))
	for id := range info.Nodes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		n := info.Nodes[id]
		d := n.Decl
		if d == nil || d.Name == nil {
			continue
		}
		if len(n.Sources) >= 2 && d.Join == nil && n.Join != "" {
			end := d.Name.End
			if k := len(d.After); k > 0 && d.After[k-1] != nil {
				end = d.After[k-1].End
			}
			add(end, "join "+n.Join, 0, true, joinRule(n))
		}
		declared := false
		for _, it := range d.Items {
			if tb, ok := it.(*ast.TypeBlock); ok && tb.Key != nil && tb.Key.Name == "output" {
				declared = true
			}
		}
		h := handlerOf(info, n.Handler)
		for _, it := range d.Items {
			switch it := it.(type) {
			case *ast.ParamBlock:
				if it.Key == nil || it.Key.Name != "with" || declared || h == nil || !h.Open || n.Output == nil {
					continue
				}
				out := n.Output
				if out.Kind == ir.KindList && out.Elem != nil {
					out = out.Elem // a for_each node outputs the list of its items' outputs
				}
				for _, p := range it.Params {
					if f := fieldOf(out, p.Name.Name); f != nil {
						add(p.Name.End, ": "+f.Type.String(), inlayKindType, false, "inferred: "+id+".output."+p.Name.Name)
					}
				}
			case *ast.ForEach:
				if it.Index != nil {
					add(it.Index.End, ": int", inlayKindType, false, "")
				}
				if it.Var != nil && it.Items != nil {
					if ei := info.Exprs[it.Items]; ei != nil && ei.Type != nil && ei.Type.Kind == ir.KindList && ei.Type.Elem != nil {
						add(it.Var.End, ": "+ei.Type.Elem.String(), inlayKindType, false, "")
					}
				}
			}
		}
	}
	slices.SortStableFunc(out, func(a, b inlayHint) int {
		if a.Position.Line != b.Position.Line {
			return int(a.Position.Line) - int(b.Position.Line)
		}
		return int(a.Position.Character) - int(b.Position.Character)
	})
	return out, nil
}

func fieldOf(t *ir.Type, name string) *ir.Field {
	if t == nil || t.Kind != ir.KindObject {
		return nil
	}
	for i := range t.Fields {
		if t.Fields[i].Name == name {
			return &t.Fields[i]
		}
	}
	return nil
}

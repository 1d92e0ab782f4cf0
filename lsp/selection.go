package lsp

import (
	"slices"

	protocol "github.com/tliron/glsp/protocol_3_16"

	"github.com/wfc-lang/wfc/lang/ast"
	"github.com/wfc-lang/wfc/lang/source"
)

// selectionRanges answers textDocument/selectionRange ("expand selection"):
// for each position, the syntax nodes that hold it, innermost first, down
// to the sub-expressions of a CEL expression the compiler checked (a.b in
// a.b + 1), then up through the item, its block, the node, the workflow
// and the whole file.
func (s *server) selectionRanges(p *protocol.SelectionRangeParams) ([]protocol.SelectionRange, error) {
	snap := s.snapshotFor(p.TextDocument.URI)
	if snap == nil {
		return nil, nil
	}
	f := snap.ast()
	res := snap.result()
	out := make([]protocol.SelectionRange, 0, len(p.Positions))
	for _, pos := range p.Positions {
		off := snap.m.Offset(pos)
		rs := []source.Range{{Start: 0, End: len(snap.src())}}
		ast.Inspect(f, func(n ast.Node) bool {
			if n == nil {
				return false
			}
			r := n.Rng()
			if r.Start > off || off > r.End {
				_, isFile := n.(*ast.File)
				return isFile
			}
			rs = append(rs, r)
			if e, ok := n.(*ast.Expr); ok && res != nil && res.Info != nil {
				if ei := res.Info.Exprs[e]; ei != nil {
					for _, sub := range ei.Subexprs {
						if sub.Range.Start <= off && off <= sub.Range.End {
							rs = append(rs, sub.Range)
						}
					}
				}
			}
			return true
		})
		// The word at the position, first of all (output in a.output.n).
		src := snap.src()
		ws, we := off, off
		for ws > 0 && ws <= len(src) && isIdentByte(src[ws-1]) {
			ws--
		}
		for we < len(src) && isIdentByte(src[we]) {
			we++
		}
		if ws < we {
			rs = append(rs, source.Range{Start: ws, End: we})
		}
		// Outermost first; each range must hold the next.
		slices.SortStableFunc(rs, func(a, b source.Range) int {
			if a.Start != b.Start {
				return a.Start - b.Start
			}
			return b.End - a.End
		})
		slices.SortStableFunc(rs, func(a, b source.Range) int { return (b.End - b.Start) - (a.End - a.Start) })
		var chain []source.Range
		for _, r := range rs {
			if k := len(chain); k > 0 {
				last := chain[k-1]
				if r == last || r.Start < last.Start || r.End > last.End {
					continue
				}
			}
			chain = append(chain, r)
		}
		var sel *protocol.SelectionRange
		for _, r := range chain {
			sel = &protocol.SelectionRange{Range: snap.m.Range(r), Parent: sel}
		}
		out = append(out, *sel)
	}
	return out, nil
}

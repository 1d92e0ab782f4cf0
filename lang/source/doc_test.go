package source

import "testing"

func TestPos(t *testing.T) {
	f := NewFile("a.wf", []byte("ab\ncé\r\nx"))
	cases := []struct {
		off, line, col int
	}{{0, 1, 1}, {2, 1, 3}, {3, 2, 1}, {5, 2, 3}, {8, 3, 1}, {9, 3, 2}, {100, 3, 2}}
	for _, c := range cases {
		p := f.Pos(c.off)
		if p.Line != c.line || p.Col != c.col {
			t.Errorf("Pos(%d) = %v, want %d:%d", c.off, p, c.line, c.col)
		}
		if c.off <= len(f.Src) && f.Offset(p.Line, p.Col) != c.off {
			t.Errorf("Offset(%v) = %d, want %d", p, f.Offset(p.Line, p.Col), c.off)
		}
	}
	if got := f.Line(2); got != "cé" {
		t.Errorf("Line(2) = %q", got)
	}
	if got := RuneOffsetToByte("éa", 1); got != 2 {
		t.Errorf("RuneOffsetToByte = %d", got)
	}
}

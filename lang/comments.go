package lang

// commentAt reports whether a comment starts at off. Comments are recorded
// by the lexer in source order.
func (p *parser) commentAt(off int) bool {
	cs := p.comments
	lo, hi := 0, len(cs)
	for lo < hi {
		m := (lo + hi) / 2
		if cs[m].Start < off {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo < len(cs) && cs[lo].Start == off
}

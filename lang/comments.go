package lang

// firstCommentFrom returns the index of the first comment starting at or
// after off.
func (p *parser) firstCommentFrom(off int) int {
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
	return lo
}

// exprText returns the source text of the expression at [start, end) with
// any comment inside replaced by spaces (newlines kept), so that offsets in
// the text still map one-to-one to the file and cel-go, which knows no
// block comments, never sees one.
func (p *parser) exprText(start, end int) string {
	text := p.src[start:end]
	k := p.firstCommentFrom(start)
	if k == len(p.comments) || p.comments[k].Start >= end {
		return text
	}
	b := []byte(text)
	for ; k < len(p.comments) && p.comments[k].Start < end; k++ {
		c := p.comments[k]
		for i := c.Start; i < min(c.End, end); i++ {
			if b[i-start] != '\n' && b[i-start] != '\r' {
				b[i-start] = ' '
			}
		}
	}
	return string(b)
}

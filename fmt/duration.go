package format

import (
	"strconv"
	"strings"
	"time"
)

// Duration returns the canonical spelling of the duration literal raw:
// hours, minutes and seconds, largest first, each only when it is not zero
// (90s → 1m30s, 1h0m0s → 1h, 1.5h → 1h30m, 2h0m5s → 2h5s); a fraction of a
// second is written as decimals of the seconds (1500ms → 1.5s, 1m0.25s
// stays 1m0.25s); durations under a second in the largest unit of ms, us
// and ns that leaves an integer or decimal part, as Go prints them (500ms,
// 1.5ms, 250us, 10ns); zero is 0s. The value is exactly the same, to the
// nanosecond. A literal time.ParseDuration rejects (too large) is returned
// as written.
func Duration(raw string) string {
	d, err := time.ParseDuration(raw)
	if err != nil || d < 0 {
		return raw
	}
	if d < time.Second {
		// 0s, 500ms, 1.5ms, 250µs → 250us, 10ns.
		return strings.Replace(d.String(), "µ", "u", 1)
	}
	b := make([]byte, 0, 16)
	if h := d / time.Hour; h > 0 {
		b = strconv.AppendInt(b, int64(h), 10)
		b = append(b, 'h')
		d -= h * time.Hour
	}
	if m := d / time.Minute; m > 0 {
		b = strconv.AppendInt(b, int64(m), 10)
		b = append(b, 'm')
		d -= m * time.Minute
	}
	if d > 0 {
		b = strconv.AppendInt(b, int64(d/time.Second), 10)
		if frac := int64(d % time.Second); frac > 0 {
			f := strconv.AppendInt(nil, frac+1e9, 10)[1:] // nine digits
			for len(f) > 0 && f[len(f)-1] == '0' {
				f = f[:len(f)-1]
			}
			b = append(b, '.')
			b = append(b, f...)
		}
		b = append(b, 's')
	}
	return string(b)
}

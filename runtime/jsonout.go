package runtime

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// JSON of the values a worker renders (`with` configs, templates, the
// values of expressions) without encoding/json's reflection for the common
// cases: a string that needs no escape, a number, a bool, null. Each gives
// exactly the bytes json.Marshal gives (TestJSONOutMatchesMarshal); anything
// else goes to json.Marshal. For the template shape of `wfc bench` this
// halves the allocations of rendering a run's configs.

// appendJSONString appends s as json.Marshal writes it.
func appendJSONString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		// json.Marshal escapes control characters, and <, > and & for
		// HTML, and checks UTF-8: those go to it. A quote or a
		// backslash (a list or map rendered in a template) is escaped
		// here as it does.
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '<' || c == '>' || c == '&' {
			data, _ := json.Marshal(s) // a string always marshals
			return append(dst, data...)
		}
	}
	dst = append(dst, '"')
	for len(s) > 0 {
		i := strings.IndexAny(s, `"\`)
		if i < 0 {
			dst = append(dst, s...)
			break
		}
		dst = append(append(dst, s[:i]...), '\\', s[i])
		s = s[i+1:]
	}
	return append(dst, '"')
}

// scalarJSON returns the JSON of a scalar CEL value as celNative and
// json.Marshal make it, and the bytes celNative counts for it; ok is false
// for any other value (lists, maps, bytes, durations, timestamps, a
// double without a plain decimal form, errors).
func scalarJSON(v ref.Val) (data []byte, counted int, ok bool) {
	switch x := v.(type) {
	case types.Null:
		return []byte("null"), 8, true
	case types.Bool:
		if x {
			return []byte("true"), 8, true
		}
		return []byte("false"), 8, true
	case types.Int:
		return strconv.AppendInt(nil, int64(x), 10), 8, true
	case types.Uint:
		return strconv.AppendUint(nil, uint64(x), 10), 8, true
	case types.Double:
		// encoding/json writes a float64 in 'f' form when it is 0 or its
		// magnitude is in [1e-6, 1e21), else in 'e' form with its own
		// exponent cleanup: only the first is done here.
		f := float64(x)
		if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21 || math.IsNaN(f)) {
			return nil, 0, false
		}
		return strconv.AppendFloat(nil, f, 'f', -1, 64), 8, true
	case types.String:
		return appendJSONString(nil, string(x)), len(x) + 2, true
	}
	return nil, 0, false
}

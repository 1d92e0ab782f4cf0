package runtime

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// What jsonout.go writes is what json.Marshal writes: strings (every
// escape, invalid UTF-8), and scalars through celJSON, errors included.
func TestJSONOutMatchesMarshal(t *testing.T) {
	strs := []string{"", "plain", `a "quoted" \ back\slash`, `\"`, "<b>&amp;</b>", "tab\there\nnew\r\x00\x1f\x7f",
		"é ü 日本", "\u2028\u2029", "bad \xff utf-8 \xc3", `["pen","ink"]`, "\\", `"`}
	rng := rand.New(rand.NewSource(1))
	for range 2000 {
		b := make([]byte, rng.Intn(24))
		for i := range b {
			switch rng.Intn(3) {
			case 0:
				b[i] = byte(rng.Intn(256))
			case 1:
				b[i] = `"\<>&ab`[rng.Intn(7)]
			default:
				b[i] = byte(0x20 + rng.Intn(0x5f))
			}
		}
		strs = append(strs, string(b))
	}
	for _, s := range strs {
		want, _ := json.Marshal(s)
		if got := appendJSONString([]byte("x"), s); string(got) != "x"+string(want) {
			t.Errorf("appendJSONString(%q) = %s, want %s", s, got[1:], want)
		}
	}

	vals := []ref.Val{types.NullValue, types.True, types.False, types.Int(0), types.Int(-1),
		types.Int(math.MaxInt64), types.Int(math.MinInt64), types.Uint(math.MaxUint64),
		types.Double(0), types.Double(math.Copysign(0, -1)), types.Double(42.5), types.Double(-1.25e-6),
		types.Double(1e-6), types.Double(9.99e-7), types.Double(1e20), types.Double(1e21), types.Double(123456789.123456789),
		types.Double(5e-324), types.Double(math.MaxFloat64), types.Double(math.NaN()), types.Double(math.Inf(-1))}
	for range 500 {
		vals = append(vals, types.Double(math.Float64frombits(rng.Uint64())), types.Double(rng.NormFloat64()*1e6))
	}
	for _, s := range strs {
		vals = append(vals, types.String(s))
	}
	for _, v := range vals {
		for _, max := range []int{0, 3, 5, 8, 12, 1 << 20} {
			got, gerr := celJSON(v, max)
			want, werr := celJSONSlow(v, max)
			if string(got) != string(want) || errText(gerr) != errText(werr) {
				t.Errorf("celJSON(%v, %d) = %s, %v; want %s, %v", v, max, got, gerr, want, werr)
			}
		}
	}
}

// celJSONSlow is celJSON as it was before scalarJSON: celNative, then
// json.Marshal.
func celJSONSlow(v ref.Val, max int) (json.RawMessage, error) {
	budget := max
	x, err := celNative(v, 0, &budget)
	if errors.Is(err, errTooBig) {
		return nil, fmt.Errorf("%w: over the limit of %d bytes as JSON (max_output_bytes)", errTooBig, max)
	}
	if err != nil {
		return nil, err
	}
	data, err := json.Marshal(x)
	if err == nil && len(data) > max {
		return nil, fmt.Errorf("%w: %d bytes as JSON, over the limit of %d (max_output_bytes)", errTooBig, len(data), max)
	}
	return data, err
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

package runtime

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// slowJSON is what fastJSON stands in for: encoding/json's Decoder with
// UseNumber, one value.
func slowJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

var fastJSONCases = []string{
	`{}`, `[]`, `null`, `true`, `false`, `0`, `-0`, `12`, `-3.25e+10`, `1E5`, `1.0`,
	`{"v":1}`, `{"a":[1,2,{"b":null}],"c":"x"}`, ` { "a" : 1 , "b" : [ ] } `,
	`"plain"`, `"esc \" \\ \/ \b \f \n \r \t"`, `"\u00e9\u4e2d\u0000"`, `"héllo 中文 😀"`,
	`{"a":1,"a":2}`, `{"v":1} trailing`, `1 2`, `[1,2]]`,
	// Left to encoding/json, which decides (an error, or its own reading).
	`{"a":1,}`, `[1,]`, `{"a" 1}`, `{a:1}`, `01`, `1.`, `.5`, `-`, `1e`, `+1`, `tru`, `nul`,
	`"\ud83d\ude00"`, `"\ud800"`, `"bad \x01"`, "\"\xff\xfe\"", `"\q"`, `"\u12"`, `"unterminated`,
	`{"a":{"b":{"c":[[[[[]]]]]}}}`, ``, `   `,
}

func TestFastJSON(t *testing.T) {
	for _, c := range fastJSONCases {
		checkFastJSON(t, []byte(c))
	}
	deep := bytes.Repeat([]byte("["), 300)
	if _, ok := fastJSON(deep); ok {
		t.Error("300 nested arrays: decoded, want left to encoding/json")
	}
	// The common cases take the fast path.
	for _, c := range []string{`{"v":1}`, `{"text":"Dear Ada, \"A-1042\"","items":["pen","ink"],"total":42.5}`} {
		if _, ok := fastJSON([]byte(c)); !ok {
			t.Errorf("%s: not decoded", c)
		}
	}
}

func checkFastJSON(t *testing.T, data []byte) {
	t.Helper()
	fv, ok := fastJSON(data)
	if !ok {
		return // encoding/json decides
	}
	sv, err := slowJSON(data)
	if err != nil {
		t.Errorf("%q: fast decoded %#v, encoding/json: %v", data, fv, err)
		return
	}
	if !reflect.DeepEqual(fv, sv) {
		t.Errorf("%q: fast %#v, encoding/json %#v", data, fv, sv)
	}
}

// FuzzFastJSON: whatever fastJSON decodes, encoding/json decodes to the
// same value.
func FuzzFastJSON(f *testing.F) {
	for _, c := range fastJSONCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkFastJSON(t, data) })
}

func BenchmarkDecodeOutput(b *testing.B) {
	data := []byte(`{"text":"Dear Ada, your order A-1042 of [\"pen\",\"ink\",\"paper\"] totals 42.5.","n":64,"ok":true}`)
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			fastJSON(data)
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			slowJSON(data)
		}
	})
}

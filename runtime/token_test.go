package runtime

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var tokenSamples = []string{
	`{"kind":"exec","run":"01m86","node":"a","iter":"","hop":1,"attempt":1,"item":-1,"gen":0,"g":"sha256:ab.d","mh":10000}`,
	`{"kind":"item","run":"r","node":"fe","iter":"2.1","hop":3,"attempt":2,"item":7,"gen":1}`,
	`{"kind":"finish","run":"r","node":"","iter":"","hop":0,"attempt":1,"item":-1,"gen":0}`,
	`{"kind":"finish","run":"r","node":"","iter":"","hop":0,"attempt":1,"item":-1,"gen":2,"g":"sha256:ab.d","mh":0}`,
	`{"kind":"exec","run":"r","node":"a","iter":"","hop":1,"attempt":1,"item":-1,"gen":0}`,
	`{"kind":"exec","run":"r","node":"b","iter":"","hop":2,"attempt":1,"item":-1,"gen":0,"g":"sha256:ab.d","mh":10,"o":{"out|a":"{\"x\":\"\\u00e9\\/\"}","er|a":null}}`,
	// Other layouts: encoding/json decides.
	`{"gen":0,"run":"r","kind":"exec","node":"a","item":-1}`,
	`{"kind":"exec","run":"r\u0041","node":"a","iter":"","hop":1,"attempt":1,"item":-1,"gen":0}`,
	`{"kind":"exec","run":"r","node":"a","iter":"","hop":01,"attempt":1,"item":-1,"gen":0}`,
	`{"kind":"exec","run":"r","node":"a","iter":"","hop":1.5,"attempt":1,"item":-1,"gen":0}`,
	`{"kind":"exec","run":"r","node":"a","iter":"","hop":1,"attempt":1,"item":-1,"gen":0,"g":"x"}`,
	`{"kind":"exec","run":"r","node":"a","iter":"","hop":1,"attempt":1,"item":-1,"gen":0} `,
	`{"kind":"exec","run":"é","node":"a","iter":"","hop":1,"attempt":1,"item":-1,"gen":0}`,
	`{"kind":"exec","run":"r","node":"a","iter":"","hop":99999999999999999999,"attempt":1,"item":-1,"gen":0}`,
	`{"kind":"exec","run":"r","node":"a","iter":"","hop":-,"attempt":1,"item":-1,"gen":0}`,
	`{"kind":"exec","run":"r","node":"b","iter":"","hop":2,"attempt":1,"item":-1,"gen":0,"g":"s","mh":10,"o":{"out|a":1}}`,
	`{"kind":"exec","run":"r","node":"b","iter":"","hop":2,"attempt":1,"item":-1,"gen":0,"g":"s","mh":10,"o":{"out|a":"x"}}}`,
	`{"kind":"exec","run":"r","node":"b","iter":"","hop":2,"attempt":1,"item":-1,"gen":0,"g":"s","mh":10,"o":null}`,
	`{"kind":"exec","run":"r","node":"b","iter":"","hop":2,"attempt":1,"item":-1,"gen":0,"g":"s","mh":10,"o":{"out|a":"x"}`,
	`{`, ``, `null`, `[]`,
}

// decodeToken reads the scripts' layout itself and gives what
// encoding/json gives, for every input.
func TestDecodeToken(t *testing.T) {
	fast := 0
	for _, raw := range tokenSamples {
		if _, ok := fastToken(raw, Token{Item: -1}); ok {
			fast++
		}
		checkDecodeToken(t, raw)
	}
	if fast != 7 {
		t.Errorf("%d samples read directly, want the 7 in the scripts' layout", fast)
	}
}

func checkDecodeToken(t *testing.T, raw string) {
	t.Helper()
	want, got := Token{Item: -1}, Token{Item: -1}
	werr := json.Unmarshal([]byte(raw), &want)
	gerr := decodeToken(raw, &got)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("%q: error %v, encoding/json's %v", raw, gerr, werr)
	}
	if werr == nil {
		if d := cmp.Diff(want, got); d != "" {
			t.Fatalf("%q: (-encoding/json +decodeToken)\n%s", raw, d)
		}
	}
}

func FuzzDecodeToken(f *testing.F) {
	for _, s := range tokenSamples {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) { checkDecodeToken(t, raw) })
}

func BenchmarkDecodeToken(b *testing.B) {
	raw := tokenSamples[0]
	b.Run("fast", func(b *testing.B) {
		for b.Loop() {
			var tok Token
			decodeToken(raw, &tok)
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		for b.Loop() {
			var tok Token
			json.Unmarshal([]byte(raw), &tok)
		}
	})
}

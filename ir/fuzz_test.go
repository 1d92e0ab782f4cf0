package ir

import (
	"bytes"
	"testing"
	"time"
)

// FuzzDecode checks that Decode never panics and that whatever it accepts
// round-trips: Marshal is stable across Decode, the hash survives, YAML
// round-trips, Validate does not panic, and what Validate accepts the
// schema accepts.
func FuzzDecode(f *testing.F) {
	for _, name := range names(analyzed(f)) {
		w := allWorkflows()[name]
		if err := Analyze(w); err != nil {
			f.Fatal(err)
		}
		b, err := Marshal(w)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		c, err := Canonical(w)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(c)
	}
	for _, s := range []string{
		``, `{}`, `[]`, `null`, `{"nodes": [{}]}`, `{"name": "x", "name": "y"}`,
		`{"nodes": [{"id": "a", "with": [{"name": "p", "value": {"const": "\ud800\u0041<"}}]}]}`,
		`{"nodes": [{"id": "a"}, {"id": "b"}], "edges": [{"from": "a", "to": "b", "kind": "after"}, {"from": "b", "to": "a", "kind": "loop"}]}`,
		`{"inputs": [{"name": "x", "type": {"kind": "list", "elem": {"kind": "int"}}, "default": [1.0, -0, 1e3]}]}`,
		`{"nodes": [{"id": "a", "type": "flow", "flow": {"uses": "c.wf", "hash": "sha256:0"}}], "children": [{"hash": "sha256:0", "workflow": {"children": [{"workflow": {}}]}}]}`,
		`{"children": [{"hash": "", "workflow": {"nodes": [{"id": "a"}], "edges": [{"from": "a", "to": "a", "kind": "after"}]}}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		defer watchdog()()
		w, err := Decode(data)
		if w != nil {
			_ = Validate(w)
		}
		if err != nil {
			return
		}
		b1, err := Marshal(w)
		if err != nil {
			t.Fatalf("Marshal of a decoded workflow: %v", err)
		}
		h1, err := Hash(w)
		if err != nil {
			t.Fatalf("Hash: %v", err)
		}
		w2, err := Decode(b1)
		if err != nil {
			t.Fatalf("Decode(Marshal(w)): %v\n%s", err, b1)
		}
		b2, err := Marshal(w2)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b1, b2) {
			t.Fatalf("Marshal not stable:\n%s\n%s", b1, b2)
		}
		if h2, _ := Hash(w2); h1 != h2 {
			t.Fatalf("hash changed across Marshal/Decode: %s %s", h1, h2)
		}
		y, err := MarshalYAML(w)
		if err != nil {
			t.Fatalf("MarshalYAML: %v", err)
		}
		w3, err := DecodeYAML(y)
		if err != nil {
			t.Fatalf("DecodeYAML(MarshalYAML(w)): %v\n%s", err, y)
		}
		b3, err := Marshal(w3)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b1, b3) {
			t.Fatalf("YAML round trip differs:\n%s\n%s\nYAML:\n%s", b1, b3, y)
		}
		if len(Validate(w)) == 0 {
			if err := ValidateSchema(b1); err != nil {
				t.Fatalf("Validate accepts but the schema rejects: %v\n%s", err, b1)
			}
		}
	})
}

// FuzzYAML checks that DecodeYAML never panics or hangs.
func FuzzYAML(f *testing.F) {
	for _, w := range analyzed(f) {
		y, err := MarshalYAML(w)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(y)
	}
	f.Add([]byte("a: &a [1]\nb: *a\n"))
	f.Add([]byte("name: [[[[{a: b}]]]]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		defer watchdog()()
		w, err := DecodeYAML(data)
		if w != nil {
			_ = Validate(w)
		}
		_ = err
	})
}

// watchdog crashes the fuzz worker if one input takes too long: the fuzzing
// engine has no per-input timeout, and a crash makes it report the input.
func watchdog() (stop func()) {
	t := time.AfterFunc(30*time.Second, func() { panic("fuzz input took over 30s") })
	return func() { t.Stop() }
}

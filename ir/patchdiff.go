package ir

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
)

// A PatchOp is one RFC 6902 operation, as Diff writes it.
type PatchOp struct {
	Op    string          `json:"op"`
	Path  string          `json:"path"`
	From  string          `json:"from,omitempty"`
	Value json.RawMessage `json:"value,omitempty"`
}

// derivedKeys are the fields Analyze computes and Decode ignores, and the
// fields that only say where a workflow came from (Source, Loc): Diff
// leaves them out, so that a patch says what changes in what the workflow
// does, and an edit above a node does not rewrite every location below.
var (
	derivedTop  = map[string]bool{"entries": true, "terminals": true, "order": true, "source": true}
	derivedNode = map[string]bool{"dependencies": true, "dependents": true, "join_info": true, "may_skip": true,
		"entry": true, "terminal": true, "loop_body": true, "loc": true}
)

// arrayKeys names the field that identifies an element of each keyed
// array of the document; edges are identified by all three fields.
var arrayKeys = map[string]string{"nodes": "id", "handlers": "name", "inputs": "name", "outputs": "name", "children": "hash"}

// Diff returns the RFC 6902 patch that turns old into new (by Hash: equal
// up to source locations and derived fields), as a JSON array. Nodes,
// handlers, inputs, outputs and children are addressed by their key: each
// index-based operation on an element is preceded by a test of its key
// (`test /nodes/3/id "check"`), so a patch made against one version fails
// cleanly against another instead of editing the wrong node. Removals come
// first, in descending index order; then changed elements, field by field;
// then insertions, in ascending order (appends as /-). An element whose
// place among the kept ones changed is removed and inserted again.
func Diff(old, new *Workflow) ([]byte, error) {
	a, err := diffDoc(old)
	if err != nil {
		return nil, err
	}
	b, err := diffDoc(new)
	if err != nil {
		return nil, err
	}
	var ops []PatchOp
	for _, k := range docOrder(unionKeys(a, b)) {
		if derivedTop[k] {
			continue
		}
		av, aok := a[k]
		bv, bok := b[k]
		switch {
		case !bok:
			ops = append(ops, PatchOp{Op: "remove", Path: "/" + escapePointer(k)})
		case !aok:
			ops = append(ops, PatchOp{Op: "add", Path: "/" + escapePointer(k), Value: bv})
		case rawEqual(av, bv):
		case k == "edges":
			ops = append(ops, diffArray("/edges", av, bv, edgeElemKey)...)
		case arrayKeys[k] != "":
			key := arrayKeys[k]
			ops = append(ops, diffArray("/"+k, av, bv, fieldKey(key))...)
		default:
			ops = append(ops, PatchOp{Op: "replace", Path: "/" + escapePointer(k), Value: bv})
		}
	}
	if ops == nil {
		ops = []PatchOp{}
	}
	return json.MarshalIndent(ops, "", "  ")
}

// diffDoc is w's JSON as an object of raw fields, without the derived
// ones of its nodes.
func diffDoc(w *Workflow) (map[string]json.RawMessage, error) {
	data, err := Marshal(w)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	if raw, ok := m["nodes"]; ok {
		var nodes []map[string]json.RawMessage
		if err := json.Unmarshal(raw, &nodes); err != nil {
			return nil, err
		}
		for _, n := range nodes {
			for k := range derivedNode {
				delete(n, k)
			}
		}
		if m["nodes"], err = json.Marshal(nodes); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// topOrder is the order of a document's fields (Workflow's), which Diff's
// operations follow: nodes before the edges between them.
var topOrder = []string{"ir_version", "name", "version", "description", "settings", "inputs", "outputs", "handlers", "nodes", "edges", "finally", "goals", "children"}

// docOrder sorts keys in document order, unknown ones last.
func docOrder(keys []string) []string {
	rank := func(k string) int {
		if i := slices.Index(topOrder, k); i >= 0 {
			return i
		}
		return len(topOrder)
	}
	slices.SortStableFunc(keys, func(x, y string) int { return rank(x) - rank(y) })
	return keys
}

func unionKeys(a, b map[string]json.RawMessage) []string {
	var keys []string
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	// Document order would be nicer, but a stable order is what matters.
	slices.Sort(keys)
	return keys
}

// A keyed element: its key (for the test op) and its encoding.
type element struct {
	key  string          // identity among the array's elements
	test PatchOp         // the test that it is the element at an index (path filled in later)
	raw  json.RawMessage // the element
}

type keyFunc func(raw json.RawMessage) (key string, testPath string, testValue json.RawMessage, ok bool)

func fieldKey(name string) keyFunc {
	return func(raw json.RawMessage) (string, string, json.RawMessage, bool) {
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil || m[name] == nil {
			return "", "", nil, false
		}
		return string(m[name]), "/" + name, m[name], true
	}
}

func edgeElemKey(raw json.RawMessage) (string, string, json.RawMessage, bool) {
	var e Edge
	if json.Unmarshal(raw, &e) != nil {
		return "", "", nil, false
	}
	v, _ := json.Marshal(e)
	return e.From + "\x00" + e.To + "\x00" + e.Kind, "", v, true
}

// diffArray diffs two arrays of keyed elements; when keys repeat or an
// element has none, it replaces the whole array.
func diffArray(path string, a, b json.RawMessage, kf keyFunc) []PatchOp {
	whole := []PatchOp{{Op: "replace", Path: path, Value: b}}
	ea, ok1 := elements(a, kf)
	eb, ok2 := elements(b, kf)
	if !ok1 || !ok2 {
		return whole
	}
	inB := map[string]int{}
	for i, e := range eb {
		inB[e.key] = i
	}
	// The kept elements: in both, and in the same relative order (the
	// longest increasing run of their indices in b); the others of a are
	// removed, the others of b inserted.
	var common []int // indices in a of elements also in b
	for i, e := range ea {
		if _, ok := inB[e.key]; ok {
			common = append(common, i)
		}
	}
	keep := map[string]bool{}
	for _, i := range longestIncreasing(common, func(i int) int { return inB[ea[i].key] }) {
		keep[ea[i].key] = true
	}
	var ops []PatchOp
	test := func(e element, idx int) PatchOp {
		t := e.test
		t.Path = path + "/" + strconv.Itoa(idx) + t.Path
		return t
	}
	for i := len(ea) - 1; i >= 0; i-- {
		if !keep[ea[i].key] {
			ops = append(ops, test(ea[i], i), PatchOp{Op: "remove", Path: path + "/" + strconv.Itoa(i)})
		}
	}
	// Changes, at the indices after the removals.
	j := 0
	for _, e := range ea {
		if !keep[e.key] {
			continue
		}
		nb := eb[inB[e.key]]
		if !rawEqual(e.raw, nb.raw) {
			ops = append(ops, test(e, j))
			ops = append(ops, diffObject(path+"/"+strconv.Itoa(j), e.raw, nb.raw)...)
		}
		j++
	}
	// Insertions, in ascending order: every element before one in b is
	// in place when it is inserted.
	n := j
	for i, e := range eb {
		if keep[e.key] {
			continue
		}
		p := path + "/" + strconv.Itoa(i)
		if i == n {
			p = path + "/-"
		}
		ops = append(ops, PatchOp{Op: "add", Path: p, Value: e.raw})
		n++
	}
	return ops
}

func elements(raw json.RawMessage, kf keyFunc) ([]element, bool) {
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		return nil, false
	}
	seen := map[string]bool{}
	out := make([]element, len(list))
	for i, r := range list {
		k, tp, tv, ok := kf(r)
		if !ok || seen[k] {
			return nil, false
		}
		seen[k] = true
		out[i] = element{key: k, test: PatchOp{Op: "test", Path: tp, Value: tv}, raw: r}
	}
	return out, true
}

// diffObject diffs two objects field by field (an element that is not an
// object is replaced).
func diffObject(path string, a, b json.RawMessage) []PatchOp {
	var ma, mb map[string]json.RawMessage
	if json.Unmarshal(a, &ma) != nil || json.Unmarshal(b, &mb) != nil {
		return []PatchOp{{Op: "replace", Path: path, Value: b}}
	}
	var ops []PatchOp
	for _, k := range unionKeys(ma, mb) {
		av, aok := ma[k]
		bv, bok := mb[k]
		p := path + "/" + escapePointer(k)
		switch {
		case !bok:
			ops = append(ops, PatchOp{Op: "remove", Path: p})
		case !aok:
			ops = append(ops, PatchOp{Op: "add", Path: p, Value: bv})
		case !rawEqual(av, bv):
			ops = append(ops, PatchOp{Op: "replace", Path: p, Value: bv})
		}
	}
	return ops
}

// longestIncreasing returns the longest subsequence of xs whose values
// f(x) increase (patience sorting), in order.
func longestIncreasing(xs []int, f func(int) int) []int {
	if len(xs) == 0 {
		return nil
	}
	tails := []int{} // index into xs of the smallest tail of each length
	prev := make([]int, len(xs))
	for i, x := range xs {
		v := f(x)
		k, _ := slices.BinarySearchFunc(tails, v, func(t, v int) int { return f(xs[t]) - v })
		if k > 0 {
			prev[i] = tails[k-1]
		} else {
			prev[i] = -1
		}
		if k == len(tails) {
			tails = append(tails, i)
		} else {
			tails[k] = i
		}
	}
	out := make([]int, len(tails))
	for i, k := len(tails)-1, tails[len(tails)-1]; i >= 0; i, k = i-1, prev[k] {
		out[i] = xs[k]
	}
	return out
}

func rawEqual(a, b json.RawMessage) bool {
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return bytes.Equal(a, b)
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}

// escapePointer escapes a key for a JSON pointer (RFC 6901).
func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

package runtime

import (
	"reflect"
	"strconv"
	"testing"
)

// TestMetaNamesCoverRunMeta: every field of runMeta that parseMeta decodes
// is read from the state hash. metaNames lists the run's fields that
// readMeta and status read, and parseMeta decodes them by name: a field
// decoded but missing from metaNames would always be zero. Every name gets
// a distinct non-zero value here, through both ways of reading (readMeta's
// HMGET reply, status's HGETALL), and every runMeta field must come out set.
func TestMetaNamesCoverRunMeta(t *testing.T) {
	vals := make([]any, len(metaNames))
	all := map[string]string{}
	for i, n := range metaNames {
		v := strconv.Itoa(i + 1)
		vals[i], all[runField(n)] = v, v
	}
	for name, h := range map[string]map[string]string{"readMeta": metaMap(vals), "status": metaFromHash(all)} {
		m, err := parseMeta("r", h)
		if err != nil {
			t.Fatal(err)
		}
		rv := reflect.ValueOf(*m)
		for i := range rv.NumField() {
			if rv.Field(i).IsZero() {
				t.Errorf("%s: runMeta.%s is not read from the state hash (is its name in metaNames?)", name, rv.Type().Field(i).Name)
			}
		}
	}
}

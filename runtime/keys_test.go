package runtime

import (
	"slices"
	"testing"
)

// scriptKeys cuts the keys from one string; they are the keys the layout's
// functions name one by one.
func TestScriptKeys(t *testing.T) {
	for _, shards := range []int{1, 3, 12} {
		k := newKeyspace("wfx", shards)
		for _, queues := range [][]string{nil, {ControlQueue}, {ControlQueue, "gpu", "a-b"}} {
			for _, run := range []string{"01m86k7zr8wz07qdsdc7w1705f", "r", "run.with-dots_1"} {
				want := k.runKeys(run)
				s := k.shard(run)
				want[6] = k.graph(s, "sha256:ab.d")
				for _, q := range queues {
					want = append(want, k.stream(s, q), k.timers(s, q))
				}
				if got := k.scriptKeys(run, "sha256:ab.d", queues); !slices.Equal(got, want) {
					t.Errorf("shards %d, queues %v, run %s:\n got %q\nwant %q", shards, queues, run, got, want)
				}
			}
		}
	}
}

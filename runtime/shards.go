package runtime

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrShardMismatch is returned, with ErrUnknownRun, for a run that is not
// in the shard where this process looks but is in another one: it was
// submitted by a process with another shard count (Options.Shards,
// --shards). Every process of a deployment must use the same count.
var ErrShardMismatch = errors.New("submitted with another shard count")

// maxProbeShards is the largest shard count probed for a run that is not
// where it should be.
const maxProbeShards = 256

// explainUnknown returns err, an ErrUnknownRun for run, or when the run's
// state is in the shard another shard count puts it in, an error that says
// so: "never submitted" would send the operator looking for a run that
// exists. It probes, in one pipeline, the shard of the run under every
// count up to maxProbeShards; only a run that is not found pays for it.
func (s *store) explainUnknown(ctx context.Context, run string, err error) error {
	if !errors.Is(err, ErrUnknownRun) || !validRunID(run) {
		return err
	}
	own := s.ks.shard(run)
	counts := map[int][]int{} // shard -> the counts that put the run there
	for n := 1; n <= maxProbeShards; n++ {
		if i := (keyspace{shards: n}).shard(run); i != own {
			counts[i] = append(counts[i], n)
		}
	}
	pipe := s.rdb.Pipeline()
	found := map[int]func() (int64, error){}
	for i := range counts {
		// The state key of the run in shard i, with the layout of keys.go.
		ks := keyspace{prefix: s.ks.prefix, shards: 1, tags: []string{fmt.Sprintf("%s:{%d}", s.ks.prefix, i)}}
		found[i] = pipe.Exists(ctx, ks.state(run)).Result
	}
	if _, perr := pipe.Exec(ctx); perr != nil {
		return err // the probe is a courtesy: keep the plain answer
	}
	for i := range maxProbeShards { // the lowest shard first: a stable answer
		exists, probed := found[i]
		if !probed {
			continue
		}
		if c, _ := exists(); c > 0 {
			return fmt.Errorf("%w %s to this process: not in shard %d of %d, where it looks, but in shard %d, where --shards %s puts it (%w: every process of a deployment must use the same --shards)",
				ErrUnknownRun, run, own, s.ks.shards, i, orList(counts[i], 3), ErrShardMismatch)
		}
	}
	return err
}

// orList writes the first most of ns as "2, 4 or 6".
func orList(ns []int, most int) string {
	if len(ns) > most {
		ns = ns[:most]
	}
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	if len(s) == 1 {
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

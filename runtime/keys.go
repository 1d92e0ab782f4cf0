package runtime

import (
	"crypto/rand"
	"fmt"
	"hash/fnv"
	"strings"
	"time"
)

// DefaultPrefix is the prefix of every key the runtime writes.
const DefaultPrefix = "wf"

// Group is the consumer group every worker reads the queue streams with.
const Group = "wfc"

// ControlQueue is the queue that carries a run's control messages: run
// deadlines and the evaluation of the workflow's outputs. At least one worker
// must serve it.
const ControlQueue = "default"

// keyspace computes the key layout (docs/runtime.md, "Keys"). Every key of a
// run, and the queues and timers its scripts write to, carry the run's shard
// as a hash tag, so that a script only touches keys of one Redis Cluster slot.
type keyspace struct {
	prefix string
	shards int
	tags   []string // "prefix:{shard}" by shard, computed once: every key starts with one
}

// newKeyspace is the only way to make a keyspace: it computes the tags.

func newKeyspace(prefix string, shards int) keyspace {
	k := keyspace{prefix: prefix, shards: shards}
	for s := range max(shards, 1) {
		k.tags = append(k.tags, fmt.Sprintf("%s:{%d}", prefix, s))
	}
	return k
}

// shard returns the shard of a run: FNV-1a of the run id modulo the shard
// count. Every process of a deployment must use the same shard count.
func (k keyspace) shard(run string) int {
	if k.shards <= 1 {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(run))
	return int(h.Sum32() % uint32(k.shards))
}

func (k keyspace) tag(shard int) string { return k.tags[shard] }

// runKeys returns the fixed keys of a run in script order (KEYS[1..6]).
func (k keyspace) runKeys(run string) []string {
	base := k.runBase(run)
	return []string{
		base + "state",   // hash: the run: run|<field> (status, gen, counter, ir, graph, inputs, ...); exec key -> node state; hop|x, err|x, att|x, out|x (output); join arrivals and counts
		base + "applied", // set: operation keys already applied
		base + "events",  // stream: the run's event log
		"",               // graph key, filled in by the caller
		base + "items",   // hash: for_each items, item states and outputs
		base + "comp",    // list: compensable exec keys in completion order
	}
}

// graphSlot is the index of the graph key in runKeys.
const graphSlot = 3

// runField is the state hash's field of one of the run's own fields
// (status, gen, counter, ...; the meta is metaNames); the scripts write the same
// names (lib.lua, step.lua).
func runField(name string) string { return "run|" + name }

// outField is the state hash's field of an execution's (or a node's latest)
// output.
func outField(x string) string { return "out|" + x }

// iterField names the state field holding how many iterations loop node id
// ran (set by complete.lua at each of its completions).
func iterField(id string) string { return "it|" + id }

// errField names the state field holding node id's latest failure as JSON
// {code, message} (x.error; in a loop body, the current iteration's).
func errField(id string) string { return "er|" + id }

// runBase is the start of every key of runKeys; runKey returns one of them.
func (k keyspace) runBase(run string) string { return k.tag(k.shard(run)) + ":run:" + run + ":" }

// (One concatenation, one string: state and events are made per execution.)
func (k keyspace) runKey(run, name string) string {
	return k.tag(k.shard(run)) + ":run:" + run + ":" + name
}

func (k keyspace) state(run string) string  { return k.runKey(run, "state") }
func (k keyspace) events(run string) string { return k.runKey(run, "events") }
func (k keyspace) items(run string) string  { return k.runKey(run, "items") }

// graph is the per-shard copy of a workflow's routing graph; suffix is the
// IR hash and the queue-assignment hash.
func (k keyspace) graph(shard int, suffix string) string {
	return k.tag(shard) + ":graph:" + suffix
}

func (k keyspace) stream(shard int, queue string) string { return k.tag(shard) + ":q:" + queue }

// entries is a queue's entry stream: the entry tokens of new runs wait
// there, without a consumer group, until a worker's take moves them into
// the queue's stream (docs/runtime.md, "Scheduling"). Same hash tag as
// the queue's stream: take touches both in one script.
func (k keyspace) entries(shard int, queue string) string { return k.tag(shard) + ":new:" + queue }

// admit is the shard's admission hash: queue -> the credits idle workers
// granted (take.lua), which let a new run's entry tokens skip the entry
// stream.
func (k keyspace) admit(shard int) string { return k.tag(shard) + ":admit" }

// takeKeys returns KEYS for take: the shard's admission hash, then each
// queue's stream and entry stream.
func (k keyspace) takeKeys(shard int, queues []string) []string {
	keys := make([]string, 1, 1+2*len(queues))
	keys[0] = k.admit(shard)
	for _, q := range queues {
		keys = append(keys, k.stream(shard, q), k.entries(shard, q))
	}
	return keys
}

// admitKeys returns the keys start.lua appends to the run keys for a new
// top-level run: the shard's admission hash, then the entry stream of
// each of the run's queues.
func (k keyspace) admitKeys(run string, queues []string) []string {
	s := k.shard(run)
	keys := make([]string, 1, 1+len(queues))
	keys[0] = k.admit(s)
	for _, q := range queues {
		keys = append(keys, k.entries(s, q))
	}
	return keys
}
func (k keyspace) timers(shard int, queue string) string { return k.tag(shard) + ":timers:" + queue }

// workers is the shard's worker registry: a hash of consumer name -> the
// worker's record (regRecord, JSON), which every worker serving the shard
// refreshes with its heartbeat. It is per shard so that the reap script
// touches it and the shard's queue streams in one slot.
func (k keyspace) workers(shard int) string { return k.tag(shard) + ":workers" }

// ir is the content-addressed IR document. It is read with plain commands,
// never inside a script, so it needs no hash tag.
func (k keyspace) ir(hash string) string { return k.prefix + ":ir:" + hash }

// scriptKeys returns KEYS for a run script: the six run keys, then a stream
// and a timers key for each of the run's queues.
func (k keyspace) scriptKeys(run, graphSuffix string, queues []string) []string {
	s := k.shard(run)
	keys := k.runKeys(run)
	keys[graphSlot] = k.graph(s, graphSuffix)
	for _, q := range queues {
		keys = append(keys, k.stream(s, q), k.timers(s, q))
	}
	return keys
}

// advanceKeys returns KEYS for advance, which has a layout of its own (the
// keys it uses until a run's last step): the run's state and events, then
// the stream of each of the run's queues.
func (k keyspace) advanceKeys(run string, queues []string) []string {
	keys := make([]string, 2, 2+len(queues))
	keys[0], keys[1] = k.state(run), k.events(run)
	return k.appendStreams(keys, k.shard(run), queues)
}

// beginKeys returns KEYS for begin, which has a layout of its own (the
// keys it uses): the run's state and events, the graph, the control
// queue's timers (queues[0]), the shard's admission hash, then the stream
// and the entry stream of each of the run's queues.
func (k keyspace) beginKeys(run, graphSuffix string, queues []string) []string {
	s := k.shard(run)
	keys := append(make([]string, 0, 5+2*len(queues)), k.state(run), k.events(run), k.graph(s, graphSuffix), k.timers(s, queues[0]), k.admit(s))
	for _, q := range queues {
		keys = append(keys, k.stream(s, q), k.entries(s, q))
	}
	return keys
}

// appendStreams appends the stream key of each queue of shard s.
func (k keyspace) appendStreams(keys []string, s int, queues []string) []string {
	for _, q := range queues {
		keys = append(keys, k.stream(s, q))
	}
	return keys
}

// newRunID returns a 26-character, time-ordered, random id in Crockford
// base32 (48 bits of milliseconds, 80 random bits).
func newRunID() string {
	const alphabet = "0123456789abcdefghjkmnpqrstvwxyz"
	var b [16]byte
	ms := uint64(time.Now().UnixMilli())
	for i := 5; i >= 0; i-- {
		b[i] = byte(ms)
		ms >>= 8
	}
	if _, err := rand.Read(b[6:]); err != nil {
		panic(err)
	}
	// 128 bits -> 26 base32 digits (the top 2 bits of the first digit are 0).
	var out [26]byte
	var acc uint64
	var bits uint
	j := 25
	for i := 15; i >= 0; i-- {
		acc |= uint64(b[i]) << bits
		bits += 8
		for bits >= 5 && j >= 0 {
			out[j] = alphabet[acc&31]
			acc >>= 5
			bits -= 5
			j--
		}
	}
	if j >= 0 {
		out[j] = alphabet[acc&31]
	}
	return string(out[:])
}

// validRunID reports whether id can name a run: 1 to 128 of [A-Za-z0-9_.-].
// Run ids are spliced into keys and into tokens the scripts build, so no
// other characters are allowed.
func validRunID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for _, r := range id {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_.-", r)
		if !ok {
			return false
		}
	}
	return true
}

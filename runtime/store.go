package runtime

import (
	"cmp"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wfc-lang/wfc/ir"
)

//go:embed scripts/*.lua
var scriptFS embed.FS

// runScripts are the scripts that share lib.lua and the run KEYS layout.
var runScripts = []string{"start", "complete", "retry", "expand", "itemdone", "finish", "abort", "cancel", "compdone", "compretry", "rerun", "finaldone", "started", "await", "decide", "wait", "flow", "listen", "signal", "patch"}

// streamScripts stand alone: they work on one stream or timers key (promote,
// heartbeat, release), on a shard's queue and entry streams (take) or on a
// worker's consumers (reap), or, as the fast paths of complete and start
// (advance, begin) and of itemdone (itemnext), on the run KEYS with
// positional arguments and only step.lua before them. take and admit
// share admission.lua.
var streamScripts = []string{"promote", "heartbeat", "release", "reap", "advance", "begin", "itemnext", "deploy", "take", "admit"}

// preludes are the files a script's body follows, by script: step.lua
// (what every script writing a run's steps shares) and lib.lua, or
// admission.lua (take and admit).
func preludes(name string) []string {
	switch {
	case slices.Contains(runScripts, name):
		return []string{"step", "lib"}
	case name == "advance" || name == "begin" || name == "itemnext":
		return []string{"step"}
	case name == "take" || name == "admit":
		return []string{"admission"}
	}
	return nil
}

func loadScripts() (map[string]*redis.Script, error) {
	m := map[string]*redis.Script{}
	for _, name := range slices.Concat(runScripts, streamScripts) {
		src, err := ScriptSource(name)
		if err != nil {
			return nil, err
		}
		m[name] = redis.NewScript(src)
	}
	return m, nil
}

// ScriptSource returns the Lua source of a script as the runtime loads it
// (its preludes, then its body), so that workers in other languages can
// load exactly the same code.
func ScriptSource(name string) (string, error) {
	if !slices.Contains(runScripts, name) && !slices.Contains(streamScripts, name) {
		return "", fmt.Errorf("runtime: no script %q", name)
	}
	var parts []string
	files := append(preludes(name), name)
	if name == "decide" {
		// decide checks and records a decision, then makes complete's
		// transition (scripts/decide.lua).
		files = append(files, "complete")
	}
	for _, f := range files {
		b, err := scriptFS.ReadFile("scripts/" + f + ".lua")
		if err != nil {
			return "", err
		}
		parts = append(parts, string(b))
	}
	return strings.Join(parts, "\n"), nil
}

// store is the runtime's access to Redis: one client for commands and
// scripts, and one with its own pool for blocking reads.
type store struct {
	rdb     redis.UniversalClient // a *redis.Client, or a *redis.ClusterClient
	blk     redis.UniversalClient
	ks      keyspace
	scripts map[string]*redis.Script

	mu     sync.Mutex
	plans  map[string]*plan        // by IR hash, loaded from Redis
	graph  map[string]bool         // graph keys known to be stored
	queues map[string]*graphQueues // by graph key, loaded from Redis
}

// graphQueues is the queue assignment of a stored graph: each node's queue,
// and the queues of a run of it as its meta lists them (the control queue,
// then the others of its nodes and compensations, sorted).
type graphQueues struct {
	node map[string]string
	list []string
}

func newStore(rdb, blk redis.UniversalClient, ks keyspace) (*store, error) {
	sc, err := loadScripts()
	if err != nil {
		return nil, err
	}
	return &store{rdb: rdb, blk: blk, ks: ks, scripts: sc, plans: map[string]*plan{}, graph: map[string]bool{}, queues: map[string]*graphQueues{}}, nil
}

// loadScripts loads every script into the server's script cache (SCRIPT
// LOAD); calls go by SHA with EVALSHA and fall back to EVAL on NOSCRIPT,
// e.g. after a server restart.
func (s *store) load(ctx context.Context) error {
	for name, sc := range s.scripts {
		if err := sc.Load(ctx, s.rdb).Err(); err != nil {
			return fmt.Errorf("loading script %s: %w", name, err)
		}
	}
	return nil
}

// A runRef is what a script call needs to know about a run.
type runRef struct {
	id     string
	graph  string // graph key suffix
	queues []string
}

// queueIndex returns the 1-based index of a queue among the run's queues
// (its stream is KEYS[8+2i], its timers KEYS[9+2i]), or 0 if it is not one.
func (r runRef) queueIndex(q string) int {
	for i, x := range r.queues {
		if x == q {
			return i + 1
		}
	}
	return 0
}

func (s *store) keys(r runRef) []string { return s.ks.scriptKeys(r.id, r.graph, r.queues) }

// msgRef names the queue message a script acknowledges.
type msgRef struct {
	Q  string `json:"q"`
	ID string `json:"id"`
}

// base holds the fields every run script reads from A.
type base struct {
	Run    string   `json:"run"`
	Now    string   `json:"now"`
	Queues []string `json:"queues"`
	Msg    *msgRef  `json:"msg,omitempty"`
}

func nowMS() int64 { return time.Now().UnixMilli() }

func (s *store) base(r runRef, msg *msgRef) base {
	return base{Run: r.id, Now: strconv.FormatInt(nowMS(), 10), Queues: r.queues, Msg: msg}
}

// ErrUnknownRun is returned for a run id that names no run: it was never
// submitted (with this prefix and shard count), or it ended more than its
// retention period ago and its keys expired.
var ErrUnknownRun = errors.New("unknown run")

func unknownRun(run string) error {
	return fmt.Errorf("%w %s (no such run: never submitted here, or it ended more than its retention period ago and its keys expired)", ErrUnknownRun, run)
}

// call runs a run script and returns its status reply ("ok", "dup",
// "inactive", "stale", ...). Error replies of the scripts ("ERR wfc: ...")
// become errors.
func (s *store) call(ctx context.Context, name string, r runRef, args any) (string, error) {
	return s.callWith(ctx, name, r, args, func(sc *redis.Script, keys []string, arg string) (any, error) {
		return sc.Run(ctx, s.rdb, keys, arg).Result()
	})
}

// callWith is call with the script run by run (a worker's batcher).
func (s *store) callWith(ctx context.Context, name string, r runRef, args any, run func(sc *redis.Script, keys []string, arg string) (any, error)) (string, error) {
	a, err := json.Marshal(args)
	if err != nil {
		return "", err
	}
	res, err := run(s.scripts[name], s.keys(r), string(a))
	if err != nil {
		if msg, ok := strings.CutPrefix(err.Error(), "ERR wfc: "); ok {
			if strings.HasPrefix(msg, "unknown run ") {
				return "", unknownRun(r.id)
			}
			if msg == "graph changed" {
				return "", errGraphChanged
			}
			return "", errors.New(msg)
		}
		return "", fmt.Errorf("script %s: %w", name, err)
	}
	str, _ := res.(string)
	return str, nil
}

// putPlan stores the IR by content hash and the shard's copy of the graph.
// Both writes are idempotent: the content never changes under a key.
func (s *store) putPlan(ctx context.Context, p *plan, shard int) error {
	gk := s.ks.graph(shard, p.suffix)
	s.mu.Lock()
	known := s.graph[gk]
	s.mu.Unlock()
	if known {
		return nil
	}
	data, err := ir.Marshal(p.w)
	if err != nil {
		return err
	}
	if err := s.rdb.SetNX(ctx, s.ks.ir(p.hash), data, 0).Err(); err != nil {
		return err
	}
	fields, err := p.graphFields()
	if err != nil {
		return err
	}
	if err := s.rdb.HSet(ctx, gk, fields).Err(); err != nil {
		return err
	}
	s.mu.Lock()
	s.graph[gk] = true
	s.mu.Unlock()
	return nil
}

// planFor returns the plan of a stored IR, loading and caching it.
func (s *store) planFor(ctx context.Context, hash string) (*plan, error) {
	s.mu.Lock()
	p := s.plans[hash]
	s.mu.Unlock()
	if p != nil {
		return p, nil
	}
	data, err := s.rdb.Get(ctx, s.ks.ir(hash)).Bytes()
	if err == redis.Nil {
		return nil, fmt.Errorf("IR %s is not stored", hash)
	}
	if err != nil {
		return nil, err
	}
	p, err = planFromJSON(data, nil, "")
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if len(s.plans) > 1000 {
		clear(s.plans)
	}
	s.plans[hash] = p
	s.mu.Unlock()
	return p, nil
}

// plan returns the plan of an IR hash when the store keeps it, else nil.
func (s *store) plan(hash string) *plan {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.plans[hash]
}

// A runMeta is the decoded meta of a run: its own fields, run|<name> in its
// state hash.
type runMeta struct {
	ID         string
	Status     string
	Gen        int
	IR         string
	Graph      string
	Queues     []string
	Workflow   string
	Inputs     string
	Result     string
	Error      string
	FailedNode string
	Comp       string
	Finally    string // "" (none yet), running, done, failed
	Created    int64
	Ended      int64
	DeadlineMS int64
	MaxHops    int
	MaxFanout  int
	Retention  int64 // ms; 0 keeps the run's keys forever
	// inputsRead: Inputs was read (not so by readMetaLean, nor in a meta
	// an exec token tells); else runInputs reads it when an expression
	// needs it.
	inputsRead bool
}

func (m *runMeta) ref() runRef { return runRef{id: m.ID, graph: m.Graph, queues: m.Queues} }

// metaNames are the run's own fields, which its state hash holds as
// run|<name> (runField); metaFields are those field names.
var (
	metaNames = []string{"status", "gen", "ir", "graph", "queues", "workflow", "inputs", "result", "error",
		"failed_node", "comp", "finally", "created", "ended", "deadline_ms", "max_hops", "max_fanout", "retention"}
	metaFields = func() []string {
		f := make([]string, len(metaNames))
		for i, n := range metaNames {
			f[i] = runField(n)
		}
		return f
	}()
)

// readMeta reads (or queues on a pipeline) the run's own fields.
func (k keyspace) readMeta(ctx context.Context, c redis.Cmdable, run string) *redis.SliceCmd {
	return c.HMGet(ctx, k.state(run), metaFields...)
}

// metaMap returns the run's own fields by name from readMeta's reply.
func metaMap(vals []any) map[string]string {
	h := map[string]string{}
	for i, v := range vals {
		if s, ok := v.(string); ok && i < len(metaNames) {
			h[metaNames[i]] = s
		}
	}
	return h
}

// metaFromHash returns the run's own fields by name from its whole state
// hash (an HGETALL reply).
func metaFromHash(states map[string]string) map[string]string {
	h := map[string]string{}
	for _, n := range metaNames {
		if v, ok := states[runField(n)]; ok {
			h[n] = v
		}
	}
	return h
}

func (s *store) meta(ctx context.Context, run string) (*runMeta, error) {
	vals, err := s.ks.readMeta(ctx, s.rdb, run).Result()
	if err != nil {
		return nil, err
	}
	m, err := parseMeta(run, metaMap(vals))
	if err != nil {
		return nil, s.explainUnknown(ctx, run, err)
	}
	return m, nil
}

// parseMeta decodes a run's own fields, by name (metaNames).
func parseMeta(run string, h map[string]string) (*runMeta, error) {
	if len(h) == 0 || h["status"] == "" {
		return nil, unknownRun(run)
	}
	i := func(k string) int64 { n, _ := strconv.ParseInt(h[k], 10, 64); return n }
	m := &runMeta{
		ID: run, Status: h["status"], Gen: int(i("gen")), IR: h["ir"], Graph: h["graph"],
		Workflow: h["workflow"], Inputs: h["inputs"], Result: h["result"], Error: h["error"],
		FailedNode: h["failed_node"], Comp: h["comp"], Finally: h["finally"], Created: i("created"), Ended: i("ended"),
		DeadlineMS: i("deadline_ms"), MaxHops: int(i("max_hops")), MaxFanout: int(i("max_fanout")),
		Retention: i("retention"),
	}
	_, m.inputsRead = h["inputs"]
	if h["queues"] != "" {
		m.Queues = strings.Split(h["queues"], ",")
	}
	return m, nil
}

// ensureGroup creates the consumer group of a queue stream, reading from
// the start so that tokens added before any worker existed are delivered.
func (s *store) ensureGroup(ctx context.Context, stream string) error {
	err := s.rdb.XGroupCreateMkStream(ctx, stream, Group, "0").Err()
	if err != nil && !strings.Contains(err.Error(), "BUSYGROUP") {
		return err
	}
	return nil
}

// nodeQueues returns the queue of every node of a run's stored graph. The
// submitting process assigned them, so a worker reads them from the graph
// key (its content never changes under the key) and keeps them.
func (s *store) nodeQueues(ctx context.Context, run, suffix string) (map[string]string, error) {
	gq, err := s.graphQueues(ctx, s.ks.graph(s.ks.shard(run), suffix))
	if err != nil {
		return nil, err
	}
	return gq.node, nil
}

func (s *store) graphQueues(ctx context.Context, key string) (*graphQueues, error) {
	s.mu.Lock()
	gq := s.queues[key]
	s.mu.Unlock()
	if gq != nil {
		return gq, nil
	}
	h, err := s.rdb.HGetAll(ctx, key).Result()
	if err != nil {
		return nil, err
	}
	gq = &graphQueues{node: map[string]string{}}
	if len(h) == 0 {
		return gq, nil // not stored (a run's start checks that it is)
	}
	others := map[string]bool{}
	ctl := ControlQueue
	for id, raw := range h {
		if id == "_" {
			var info graphInfo
			if err := json.Unmarshal([]byte(raw), &info); err != nil {
				return nil, fmt.Errorf("graph %s: %w", key, err)
			}
			ctl = cmp.Or(info.Ctl, ControlQueue)
			if info.FQ != "" {
				others[info.FQ] = true
			}
			continue
		}
		var g gnode
		if err := json.Unmarshal([]byte(raw), &g); err != nil {
			return nil, fmt.Errorf("graph %s, node %s: %w", key, id, err)
		}
		gq.node[id] = g.Q
		for _, q := range []string{g.Q, g.CQ} {
			if q != "" {
				others[q] = true
			}
		}
	}
	delete(others, ctl)
	gq.list = append([]string{ctl}, slices.Sorted(maps.Keys(others))...)
	s.mu.Lock()
	if len(s.queues) > 1000 {
		clear(s.queues)
	}
	s.queues[key] = gq
	s.mu.Unlock()
	return gq, nil
}

// cached returns the plan of an IR hash and the queues of a graph key when
// both are kept already, without reading Redis; else nil.
func (s *store) cached(hash, graphKey string) (*plan, *graphQueues) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, gq := s.plans[hash], s.queues[graphKey]
	if p == nil || gq == nil {
		return nil, nil
	}
	return p, gq
}

package bench

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	wfrt "github.com/wfc-lang/wfc/runtime"
	"github.com/wfc-lang/wfc/runtime/internal/redisproc"
)

// A LocalCluster is a Redis Cluster of masters without replicas that the
// benchmark started itself (runtime/internal/redisproc): one redis-server
// per master on a free loopback port, no persistence, in a temporary
// directory removed by Close.
type LocalCluster struct {
	Addrs []string
	// c's nodes require a random password (requirepass), so that another
	// local user cannot reach them while the bench runs; a secret of this
	// process, in URL only.
	c   *redisproc.Cluster
	dir string
}

// StartCluster starts a cluster of masters masters. It needs redis-server
// on PATH (not redis-cli, which makes no cluster of one or two masters).
// The slots are split evenly, in order.
func StartCluster(ctx context.Context, masters int) (*LocalCluster, error) {
	if masters < 1 || masters > 64 {
		return nil, fmt.Errorf("bench: a local cluster of %d masters: want 1 to 64", masters)
	}
	if _, err := redisproc.Binary(); err != nil {
		return nil, errors.New("bench: starting a local Redis Cluster needs redis-server on PATH")
	}
	dir, err := os.MkdirTemp("", "wfc-bench-cluster-")
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	c, err := redisproc.StartCluster(ctx, dir, masters, rand.Text())
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("bench: %w", err)
	}
	return &LocalCluster{Addrs: c.Addrs(), c: c, dir: dir}, nil
}

// URL returns the cluster's URL as the runtime takes it.
// It holds the password: never print or log it.
func (c *LocalCluster) URL() string { return c.c.URL() }

// Close stops every node (SIGKILL: there is nothing to save) and removes
// the directory.
func (c *LocalCluster) Close() {
	c.c.Kill()
	os.RemoveAll(c.dir)
}

// clusterOptions turns a redis+cluster://[userinfo@]h1:p1,h2:p2[/][?query]
// URL into go-redis cluster options, as the runtime reads it (the
// benchmark's own clients, for INFO and the reference, go to the same
// nodes).
func clusterOptions(raw string) (*redis.ClusterOptions, error) {
	scheme, rest, _ := strings.Cut(raw, "://")
	authority, tail := rest, ""
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		authority, tail = rest[:i], rest[i:]
	}
	_, query, _ := strings.Cut(tail, "?")
	userinfo, hosts := "", authority
	if i := strings.LastIndex(authority, "@"); i >= 0 {
		userinfo, hosts = authority[:i+1], authority[i+1:]
	}
	var addrs []string
	for _, h := range strings.Split(hosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			addrs = append(addrs, h)
		}
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("bench: %s names no cluster node", raw)
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, fmt.Errorf("bench: %s: %w", raw, err)
	}
	for _, a := range addrs[1:] {
		q.Add("addr", a)
	}
	base := "redis"
	if strings.HasPrefix(scheme, "rediss") {
		base = "rediss"
	}
	u := base + "://" + userinfo + addrs[0]
	if enc := q.Encode(); enc != "" {
		u += "?" + enc
	}
	return redis.ParseClusterURL(u)
}

// A Cluster describes the Redis Cluster a session measured: its masters,
// in the order of each scenario's per-master figures.
type Cluster struct {
	Name    string   `json:"name"`   // "3m": the suffix of its scenarios' names when a run measures several
	Shards  int      `json:"shards"` // the runtime's shard count (hash tags {0}…{n-1})
	Masters []Master `json:"masters"`
}

// A Master is one master of a cluster: the slots it serves and how many of
// the runtime's shards (hash tags) fall in them. Runs are spread evenly
// over the shards, so a master's share of the work is about its shards
// over the shard count.
type Master struct {
	Addr   string `json:"addr"`
	Slots  int    `json:"slots"`
	Shards int    `json:"shards"`
}

// describeCluster reads the slot map and places the shards' hash tags.
func describeCluster(ctx context.Context, rdb *redis.ClusterClient, prefix string, shards int) (*Cluster, error) {
	slots, err := rdb.ClusterSlots(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("bench: CLUSTER SLOTS: %w", err)
	}
	byAddr := map[string]*Master{}
	owner := func(slot int) *Master {
		for _, s := range slots {
			if slot >= s.Start && slot <= s.End && len(s.Nodes) > 0 {
				return byAddr[s.Nodes[0].Addr]
			}
		}
		return nil
	}
	for _, s := range slots {
		if len(s.Nodes) == 0 {
			continue
		}
		m := byAddr[s.Nodes[0].Addr]
		if m == nil {
			m = &Master{Addr: s.Nodes[0].Addr}
			byAddr[m.Addr] = m
		}
		m.Slots += s.End - s.Start + 1
	}
	for i := range max(shards, 1) {
		// The runtime's tag of shard i (runtime/keys.go).
		slot, err := rdb.ClusterKeySlot(ctx, fmt.Sprintf("%s:{%d}", prefix, i)).Result()
		if err != nil {
			return nil, fmt.Errorf("bench: CLUSTER KEYSLOT: %w", err)
		}
		if m := owner(int(slot)); m != nil {
			m.Shards++
		}
	}
	c := &Cluster{Shards: max(shards, 1)}
	for _, m := range byAddr {
		c.Masters = append(c.Masters, *m)
	}
	slices.SortFunc(c.Masters, func(a, b Master) int { return strings.Compare(a.Addr, b.Addr) })
	c.Name = fmt.Sprintf("%dm", len(c.Masters))
	return c, nil
}

// mastersInfo returns the INFO fields of every master of a cluster, by
// address.
func mastersInfo(ctx context.Context, rdb *redis.ClusterClient) map[string]map[string]string {
	var mu sync.Mutex
	out := map[string]map[string]string{}
	rdb.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		info := redisInfo(ctx, c)
		mu.Lock()
		out[c.Options().Addr] = info
		mu.Unlock()
		return nil
	})
	return out
}

// masterCPU returns each master's CPU seconds in the order of the
// cluster's masters, from a cluster's INFO (redisInfo keeps them under
// "cpu@addr").
func (c *Cluster) masterCPU(info map[string]string) []float64 {
	out := make([]float64, len(c.Masters))
	for i, m := range c.Masters {
		out[i], _ = strconv.ParseFloat(info["cpu@"+m.Addr], 64)
	}
	return out
}

// isCluster reports whether a URL names a Redis Cluster.
func isCluster(u string) bool { return wfrt.IsClusterURL(u) }

package bench

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	wfrt "github.com/wfc-lang/wfc/runtime"
)

// A LocalCluster is a Redis Cluster of masters without replicas that the
// benchmark started itself: one redis-server per master on a free loopback
// port (with its cluster bus port, +10000, free too), no persistence, in a
// temporary directory removed by Close.
type LocalCluster struct {
	Addrs []string
	// password: every node requires it (requirepass), so that another
	// local user cannot reach the nodes while the bench runs; a secret of
	// this process, in URL only.
	password string
	dir      string
	procs    []*exec.Cmd
}

// StartCluster starts a cluster of masters masters. It needs redis-server
// on PATH (not redis-cli: the slots are assigned with CLUSTER ADDSLOTSRANGE
// and the nodes joined with CLUSTER MEET, which, unlike redis-cli --cluster
// create, also makes a cluster of one or two masters). The slots are split
// evenly, in order.
func StartCluster(ctx context.Context, masters int) (*LocalCluster, error) {
	if masters < 1 || masters > 64 {
		return nil, fmt.Errorf("bench: a local cluster of %d masters: want 1 to 64", masters)
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, errors.New("bench: starting a local Redis Cluster needs redis-server on PATH")
	}
	dir, err := os.MkdirTemp("", "wfc-bench-cluster-")
	if err != nil {
		return nil, err
	}
	c := &LocalCluster{dir: dir, password: rand.Text()}
	ok := false
	defer func() {
		if !ok {
			c.Close()
		}
	}()
	for i := range masters {
		if err := c.startNode(ctx, bin, i); err != nil {
			return nil, err
		}
	}
	nodes := make([]*redis.Client, masters)
	for i, a := range c.Addrs {
		nodes[i] = redis.NewClient(&redis.Options{Addr: a, Password: c.password})
		defer nodes[i].Close()
	}
	for i, n := range nodes {
		lo, hi := i*16384/masters, (i+1)*16384/masters-1
		if err := n.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err(); err != nil {
			return nil, fmt.Errorf("bench: CLUSTER ADDSLOTSRANGE %d %d on %s: %w", lo, hi, c.Addrs[i], err)
		}
	}
	for _, a := range c.Addrs[1:] {
		host, port, _ := net.SplitHostPort(a)
		if err := nodes[0].ClusterMeet(ctx, host, port).Err(); err != nil {
			return nil, fmt.Errorf("bench: CLUSTER MEET %s: %w", a, err)
		}
	}
	// Ready when every node knows every other and sees all slots served.
	deadline := time.Now().Add(30 * time.Second)
	for i, n := range nodes {
		for {
			info, err := n.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(masters)+"\r") {
				break
			}
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("bench: cluster node %s not ready after 30 s: %v\n%s", c.Addrs[i], err, info)
			}
			sleep(ctx, 50*time.Millisecond)
		}
	}
	ok = true
	return c, nil
}

// startNode starts the i-th node, trying a few port pairs: a port found
// free may be taken before the server binds it.
func (c *LocalCluster) startNode(ctx context.Context, bin string, i int) error {
	d := filepath.Join(c.dir, fmt.Sprintf("node%d", i))
	if err := os.MkdirAll(d, 0o755); err != nil {
		return err
	}
	var last error
	for range 5 {
		port, err := freePortPair()
		if err != nil {
			return err
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		cmd := exec.Command(bin,
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", d,
			"--save", "", "--appendonly", "no", "--daemonize", "no", "--protected-mode", "no",
			"--requirepass", c.password, "--masterauth", c.password,
			"--logfile", filepath.Join(d, "redis.log"),
			"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(d, "nodes.conf"),
			"--cluster-node-timeout", "5000",
			// A lone master learns no address of its own from a peer:
			// announce it, so that CLUSTER SLOTS names every master alike.
			"--cluster-announce-ip", "127.0.0.1")
		dieWithParent(cmd)
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("bench: starting redis-server: %w", err)
		}
		var once sync.Once
		exited := make(chan struct{})
		go func() { cmd.Wait(); once.Do(func() { close(exited) }) }()
		if last = waitPing(ctx, addr, c.password, exited); last == nil {
			c.Addrs = append(c.Addrs, addr)
			c.procs = append(c.procs, cmd)
			return nil
		}
		cmd.Process.Kill()
		<-exited
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	log, _ := os.ReadFile(filepath.Join(d, "redis.log"))
	return fmt.Errorf("bench: redis-server for cluster node %d: %v\n%s", i, last, lastLines(string(log), 10))
}

// waitPing waits until the server at addr answers PING, for at most 10 s.
func waitPing(ctx context.Context, addr, password string, exited <-chan struct{}) error {
	rdb := redis.NewClient(&redis.Options{Addr: addr, Password: password, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer rdb.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-exited:
			return fmt.Errorf("redis-server on %s exited", addr)
		default:
		}
		if rdb.Ping(ctx).Err() == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server on %s did not answer PING in 10 s", addr)
		}
		sleep(ctx, 20*time.Millisecond)
	}
}

// freePortPair returns a free port p whose cluster bus port p+10000 is
// free too, below the usual ephemeral range so that p+10000 exists.
func freePortPair() (int, error) {
	for range 200 {
		p := 15000 + mrand.IntN(15000)
		a, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		b, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p+10000))
		a.Close()
		if err != nil {
			continue
		}
		b.Close()
		return p, nil
	}
	return 0, errors.New("bench: no free port pair for a cluster node")
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// URL returns the cluster's URL as the runtime takes it.
// It holds the password: never print or log it.
func (c *LocalCluster) URL() string {
	return "redis+cluster://:" + c.password + "@" + strings.Join(c.Addrs, ",")
}

// Close stops every node (SIGKILL: there is nothing to save) and removes
// the directory.
func (c *LocalCluster) Close() {
	for _, p := range c.procs {
		p.Process.Kill()
	}
	c.procs = nil
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

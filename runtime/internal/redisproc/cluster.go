package redisproc

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// How long a new cluster may take until every node sees it whole.
const clusterTimeout = 30 * time.Second

// A Cluster is a Redis Cluster of masters without replicas, each a Server.
type Cluster struct {
	Nodes    []*Server
	password string
}

// StartCluster starts a cluster of masters masters, node i in dir/node<i>,
// every node requiring password unless it is "". The slots are split
// evenly, in order. It returns once every node knows every other and sees
// all slots served. The nodes are joined with CLUSTER ADDSLOTS and
// CLUSTER MEET, not redis-cli --cluster create, which needs redis-cli and
// refuses clusters of fewer than three masters.
func StartCluster(ctx context.Context, dir string, masters int, password string) (*Cluster, error) {
	if masters < 1 || masters > 1000 {
		return nil, fmt.Errorf("redisproc: a cluster of %d masters: want 1 to 1000", masters)
	}
	c := &Cluster{password: password}
	ok := false
	defer func() {
		if !ok {
			c.Kill()
		}
	}()
	for i := range masters {
		d := filepath.Join(dir, fmt.Sprintf("node%d", i))
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("redisproc: %w", err)
		}
		s, err := Start(ctx, d, Options{Cluster: true, Password: password})
		if err != nil {
			return nil, fmt.Errorf("cluster node %d: %w", i, err)
		}
		c.Nodes = append(c.Nodes, s)
	}
	nodes := make([]*redis.Client, masters)
	for i, s := range c.Nodes {
		nodes[i] = redis.NewClient(&redis.Options{Addr: s.Addr(), Password: password})
		defer nodes[i].Close()
	}
	for i, n := range nodes {
		// Distinct epochs, as redis-cli gives them: the nodes need not
		// settle a collision before the cluster is ok.
		if err := n.Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err(); err != nil {
			return nil, fmt.Errorf("CLUSTER SET-CONFIG-EPOCH on %s: %w", c.Nodes[i].Addr(), err)
		}
		// ADDSLOTS, not ADDSLOTSRANGE, which needs Redis 7.
		lo, hi := i*16384/masters, (i+1)*16384/masters-1
		args := make([]any, 0, 2+hi-lo+1)
		args = append(args, "CLUSTER", "ADDSLOTS")
		for slot := lo; slot <= hi; slot++ {
			args = append(args, slot)
		}
		if err := n.Do(ctx, args...).Err(); err != nil {
			return nil, fmt.Errorf("CLUSTER ADDSLOTS %d to %d on %s: %w", lo, hi, c.Nodes[i].Addr(), err)
		}
	}
	for _, s := range c.Nodes[1:] {
		host, port, _ := net.SplitHostPort(s.Addr())
		if err := nodes[0].ClusterMeet(ctx, host, port).Err(); err != nil {
			return nil, fmt.Errorf("CLUSTER MEET %s: %w", s.Addr(), err)
		}
	}
	wait, cancel := context.WithTimeout(ctx, clusterTimeout)
	defer cancel()
	known := "cluster_known_nodes:" + strconv.Itoa(masters) + "\r"
	for i, n := range nodes {
		for {
			info, err := n.ClusterInfo(wait).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, known) {
				break
			}
			if ctx.Err() != nil {
				return nil, fmt.Errorf("starting a Redis Cluster: %w", ctx.Err())
			}
			if wait.Err() != nil {
				return nil, fmt.Errorf("cluster node %s not ready within %v: %v\n%s", c.Nodes[i].Addr(), clusterTimeout, err, strings.TrimSpace(info))
			}
			t := time.NewTimer(50 * time.Millisecond)
			select {
			case <-t.C:
			case <-wait.Done():
				t.Stop()
			}
		}
	}
	ok = true
	return c, nil
}

// Addrs returns the host:port of every node.
func (c *Cluster) Addrs() []string {
	a := make([]string, len(c.Nodes))
	for i, s := range c.Nodes {
		a[i] = s.Addr()
	}
	return a
}

// URL returns the cluster's URL as the runtime takes it,
// redis+cluster://[:password@]host:port,host:port,...: with a password,
// never print or log it.
func (c *Cluster) URL() string {
	auth := ""
	if c.password != "" {
		auth = url.UserPassword("", c.password).String() + "@"
	}
	return "redis+cluster://" + auth + strings.Join(c.Addrs(), ",")
}

// Kill stops every node with SIGKILL.
func (c *Cluster) Kill() {
	for _, s := range c.Nodes {
		s.Kill()
	}
}

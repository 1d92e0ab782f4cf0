package redistest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// CLIBinary returns the path of redis-cli, or "" if it is not installed
// (Debian: package redis-tools, a dependency of redis-server).
func CLIBinary() string {
	p, err := exec.LookPath("redis-cli")
	if err != nil {
		return ""
	}
	return p
}

// RequireCluster skips (or, with CI=true, fails) the test when
// redis-server or redis-cli is missing.
func RequireCluster(t testing.TB) {
	t.Helper()
	Require(t)
	if CLIBinary() == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("redis-cli is not on PATH and CI=true: the Redis Cluster tests need it (Debian package redis-tools)")
		}
		t.Skip("redis-cli is not on PATH; skipping the Redis Cluster tests (install redis-tools)")
	}
}

// A Cluster is a Redis Cluster of masters without replicas, each a
// redis-server on a free loopback port.
type Cluster struct {
	Nodes []*Server
}

// StartCluster starts a cluster of n masters for the test and stops it
// when the test ends.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	RequireCluster(t)
	c, err := NewCluster(t.TempDir(), n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Kill)
	return c
}

// NewCluster starts n cluster-enabled servers in subdirectories of dir,
// joins them with redis-cli --cluster create (slots split evenly, no
// replicas) and waits until every node reports cluster_state:ok.
func NewCluster(dir string, n int) (*Cluster, error) {
	if CLIBinary() == "" {
		return nil, fmt.Errorf("redis-cli is not on PATH")
	}
	c := &Cluster{}
	for i := 0; i < n; i++ {
		d := filepath.Join(dir, fmt.Sprintf("node%d", i))
		if err := os.MkdirAll(d, 0o755); err != nil {
			c.Kill()
			return nil, err
		}
		s, err := New(d, Options{Cluster: true})
		if err != nil {
			c.Kill()
			return nil, err
		}
		c.Nodes = append(c.Nodes, s)
	}
	args := []string{"--cluster", "create"}
	args = append(args, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	out, err := exec.Command(CLIBinary(), args...).CombinedOutput()
	if err != nil {
		c.Kill()
		return nil, fmt.Errorf("redis-cli --cluster create: %v\n%s", err, tail(string(out)))
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, s := range c.Nodes {
		for {
			out, err := exec.Command(CLIBinary(), "-h", "127.0.0.1", "-p", fmt.Sprint(s.Port), "cluster", "info").Output()
			if err == nil && strings.Contains(string(out), "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				c.Kill()
				return nil, fmt.Errorf("cluster node %s not ok after 30s: %v\n%s", s.Addr(), err, out)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return c, nil
}

// Addrs returns the host:port of every node.
func (c *Cluster) Addrs() []string {
	var a []string
	for _, s := range c.Nodes {
		a = append(a, s.Addr())
	}
	return a
}

// URL returns the cluster's URL as the runtime takes it:
// redis+cluster://host:port,host:port,...
func (c *Cluster) URL() string { return "redis+cluster://" + strings.Join(c.Addrs(), ",") }

// Kill stops every node.
func (c *Cluster) Kill() {
	for _, s := range c.Nodes {
		s.Kill()
	}
}

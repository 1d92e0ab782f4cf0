package redistest

import (
	"context"
	"testing"

	"github.com/wfc-lang/wfc/runtime/internal/redisproc"
)

// RequireCluster skips (or, with CI=true, fails) the test when the Redis
// Cluster tests cannot run: redis-server is missing (the cluster is joined
// with CLUSTER MEET, without redis-cli).
func RequireCluster(t testing.TB) {
	t.Helper()
	Require(t)
}

// A Cluster is a Redis Cluster of masters without replicas, each a
// redis-server on a free loopback port, without a password.
type Cluster = redisproc.Cluster

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
// with the slots split evenly, and waits until every node sees the whole
// cluster ok.
func NewCluster(dir string, n int) (*Cluster, error) {
	return redisproc.StartCluster(context.Background(), dir, n, "")
}

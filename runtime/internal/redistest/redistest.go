// Package redistest starts real redis-server processes for tests, with
// runtime/internal/redisproc: on a free loopback port, in a temporary
// directory, optionally with the append-only file on, and can kill
// (SIGKILL) and restart them; and Redis Clusters of masters.
//
// When redis-server is not on PATH, Start skips the test, unless the
// environment variable CI is "true": then the test fails, so that CI never
// passes without the real-server half of the suite.
package redistest

import (
	"context"
	"os"
	"testing"

	"github.com/wfc-lang/wfc/runtime/internal/redisproc"
)

// Options configure a server.
type Options = redisproc.Options

// A Server is one redis-server process.
type Server struct {
	*redisproc.Server
}

// Binary returns the path of redis-server, or "" if it is not installed.
func Binary() string {
	p, _ := redisproc.Binary()
	return p
}

// Require skips (or, with CI=true, fails) the test when redis-server is
// missing.
func Require(t testing.TB) string {
	t.Helper()
	bin := Binary()
	if bin == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("redis-server is not on PATH and CI=true: the runtime suite must run against real Redis")
		}
		t.Skip("redis-server is not on PATH; skipping the real-Redis half (install redis-server to run it)")
	}
	return bin
}

// Start starts a server for the test and stops it when the test ends.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	Require(t)
	s, err := New(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Kill)
	return s
}

// New starts a server in dir without a testing.TB (for TestMain).
func New(dir string, opts Options) (*Server, error) {
	s, err := redisproc.Start(context.Background(), dir, opts)
	if err != nil {
		return nil, err
	}
	return &Server{s}, nil
}

// Restart starts the server again on the same port and directory; with
// AOF on it reloads everything acknowledged before the kill.
func (s *Server) Restart() error { return s.Server.Restart(context.Background()) }

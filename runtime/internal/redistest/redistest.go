// Package redistest starts real redis-server processes for tests: on a free
// loopback port, in a temporary directory, optionally with the append-only
// file on, and can kill (SIGKILL) and restart them.
//
// When redis-server is not on PATH, Start skips the test, unless the
// environment variable CI is "true": then the test fails, so that CI never
// passes without the real-server half of the suite.
package redistest

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Options configure a server.
type Options struct {
	// AOF turns on appendonly with appendfsync always, so that a restart
	// after SIGKILL keeps every acknowledged write.
	AOF bool
	// Cluster starts the server with cluster-enabled yes (a node of a
	// Cluster; see StartCluster). Its port and port+10000 (the cluster bus)
	// are both free.
	Cluster bool
	// Args are more redis-server arguments: ACL users ("--user", "alice",
	// "on", ">secret", ...), TLS ("--tls-port", ...). A server whose
	// default user needs a password counts as up when PING answers
	// NOAUTH.
	Args []string
}

// A Server is one redis-server process.
type Server struct {
	Port int
	Dir  string
	opts Options

	mu  sync.Mutex
	cmd *exec.Cmd
}

// Binary returns the path of redis-server, or "" if it is not installed.
func Binary() string {
	p, err := exec.LookPath("redis-server")
	if err != nil {
		return ""
	}
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
	if Binary() == "" {
		return nil, fmt.Errorf("redis-server is not on PATH")
	}
	s := &Server{Dir: dir, opts: opts}
	var err error
	for try := 0; try < 5; try++ {
		if s.opts.Cluster {
			s.Port, err = freeClusterPort()
		} else {
			s.Port, err = freePort()
		}
		if err != nil {
			continue
		}
		if err = s.start(); err == nil {
			return s, nil
		}
	}
	return nil, err
}

// URL returns the server's redis:// URL.
func (s *Server) URL() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", s.Port) }

// Addr returns host:port.
func (s *Server) Addr() string { return fmt.Sprintf("127.0.0.1:%d", s.Port) }

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// freeClusterPort returns a free port p whose cluster bus port p+10000 is
// free too, below the usual ephemeral range so that p+10000 exists.
func freeClusterPort() (int, error) {
	for try := 0; try < 200; try++ {
		p := 15000 + rand.IntN(15000)
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
	return 0, fmt.Errorf("no free port pair for a cluster node")
}

func (s *Server) start() error {
	args := []string{
		"--port", fmt.Sprint(s.Port), "--bind", "127.0.0.1", "--dir", s.Dir,
		"--save", "", "--daemonize", "no", "--protected-mode", "no",
		"--logfile", filepath.Join(s.Dir, "redis.log"),
	}
	if s.opts.Cluster {
		args = append(args, "--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(s.Dir, "nodes.conf"),
			"--cluster-node-timeout", "5000")
	}
	if s.opts.AOF {
		args = append(args, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		args = append(args, "--appendonly", "no")
	}
	args = append(args, s.opts.Args...)
	cmd := exec.Command(Binary(), args...)
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			log, _ := os.ReadFile(filepath.Join(s.Dir, "redis.log"))
			return fmt.Errorf("redis-server exited: %v\n%s", err, tail(string(log)))
		default:
		}
		if ping(s.Addr()) {
			s.mu.Lock()
			s.cmd = cmd
			s.mu.Unlock()
			go func() { <-exited }()
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Kill()
	return fmt.Errorf("redis-server on port %d did not answer PING", s.Port)
}

func tail(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > 10 {
		lines = lines[len(lines)-10:]
	}
	return strings.Join(lines, "\n")
}

// ping sends PING and waits for +PONG, or -NOAUTH (the server is up and
// wants a password: Options.Args); not -LOADING (the server is up but
// still reading its AOF; keep waiting).
func ping(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && (strings.HasPrefix(line, "+PONG") || strings.HasPrefix(line, "-NOAUTH"))
}

// Kill stops the server with SIGKILL (no shutdown save) and waits until
// its port is closed.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd := s.cmd
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Kill()
	for i := 0; i < 200; i++ {
		c, err := net.DialTimeout("tcp", s.Addr(), 50*time.Millisecond)
		if err != nil {
			return
		}
		c.Close()
		time.Sleep(10 * time.Millisecond)
	}
}

// Restart starts the server again on the same port and directory; with
// AOF on it reloads everything acknowledged before the kill.
func (s *Server) Restart() error {
	s.Kill()
	var err error
	for try := 0; try < 20; try++ {
		if err = s.start(); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

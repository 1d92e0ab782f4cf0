package redisproc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ErrNoBinary is returned when redis-server is not on PATH.
var ErrNoBinary = errors.New("redis-server is not on PATH (Debian package redis-server)")

// errExited: the server exited before answering PING, most often because
// the port found free was taken before it could bind it; another port is
// worth a try.
var errExited = errors.New("exited before answering PING")

// How long a server may take to answer its first PING.
const startTimeout = 10 * time.Second

// Binary returns the path of redis-server, or ErrNoBinary.
func Binary() (string, error) {
	p, err := exec.LookPath("redis-server")
	if err != nil {
		return "", ErrNoBinary
	}
	return p, nil
}

// Options configure a server.
type Options struct {
	// AOF turns on appendonly with appendfsync always, so that a restart
	// after Kill keeps every acknowledged write.
	AOF bool
	// Cluster starts the server with cluster-enabled yes, as a node of a
	// Cluster (see StartCluster); its port and port+10000 (the cluster
	// bus) are both free.
	Cluster bool
	// Password, when set, is required of every client (requirepass) and
	// given to the other nodes of a cluster (masterauth). It goes to the
	// server in a configuration file readable by this user only, not on
	// the command line, where other local users could read it.
	Password string
	// Args are more redis-server arguments: ACL users ("--user", "alice",
	// "on", ">secret", ...), TLS ("--tls-port", ...). A server whose
	// default user needs a password counts as up when PING answers
	// NOAUTH.
	Args []string
}

// A Server is one redis-server process on 127.0.0.1.
type Server struct {
	Port int
	Dir  string
	opts Options
	bin  string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd has been waited for
}

// Start starts a server whose files (log, AOF, cluster configuration) go
// in dir, an existing directory, on a free loopback port. It returns once
// the server answers PING. ctx bounds the start only: the server runs
// until Kill.
func Start(ctx context.Context, dir string, opts Options) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("redisproc: the directory for redis-server: %w", err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("redisproc: the directory for redis-server, %s, is not a directory", dir)
	}
	if err := checkPassword(opts.Password); err != nil {
		return nil, err
	}
	s := &Server{Dir: dir, opts: opts, bin: bin}
	for range 5 {
		if opts.Cluster {
			s.Port, err = freePortPair()
		} else {
			s.Port, err = freePort()
		}
		if err != nil {
			return nil, err
		}
		if err = s.start(ctx); err == nil {
			return s, nil
		}
		if !errors.Is(err, errExited) || ctx.Err() != nil {
			return nil, err
		}
	}
	return nil, err
}

// checkPassword accepts what the configuration file can hold unquoted.
func checkPassword(pw string) error {
	for _, r := range pw {
		if r <= ' ' || r > '~' || r == '"' || r == '\'' || r == '\\' {
			return errors.New("redisproc: the password must be printable ASCII without spaces, quotes or backslashes")
		}
	}
	return nil
}

// Addr returns host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)) }

// URL returns the server's redis:// URL, with the password if there is
// one: never print or log it then.
func (s *Server) URL() string {
	auth := ""
	if s.opts.Password != "" {
		auth = url.UserPassword("", s.opts.Password).String() + "@"
	}
	return "redis://" + auth + s.Addr() + "/0"
}

func (s *Server) args() ([]string, error) {
	var args []string
	if s.opts.Password != "" {
		// The configuration file must come first.
		conf := filepath.Join(s.Dir, "auth.conf")
		body := "requirepass " + s.opts.Password + "\nmasterauth " + s.opts.Password + "\n"
		if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
			return nil, fmt.Errorf("redisproc: writing the server's password file: %w", err)
		}
		args = append(args, conf)
	}
	args = append(args,
		"--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1", "--dir", s.Dir,
		"--save", "", "--daemonize", "no", "--protected-mode", "no",
		"--logfile", filepath.Join(s.Dir, "redis.log"))
	if s.opts.Cluster {
		args = append(args, "--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(s.Dir, "nodes.conf"),
			"--cluster-node-timeout", "5000",
			// A lone master learns no address of its own from a peer:
			// announce it, so that CLUSTER SLOTS names every master alike.
			"--cluster-announce-ip", "127.0.0.1")
	}
	if s.opts.AOF {
		args = append(args, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		args = append(args, "--appendonly", "no")
	}
	return append(args, s.opts.Args...), nil
}

// start runs redis-server on s.Port and waits until it answers PING.
func (s *Server) start(ctx context.Context) error {
	args, err := s.args()
	if err != nil {
		return err
	}
	// What the server says before its log is open (a bad argument) goes
	// to a file: a pipe would keep Wait waiting for any child the server
	// forked (an AOF rewrite) after a Kill.
	outPath := filepath.Join(s.Dir, "redis-server.out")
	out, err := os.Create(outPath)
	if err != nil {
		return fmt.Errorf("redisproc: %w", err)
	}
	defer out.Close()
	cmd := exec.Command(s.bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting redis-server: %w", err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	wait, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if ping(wait, s.Addr()) {
			s.mu.Lock()
			s.cmd, s.exited = cmd, exited
			s.mu.Unlock()
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("redis-server on port %d %w (%v)%s", s.Port, errExited, waitErr, s.diagnostics(outPath))
		case <-wait.Done():
			cmd.Process.Kill()
			<-exited
			if ctx.Err() != nil {
				return fmt.Errorf("starting redis-server on port %d: %w", s.Port, ctx.Err())
			}
			return fmt.Errorf("redis-server on port %d did not answer PING within %v%s", s.Port, startTimeout, s.diagnostics(outPath))
		case <-tick.C:
		}
	}
}

// diagnostics returns the last lines the server wrote, for an error.
func (s *Server) diagnostics(outPath string) string {
	var b strings.Builder
	for _, p := range []string{outPath, filepath.Join(s.Dir, "redis.log")} {
		if data, _ := os.ReadFile(p); len(strings.TrimSpace(string(data))) > 0 {
			b.WriteString("\n" + tail(string(data), 10))
		}
	}
	return b.String()
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// ping sends PING and waits for +PONG, or -NOAUTH (the server is up and
// wants a password); not -LOADING (the server is up but still reading its
// AOF: keep waiting).
func ping(ctx context.Context, addr string) bool {
	d := net.Dialer{Timeout: 200 * time.Millisecond}
	c, err := d.DialContext(ctx, "tcp", addr)
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

// Kill stops the server with SIGKILL (no shutdown save) and waits until it
// has exited, its port closed. Killing a server that is not running does
// nothing.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd, s.exited = nil, nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Kill()
	<-exited
}

// Restart kills the server if it runs and starts it again on the same
// port and directory; with AOF on it reloads every write acknowledged
// before the kill, and a cluster node rejoins its cluster.
func (s *Server) Restart(ctx context.Context) error {
	s.Kill()
	var err error
	// The port is free again once the server has exited, unless another
	// process took it meanwhile: retry for a while, then give up.
	for range 20 {
		if err = s.start(ctx); err == nil || !errors.Is(err, errExited) {
			return err
		}
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("restarting redis-server on port %d: %w", s.Port, ctx.Err())
		}
	}
	return err
}

// freePort returns a port free on the loopback interface.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("redisproc: no free loopback port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// freePortPair returns a free port p whose cluster bus port p+10000 is
// free too, below the usual ephemeral range so that p+10000 exists.
func freePortPair() (int, error) {
	for range 200 {
		p := 15000 + rand.IntN(15000)
		a, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		b, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p+10000)))
		a.Close()
		if err != nil {
			continue
		}
		b.Close()
		return p, nil
	}
	return 0, errors.New("redisproc: no free loopback port pair (p, p+10000) for a cluster node")
}

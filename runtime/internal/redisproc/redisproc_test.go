package redisproc

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// need skips (or, with CI=true, fails) the test when redis-server is
// missing, as runtime/internal/redistest does (which this package cannot
// import: it imports this one).
func need(t *testing.T) {
	t.Helper()
	if _, err := Binary(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
}

// A server starts, answers, keeps what it acknowledged across Kill and
// Restart only with the AOF on, and requires its password when it has
// one.
func TestStartKillRestart(t *testing.T) {
	need(t)
	ctx := context.Background()
	for _, c := range []struct {
		name string
		opts Options
		keep bool // the key survives Kill and Restart
	}{
		{"plain", Options{}, false},
		{"aof", Options{AOF: true}, true},
		{"password", Options{Password: "s3cret-pw"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := Start(ctx, t.TempDir(), c.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Kill()
			opt, err := redis.ParseURL(s.URL())
			if err != nil {
				t.Fatalf("URL %q: %v", s.URL(), err)
			}
			if opt.Addr != s.Addr() || opt.Password != c.opts.Password || s.Addr() != "127.0.0.1:"+strconv.Itoa(s.Port) {
				t.Fatalf("URL %q, Addr %s, port %d", s.URL(), s.Addr(), s.Port)
			}
			rdb := redis.NewClient(opt)
			defer rdb.Close()
			if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
				t.Fatal(err)
			}
			anon := redis.NewClient(&redis.Options{Addr: s.Addr()})
			defer anon.Close()
			if err := anon.Ping(ctx).Err(); (c.opts.Password != "") != (err != nil && redis.IsAuthError(err)) {
				t.Errorf("PING without a password: %v", err)
			}
			if c.opts.Password != "" {
				// On disk for the server only; not on its command line.
				fi, err := os.Stat(filepath.Join(s.Dir, "auth.conf"))
				if err != nil || fi.Mode().Perm() != 0o600 {
					t.Errorf("password file: %v %v", fi, err)
				}
				// (The server rewrites its process title once up: only
				// the arguments show what ps could read at its start.)
				args, err := s.args()
				if err != nil || strings.Contains(strings.Join(args, " "), c.opts.Password) {
					t.Errorf("the password is on the command line: %q %v", args, err)
				}
			}
			s.Kill()
			if c, err := net.DialTimeout("tcp", s.Addr(), time.Second); err == nil {
				c.Close()
				t.Fatal("the port is still open after Kill")
			}
			s.Kill() // a second Kill does nothing
			if err := s.Restart(ctx); err != nil {
				t.Fatal(err)
			}
			got, err := rdb.Get(ctx, "k").Result()
			if c.keep && (err != nil || got != "v") {
				t.Errorf("after restart with AOF: %q %v, want v", got, err)
			}
			if !c.keep && err != redis.Nil {
				t.Errorf("after restart without AOF: %q %v, want nothing", got, err)
			}
		})
	}
}

// Bad input and a server that cannot start give clear errors, at once.
func TestStartErrors(t *testing.T) {
	need(t)
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name string
		ctx  context.Context
		dir  string
		opts Options
		want string
	}{
		{"no directory", context.Background(), filepath.Join(t.TempDir(), "nope"), Options{}, "no such file"},
		{"a file", context.Background(), file, Options{}, "is not a directory"},
		{"bad password", context.Background(), t.TempDir(), Options{Password: "two words"}, "without spaces"},
		{"bad argument", context.Background(), t.TempDir(), Options{Args: []string{"--no-such-directive", "1"}}, "no-such-directive"},
		{"cancelled", cancelled, t.TempDir(), Options{}, "context canceled"},
	} {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			s, err := Start(c.ctx, c.dir, c.opts)
			if err == nil {
				s.Kill()
				t.Fatal("started")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q, want it to say %q", err, c.want)
			}
			// Not the 10 s a server gets to answer, nor five tries.
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
	if _, err := StartCluster(context.Background(), t.TempDir(), 0, ""); err == nil || !strings.Contains(err.Error(), "want 1 to") {
		t.Errorf("a cluster of no masters: %v", err)
	}
}

// A cluster's nodes serve all slots between them, evenly and in order,
// know each other, and require the password when there is one.
func TestStartCluster(t *testing.T) {
	need(t)
	ctx := context.Background()
	for _, c := range []struct {
		masters  int
		password string
	}{
		{1, "pw-1"},
		{3, ""},
	} {
		t.Run(strconv.Itoa(c.masters), func(t *testing.T) {
			cl, err := StartCluster(ctx, t.TempDir(), c.masters, c.password)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Kill()
			if len(cl.Nodes) != c.masters || len(cl.Addrs()) != c.masters {
				t.Fatalf("%d nodes, addrs %v", len(cl.Nodes), cl.Addrs())
			}
			wantURL := "redis+cluster://" + strings.Join(cl.Addrs(), ",")
			if c.password != "" {
				wantURL = "redis+cluster://:" + c.password + "@" + strings.Join(cl.Addrs(), ",")
			}
			if cl.URL() != wantURL {
				t.Errorf("URL %q, want %q", cl.URL(), wantURL)
			}
			rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), Password: c.password})
			defer rdb.Close()
			slots, err := rdb.ClusterSlots(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			owner := map[string][2]int{}
			for _, s := range slots {
				owner[s.Nodes[0].Addr] = [2]int{s.Start, s.End}
			}
			for i, a := range cl.Addrs() {
				if want := [2]int{i * 16384 / c.masters, (i+1)*16384/c.masters - 1}; owner[a] != want {
					t.Errorf("node %d (%s) serves %v, want %v (all: %v)", i, a, owner[a], want, owner)
				}
			}
			// Every key goes somewhere: the cluster is usable.
			for i := range 20 {
				if err := rdb.Set(ctx, "k"+strconv.Itoa(i), i, 0).Err(); err != nil {
					t.Fatal(err)
				}
			}
			anon := redis.NewClient(&redis.Options{Addr: cl.Addrs()[0]})
			defer anon.Close()
			if err := anon.Ping(ctx).Err(); (c.password != "") != (err != nil && redis.IsAuthError(err)) {
				t.Errorf("PING without a password: %v", err)
			}
			cl.Kill()
			for _, a := range cl.Addrs() {
				if c, err := net.DialTimeout("tcp", a, time.Second); err == nil {
					c.Close()
					t.Errorf("node %s still listens after Kill", a)
				}
			}
		})
	}
}

func TestFreePortPair(t *testing.T) {
	for range 5 {
		p, err := freePortPair()
		if err != nil {
			t.Fatal(err)
		}
		if p < 15000 || p+10000 > 65535 {
			t.Fatalf("port %d: its bus port %d is out of range", p, p+10000)
		}
	}
}

// A server that cannot bind its port exits and says why; Start takes that
// error for a port taken meanwhile and tries another.
func TestTakenPort(t *testing.T) {
	need(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	s := &Server{Dir: t.TempDir(), Port: l.Addr().(*net.TCPAddr).Port}
	s.bin, _ = Binary()
	err = s.start(context.Background())
	if !errors.Is(err, errExited) || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("a server on a taken port: %v, want it to have exited saying why", err)
	}
}

package runtime

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// go-redis logs what its pools go through (every failed dial, every
// connection it drops) straight to standard error, in its own format: with
// Redis down, a "wfc status" printed a dozen "failed to dial after 5
// attempts" lines before its own one-line error. The runtime reports what
// matters itself (an error returned, a worker's warning with backoff), so
// go-redis's lines go to the engine's logger at debug level, where
// "wfc worker -v" shows them. go-redis has one logger per process: the
// last engine opened gets them.
var (
	redisLogOnce sync.Once
	redisLogTo   atomic.Pointer[slog.Logger]
)

type redisLogger struct{}

func (redisLogger) Printf(ctx context.Context, format string, v ...any) {
	if l := redisLogTo.Load(); l != nil && l.Enabled(ctx, slog.LevelDebug) {
		l.DebugContext(ctx, "go-redis: "+strings.TrimSpace(fmt.Sprintf(format, v...)))
	}
}

// routeRedisLogs sends go-redis's own log lines to l at debug level.
func routeRedisLogs(l *slog.Logger) {
	redisLogTo.Store(l)
	redisLogOnce.Do(func() { redis.SetLogger(redisLogger{}) })
}

// The URL schemes of a Redis Cluster: redis+cluster://[user:pass@]host:port[,host:port...][?options]
// (rediss+cluster:// for TLS). The hosts are seed nodes; the client
// discovers the others and follows the slot map. Options are go-redis's
// cluster URL options (dial_timeout=3s, ...).
const (
	clusterScheme    = "redis+cluster"
	clusterSchemeTLS = "rediss+cluster"
)

// IsClusterURL reports whether a Redis URL names a Redis Cluster
// (redis+cluster:// or rediss+cluster://).
func IsClusterURL(u string) bool {
	return strings.HasPrefix(u, clusterScheme+"://") || strings.HasPrefix(u, clusterSchemeTLS+"://")
}

// clients are the two clients of a store: one for commands and scripts, one
// with its own pool for blocking reads (XREADGROUP, XREAD BLOCK).
type clients struct {
	rdb, blk redis.UniversalClient
	addr     string // for messages: host:port, or "cluster a,b,c"
	cluster  bool
}

// newClients connects to a single Redis (redis://, rediss://, unix://) or
// a Redis Cluster (redis+cluster://). blockers is the number of
// connections the blocking-read pool must hold per server.
func newClients(rawURL string, blockers int, tlsCfg *tls.Config) (*clients, error) {
	if IsClusterURL(rawURL) {
		co, err := parseClusterURL(rawURL)
		if err != nil {
			return nil, err
		}
		if co.TLSConfig, err = withTLS(co.TLSConfig, tlsCfg); err != nil {
			return nil, err
		}
		if co.ConnMaxIdleTime == 0 {
			co.ConnMaxIdleTime = time.Minute
		}
		co.Dialer = lazyCheckDialer(redis.NewDialer(&redis.Options{DialTimeout: cmp.Or(co.DialTimeout, 5*time.Second), TLSConfig: co.TLSConfig}))
		bo := *co
		// A cluster client has a pool per node; each blocking read goes to
		// the master of its shard's slot.
		bo.PoolSize = max(10, blockers)
		bo.MinIdleConns = 0
		return &clients{
			rdb: redis.NewClusterClient(co), blk: redis.NewClusterClient(&bo),
			addr: "cluster " + strings.Join(co.Addrs, ","), cluster: true,
		}, nil
	}
	ro, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	if ro.TLSConfig, err = withTLS(ro.TLSConfig, tlsCfg); err != nil {
		return nil, err
	}
	ro.ConnMaxIdleTime = time.Minute
	ro.Dialer = lazyCheckDialer(redis.NewDialer(ro))
	bo := *ro
	bo.PoolSize = max(10, blockers)
	bo.MinIdleConns = 0
	return &clients{rdb: redis.NewClient(ro), blk: redis.NewClient(&bo), addr: ro.Addr}, nil
}

// withTLS returns the TLS configuration of a connection: the URL's
// (rediss://: go-redis's, with the host as server name) with custom's
// settings (Options.RedisTLS: a private CA, a client certificate) when
// given. custom without a TLS URL is an error: it would go unused, in
// plain text.
func withTLS(fromURL, custom *tls.Config) (*tls.Config, error) {
	if custom == nil {
		return fromURL, nil
	}
	if fromURL == nil {
		return nil, errors.New("a TLS configuration (Options.RedisTLS) is given but the URL is not rediss:// (nor rediss+cluster://)")
	}
	c := custom.Clone()
	if c.ServerName == "" {
		c.ServerName = fromURL.ServerName
	}
	c.MinVersion = max(c.MinVersion, fromURL.MinVersion)
	return c, nil
}

// parseClusterURL turns redis+cluster://[userinfo@]h1:p1,h2:p2[/][?query]
// into go-redis cluster options.
func parseClusterURL(raw string) (*redis.ClusterOptions, error) {
	scheme, rest, _ := strings.Cut(raw, "://")
	authority, tail := rest, ""
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		authority, tail = rest[:i], rest[i:]
	}
	path, query, _ := strings.Cut(tail, "?")
	if path != "" && path != "/" && path != "/0" {
		return nil, fmt.Errorf("%s: a Redis Cluster has only database 0 (got path %q)", raw, path)
	}
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
		return nil, fmt.Errorf("%s: no cluster node given (want %s://host:port[,host:port...])", raw, clusterScheme)
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", raw, err)
	}
	for _, a := range addrs[1:] {
		q.Add("addr", a)
	}
	base := "redis"
	if scheme == clusterSchemeTLS {
		base = "rediss"
	}
	u := base + "://" + userinfo + addrs[0]
	if enc := q.Encode(); enc != "" {
		u += "?" + enc
	}
	return redis.ParseClusterURL(u)
}

// idleCheckAfter is how long a pooled connection must have been idle before
// its next command first checks that the server has not closed it.
const idleCheckAfter = 100 * time.Millisecond

// lazyCheckDialer wraps go-redis's dialer so that its pool's health check
// costs nothing on the hot path. go-redis checks every connection it takes
// from its pool with a non-blocking read (recvfrom with MSG_PEEK) through
// the connection's SyscallConn, a syscall per command or pipeline: about a
// tenth of a busy worker's CPU. The wrapper's SyscallConn gives it a
// RawConn whose Read makes that check only when the connection has been
// idle for idleCheckAfter, and else reports it healthy without a syscall:
// a connection in constant use costs no syscall, and one that lay idle in
// the pool, which is where a server-side close (CLIENT KILL, a timeout, a
// restart) finds connections, is checked when the pool hands it out. The
// pool then drops a closed one and takes the next, or dials: after a
// restart, however many dead connections the pool holds, the command goes
// on a live one and spends none of its retries (a check in Write alone
// spent one per dead connection, and a pool of more than MaxRetries failed
// the command). Write makes the same check for a connection the pool did
// not check (not idle then): a closed one fails that Write with an error
// wrapping io.EOF before anything is sent, so go-redis drops it and
// retries. A connection closed while in constant use fails its next
// command once (as it could between go-redis's check and its write): the
// runtime's scripts are idempotent and a failed handling leaves its
// message pending for a retry (docs/runtime.md, "Connections").
func lazyCheckDialer(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		lc := &lazyCheckConn{Conn: c}
		if sc, ok := c.(syscall.Conn); ok {
			lc.raw, _ = sc.SyscallConn()
		}
		lc.last.Store(time.Now().UnixNano())
		return lc, nil
	}
}

// A lazyCheckConn is a net.Conn whose SyscallConn checks it only after an
// idle spell (lazyCheckDialer), without NetConn, through which go-redis
// would unwrap it.
type lazyCheckConn struct {
	net.Conn
	raw  syscall.RawConn // nil: it cannot check (not a socket go can peek)
	last atomic.Int64    // unix ns of its last Write or check
	// checks counts the checks it made, closed those that found it closed
	// (tests).
	checks, closed atomic.Int64
}

// errServerClosed is a pooled connection found closed by the server
// before a command was written to it. It wraps io.EOF, which go-redis
// retries on a new connection.
var errServerClosed = fmt.Errorf("redis connection closed by the server while idle: %w", io.EOF)

// check peeks at the connection when it has been idle for idleCheckAfter:
// errServerClosed (or another error wrapping io.EOF) when the server
// closed it or it failed. A healthy one counts as used now.
func (c *lazyCheckConn) check() error {
	now := time.Now().UnixNano()
	if c.raw == nil || now-c.last.Load() < int64(idleCheckAfter) {
		return nil
	}
	c.checks.Add(1)
	// A past command's read deadline may have expired while the
	// connection lay idle, and would fail the peek: go-redis sets its own
	// again before it reads the reply.
	_ = c.Conn.SetReadDeadline(time.Time{})
	if err := peekClosed(c.raw); err != nil {
		c.closed.Add(1)
		return err
	}
	c.last.Store(now)
	return nil
}

func (c *lazyCheckConn) Write(b []byte) (int, error) {
	if err := c.check(); err != nil {
		return 0, err
	}
	c.last.Store(time.Now().UnixNano())
	return c.Conn.Write(b)
}

// SyscallConn is what go-redis's pool checks a connection through when it
// hands it out (and what it peeks at for pending push data): lazyRaw.
func (c *lazyCheckConn) SyscallConn() (syscall.RawConn, error) { return lazyRaw{c}, nil }

// lazyRaw is a lazyCheckConn's RawConn for go-redis's checks. Its Read does
// not call f: it is check, whose error says the connection is closed, and
// whose nil says it is healthy with nothing to read (no data is ever
// reported waiting: go-redis reads a push notification before the reply
// it precedes, as it does on a connection it cannot peek at, such as TLS).
type lazyRaw struct{ c *lazyCheckConn }

var errNoRawConn = errors.New("redis connection: not a socket")

func (r lazyRaw) Read(func(fd uintptr) bool) error { return r.c.check() }

func (r lazyRaw) Write(f func(fd uintptr) bool) error {
	if r.c.raw == nil {
		return errNoRawConn
	}
	return r.c.raw.Write(f)
}

func (r lazyRaw) Control(f func(fd uintptr)) error {
	if r.c.raw == nil {
		return errNoRawConn
	}
	return r.c.raw.Control(f)
}

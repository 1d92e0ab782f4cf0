package redistest

import (
	"bytes"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// A Proxy forwards TCP connections to a server and can cut them all, to
// simulate a network outage or a server restart seen from the client, or
// one at a time, mid-command (Cut, LoseReply).
type Proxy struct {
	l      net.Listener
	target string

	mu    sync.Mutex
	down  bool
	conns map[net.Conn]bool
	links []*link

	latency   atomic.Int64 // SetLatency, ns
	loseMatch []byte       // LoseReply's match (under mu)
	loseNext  atomic.Bool  // LoseReply: the next link to send it loses its reply
	lost      atomic.Int64 // replies lost by LoseReply
}

// A link is one client connection and its connection to the server.
type link struct {
	client, server net.Conn
	// loseReply: the next bytes from the server are dropped and the
	// link cut, after the server has run what the client sent.
	loseReply atomic.Bool
}

// NewProxy listens on a free loopback port and forwards to target.
func NewProxy(target string) (*Proxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{l: l, target: target, conns: map[net.Conn]bool{}}
	go p.accept()
	return p, nil
}

// Cut closes one open connection, chosen at random, wherever its commands
// are. It reports whether there was one.
func (p *Proxy) Cut(r *rand.Rand) bool {
	l := p.pick(r)
	if l == nil {
		return false
	}
	l.client.Close()
	l.server.Close()
	return true
}

// LoseReply makes the next connection that sends a command containing
// match (in lower case: "evalsha", "xreadgroup"; "" for any) lose the
// reply: the server runs the commands, and the client sees its connection
// close before their replies (a client that retries sends them again).
func (p *Proxy) LoseReply(match string) {
	p.mu.Lock()
	p.loseMatch = []byte(match)
	p.mu.Unlock()
	p.loseNext.Store(true)
}

// SetLatency delays everything the proxy forwards, each way, by d (a
// round trip by 2d).
func (p *Proxy) SetLatency(d time.Duration) { p.latency.Store(int64(d)) }

// Lost returns how many replies LoseReply's connections lost.
func (p *Proxy) Lost() int64 { return p.lost.Load() }

func (p *Proxy) pick(r *rand.Rand) *link {
	p.mu.Lock()
	defer p.mu.Unlock()
	// Drop the closed ones.
	live := p.links[:0]
	for _, l := range p.links {
		if p.conns[l.client] {
			live = append(live, l)
		}
	}
	clear(p.links[len(live):])
	p.links = live
	if len(live) == 0 {
		return nil
	}
	return live[r.IntN(len(live))]
}

// Addr returns the proxy's address.
func (p *Proxy) Addr() string { return p.l.Addr().String() }

// Down closes every connection and refuses new ones until Up.
func (p *Proxy) Down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
	p.links = nil
}

// Up accepts connections again.
func (p *Proxy) Up() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}

// Close stops the proxy.
func (p *Proxy) Close() {
	p.l.Close()
	p.Down()
}

func (p *Proxy) accept() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down := p.down
		p.mu.Unlock()
		if down {
			c.Close()
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		l := &link{client: c, server: s}
		p.mu.Lock()
		p.conns[c], p.conns[s] = true, true
		p.links = append(p.links, l)
		p.mu.Unlock()
		go p.pipe(l, c, s, true)
		go p.pipe(l, s, c, false)
	}
}

// pipe copies src to dst until either closes; fromServer: the replies'
// direction, where LoseReply drops a reply.
func (p *Proxy) pipe(l *link, dst, src net.Conn, fromServer bool) {
	defer func() {
		dst.Close()
		src.Close()
		p.mu.Lock()
		delete(p.conns, dst)
		delete(p.conns, src)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if fromServer && l.loseReply.Load() {
				p.lost.Add(1)
				return
			}
			if !fromServer && p.loseNext.Load() {
				p.mu.Lock()
				if p.loseNext.Load() && bytes.Contains(bytes.ToLower(buf[:n]), p.loseMatch) {
					p.loseNext.Store(false)
					l.loseReply.Store(true)
				}
				p.mu.Unlock()
			}
			if d := p.latency.Load(); d > 0 {
				time.Sleep(time.Duration(d))
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

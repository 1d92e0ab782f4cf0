package tools

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A netPolicy is the agent tools' allow-list of hosts (Config.HTTPAllow).
// It mirrors the http handler's policy (runtime/handlers/netpolicy.go)
// with one difference: nothing is allowed unless listed. A request's URL
// (and every redirect's) must name a listed host, and every connection is
// checked again on the address actually dialled, so that a listed name
// that resolves to a loopback, private or metadata address (DNS rebinding
// included) is refused unless that address is listed itself.
type netPolicy struct {
	all   bool // "*": any host, at public addresses
	rules []netRule
}

// A netRule matches a host name or a range of addresses, on any port or
// one.
type netRule struct {
	host   string       // lower-case host name; "" for an address rule
	prefix netip.Prefix // the addresses, when host is ""
	port   string       // "" for any port
}

func parseNetPolicy(entries []string) (*netPolicy, error) {
	p := &netPolicy{}
	for _, e := range entries {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		if e == "*" {
			p.all = true
			continue
		}
		r, ok := parseNetRule(e)
		if !ok {
			return nil, fmt.Errorf("--agent-http-allow: %q is not an IP address, a CIDR range or a host name (each optionally with :port), nor *", e)
		}
		p.rules = append(p.rules, r)
	}
	return p, nil
}

func parseNetRule(e string) (netRule, bool) {
	if p, err := netip.ParsePrefix(e); err == nil {
		return netRule{prefix: p.Masked()}, true
	}
	if a, err := netip.ParseAddr(e); err == nil {
		a = a.Unmap().WithZone("")
		return netRule{prefix: netip.PrefixFrom(a, a.BitLen())}, true
	}
	host, port := e, ""
	if h, p, err := net.SplitHostPort(e); err == nil {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return netRule{}, false
		}
		host, port = h, p
	}
	if a, err := netip.ParseAddr(host); err == nil {
		a = a.Unmap().WithZone("")
		return netRule{prefix: netip.PrefixFrom(a, a.BitLen()), port: port}, true
	}
	host = normHost(host)
	if !validHostName(host) {
		return netRule{}, false
	}
	return netRule{host: host, port: port}, true
}

func normHost(h string) string { return strings.TrimSuffix(strings.ToLower(h), ".") }

func validHostName(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, c := range h {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_') {
			return false
		}
	}
	return true
}

// checkURL decides on a URL before any connection: its scheme is http or
// https and its host is listed.
func (p *netPolicy) checkURL(u *url.URL) error {
	if u.Scheme != "http" && u.Scheme != "https" {
		return errorf(CodeDenied, "%q: only http and https URLs are allowed", u.Redacted())
	}
	if u.User != nil {
		return errorf(CodeDenied, "%s: URLs with user info are not allowed; send credentials in headers", u.Redacted())
	}
	host := u.Hostname()
	if host == "" {
		return errorf(CodeDenied, "%q has no host", u.Redacted())
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	if p.all {
		return nil
	}
	if a, err := netip.ParseAddr(host); err == nil {
		a = a.Unmap().WithZone("")
		for _, r := range p.rules {
			if r.host == "" && r.prefix.Contains(a) && (r.port == "" || r.port == port) {
				return nil
			}
		}
	} else {
		h := normHost(host)
		for _, r := range p.rules {
			if r.host == h && (r.port == "" || r.port == port) {
				return nil
			}
		}
	}
	return errorf(CodeDenied, "%s is not on the worker's allow-list of hosts (--agent-http-allow); ask for one of: %s", net.JoinHostPort(host, port), p.describe())
}

func (p *netPolicy) describe() string {
	if len(p.rules) == 0 {
		return "none (this worker allows no hosts)"
	}
	var s []string
	for _, r := range p.rules {
		h := r.host
		if h == "" {
			h = r.prefix.String()
			if r.prefix.IsSingleIP() {
				h = r.prefix.Addr().String()
			}
		}
		if r.port != "" {
			h = net.JoinHostPort(h, r.port)
		}
		s = append(s, h)
	}
	return strings.Join(s, ", ")
}

// checkAddr decides on one connection: host is the URL's host, a the
// address about to be dialled.
func (p *netPolicy) checkAddr(host string, a netip.AddrPort) error {
	addr := a.Addr().Unmap().WithZone("")
	port := strconv.Itoa(int(a.Port()))
	for _, r := range p.rules {
		if r.host == "" && r.prefix.Contains(addr) && (r.port == "" || r.port == port) {
			return nil
		}
	}
	if why := specialRange(addr); why != "" {
		return errorf(CodeDenied, "%s resolves to %s, a %s address, which agent tools do not connect to unless --agent-http-allow lists that address", host, addr, why)
	}
	if p.all {
		return nil
	}
	h := normHost(host)
	for _, r := range p.rules {
		if r.host == h && (r.port == "" || r.port == port) {
			return nil
		}
	}
	return errorf(CodeDenied, "%s (%s) is not on the worker's allow-list of hosts (--agent-http-allow)", host, addr)
}

var (
	cgnat    = netip.MustParsePrefix("100.64.0.0/10")
	thisNet  = netip.MustParsePrefix("0.0.0.0/8")
	reserved = netip.MustParsePrefix("240.0.0.0/4")
	siteLoc  = netip.MustParsePrefix("fec0::/10")
	nat64    = netip.MustParsePrefix("64:ff9b::/96")
)

// specialRange names the kind of a non-public address (as the http
// handler's policy does), or returns "".
func specialRange(a netip.Addr) string {
	a = a.Unmap()
	if nat64.Contains(a) {
		b := a.As16()
		a = netip.AddrFrom4([4]byte(b[12:]))
	}
	switch {
	case a.IsUnspecified() || thisNet.Contains(a):
		return "unspecified"
	case a.IsLoopback():
		return "loopback"
	case a.IsLinkLocalUnicast():
		return "link-local"
	case a.IsPrivate() || siteLoc.Contains(a):
		return "private"
	case cgnat.Contains(a):
		return "shared (CGNAT)"
	case a.IsMulticast():
		return "multicast"
	case reserved.Contains(a):
		return "reserved"
	}
	return ""
}

// deniedDial wraps the policy's refusal so that it survives net/http's
// error wrapping.
type deniedDial struct{ err *Error }

func (d *deniedDial) Error() string { return d.err.Message }

// client returns an http client whose every connection goes through the
// policy (directly, never through a proxy, whose address the policy
// would see instead), whose redirects are checked hop by hop, and whose
// requests end after timeout.
func (p *netPolicy) client(timeout time.Duration) *http.Client {
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			host = addr
		}
		d := &net.Dialer{
			Timeout:   10 * time.Second,
			KeepAlive: 30 * time.Second,
			ControlContext: func(_ context.Context, _, address string, _ syscall.RawConn) error {
				a, err := netip.ParseAddrPort(address)
				if err != nil {
					return fmt.Errorf("unexpected address %q", address)
				}
				if e := p.checkAddr(host, a); e != nil {
					return &deniedDial{e.(*Error)}
				}
				return nil
			},
		}
		return d.DialContext(ctx, network, addr)
	}
	t := &http.Transport{
		DialContext:           dial,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          32,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: timeout,
		ExpectContinueTimeout: time.Second,
	}
	return &http.Client{Transport: t, Timeout: timeout, CheckRedirect: p.checkRedirect}
}

// safeHeaders are the request headers a redirect to another host keeps.
var safeHeaders = map[string]bool{"Accept": true, "Accept-Language": true, "Content-Language": true,
	"Content-Type": true, "User-Agent": true}

// checkRedirect follows at most 5 redirects, each to an allowed host; one
// to another host drops every header but the safe ones, so that a
// credential does not reach a host it was not written for.
func (p *netPolicy) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 5 {
		return errorf(CodeFailed, "stopped after 5 redirects")
	}
	if err := p.checkURL(req.URL); err != nil {
		e := err.(*Error)
		return &Error{Code: e.Code, Message: "redirect refused: " + e.Message}
	}
	first := via[0].URL
	if req.URL.Scheme != first.Scheme || req.URL.Host != first.Host {
		for k := range req.Header {
			if !safeHeaders[http.CanonicalHeaderKey(k)] {
				req.Header.Del(k)
			}
		}
	}
	return nil
}

// httpError turns a client error into a tool error, keeping a policy
// refusal's message and saying a timeout is one.
func httpError(err error, timeout time.Duration) *Error {
	var d *deniedDial
	if errors.As(err, &d) {
		return d.err
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var ue *url.Error
	if errors.As(err, &ue) && ue.Timeout() {
		return errorf(CodeTimeout, "the request did not finish within %s", timeout)
	}
	return errorf(CodeFailed, "the request failed: %v", err)
}

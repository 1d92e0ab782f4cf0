// Package netpolicy holds the pieces of a network policy for outbound
// HTTP that the http handler (runtime/handlers: allowed unless a
// special-purpose address or denied) and the agent tools
// (runtime/agent/tools: denied unless listed) share: parsing the
// operator's host lists, recognising the non-public address ranges,
// dialling with a check on the address actually dialled, and dropping
// credentials on a cross-host redirect. Each caller keeps its own
// decision (which entries admit which addresses) and its own errors.
package netpolicy

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A Rule matches a host name (as written in the URL) or a range of
// addresses, on any port or one.
type Rule struct {
	Host   string       // lower-case host name without a final dot; "" for an address rule
	Prefix netip.Prefix // the addresses, when Host is ""
	Port   string       // "" for any port
}

// ParseList reads list entries: "*" (all is then true), an IP address, a
// CIDR range, or a host name, the address and the name optionally with
// :port ("127.0.0.1:8080", "[::1]:8080", "api.internal:8443"). Blank
// entries are skipped. A bad entry's error starts with flag, the option
// the operator wrote it in.
func ParseList(flag string, entries []string) (rules []Rule, all bool, err error) {
	for _, e := range entries {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		if e == "*" {
			all = true
			continue
		}
		r, ok := ParseRule(e)
		if !ok {
			return nil, false, fmt.Errorf("%s: %q is not an IP address, a CIDR range or a host name (each optionally with :port), nor *", flag, e)
		}
		rules = append(rules, r)
	}
	return rules, all, nil
}

// ParseRule reads one entry other than "*".
func ParseRule(e string) (Rule, bool) {
	if p, err := netip.ParsePrefix(e); err == nil {
		return Rule{Prefix: p.Masked()}, true
	}
	if a, err := netip.ParseAddr(e); err == nil {
		a = a.Unmap().WithZone("")
		return Rule{Prefix: netip.PrefixFrom(a, a.BitLen())}, true
	}
	host, port := e, ""
	if h, p, err := net.SplitHostPort(e); err == nil {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return Rule{}, false
		}
		host, port = h, p
	}
	if a, err := netip.ParseAddr(host); err == nil {
		a = a.Unmap().WithZone("")
		return Rule{Prefix: netip.PrefixFrom(a, a.BitLen()), Port: port}, true
	}
	host = NormHost(host)
	if !validHostName(host) {
		return Rule{}, false
	}
	return Rule{Host: host, Port: port}, true
}

// NormHost is how a host name is compared: lower case, no final dot.
func NormHost(h string) string { return strings.TrimSuffix(strings.ToLower(h), ".") }

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

// Match reports whether r admits port (decimal) of host (normalised, see
// NormHost) or of address a (unmapped, without a zone). Pass "" as host
// to match address rules only, the zero Addr to match host rules only.
func (r Rule) Match(host string, a netip.Addr, port string) bool {
	if r.Port != "" && r.Port != port {
		return false
	}
	if r.Host != "" {
		return r.Host == host
	}
	return a.IsValid() && r.Prefix.Contains(a)
}

// String is the entry r was parsed from, normalised ("10.0.0.0/8",
// "127.0.0.1:8080", "api.example.com").
func (r Rule) String() string {
	h := r.Host
	if h == "" {
		h = r.Prefix.String()
		if r.Prefix.IsSingleIP() {
			h = r.Prefix.Addr().String()
		}
	}
	if r.Port != "" {
		h = net.JoinHostPort(h, r.Port)
	}
	return h
}

var (
	cgnat    = netip.MustParsePrefix("100.64.0.0/10")
	thisNet  = netip.MustParsePrefix("0.0.0.0/8")
	reserved = netip.MustParsePrefix("240.0.0.0/4") // and 255.255.255.255
	siteLoc  = netip.MustParsePrefix("fec0::/10")
	nat64    = netip.MustParsePrefix("64:ff9b::/96")
)

// SpecialRange names the kind of address a is when it is not a public
// unicast address a workflow should reach by default: loopback,
// link-local (cloud metadata services live at 169.254.169.254),
// private, shared (CGNAT), unspecified, multicast or reserved; else "".
// An IPv4 address in an IPv4-mapped or NAT64 IPv6 address is judged as
// itself.
func SpecialRange(a netip.Addr) string {
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

// A DialFunc is an http.Transport's DialContext.
type DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error)

// Dialer returns a DialContext that dials as the default transport does
// (connect timeout, 30 s keep-alive) and calls check before connecting
// to each address tried — the address actually dialled, after DNS
// resolution, so that neither a name resolving to a refused address (DNS
// rebinding included) nor a redirect gets around the policy. host is the
// host the request named (a name or an IP literal); check's error ends
// the attempt and can be found with errors.As in the client's error.
func Dialer(connectTimeout time.Duration, check func(host string, a netip.AddrPort) error) DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			host = addr
		}
		d := &net.Dialer{
			Timeout:   connectTimeout,
			KeepAlive: 30 * time.Second,
			ControlContext: func(_ context.Context, _, address string, _ syscall.RawConn) error {
				a, err := netip.ParseAddrPort(address)
				if err != nil {
					return fmt.Errorf("unexpected address %q", address)
				}
				return check(host, a)
			},
		}
		return d.DialContext(ctx, network, addr)
	}
}

// Transport returns an http.Transport with http.DefaultTransport's
// settings whose every connection goes through dial — not a clone of
// DefaultTransport: a program may have given it a DialTLSContext, which
// would bypass dial — and directly: through a proxy the policy would see
// the proxy's address, not the one the request reaches.
func Transport(dial DialFunc) *http.Transport {
	return &http.Transport{
		DialContext:           dial,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}

// safeHeaders are the request headers a redirect to another host keeps.
var safeHeaders = map[string]bool{"Accept": true, "Accept-Language": true, "Content-Language": true,
	"Content-Type": true, "User-Agent": true}

// DropCredentialsOnHostChange is for a CheckRedirect: when req (the next
// hop) goes to another scheme or host (or port) than the first request,
// it drops every header but the safe ones (Accept, Accept-Language,
// Content-Language, Content-Type, User-Agent) and those named in keep
// (canonical form), so that a credential a request sends (X-Api-Key, a
// token) does not reach a host it was not written for. (Go itself drops
// Authorization and cookies only.)
func DropCredentialsOnHostChange(req *http.Request, via []*http.Request, keep ...string) {
	first := via[0].URL
	if req.URL.Scheme == first.Scheme && req.URL.Host == first.Host {
		return
	}
	for k := range req.Header {
		ck := http.CanonicalHeaderKey(k)
		if !safeHeaders[ck] && !slices.Contains(keep, ck) {
			req.Header.Del(k)
		}
	}
}

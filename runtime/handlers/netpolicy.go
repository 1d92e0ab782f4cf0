package handlers

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CodeHTTPDenied is the error code of an http request the worker's
// network policy refused (not retryable: the policy does not change
// between attempts).
const CodeHTTPDenied = "http.denied"

// A netPolicy says which addresses the http handler may connect to. It is
// checked on every connection the handler's transport opens, on the
// address actually dialled (after DNS resolution, for every address tried
// and every redirect), so neither a host name that resolves to a private
// address (DNS rebinding included) nor a redirect gets around it.
//
// The deny list wins; then "*" or an allow-list entry admits an address;
// otherwise the special-purpose ranges (specialRange) are refused and
// every other address is admitted.
type netPolicy struct {
	allowAll, denyAll bool
	allow, deny       []netRule
}

// A netRule matches a host name (as written in the URL) or a range of
// addresses, on any port or one.
type netRule struct {
	host   string       // lower-case host name; "" for an address rule
	prefix netip.Prefix // the addresses, when host is ""
	port   string       // "" for any port
}

// parseNetPolicy reads allow- and deny-list entries: "*", an IP address,
// a CIDR range, or a host name, the address and the name optionally with
// :port ("127.0.0.1:8080", "[::1]:8080", "api.internal:8443").
func parseNetPolicy(allow, deny []string) (*netPolicy, error) {
	p := &netPolicy{}
	var err error
	if p.allow, p.allowAll, err = parseNetRules("--http-allow", allow); err != nil {
		return nil, err
	}
	if p.deny, p.denyAll, err = parseNetRules("--http-deny", deny); err != nil {
		return nil, err
	}
	return p, nil
}

// CheckHTTPPolicy reports an entry of an http allow or deny list
// (Options.HTTPAllow, HTTPDeny) that means nothing, so that a command line
// can refuse it before starting.
func CheckHTTPPolicy(allow, deny []string) error {
	_, err := parseNetPolicy(allow, deny)
	return err
}

func parseNetRules(flag string, entries []string) (rules []netRule, all bool, err error) {
	for _, e := range entries {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		if e == "*" {
			all = true
			continue
		}
		r, ok := parseNetRule(e)
		if !ok {
			return nil, false, fmt.Errorf("%s: %q is not an IP address, a CIDR range or a host name (each optionally with :port), nor *", flag, e)
		}
		rules = append(rules, r)
	}
	return rules, all, nil
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

// normHost is how a host name is compared: lower case, no final dot.
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

func (r netRule) match(host string, a netip.AddrPort) bool {
	if r.port != "" && r.port != strconv.Itoa(int(a.Port())) {
		return false
	}
	if r.host != "" {
		return r.host == host
	}
	return r.prefix.Contains(a.Addr())
}

// check decides on one connection: host is the name the URL gave (or its
// IP literal), a the address about to be dialled.
func (p *netPolicy) check(host string, a netip.AddrPort) error {
	host = normHost(host)
	a = netip.AddrPortFrom(a.Addr().Unmap().WithZone(""), a.Port())
	if p.denyAll {
		return &deniedError{host: host, addr: a, listed: true}
	}
	for _, r := range p.deny {
		if r.match(host, a) {
			return &deniedError{host: host, addr: a, listed: true}
		}
	}
	if p.allowAll {
		return nil
	}
	for _, r := range p.allow {
		if r.match(host, a) {
			return nil
		}
	}
	if why := specialRange(a.Addr()); why != "" {
		return &deniedError{host: host, addr: a, reason: why}
	}
	return nil
}

var (
	cgnat    = netip.MustParsePrefix("100.64.0.0/10")
	thisNet  = netip.MustParsePrefix("0.0.0.0/8")
	reserved = netip.MustParsePrefix("240.0.0.0/4") // and 255.255.255.255
	siteLoc  = netip.MustParsePrefix("fec0::/10")
	nat64    = netip.MustParsePrefix("64:ff9b::/96")
)

// specialRange names the kind of address a is when it is not a public
// unicast address a workflow should reach by default: loopback,
// link-local (cloud metadata services live at 169.254.169.254),
// private, shared (CGNAT), unspecified, multicast or reserved. An IPv4
// address in an IPv4-mapped or NAT64 IPv6 address is judged as itself.
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

// A deniedError is a connection the policy refused.
type deniedError struct {
	host   string
	addr   netip.AddrPort
	reason string // the kind of address; "" when the deny list names it
	listed bool
}

func (e *deniedError) Error() string {
	ip := e.addr.Addr().String()
	who, hint := e.addr.String(), "--http-allow "+ip
	if e.host != "" && e.host != ip {
		who = e.host + " (" + who + ")"
		hint += " or --http-allow " + e.host
	}
	if e.listed {
		return who + " is on the worker's --http-deny list"
	}
	return fmt.Sprintf("%s is a %s address, which workers do not connect to by default; to allow it, start the worker (or wfc run) with %s", who, e.reason, hint)
}

// dialer returns a DialContext that dials as the default transport does
// and lets the policy refuse each address before connecting.
func (p *netPolicy) dialer() func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			host = addr
		}
		d := &net.Dialer{
			Timeout:   30 * time.Second,
			KeepAlive: 30 * time.Second,
			ControlContext: func(_ context.Context, _, address string, _ syscall.RawConn) error {
				a, err := netip.ParseAddrPort(address)
				if err != nil {
					return fmt.Errorf("unexpected address %q", address)
				}
				return p.check(host, a)
			},
		}
		return d.DialContext(ctx, network, addr)
	}
}

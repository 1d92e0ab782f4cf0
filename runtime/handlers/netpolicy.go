package handlers

import (
	"fmt"
	"net/netip"
	"strconv"
	"time"

	"github.com/wfc-lang/wfc/runtime/internal/netpolicy"
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
// otherwise the special-purpose ranges (netpolicy.SpecialRange) are
// refused and every other address is admitted.
type netPolicy struct {
	allowAll, denyAll bool
	allow, deny       []netpolicy.Rule
}

// parseNetPolicy reads allow- and deny-list entries (netpolicy.ParseList).
func parseNetPolicy(allow, deny []string) (*netPolicy, error) {
	p := &netPolicy{}
	var err error
	if p.allow, p.allowAll, err = netpolicy.ParseList("--http-allow", allow); err != nil {
		return nil, err
	}
	if p.deny, p.denyAll, err = netpolicy.ParseList("--http-deny", deny); err != nil {
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

// check decides on one connection: host is the name the URL gave (or its
// IP literal), a the address about to be dialled.
func (p *netPolicy) check(host string, a netip.AddrPort) error {
	host = netpolicy.NormHost(host)
	a = netip.AddrPortFrom(a.Addr().Unmap().WithZone(""), a.Port())
	port := strconv.Itoa(int(a.Port()))
	if p.denyAll {
		return &deniedError{host: host, addr: a, listed: true}
	}
	for _, r := range p.deny {
		if r.Match(host, a.Addr(), port) {
			return &deniedError{host: host, addr: a, listed: true}
		}
	}
	if p.allowAll {
		return nil
	}
	for _, r := range p.allow {
		if r.Match(host, a.Addr(), port) {
			return nil
		}
	}
	if why := netpolicy.SpecialRange(a.Addr()); why != "" {
		return &deniedError{host: host, addr: a, reason: why}
	}
	return nil
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
func (p *netPolicy) dialer() netpolicy.DialFunc {
	return netpolicy.Dialer(30*time.Second, func(host string, a netip.AddrPort) error { return p.check(host, a) })
}

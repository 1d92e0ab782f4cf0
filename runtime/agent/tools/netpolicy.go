package tools

import (
	"errors"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/wfc-lang/wfc/runtime/internal/netpolicy"
)

// A netPolicy is the agent tools' allow-list of hosts (Config.HTTPAllow).
// It shares its parts with the http handler's policy (runtime/internal/netpolicy)
// but differs in one way: nothing is allowed unless listed. A request's URL
// (and every redirect's) must name a listed host, and every connection is
// checked again on the address actually dialled, so that a listed name
// that resolves to a loopback, private or metadata address (DNS rebinding
// included) is refused unless that address is listed itself.
type netPolicy struct {
	all   bool // "*": any host, at public addresses
	rules []netpolicy.Rule
}

func parseNetPolicy(entries []string) (*netPolicy, error) {
	rules, all, err := netpolicy.ParseList("--agent-http-allow", entries)
	if err != nil {
		return nil, err
	}
	return &netPolicy{all: all, rules: rules}, nil
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
		if p.admits("", a.Unmap().WithZone(""), port) {
			return nil
		}
	} else if p.admits(netpolicy.NormHost(host), netip.Addr{}, port) {
		return nil
	}
	return errorf(CodeDenied, "%s is not on the worker's allow-list of hosts (--agent-http-allow); ask for one of: %s", net.JoinHostPort(host, port), p.describe())
}

func (p *netPolicy) describe() string {
	if len(p.rules) == 0 {
		return "none (this worker allows no hosts)"
	}
	var s []string
	for _, r := range p.rules {
		s = append(s, r.String())
	}
	return strings.Join(s, ", ")
}

// admits reports whether a rule admits port of host or of address a
// (netpolicy.Rule.Match).
func (p *netPolicy) admits(host string, a netip.Addr, port string) bool {
	for _, r := range p.rules {
		if r.Match(host, a, port) {
			return true
		}
	}
	return false
}

// checkAddr decides on one connection: host is the URL's host, a the
// address about to be dialled.
func (p *netPolicy) checkAddr(host string, a netip.AddrPort) error {
	addr := a.Addr().Unmap().WithZone("")
	port := strconv.Itoa(int(a.Port()))
	if p.admits("", addr, port) {
		return nil
	}
	if why := netpolicy.SpecialRange(addr); why != "" {
		return errorf(CodeDenied, "%s resolves to %s, a %s address, which agent tools do not connect to unless --agent-http-allow lists that address", host, addr, why)
	}
	if p.all {
		return nil
	}
	if p.admits(netpolicy.NormHost(host), netip.Addr{}, port) {
		return nil
	}
	return errorf(CodeDenied, "%s (%s) is not on the worker's allow-list of hosts (--agent-http-allow)", host, addr)
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
	dial := netpolicy.Dialer(10*time.Second, func(host string, a netip.AddrPort) error {
		if e := p.checkAddr(host, a); e != nil {
			return &deniedDial{e.(*Error)}
		}
		return nil
	})
	t := netpolicy.Transport(dial)
	t.MaxIdleConns = 32
	t.ResponseHeaderTimeout = timeout
	return &http.Client{Transport: t, Timeout: timeout, CheckRedirect: p.checkRedirect}
}

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
	netpolicy.DropCredentialsOnHostChange(req, via)
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

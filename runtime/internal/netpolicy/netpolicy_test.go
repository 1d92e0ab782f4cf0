package netpolicy

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The ranges refused by default (the http handler) or unless listed (the
// agent tools).
func TestSpecialRange(t *testing.T) {
	for a, want := range map[string]string{
		"127.0.0.1": "loopback", "127.9.9.9": "loopback", "::1": "loopback", "::ffff:127.0.0.1": "loopback",
		"64:ff9b::7f00:1": "loopback",
		"169.254.169.254": "link-local", "fe80::1": "link-local",
		"10.1.2.3": "private", "172.16.0.1": "private", "172.31.255.255": "private", "192.168.1.1": "private",
		"fc00::1": "private", "fd12:3456::1": "private", "::ffff:10.0.0.1": "private", "fec0::1": "private",
		"100.64.0.1": "shared (CGNAT)", "100.127.255.255": "shared (CGNAT)",
		"0.0.0.0": "unspecified", "0.1.2.3": "unspecified", "::": "unspecified",
		"224.0.0.1": "multicast", "ff02::1": "multicast",
		"255.255.255.255": "reserved", "240.0.0.1": "reserved",
		"8.8.8.8": "", "172.15.255.255": "", "172.32.0.1": "", "100.128.0.1": "", "2606:4700::1111": "", "::ffff:1.1.1.1": "",
	} {
		if got := SpecialRange(netip.MustParseAddr(a)); got != want {
			t.Errorf("%s: %q, want %q", a, got, want)
		}
	}
}

// TestParseList: the entries both policies take, and the errors, which
// name the option the entry came from.
func TestParseList(t *testing.T) {
	for _, e := range []string{"not a host", "10.0.0.0/33", "host:0", "host:65536", "host:http", "[::1", "a/b", "http://x", "a b"} {
		_, _, err := ParseList("--some-allow", []string{"10.0.0.0/8", e})
		if err == nil || !strings.HasPrefix(err.Error(), "--some-allow: ") || !strings.Contains(err.Error(), "not an IP address, a CIDR range or a host name") {
			t.Errorf("%q: %v", e, err)
		}
	}
	rules, all, err := ParseList("--x", []string{"10.1.2.3/8", "::1", "[::1]:8080", "::ffff:127.0.0.1", "127.0.0.1:6379", "API.internal.:8443", " 192.168.1.1 ", "", "under_score"})
	if err != nil || all {
		t.Fatalf("%v %v", all, err)
	}
	var got []string
	for _, r := range rules {
		got = append(got, r.String())
	}
	want := "10.0.0.0/8 ::1 [::1]:8080 127.0.0.1 127.0.0.1:6379 api.internal:8443 192.168.1.1 under_score"
	if strings.Join(got, " ") != want {
		t.Errorf("rules %q, want %q", strings.Join(got, " "), want)
	}
	if _, all, err := ParseList("--x", []string{"*", " * "}); !all || err != nil {
		t.Errorf("*: %v %v", all, err)
	}
	if rules, all, err := ParseList("--x", nil); rules != nil || all || err != nil {
		t.Errorf("empty: %v %v %v", rules, all, err)
	}
}

func TestRuleMatch(t *testing.T) {
	rule := func(e string) Rule {
		r, ok := ParseRule(e)
		if !ok {
			t.Fatalf("%q does not parse", e)
		}
		return r
	}
	a := netip.MustParseAddr
	cases := []struct {
		rule, host string
		addr       netip.Addr
		port       string
		want       bool
	}{
		{"10.0.0.0/8", "", a("10.9.9.9"), "80", true},
		{"10.0.0.0/8", "", a("11.0.0.1"), "80", false},
		{"10.0.0.0/8", "ten.example", netip.Addr{}, "80", false}, // an address rule does not match a name
		{"127.0.0.1:8080", "", a("127.0.0.1"), "8080", true},
		{"127.0.0.1:8080", "", a("127.0.0.1"), "8081", false},
		{"api.internal", "api.internal", netip.Addr{}, "443", true},
		{"api.internal", "api.internal", a("10.0.0.1"), "443", true},
		{"api.internal", "", a("10.0.0.1"), "443", false}, // nor a name rule an address
		{"api.internal", "other.internal", netip.Addr{}, "443", false},
		{"Api.Internal.:8443", "api.internal", netip.Addr{}, "8443", true},
		{"api.internal:8443", "api.internal", netip.Addr{}, "443", false},
	}
	for _, c := range cases {
		if got := rule(c.rule).Match(c.host, c.addr, c.port); got != c.want {
			t.Errorf("%s matches %q %v :%s = %v, want %v", c.rule, c.host, c.addr, c.port, got, c.want)
		}
	}
}

// TestDialerChecksBeforeConnecting: the check sees the host the request
// named and the address dialled, and a refusal means no connection at
// all, its error reaching the client's caller.
func TestDialerChecksBeforeConnecting(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())

	refused := errors.New("refused by the test")
	var seenHost string
	var seenAddr netip.AddrPort
	allow := false
	dial := Dialer(5*time.Second, func(host string, a netip.AddrPort) error {
		seenHost, seenAddr = host, a
		if !allow {
			return refused
		}
		return nil
	})
	c := &http.Client{Transport: Transport(dial)}
	defer c.CloseIdleConnections()
	ctx := context.Background()
	get := func() error {
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://localhost:"+port+"/", nil)
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := get(); !errors.Is(err, refused) {
		t.Fatalf("refused: %v", err)
	}
	if seenHost != "localhost" || !seenAddr.Addr().IsLoopback() || seenAddr.Port() == 0 {
		t.Errorf("the check saw %q %v", seenHost, seenAddr)
	}
	if n := conns.Load(); n != 0 {
		t.Errorf("a refused dial connected %d times", n)
	}
	allow = true
	if err := get(); err != nil || conns.Load() != 1 {
		t.Errorf("allowed: %v, %d connections", err, conns.Load())
	}
}

// TestTransportNoProxy: the policy's transport never goes through a proxy
// (the policy would see the proxy's address).
func TestTransportNoProxy(t *testing.T) {
	if Transport(nil).Proxy != nil {
		t.Error("the transport uses a proxy")
	}
}

// TestDropCredentialsOnHostChange: a redirect to another scheme, host or
// port keeps only the safe headers and those asked for; one to the same
// origin keeps everything.
func TestDropCredentialsOnHostChange(t *testing.T) {
	first, _ := http.NewRequest("GET", "http://a.example:8080/x", nil)
	hop := func(u string) *http.Request {
		r, _ := http.NewRequest("GET", u, nil)
		for _, h := range []string{"Accept", "Accept-Language", "Content-Language", "Content-Type", "User-Agent", "Idempotency-Key", "X-Api-Key", "Authorization", "x-token"} {
			r.Header.Set(h, "v")
		}
		return r
	}
	same := hop("http://a.example:8080/y")
	DropCredentialsOnHostChange(same, []*http.Request{first})
	if len(same.Header) != 9 {
		t.Errorf("same origin lost headers: %v", same.Header)
	}
	for _, u := range []string{"http://b.example:8080/x", "https://a.example:8080/x", "http://a.example:8081/x"} {
		r := hop(u)
		DropCredentialsOnHostChange(r, []*http.Request{first, same}, "Idempotency-Key")
		if len(r.Header) != 6 || r.Header.Get("Idempotency-Key") != "v" || r.Header.Get("User-Agent") != "v" {
			t.Errorf("%s: kept %v", u, r.Header)
		}
		r = hop(u)
		DropCredentialsOnHostChange(r, []*http.Request{first})
		if len(r.Header) != 5 || r.Header.Get("X-Api-Key") != "" || r.Header.Get("Idempotency-Key") != "" {
			t.Errorf("%s: kept %v", u, r.Header)
		}
	}
}

package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// testCert is a self-signed certificate for 127.0.0.1 and localhost (its
// own CA), in PEM files.
type testCert struct {
	certFile, keyFile string
	pool              *x509.CertPool
	certPEM, keyPEM   []byte
}

func newTestCert(t *testing.T, dir, name string) *testCert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	c := &testCert{
		certFile: filepath.Join(dir, name+".crt"), keyFile: filepath.Join(dir, name+".key"),
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}),
		pool:    x509.NewCertPool(),
	}
	c.pool.AppendCertsFromPEM(c.certPEM)
	if err := os.WriteFile(c.certFile, c.certPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.keyFile, c.keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return c
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader in two
// goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// serveInProcess runs `wfc serve` with args in this process until the
// test ends, and returns the URL it prints and its standard error.
func serveInProcess(t *testing.T, vars map[string]string, args ...string) (string, *syncBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var errb syncBuffer
	env := &Env{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: &errb, Getenv: func(k string) string { return vars[k] }}
	done := make(chan int, 1)
	go func() { done <- dispatch(ctx, env, append([]string{"serve"}, args...)) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	listening := regexp.MustCompile(`listening on (https?://[0-9.:]+) `)
	for i := 0; i < 1000; i++ {
		if m := listening.FindStringSubmatch(errb.String()); m != nil {
			return m[1], &errb
		}
		select {
		case code := <-done:
			done <- code
			t.Fatalf("wfc serve exited %d: %s", code, errb.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("wfc serve did not listen: %s", errb.String())
	return "", nil
}

func TestServeTLS(t *testing.T) {
	dir := t.TempDir()
	cert := newTestCert(t, dir, "server")
	const token = "tls-token-0123456789abcdef"
	url, _ := serveInProcess(t, map[string]string{"WFC_SERVE_TOKENS": token + " ops@example.com read,submit"},
		"--listen", "127.0.0.1:0", "--tls-cert", cert.certFile, "--tls-key", cert.keyFile, "--workers", "1")
	if !strings.HasPrefix(url, "https://") {
		t.Fatalf("wfc serve listens on %s, want https://", url)
	}
	trusting := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: cert.pool}}}
	get := func(c *http.Client, u, tok string) (*http.Response, string, error) {
		req, _ := http.NewRequest("GET", u, nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := c.Do(req)
		if err != nil {
			return nil, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b), nil
	}

	// A client trusting the certificate: the API over TLS, tokens and all.
	if resp, body, err := get(trusting, url+"/healthz", ""); err != nil || resp.StatusCode != 200 || resp.TLS == nil {
		t.Fatalf("GET /healthz over TLS: %v %v %s", err, resp, body)
	}
	if resp, body, err := get(trusting, url+"/v1/runs", ""); err != nil || resp.StatusCode != 401 {
		t.Fatalf("GET /v1/runs without a token: %v %v %s", err, resp, body)
	}
	if resp, body, err := get(trusting, url+"/v1/runs", token); err != nil || resp.StatusCode != 200 || !strings.Contains(body, `"runs"`) {
		t.Fatalf("GET /v1/runs with a token: %v %v %s", err, resp, body)
	}
	// One not trusting it fails the handshake.
	var unknown x509.UnknownAuthorityError
	if _, _, err := get(&http.Client{}, url+"/healthz", ""); !errors.As(err, &unknown) {
		t.Fatalf("a client without the CA: %v, want an unknown-authority error", err)
	}
	// Plain HTTP to the TLS port: a clean 400 that says why, and the
	// server goes on.
	plain := "http://" + strings.TrimPrefix(url, "https://")
	resp, body, err := get(&http.Client{}, plain+"/healthz", "")
	if err != nil || resp.StatusCode != 400 || !strings.Contains(body, "HTTPS server") {
		t.Fatalf("plain HTTP to the TLS port: %v %v %q", err, resp, body)
	}
	if resp, _, err := get(trusting, url+"/readyz", ""); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /readyz after the plain request: %v %v", err, resp)
	}
}

func TestServeTLSBadKeys(t *testing.T) {
	dir := t.TempDir()
	a, b := newTestCert(t, dir, "a"), newTestCert(t, dir, "b")
	garbage := filepath.Join(dir, "garbage.pem")
	os.WriteFile(garbage, []byte("not a PEM file\n"), 0o644)
	unreadable := filepath.Join(dir, "unreadable.key")
	os.WriteFile(unreadable, a.keyPEM, 0o000)
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"missing key", []string{"--tls-cert", a.certFile, "--tls-key", filepath.Join(dir, "nosuch.key")}, exitFailed, "TLS: open " + filepath.Join(dir, "nosuch.key") + ": no such file or directory"},
		{"mismatched key", []string{"--tls-cert", a.certFile, "--tls-key", b.keyFile}, exitFailed, "TLS: tls: private key does not match public key"},
		{"not PEM", []string{"--tls-cert", garbage, "--tls-key", a.keyFile}, exitFailed, "TLS: tls: failed to find any PEM data in certificate input"},
		{"key as certificate", []string{"--tls-cert", a.keyFile, "--tls-key", a.keyFile}, exitFailed, "PEM inputs may have been switched"},
		{"cert alone", []string{"--tls-cert", a.certFile}, exitUsage, "give --tls-cert and --tls-key together"},
		// Off loopback without tokens: refused, TLS or not.
		{"open listener", []string{"--listen", "0.0.0.0:0", "--tls-cert", a.certFile, "--tls-key", a.keyFile}, exitUsage, "refusing to listen on 0.0.0.0:0 without tokens"},
	}
	if os.Geteuid() != 0 { // root reads a file whatever its mode
		cases = append(cases, struct {
			name string
			args []string
			code int
			want string
		}{"unreadable key", []string{"--tls-cert", a.certFile, "--tls-key", unreadable}, exitFailed, "permission denied"})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"serve", "--listen", "127.0.0.1:0", "--workers", "0"}, c.args...)
			code, _, errs := wfcIn(context.Background(), nil, args...)
			if code != c.code || !strings.Contains(errs, c.want) || strings.Contains(errs, "panic") || strings.Contains(errs, "listening") {
				t.Fatalf("exit %d, want %d with %q: %s", code, c.code, c.want, errs)
			}
		})
	}
}

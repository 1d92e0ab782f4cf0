package runtime

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/runtime/handlers"
	"github.com/wfc-lang/wfc/runtime/internal/redistest"
)

// The Redis URLs of a secured Redis: an ACL user with a password
// (redis://alice:secret@host:port/0), TLS (rediss://) with a private CA
// (Options.RedisTLS), and both; on redis-server and on miniredis.

const aclPassword = "s3cret-Pa55word"

// selfSigned is a certificate for 127.0.0.1 that is its own CA, as PEM
// files in dir, a tls.Certificate and a pool trusting it.
type selfSigned struct {
	certFile, keyFile string
	pair              tls.Certificate
	pool              *x509.CertPool
}

func newSelfSigned(t *testing.T, dir string) *selfSigned {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "wfc test redis"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true,
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
	c := &selfSigned{certFile: filepath.Join(dir, "redis.crt"), keyFile: filepath.Join(dir, "redis.key"), pool: x509.NewCertPool()}
	c.pool.AppendCertsFromPEM(certPEM)
	if c.pair, err = tls.X509KeyPair(certPEM, keyPEM); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.certFile, certPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return c
}

// securedRedis is a Redis whose default user is off and whose user alice
// has aclPassword; with TLS on when cert is given. It returns the
// address of the plain port and of the TLS port ("" without cert).
func securedRedis(t *testing.T, real bool, cert *selfSigned) (plain, tlsAddr string) {
	t.Helper()
	if !real {
		m := miniredis.NewMiniRedis()
		m.RequireUserAuth("alice", aclPassword)
		if err := m.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Close)
		plain = m.Addr()
		if cert != nil {
			mt := miniredis.NewMiniRedis()
			mt.RequireUserAuth("alice", aclPassword)
			if err := mt.StartTLS(&tls.Config{Certificates: []tls.Certificate{cert.pair}}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(mt.Close)
			tlsAddr = mt.Addr()
		}
		return plain, tlsAddr
	}
	args := []string{"--user", "default", "off", "--user", "alice", "on", ">" + aclPassword, "~*", "&*", "+@all"}
	var tlsPort int
	if cert != nil {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		tlsPort = l.Addr().(*net.TCPAddr).Port
		l.Close()
		args = append(args, "--tls-port", fmt.Sprint(tlsPort), "--tls-cert-file", cert.certFile, "--tls-key-file", cert.keyFile,
			"--tls-ca-cert-file", cert.certFile, "--tls-auth-clients", "no")
	}
	s := redistest.Start(t, redistest.Options{Args: args})
	if cert != nil {
		tlsAddr = fmt.Sprintf("127.0.0.1:%d", tlsPort)
	}
	return s.Addr(), tlsAddr
}

// fullRun opens an engine on url, runs a two-step workflow to its end
// with a worker of the engine, and returns the run's status.
func fullRun(t *testing.T, url string, tlsCfg *tls.Config) *Status {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	e, err := Open(ctx, Options{RedisURL: url, RedisTLS: tlsCfg, Prefix: fmt.Sprintf("t%d", prefixSeq.Add(1)), Logger: testLogger(t)})
	if err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	defer e.Close()
	reg := handlers.NewRegistry(handlers.Options{})
	reg.RegisterFunc("echo", func(_ context.Context, req handlers.Request) (json.RawMessage, error) { return req.Config, nil })
	e.StartWorkers(ctx, 2, fastWorker(reg))
	defer e.StopWorkers()
	w := build(t, wfSpec{
		inputs:  []ir.Input{input("who", ir.KindString)},
		outputs: []ir.Output{output("b", "b.output")},
		nodes: []*nodeSpec{
			task("a", "echo", with("who", cexpr("input.who"))),
			task("b", "echo", after("a"), with("hello", cexpr("a.output.who"))),
		},
	})
	run, err := e.Submit(ctx, w, map[string]any{"who": "ada"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := e.Wait(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != RunCompleted || string(st.Result) != `{"b":{"hello":"ada"}}` {
		t.Fatalf("run over %s: %s %s %s", url, st.State, st.Result, st.Error)
	}
	return st
}

// openErr opens an engine on url and returns the error it must fail with.
func openErr(t *testing.T, url string, tlsCfg *tls.Config) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e, err := Open(ctx, Options{RedisURL: url, RedisTLS: tlsCfg, ConnectTimeout: 2 * time.Second, Logger: testLogger(t)})
	if err == nil {
		e.Close()
		t.Fatalf("open %s: no error", url)
	}
	if strings.Contains(err.Error(), aclPassword) || strings.Contains(err.Error(), "wrong-Pa55word") {
		t.Fatalf("the error shows the password: %v", err)
	}
	return err
}

func TestRedisURLACLUser(t *testing.T) {
	for _, real := range []bool{false, true} {
		t.Run(map[bool]string{false: "miniredis", true: "redis"}[real], func(t *testing.T) {
			t.Parallel()
			addr, _ := securedRedis(t, real, nil)
			fullRun(t, "redis://alice:"+aclPassword+"@"+addr+"/0", nil)
			err := openErr(t, "redis://alice:wrong-Pa55word@"+addr+"/0", nil)
			// A refused login is told at once ("refused the login"), not
			// retried until the connect deadline ("cannot reach").
			if !strings.Contains(err.Error(), "WRONGPASS") || !strings.Contains(err.Error(), "refused the login") {
				t.Fatalf("wrong password: %v, want the server's WRONGPASS, at once", err)
			}
			if err := openErr(t, "redis://"+addr+"/0", nil); !strings.Contains(err.Error(), "NOAUTH") || !strings.Contains(err.Error(), "refused the login") {
				t.Fatalf("no password: %v, want NOAUTH, at once", err)
			}
		})
	}
}

func TestRedisURLTLS(t *testing.T) {
	for _, real := range []bool{false, true} {
		t.Run(map[bool]string{false: "miniredis", true: "redis"}[real], func(t *testing.T) {
			t.Parallel()
			cert := newSelfSigned(t, t.TempDir())
			plain, tlsAddr := securedRedis(t, real, cert)
			trust := &tls.Config{RootCAs: cert.pool}
			fullRun(t, "rediss://alice:"+aclPassword+"@"+tlsAddr+"/0", trust)
			// The system roots do not know the private CA.
			var unknown x509.UnknownAuthorityError
			if err := openErr(t, "rediss://alice:"+aclPassword+"@"+tlsAddr+"/0", nil); !errors.As(err, &unknown) && !strings.Contains(err.Error(), "certificate signed by unknown authority") {
				t.Fatalf("untrusted certificate: %v", err)
			}
			// The certificate names 127.0.0.1, not another host.
			if err := openErr(t, "rediss://alice:"+aclPassword+"@"+tlsAddr+"/0", &tls.Config{RootCAs: cert.pool, ServerName: "redis.example.com"}); !strings.Contains(err.Error(), "certificate is valid for") {
				t.Fatalf("wrong server name: %v", err)
			}
			// A TLS configuration for a plain URL is refused, not ignored.
			if err := openErr(t, "redis://alice:"+aclPassword+"@"+plain+"/0", trust); !strings.Contains(err.Error(), "not rediss://") {
				t.Fatalf("TLS settings with redis://: %v", err)
			}
		})
	}
}

package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// The commands take a Redis ACL user's URL (redis://user:password@host)
// everywhere — run, submit, worker, status, serve — and never print the
// password, not even when it is wrong.

const cliRedisPassword = "cli-Secret-pw-42"

// aclRedis returns the address of a Redis whose only user is alice with
// cliRedisPassword: miniredis, or a redis-server with the default user
// off.
func aclRedis(t *testing.T, real bool) string {
	t.Helper()
	if real {
		port := startRedisServer(t, "--user", "default", "off", "--user", "alice", "on", ">"+cliRedisPassword, "~*", "&*", "+@all")
		return fmt.Sprintf("127.0.0.1:%d", port)
	}
	m := miniredis.NewMiniRedis()
	m.RequireUserAuth("alice", cliRedisPassword)
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m.Addr()
}

func TestCLIRedisACLUser(t *testing.T) {
	for _, real := range []bool{false, true} {
		t.Run(map[bool]string{false: "miniredis", true: "redis"}[real], func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			addr := aclRedis(t, real)
			url := "redis://alice:" + cliRedisPassword + "@" + addr + "/0"
			wrong := "redis://alice:wrong-" + cliRedisPassword + "@" + addr + "/0"
			noPassword := func(what, s string) {
				t.Helper()
				if strings.Contains(s, cliRedisPassword) {
					t.Fatalf("%s prints the password:\n%s", what, s)
				}
			}

			// run: its own workers, over the ACL user.
			code, out, errs := wfcIn(ctx, nil, "run", "--redis", url, "../../examples/greet.wf", "--input", "name=Ada")
			if code != 0 || !strings.Contains(out, "HELLO, ADA!") {
				t.Fatalf("run: %d %s %s", code, out, errs)
			}
			noPassword("run", out+errs)

			// worker and submit (and status), as separate commands; the
			// URL from $WFC_REDIS for the worker.
			wctx, stopWorker := context.WithCancel(ctx)
			wdone := make(chan string, 1)
			go func() {
				_, wout, werrs := wfcIn(wctx, map[string]string{"WFC_REDIS": url}, "worker")
				wdone <- wout + werrs
			}()
			code, out, errs = wfcIn(ctx, nil, "submit", "--redis", url, "--wait", "-q", "../../examples/greet.wf", "--input", "name=Bo")
			if code != 0 || !strings.Contains(out, "HELLO, BO!") {
				t.Fatalf("submit --wait: %d %s %s", code, out, errs)
			}
			noPassword("submit", out+errs)
			run := strings.SplitN(out, "\n", 2)[0]
			if code, out, errs = wfcIn(ctx, nil, "status", "--redis", url, run); code != 0 || !strings.Contains(out, "completed") {
				t.Fatalf("status: %d %s %s", code, out, errs)
			}
			stopWorker()
			noPassword("worker", <-wdone)

			// serve: the API over the same Redis.
			base, serr := serveInProcess(t, nil, "--redis", url, "--listen", "127.0.0.1:0", "--workers", "1")
			resp, err := http.Get(base + "/readyz")
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("readyz over the ACL user: %v %v", err, resp)
			}
			resp.Body.Close()
			resp, err = http.Get(base + "/v1/runs?workflow=greet&state=completed")
			body := ""
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				body = string(b)
			}
			if err != nil || !strings.Contains(body, run) {
				t.Fatalf("the server does not list %s: %v %s", run, err, body)
			}
			noPassword("serve", serr.String())

			// A wrong password: each command fails with the server's
			// answer, and the password (right or wrong) nowhere.
			for _, args := range [][]string{
				{"run", "--redis", wrong, "../../examples/greet.wf", "--input", "name=Ada"},
				{"submit", "--redis", wrong, "../../examples/greet.wf", "--input", "name=Ada"},
				{"status", "--redis", wrong, run},
				{"worker", "--redis", wrong},
				{"serve", "--redis", wrong, "--listen", "127.0.0.1:0"},
			} {
				tctx, tcancel := context.WithTimeout(ctx, 60*time.Second)
				code, out, errs := wfcIn(tctx, nil, args...)
				tcancel()
				if code == 0 || !strings.Contains(errs, "WRONGPASS") {
					t.Fatalf("wfc %s with a wrong password: exit %d\n%s%s", args[0], code, out, errs)
				}
				noPassword("wfc "+args[0]+" (wrong password)", out+errs)
				if strings.Contains(out+errs, "wrong-") {
					t.Fatalf("wfc %s shows the wrong password:\n%s", args[0], errs)
				}
			}
		})
	}
}

// TestCLIRedissPrivateCA: rediss:// with a server certificate of a
// private CA, which the commands trust through SSL_CERT_FILE (Go's
// system roots on Linux and the BSDs); without it they refuse the
// server. The wfc binary runs as a process, so that the variable is read
// at its start.
func TestCLIRedissPrivateCA(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("SSL_CERT_FILE names the system roots on Linux")
	}
	bin, err := exec.LookPath("wfc")
	if err != nil || !strings.Contains(bin, "testscript-main") {
		t.Skipf("no wfc test binary on PATH (%q)", bin)
	}
	dir := t.TempDir()
	cert := newTestCert(t, dir, "redis")
	pair, err := tls.X509KeyPair(cert.certPEM, cert.keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	m := miniredis.NewMiniRedis()
	m.RequireUserAuth("alice", cliRedisPassword)
	if err := m.StartTLS(&tls.Config{Certificates: []tls.Certificate{pair}}); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	url := "rediss://alice:" + cliRedisPassword + "@" + m.Addr() + "/0"
	wfc := func(env []string, args ...string) (int, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = append(procEnvWithout("SSL_CERT_FILE", "SSL_CERT_DIR", "WFC_REDIS"), env...)
		out, err := cmd.CombinedOutput()
		code := 0
		if err != nil {
			code = -1
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
		}
		return code, string(out)
	}
	code, out := wfc([]string{"SSL_CERT_FILE=" + cert.certFile}, "run", "--redis", url, "../../examples/greet.wf", "--input", "name=Ada")
	if code != 0 || !strings.Contains(out, "HELLO, ADA!") {
		t.Fatalf("run over rediss:// trusting the CA: %d\n%s", code, out)
	}
	code, out = wfc([]string{"SSL_CERT_FILE=" + dir + "/nosuch.pem"}, "run", "--redis", url, "../../examples/greet.wf", "--input", "name=Ada")
	if code == 0 || !strings.Contains(out, "certificate signed by unknown authority") || strings.Contains(out, cliRedisPassword) {
		t.Fatalf("run over rediss:// not trusting the CA: %d\n%s", code, out)
	}
}

// procEnvWithout is this process's environment without the variables.
func procEnvWithout(names ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		keep := true
		for _, n := range names {
			keep = keep && !strings.HasPrefix(kv, n+"=")
		}
		if keep {
			env = append(env, kv)
		}
	}
	return env
}

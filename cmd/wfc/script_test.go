package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/wfc-lang/wfc/lang"
)

var update = flag.Bool("update", false, "update the cmp files of the testscript scripts")

func TestMain(m *testing.M) {
	// A hidden command that panics, to test the top-level recovery. It is
	// registered here, in the test binary only; the scripts run this
	// binary as `wfc`.
	commands = append(commands, &command{
		Name:   "internal-panic",
		Hidden: true,
		Run: func(ctx context.Context, env *Env, args []string) int {
			var m map[string]int
			m["boom"]++ // a real runtime panic, not just a panic(string)
			return 0
		},
	})
	testscript.Main(m, map[string]func(){
		"wfc":       func() { os.Exit(Main()) },
		"crmworker": func() { os.Exit(crmWorker()) },
	})
}

// TestScripts runs testdata/script/*.txtar. Run with -update to rewrite
// the files that `cmp` compares against.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("testdata", "script"),
		UpdateScripts:       *update,
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		Setup: func(e *testscript.Env) error {
			root, err := filepath.Abs(filepath.Join("..", ".."))
			if err != nil {
				return err
			}
			e.Setenv("REPO", root)
			return nil
		},
		Condition: func(cond string) (bool, error) {
			switch cond {
			case "root":
				return os.Geteuid() == 0, nil
			case "rediscluster":
				return haveRedisCluster()
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exitcode":      cmdExitcode,
			"json":          cmdJSON,
			"genwf":         cmdGenwf,
			"redis-cluster": cmdRedisCluster,
			"stdoutenv":     cmdStdoutEnv,
			"http-server":   cmdHTTPServer,
			"freeport":      cmdFreePort,
		},
	})
}

// exitcode N PROG ARGS... runs PROG and requires exit code N. Its stdout
// and stderr are then available to stdout, stderr and cmp like exec's.
func cmdExitcode(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exitcode N program [args...]")
	}
	want, err := strconv.Atoi(args[0])
	ts.Check(err)
	err = ts.Exec(args[1], args[2:]...)
	got := 0
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			ts.Fatalf("%s: %v", args[1], err)
		}
		got = ee.ExitCode()
	}
	if got != want {
		ts.Fatalf("%s exited with %d, want %d", args[1], got, want)
	}
}

// json SOURCE [PATH=VALUE | len(PATH)=N]... requires SOURCE (stdout, stderr
// or a file) to hold exactly one JSON document, and checks values in it.
// PATH is dot-separated object keys and array indices ("files.0.file", or
// "." for the whole document); VALUE is compared with the compact JSON
// encoding of what PATH finds; N with the length of an array or object.
func cmdJSON(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 {
		ts.Fatalf("usage: json stdout|stderr|FILE [PATH=VALUE | len(PATH)=N]...")
	}
	dec := json.NewDecoder(strings.NewReader(ts.ReadFile(args[0]))) // ReadFile knows stdout and stderr
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		ts.Fatalf("%s is not JSON: %v", args[0], err)
	}
	if _, err := dec.Token(); err == nil {
		ts.Fatalf("%s holds more than one JSON document", args[0])
	}
	for _, a := range args[1:] {
		lhs, want, ok := strings.Cut(a, "=")
		if !ok {
			ts.Fatalf("json: %q is not PATH=VALUE or len(PATH)=N", a)
		}
		path, isLen := lhs, false
		if p, ok := strings.CutPrefix(lhs, "len("); ok && strings.HasSuffix(p, ")") {
			path, isLen = strings.TrimSuffix(p, ")"), true
		}
		v, err := jsonLookup(doc, path)
		if err != nil {
			ts.Fatalf("json %s: %v", path, err)
		}
		var got string
		if isLen {
			switch v := v.(type) {
			case []any:
				got = strconv.Itoa(len(v))
			case map[string]any:
				got = strconv.Itoa(len(v))
			default:
				ts.Fatalf("json %s: %T has no length", path, v)
			}
		} else {
			var b bytes.Buffer
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(false)
			ts.Check(enc.Encode(v))
			got = strings.TrimSuffix(b.String(), "\n")
		}
		if got != want {
			ts.Fatalf("json %s: got %s, want %s", lhs, got, want)
		}
	}
}

func jsonLookup(v any, path string) (any, error) {
	if path == "." || path == "" {
		return v, nil
	}
	for _, key := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			next, ok := x[key]
			if !ok {
				return nil, fmt.Errorf("no key %q", key)
			}
			v = next
		case []any:
			i, err := strconv.Atoi(key)
			if err != nil || i < 0 || i >= len(x) {
				return nil, fmt.Errorf("no index %q in an array of %d", key, len(x))
			}
			v = x[i]
		default:
			return nil, fmt.Errorf("cannot index %T with %q", v, key)
		}
	}
	return v, nil
}

// genwf KIND FILE N writes a generated input:
//
//	large  a valid workflow of at least N bytes (a few dozen more)
//	nested a workflow whose one expression nests N parentheses deep
//	junk   N deterministic pseudo-random bytes
//
// N is a number, or "limit" (lang.MaxFileSize) or "maxread" (how much wfc
// reads of one input) followed by +K or -K.
func cmdGenwf(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: genwf large|nested|junk FILE N")
	}
	n, err := genSize(args[2])
	ts.Check(err)
	var b bytes.Buffer
	switch args[0] {
	case "large":
		// 1,000 nodes (well under the node limit), then comments.
		b.WriteString("workflow large {\n")
		for i := 0; i < 1000 && b.Len() < n; i++ {
			fmt.Fprintf(&b, "  task t%04d { run \"noop\" }\n", i)
		}
		for b.Len() < n-2 {
			b.WriteString("  // " + strings.Repeat("padding ", 8) + "\n")
		}
		b.WriteString("}\n")
	case "nested":
		fmt.Fprintf(&b, "workflow deep {\n  task t { run \"cel\"  with { x = %s1%s } }\n}\n",
			strings.Repeat("(", n), strings.Repeat(")", n))
	case "junk":
		x := uint32(2463534242)
		for range n {
			x ^= x << 13
			x ^= x >> 17
			x ^= x << 5
			b.WriteByte(byte(x))
		}
	default:
		ts.Fatalf("genwf: unknown kind %q", args[0])
	}
	ts.Check(os.WriteFile(ts.MkAbs(args[1]), b.Bytes(), 0o644))
}

func genSize(s string) (int, error) {
	base := 0
	for name, v := range map[string]int{"limit": lang.MaxFileSize, "maxread": maxRead} {
		if rest, ok := strings.CutPrefix(s, name); ok {
			base, s = v, rest
			if s == "" {
				return base, nil
			}
		}
	}
	n, err := strconv.Atoi(s)
	return base + n, err
}

// stdoutenv NAME [N] sets $NAME to the first line of the last command's
// standard output (a run id printed by wfc submit), or to its N-th field
// (1-based, split at spaces: the run id of a wfc approvals line).
func cmdStdoutEnv(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 || len(args) > 2 {
		ts.Fatalf("usage: stdoutenv NAME [N]")
	}
	line, _, _ := strings.Cut(ts.ReadFile("stdout"), "\n")
	line = strings.TrimSpace(line)
	if len(args) == 2 {
		n, err := strconv.Atoi(args[1])
		f := strings.Fields(line)
		if err != nil || n < 1 || n > len(f) {
			ts.Fatalf("stdoutenv: no field %s in %q", args[1], line)
		}
		line = f[n-1]
	}
	ts.Setenv(args[0], line)
}

// haveRedisCluster is condition [rediscluster]: redis-server and
// redis-cli are installed. When they are not and CI=true it is an error, so
// that CI never skips the Redis Cluster script.
func haveRedisCluster() (bool, error) {
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			if os.Getenv("CI") == "true" {
				return false, fmt.Errorf("%s is not on PATH and CI=true", bin)
			}
			return false, nil
		}
	}
	return true, nil
}

// http-server starts an HTTP server on a loopback port for the rest of
// the script and sets $HTTP_URL (http://127.0.0.1:PORT) and $HTTP_PORT.
// It answers /json with {"ok": true} and a Set-Cookie header, and
// redirects /redirect?to=URL to URL.
func cmdHTTPServer(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: http-server")
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/redirect":
			http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
		default:
			w.Header().Set("Set-Cookie", "sid=s3cret")
			w.Header().Set("X-Request-Id", "r-1")
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"ok": true}`))
		}
	}))
	ts.Defer(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	ts.Setenv("HTTP_URL", srv.URL)
	ts.Setenv("HTTP_PORT", port)
}

// redis-cluster starts a Redis Cluster of three masters (redis-server on
// free loopback ports, joined with redis-cli --cluster create) for the rest
// of the script and sets $REDIS_CLUSTER to its redis+cluster:// URL. Guard
// it with [!rediscluster] skip.
func cmdRedisCluster(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: redis-cluster")
	}
	if ok, err := haveRedisCluster(); !ok {
		ts.Fatalf("cannot start a Redis Cluster: %v", err)
	}
	var addrs []string
	for i := 0; i < 3; i++ {
		dir := ts.MkAbs(fmt.Sprintf("redis-node%d", i))
		ts.Check(os.MkdirAll(dir, 0o755))
		var started bool
		for try := 0; try < 20 && !started; try++ {
			port := 15000 + rand.IntN(15000)
			if !portFree(port) || !portFree(port+10000) {
				continue
			}
			cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
				"--dir", dir, "--save", "", "--appendonly", "no", "--protected-mode", "no",
				"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, "nodes.conf"),
				"--logfile", filepath.Join(dir, "redis.log"))
			ts.Check(cmd.Start())
			ts.Defer(func() { cmd.Process.Kill(); cmd.Wait() })
			addr := fmt.Sprintf("127.0.0.1:%d", port)
			for w := 0; w < 100; w++ {
				if out, err := exec.Command("redis-cli", "-p", strconv.Itoa(port), "ping").Output(); err == nil && strings.TrimSpace(string(out)) == "PONG" {
					started = true
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if started {
				addrs = append(addrs, addr)
			}
		}
		if !started {
			ts.Fatalf("could not start cluster node %d", i)
		}
	}
	cargs := append([]string{"--cluster", "create"}, addrs...)
	cargs = append(cargs, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command("redis-cli", cargs...).CombinedOutput(); err != nil {
		ts.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, a := range addrs {
		_, port, _ := strings.Cut(a, ":")
		for w := 0; ; w++ {
			out, _ := exec.Command("redis-cli", "-p", port, "cluster", "info").Output()
			if strings.Contains(string(out), "cluster_state:ok") {
				break
			}
			if w > 300 {
				ts.Fatalf("cluster node %s not ok", a)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	ts.Setenv("REDIS_CLUSTER", "redis+cluster://"+strings.Join(addrs, ","))
}

func portFree(port int) bool {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/runtime/handlers"
)

// Two secrets: a plain one, and one whose JSON form differs from it (", \,
// and HTML characters Go's encoder escapes).
const (
	plainSecret = "tok-PLAIN-4f1c2a"
	weirdSecret = `w3ird"se\cret<&>`
)

// secretMarks are substrings only the secrets contain.
var secretMarks = []string{"PLAIN-4f1c2a", "w3ird", `se\cret`, `se\\cret`}

func testSecrets(t testing.TB) *Secrets {
	t.Helper()
	s, err := NewSecrets(map[string]string{"API_TOKEN": plainSecret, "WEIRD": weirdSecret})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// dumpKeys returns every key of the engine's keyspace with its content
// (hashes, strings, streams, lists, sets, sorted sets), as text.
func dumpKeys(t *testing.T, e *Engine) string {
	t.Helper()
	ctx := context.Background()
	o, err := redis.ParseURL(engineURL(e))
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(o)
	defer c.Close()
	var b strings.Builder
	iter := c.Scan(ctx, 0, e.st.ks.prefix+"*", 1000).Iterator()
	n := 0
	for iter.Next(ctx) {
		k := iter.Val()
		n++
		typ, err := c.Type(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s (%s): ", k, typ)
		var v any
		switch typ {
		case "string":
			v, err = c.Get(ctx, k).Result()
		case "hash":
			v, err = c.HGetAll(ctx, k).Result()
		case "stream":
			v, err = c.XRange(ctx, k, "-", "+").Result()
		case "list":
			v, err = c.LRange(ctx, k, 0, -1).Result()
		case "set":
			v, err = c.SMembers(ctx, k).Result()
		case "zset":
			v, err = c.ZRangeWithScores(ctx, k, 0, -1).Result()
		}
		if err != nil && err != redis.Nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%v\n", v)
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	if n < 5 {
		t.Fatalf("found only %d keys under %q", n, e.st.ks.prefix)
	}
	return b.String()
}

func noSecretIn(t *testing.T, where, text string) {
	t.Helper()
	for _, m := range secretMarks {
		if strings.Contains(text, m) {
			i := strings.Index(text, m)
			t.Errorf("%s holds a secret (%q) near: %s", where, m, text[max(0, i-200):min(len(text), i+100)])
		}
	}
}

// TestLimitSecretInputs: a secret input's value reaches the handler, but
// Redis (run state, events, outputs, meta, IR, queues) holds only its name
// and *** where a node or the workflow outputs the value; an error message
// with the secret is masked too (issue #14 item 9: tokens were stored in
// the run's inputs, run.started and every output that echoed them).
func TestLimitSecretInputs(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		var mu sync.Mutex
		var got []string
		v.reg.RegisterFunc("grab", func(ctx context.Context, req handlers.Request) (json.RawMessage, error) {
			mu.Lock()
			got = append(got, string(req.Config))
			mu.Unlock()
			return req.Config, nil // echoes the secret
		})
		v.reg.RegisterFunc("leak", func(ctx context.Context, req handlers.Request) (json.RawMessage, error) {
			var c struct{ Tok string }
			json.Unmarshal(req.Config, &c)
			return nil, fmt.Errorf("server refused token %s; body {\"t\":%q}", c.Tok, c.Tok)
		})
		v.worker(func(o *WorkerOptions) { o.Secrets = testSecrets(t) })
		w := build(t, wfSpec{
			inputs: []ir.Input{input("token", ir.KindSecret, `"API_TOKEN"`), input("odd", ir.KindSecret)},
			outputs: []ir.Output{
				output("auth", "a.output.auth"),
				output("odd", "input.odd"),
				output("err", "has(c.error) ? c.error.message : ''"),
			},
			nodes: []*nodeSpec{
				task("a", "grab",
					with("auth", tmpl("Bearer ", &ir.Expr{CEL: "input.token"})),
					with("odd", cexpr("input.odd")),
					with("nested", cexpr(`{'k': [input.odd + '!']}`)),
					with("json", cexpr(`'{"t":"' + input.odd.replace('\\', '\\\\').replace('"', '\\"') + '"}'`))),
				task("b", "grab", after("a"), with("copy", cexpr("a.output.auth"))),
				task("c", "leak", with("tok", cexpr("input.odd")), onError("d"), func(s *nodeSpec) {
					s.n.Retry = &ir.Retry{Attempts: 2, Backoff: ir.BackoffFixed}
				}),
				task("d", "noop"),
			},
		})
		st := v.run(w, map[string]any{"odd": "WEIRD"})
		if st.State != RunCompleted {
			t.Fatalf("run %s: %s", st.State, st.Error)
		}
		mu.Lock()
		first := got[0]
		mu.Unlock()
		var cfg struct{ Auth, Odd string }
		json.Unmarshal([]byte(first), &cfg)
		if cfg.Auth != "Bearer "+plainSecret || cfg.Odd != weirdSecret {
			t.Errorf("the handler got %s, want the secrets' values", first)
		}
		if a := nodeOutput(st, "a"); !strings.Contains(a, `"auth":"Bearer ***"`) || !strings.Contains(a, `"odd":"***"`) || !strings.Contains(a, `["***!"]`) {
			t.Errorf("a's output is %s, want the secrets masked", a)
		}
		if bo := nodeOutput(st, "b"); !strings.Contains(bo, `Bearer ***`) {
			t.Errorf("b's output is %s", bo)
		}
		if res := string(st.Result); !strings.Contains(res, `"odd":"***"`) || !strings.Contains(res, "refused token ***") {
			t.Errorf("run outputs %s", res)
		}
		noSecretIn(t, "the status", dump(st))
		evs, err := v.e.Events(v.ctx, st.RunID)
		if err != nil {
			t.Fatal(err)
		}
		noSecretIn(t, "the events", dump(evs))
		noSecretIn(t, "redis", dumpKeys(t, v.e))
		if !strings.Contains(dump(st), `"WEIRD"`) {
			t.Errorf("the status does not show the secret's name:\n%s", dump(st))
		}
	})
}

func nodeOutput(st *Status, id string) string {
	if n := st.Nodes[id]; n != nil {
		return string(n.Output)
	}
	return "(no " + id + ")"
}

// TestLimitSecretMissing: a node that reads a secret the worker lacks fails
// with code secret, naming the secret; a node that does not read it runs.
// A value that is not a secret name is refused at submit.
func TestLimitSecretMissing(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker(func(o *WorkerOptions) { o.Secrets = testSecrets(t) })
		w := build(t, wfSpec{
			inputs: []ir.Input{input("token", ir.KindSecret), input("n", ir.KindInt, "1")},
			nodes: []*nodeSpec{
				task("free", "cel", with("n", cexpr("input.n + 1"))),
				task("uses", "cel", after("free"), with("h", tmpl("Bearer ", &ir.Expr{CEL: "input.token"}))),
			},
		})
		st := v.run(w, map[string]any{"token": "NOT_THERE"})
		if st.State != RunFailed {
			t.Fatalf("run %s, want failed", st.State)
		}
		if s := nodeState(st, "free"); s != NodeCompleted {
			t.Errorf("free is %s", s)
		}
		failed := st.Nodes["uses"]
		if failed == nil || failed.Code != CodeSecret || !strings.Contains(failed.Error, "NOT_THERE") || !strings.Contains(failed.Error, "WFC_SECRET_NOT_THERE") {
			t.Errorf("uses: %s", dump(failed))
		}
		for _, bad := range []any{weirdSecret, "has space", "", 42, strings.Repeat("A", 129)} {
			_, err := v.e.Submit(v.ctx, w, map[string]any{"token": bad})
			var ie *InputError
			if !errors.As(err, &ie) || !strings.Contains(err.Error(), "name of a secret") {
				t.Errorf("submit token=%v: %v", bad, err)
			}
			if err != nil && strings.Contains(err.Error(), "w3ird") {
				t.Errorf("the error shows the value: %v", err)
			}
		}
	})
}

// TestLimitSecretMask: the masking of text and JSON, and what NewSecrets
// and LoadSecrets refuse.
func TestLimitSecretMask(t *testing.T) {
	s := testSecrets(t)
	esc, _ := json.Marshal(weirdSecret)
	escS := string(esc[1 : len(esc)-1])
	for _, c := range [][2]string{
		{"x " + plainSecret + " y", "x *** y"},
		{"body " + escS, "body ***"},
		{"twice " + strings.Trim(string(jsonString(escS)), `"`), "twice ***"},
		{"raw " + weirdSecret, "raw ***"},
		{"none", "none"},
	} {
		if got := s.Text(c[0]); got != c[1] {
			t.Errorf("Text(%q) = %q, want %q", c[0], got, c[1])
		}
	}
	// JSON: inside strings (keys too), whatever the escapes; the rest kept
	// byte for byte.
	plainU := `\u0074ok-PLAIN-4f1c2a` // "t" written as \u0074
	for _, c := range [][2]string{
		{`{"a": "` + plainSecret + `", "n": 1.50}`, `{"a": "***", "n": 1.50}`},
		{`{"a":"` + plainU + `"}`, `{"a":"***"}`},
		{`{"` + plainSecret + `":true}`, `{"***":true}`},
		{`["` + escS + `x"]`, `["***x"]`},
		{`{"doc":"{\"t\":\"` + strings.ReplaceAll(strings.ReplaceAll(escS, `\`, `\\`), `"`, `\"`) + `\"}"}`, `{"doc":"{\"t\":\"***\"}"}`},
		{`{"a":"\u003c` + plainSecret + `"}`, `{"a":"<***"}`},
		{`not json "` + plainSecret, `not json "***`},
		{`{"x":"plain"}`, `{"x":"plain"}`},
	} {
		if got := string(s.JSON([]byte(c[0]))); got != c[1] {
			t.Errorf("JSON(%s) = %s, want %s", c[0], got, c[1])
		}
	}
	var nilS *Secrets
	if nilS.Text(plainSecret) != plainSecret || string(nilS.JSON([]byte(`"x"`))) != `"x"` {
		t.Error("nil secrets changed a value")
	}

	// Log records.
	var buf bytes.Buffer
	log := slog.New(maskHandler{slog.NewJSONHandler(&buf, nil), s}).With("k", plainSecret)
	log.Warn("msg "+plainSecret, "err", errors.New("e "+weirdSecret), "g", slog.GroupValue(slog.String("x", plainSecret)), "n", 3)
	noSecretIn(t, "a log line", buf.String())
	if !strings.Contains(buf.String(), `"n":3`) {
		t.Errorf("log: %s", buf.String())
	}

	for _, bad := range []map[string]string{{"A": "abc"}, {"bad name": "abcdef"}, {"": "abcdef"}} {
		if _, err := NewSecrets(bad); err == nil || strings.Contains(err.Error(), "abc") && !strings.Contains(err.Error(), "bad name") {
			t.Errorf("NewSecrets(%v): %v", bad, err)
		}
	}

	// LoadSecrets: environment, then the file; a file others can read is
	// refused; a value that is not a string is refused without showing it.
	dir := t.TempDir()
	f := filepath.Join(dir, "secrets.json")
	if err := os.WriteFile(f, []byte(`{"FROM_FILE": "file-value-1", "BOTH": "file-wins"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	ls, err := LoadSecrets(f, []string{"WFC_SECRET_FROM_ENV=env-value-1", "WFC_SECRET_BOTH=env-loses", "OTHER=x", "WFC_SECRETX=y"})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"FROM_FILE": "file-value-1", "FROM_ENV": "env-value-1", "BOTH": "file-wins"} {
		if got, _ := ls.lookup(name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	if ls.Len() != 3 {
		t.Errorf("names %v", ls.Names())
	}
	if err := os.Chmod(f, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadSecrets(f, nil); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a world-readable file: %v", err)
	}
	for _, body := range []string{`{"A": 12345}`, `["x"]`, `{"A": "ab"}`, `nul`} {
		os.WriteFile(f, []byte(body), 0o600)
		os.Chmod(f, 0o600)
		if _, err := LoadSecrets(f, nil); err == nil || strings.Contains(err.Error(), "12345") {
			t.Errorf("file %s: %v", body, err)
		}
	}
	if _, err := LoadSecrets(dir, nil); err == nil {
		t.Error("a directory was read as a secrets file")
	}
	if _, err := LoadSecrets("", []string{"WFC_SECRET_X=ab"}); err == nil || strings.Contains(err.Error(), "ab\"") {
		t.Errorf("a short env secret: %v", err)
	}
}

// A parent that passes the value of its secret input to a child flow (as a
// string input) does not store it in clear with the child's inputs: the
// child gets it masked.
func TestLimitSecretIntoChildFlow(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		v := newEnv(t, b)
		v.worker(func(o *WorkerOptions) { o.Secrets = testSecrets(t) })
		child := build(t, wfSpec{name: "kid", inputs: []ir.Input{input("s", "string")},
			outputs: []ir.Output{output("len", "size(input.s)")},
			nodes:   []*nodeSpec{task("work", "noop")}})
		w := build(t, wfSpec{name: "parent", inputs: []ir.Input{input("token", ir.KindSecret, `"API_TOKEN"`)},
			outputs:  []ir.Output{output("len", "c.output.len")},
			children: []*ir.Workflow{child},
			nodes:    []*nodeSpec{flowNode(t, "c", child, fwith("s", cexpr("input.token")))}})
		st := v.run(w, nil)
		if st.State != RunCompleted {
			t.Fatalf("parent: %s", dump(st))
		}
		if keys := dumpKeys(t, v.e); strings.Contains(keys, plainSecret) {
			t.Fatalf("the secret is stored in clear:\n%s", keys)
		}
		if got := string(st.Result); got != `{"len":3}` { // "***"
			t.Errorf("result %s: the child should get the masked value", got)
		}
	})
}

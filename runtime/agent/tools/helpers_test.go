package tools

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
)

// memBlobs is a BlobStore in memory, for tests of the tools alone (the
// runtime's Redis store is tested in runtime/blobs_test.go).
type memBlobs struct {
	mu   sync.Mutex
	m    map[string][]byte
	puts int
}

func (b *memBlobs) Put(_ context.Context, data []byte) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil {
		b.m = map[string][]byte{}
	}
	sum := sha256.Sum256(data)
	ref := "sha256:" + hex.EncodeToString(sum[:])
	b.m[ref] = append([]byte(nil), data...)
	b.puts++
	return ref, nil
}

func (b *memBlobs) Get(_ context.Context, ref string) ([]byte, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	d, ok := b.m[ref]
	if !ok {
		return nil, errors.New("unknown reference")
	}
	return d, nil
}

// toolset builds every tool with cfg and env, by name.
func toolset(t *testing.T, cfg Config, env Env) map[string]Tool {
	t.Helper()
	ts, err := New(Names, cfg, env)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]Tool{}
	for _, x := range ts {
		m[x.Name()] = x
	}
	return m
}

// jsonEq reports whether two JSON texts hold the same value.
func jsonEq(t *testing.T, got json.RawMessage, want string) bool {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("result is not JSON: %v: %s", err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want is not JSON: %v: %s", err, want)
	}
	return reflect.DeepEqual(g, w)
}

// pipelineResultOf runs execute_pipeline and returns its result field.
func runPipeline(t *testing.T, tl Tool, args string) (json.RawMessage, error) {
	t.Helper()
	out, err := tl.Call(context.Background(), json.RawMessage(args))
	if err != nil {
		return nil, err
	}
	var r struct {
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("pipeline result %s: %v", out, err)
	}
	return r.Result, nil
}

func wantErr(t *testing.T, err error, code, substr string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want %s containing %q", code, substr)
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not a tool *Error", err, err)
	}
	if code != "" && e.Code != code {
		t.Errorf("code = %q, want %q (message %q)", e.Code, code, e.Message)
	}
	if !strings.Contains(e.Message, substr) {
		t.Errorf("message %q does not contain %q", e.Message, substr)
	}
}

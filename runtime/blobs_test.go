package runtime

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestBlobs: a run's blobs round-trip by content hash, are bounded per
// blob and per run, refuse unknown runs and references, and expire with
// the run (its retention plus LiveTTL while it runs; the run's own TTL
// once it ended; never for a run kept forever).
func TestBlobs(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		const ret = time.Hour
		v := newEnv(t, b, Options{Retention: ret})
		wf := build(t, wfSpec{nodes: []*nodeSpec{task("a", "noop")}})
		ctx := context.Background()
		live := v.submit(wf, nil) // no worker yet: the run has not ended
		opts := BlobOptions{MaxBytes: 1000, MaxRunBytes: 1500, LiveTTL: time.Minute}
		bs := v.e.Blobs(live, opts)

		data := []byte(`{"rows":[1,2,3]}`)
		ref, err := bs.Put(ctx, data)
		if err != nil {
			t.Fatal(err)
		}
		if want := "sha256:" + sha256hex(data); ref != want {
			t.Errorf("ref = %s, want %s", ref, want)
		}
		got, err := bs.Get(ctx, ref)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("Get = %q, %v", got, err)
		}
		if again, err := bs.Put(ctx, data); err != nil || again != ref {
			t.Errorf("second Put = %s, %v", again, err)
		}
		key := v.e.st.ks.runKey(live, "blob:"+sha256hex(data))
		if !strings.Contains(key, "{") || v.e.st.ks.shard(live) != shardOfKey(t, v.e, key) {
			t.Errorf("blob key %s is not in the run's slot", key)
		}
		if d := v.e.st.rdb.PTTL(ctx, key).Val(); d <= ret || d > ret+time.Minute {
			t.Errorf("live run: blob TTL %v, want (%v, %v]", d, ret, ret+time.Minute)
		}

		// Bounds: one blob, then the run's total (the duplicate Put above
		// counted once).
		if _, err := bs.Put(ctx, make([]byte, 1001)); err == nil || !strings.Contains(err.Error(), "at most 1000") {
			t.Errorf("oversized blob: %v", err)
		}
		if _, err := bs.Put(ctx, bytes.Repeat([]byte("a"), 900)); err != nil {
			t.Fatal(err)
		}
		if _, err := bs.Put(ctx, bytes.Repeat([]byte("b"), 900)); err == nil || !strings.Contains(err.Error(), "pass its bound of 1500") {
			t.Errorf("run bound: %v", err)
		}

		// References the run does not hold, and malformed ones.
		other := "sha256:" + sha256hex([]byte("nope"))
		if _, err := bs.Get(ctx, other); !errors.Is(err, ErrUnknownBlob) {
			t.Errorf("unknown ref: %v", err)
		}
		for _, bad := range []string{"", "sha256:xyz", "md5:" + sha256hex(data), "sha256:" + strings.ToUpper(sha256hex(data))} {
			if _, err := bs.Get(ctx, bad); err == nil || !strings.Contains(err.Error(), "not a blob reference") {
				t.Errorf("ref %q: %v", bad, err)
			}
		}
		// Another run does not see this run's blobs.
		live2 := v.submit(wf, nil)
		if _, err := v.e.Blobs(live2, opts).Get(ctx, ref); !errors.Is(err, ErrUnknownBlob) {
			t.Errorf("another run read the blob: %v", err)
		}
		if _, err := v.e.Blobs("no-such-run", opts).Put(ctx, data); !errors.Is(err, ErrUnknownRun) {
			t.Errorf("unknown run: %v", err)
		}
		// A corrupted blob is refused, not returned.
		v.e.st.rdb.Set(ctx, key, "tampered", 0)
		if _, err := bs.Get(ctx, ref); err == nil || !strings.Contains(err.Error(), "does not match its hash") {
			t.Errorf("tampered blob: %v", err)
		}

		// Once the run ended, a new blob expires with the run's keys.
		v.worker()
		v.wait(live)
		stateTTL := v.e.st.rdb.PTTL(ctx, v.e.st.ks.state(live)).Val()
		if stateTTL <= 0 {
			t.Fatalf("ended run's state TTL %v", stateTTL)
		}
		late := []byte(`"late"`)
		if _, err := bs.Put(ctx, late); err != nil {
			t.Fatal(err)
		}
		if d := v.e.st.rdb.PTTL(ctx, v.e.st.ks.runKey(live, "blob:"+sha256hex(late))).Val(); d <= 0 || d > stateTTL {
			t.Errorf("ended run: blob TTL %v, want (0, %v]", d, stateTTL)
		}

		// A run kept forever keeps its blobs forever.
		keep := newEnv(t, b, Options{Retention: KeepForever})
		run := keep.submit(wf, nil)
		kb := keep.e.Blobs(run, BlobOptions{})
		if _, err := kb.Put(ctx, data); err != nil {
			t.Fatal(err)
		}
		if d := keep.e.st.rdb.PTTL(ctx, keep.e.st.ks.runKey(run, "blob:"+sha256hex(data))).Val(); d != -1 {
			t.Errorf("kept forever: blob TTL %v, want none", d)
		}
	})
}

func shardOfKey(t *testing.T, e *Engine, key string) int {
	t.Helper()
	for s := range max(e.st.ks.shards, 1) {
		if strings.HasPrefix(key, e.st.ks.tag(s)+":") {
			return s
		}
	}
	t.Fatalf("key %s has no shard tag", key)
	return -1
}

func sha256hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

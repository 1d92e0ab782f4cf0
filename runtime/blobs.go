package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// BlobOptions bound a run's blobs (Engine.Blobs). A zero field takes its
// default.
type BlobOptions struct {
	// MaxBytes bounds one blob (default 8 MiB).
	MaxBytes int
	// MaxRunBytes bounds the bytes of all the blobs of one run (default
	// 64 MiB); a Put past it fails.
	MaxRunBytes int64
	// LiveTTL is how long a blob of a run that has not ended is kept
	// beyond the run's retention (default 7 days): a running run's keys do
	// not expire, but the end of a run does not visit its blobs, so they
	// carry a TTL of their own from the start.
	LiveTTL time.Duration
}

func (o BlobOptions) withDefaults() BlobOptions {
	if o.MaxBytes <= 0 {
		o.MaxBytes = 8 << 20
	}
	if o.MaxRunBytes <= 0 {
		o.MaxRunBytes = 64 << 20
	}
	if o.LiveTTL <= 0 {
		o.LiveTTL = 7 * 24 * time.Hour
	}
	return o
}

// RunBlobs is the content-addressed store of one run's large values: the
// results agent tools store instead of carrying them
// (runtime/agent/tools.BlobStore). A blob is named by its SHA-256
// ("sha256:<hex>"), kept under the run's keys (same hash tag, so the
// scripts stay in one Cluster slot), and expires with the run: when the
// run has ended, with its keys; while it runs, after its retention plus
// LiveTTL (extended by every Put and Get); never, for a run kept forever.
type RunBlobs struct {
	st   *store
	run  string
	opts BlobOptions
}

// Blobs returns the blob store of a run.
func (e *Engine) Blobs(run string, opts BlobOptions) *RunBlobs {
	return &RunBlobs{st: e.st, run: run, opts: opts.withDefaults()}
}

// ErrUnknownBlob is the error of a Get of a reference the run does not
// hold (never stored for this run, or expired).
var ErrUnknownBlob = errors.New("unknown blob")

// blobTTL is the Lua that computes a blob's PX from the run's state
// (KEYS[1]): the state's own TTL once the run has ended; its retention
// plus LiveTTL (ARGV[1]) while it runs; 0 (no expiry) for a run kept
// forever. extend sets a key's TTL to px unless it already lives longer.
const blobTTL = `
local function blobpx()
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl > 0 then return ttl end
  local ret = tonumber(redis.call('HGET', KEYS[1], 'run|retention') or '0') or 0
  if ret > 0 then return ret + tonumber(ARGV[1]) end
  return 0
end
local function extend(key, px)
  if px == 0 then redis.call('PERSIST', key); return end
  local cur = redis.call('PTTL', key)
  if cur == -1 or cur < px then redis.call('PEXPIRE', key, px) end
end
`

// KEYS: state, blob, the run's blob byte count. ARGV: live TTL (ms),
// data, max run bytes.
var blobPut = redis.NewScript(blobTTL + `
if redis.call('EXISTS', KEYS[1]) == 0 then return redis.error_reply('ERR wfc: unknown run') end
local px = blobpx()
if redis.call('EXISTS', KEYS[2]) == 1 then
  extend(KEYS[2], px)
  return 'dup'
end
local n = string.len(ARGV[2])
local total = tonumber(redis.call('GET', KEYS[3]) or '0') or 0
if total + n > tonumber(ARGV[3]) then
  return redis.error_reply('ERR wfc: the run stores ' .. total .. ' bytes of blobs; ' .. n .. ' more would pass its bound of ' .. ARGV[3])
end
redis.call('SET', KEYS[2], ARGV[2])
extend(KEYS[2], px)
redis.call('INCRBY', KEYS[3], n)
extend(KEYS[3], px)
return 'ok'
`)

// KEYS: state, blob. ARGV: live TTL (ms). Returns the blob (extending its
// TTL), or false.
var blobGet = redis.NewScript(blobTTL + `
local v = redis.call('GET', KEYS[2])
if not v then return false end
if redis.call('EXISTS', KEYS[1]) == 1 then extend(KEYS[2], blobpx()) end
return v
`)

func (b *RunBlobs) keys(hexsum string) []string {
	ks := b.st.ks
	return []string{ks.state(b.run), ks.runKey(b.run, "blob:"+hexsum), ks.runKey(b.run, "blobbytes")}
}

// Put stores data and returns its reference. Storing the same bytes again
// changes nothing but the expiry.
func (b *RunBlobs) Put(ctx context.Context, data []byte) (string, error) {
	if len(data) > b.opts.MaxBytes {
		return "", fmt.Errorf("the value is %d bytes; a blob may have at most %d", len(data), b.opts.MaxBytes)
	}
	sum := sha256.Sum256(data)
	h := hex.EncodeToString(sum[:])
	err := blobPut.Run(ctx, b.st.rdb, b.keys(h), b.opts.LiveTTL.Milliseconds(), data, strconv.FormatInt(b.opts.MaxRunBytes, 10)).Err()
	if err != nil {
		if msg, ok := strings.CutPrefix(err.Error(), "ERR wfc: "); ok {
			if msg == "unknown run" {
				return "", unknownRun(b.run)
			}
			return "", errors.New(msg)
		}
		return "", fmt.Errorf("storing a blob: %w", err)
	}
	return "sha256:" + h, nil
}

// Get returns the bytes a reference names, checked against the hash.
func (b *RunBlobs) Get(ctx context.Context, ref string) ([]byte, error) {
	h, ok := strings.CutPrefix(ref, "sha256:")
	if !ok || len(h) != 64 || strings.Trim(h, "0123456789abcdef") != "" {
		return nil, fmt.Errorf("%q is not a blob reference (sha256: and 64 lower-case hex digits)", ref)
	}
	v, err := blobGet.Run(ctx, b.st.rdb, b.keys(h)[:2], b.opts.LiveTTL.Milliseconds()).Text()
	if errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("%w %s (never stored for run %s, or expired)", ErrUnknownBlob, ref, b.run)
	}
	if err != nil {
		return nil, fmt.Errorf("reading a blob: %w", err)
	}
	if sum := sha256.Sum256([]byte(v)); hex.EncodeToString(sum[:]) != h {
		return nil, fmt.Errorf("blob %s of run %s does not match its hash", ref, b.run)
	}
	return []byte(v), nil
}

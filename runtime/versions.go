package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wfc-lang/wfc/ir"
)

// The workflow store: every IR is stored once under its content hash
// (keyspace.ir; Submit stores what it runs there too), and a tag names a
// sequence of versions, each an IR hash. Deploy moves a tag; a hash never
// changes; a run keeps the IR it started with unless it is patched
// (docs/patching.md, "Versions").

// A Version is one version of a tag: its number (1, 2, ...), the IR hash,
// when and by whom it was deployed.
type Version struct {
	Tag     string    `json:"tag"`
	Version int       `json:"version"`
	Hash    string    `json:"hash"`
	At      time.Time `json:"at"`
	By      string    `json:"by,omitempty"`
}

// ErrUnknownTag is returned for a tag never deployed.
var ErrUnknownTag = errors.New("unknown tag")

// ValidTag reports whether s can name a tag: 1 to 64 letters, digits and
// . _ - : (tags are spliced into keys).
func ValidTag(s string) bool { return ValidQueue(s) }

func (k keyspace) tagKey(name string) string  { return k.prefix + ":tag:" + name }
func (k keyspace) tagRuns(name string) string { return k.prefix + ":tagruns:" + name }
func (k keyspace) tagSet() string             { return k.prefix + ":tags" }

type versionRec struct {
	Version int    `json:"version"`
	Hash    string `json:"hash"`
	At      int64  `json:"at"`
	By      string `json:"by"`
}

func (r versionRec) of(tag string) Version {
	return Version{Tag: tag, Version: r.Version, Hash: r.Hash, At: time.UnixMilli(r.At).UTC(), By: r.By}
}

// Deploy stores w by its content hash and moves tag to it: a new version,
// unless the tag's current version is that IR already (then that version
// is returned). w must be a workflow this runtime can run (as for Submit).
func (e *Engine) Deploy(ctx context.Context, w *ir.Workflow, tag, by string) (Version, error) {
	if !ValidTag(tag) {
		return Version{}, fmt.Errorf("runtime: bad tag %q: use 1 to 64 of [A-Za-z0-9._:-]", tag)
	}
	if len(by) > 200 {
		return Version{}, fmt.Errorf("runtime: deployer name over 200 bytes")
	}
	p, err := e.plan(w)
	if err != nil {
		return Version{}, err
	}
	if err := e.storeIR(ctx, p); err != nil {
		return Version{}, err
	}
	raw, err := e.st.scripts["deploy"].Run(ctx, e.st.rdb, []string{e.st.ks.tagKey(tag)}, p.hash, strconv.FormatInt(nowMS(), 10), by).Text()
	if err != nil {
		return Version{}, fmt.Errorf("runtime: deploying %s: %w", tag, err)
	}
	var r versionRec
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		return Version{}, fmt.Errorf("runtime: tag %s: %w", tag, err)
	}
	// The set of tag names, for Tags: after the tag moved, so a tag listed
	// exists; a deploy that died before it leaves its tag unlisted until
	// the next deploy of it.
	if err := e.st.rdb.SAdd(ctx, e.st.ks.tagSet(), tag).Err(); err != nil {
		return Version{}, fmt.Errorf("runtime: deploying %s: %w", tag, err)
	}
	return r.of(tag), nil
}

// Tags returns the names of the deployed tags, sorted.
func (e *Engine) Tags(ctx context.Context) ([]string, error) {
	names, err := e.st.rdb.SMembers(ctx, e.st.ks.tagSet()).Result()
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	return names, nil
}

// storeIR stores a plan's IR under its hash (once: the content never
// changes under the key).
func (e *Engine) storeIR(ctx context.Context, p *plan) error {
	data, err := ir.Marshal(p.w)
	if err != nil {
		return err
	}
	return e.st.rdb.SetNX(ctx, e.st.ks.ir(p.hash), data, 0).Err()
}

// Versions returns a tag's versions, oldest first.
func (e *Engine) Versions(ctx context.Context, tag string) ([]Version, error) {
	if !ValidTag(tag) {
		return nil, fmt.Errorf("runtime: bad tag %q", tag)
	}
	raws, err := e.st.rdb.LRange(ctx, e.st.ks.tagKey(tag), 0, -1).Result()
	if err != nil {
		return nil, err
	}
	if len(raws) == 0 {
		return nil, fmt.Errorf("%w %s (deploy it with wfc deploy --tag %s)", ErrUnknownTag, tag, tag)
	}
	out := make([]Version, 0, len(raws))
	for _, raw := range raws {
		var r versionRec
		if err := json.Unmarshal([]byte(raw), &r); err != nil {
			return nil, fmt.Errorf("runtime: tag %s: %w", tag, err)
		}
		out = append(out, r.of(tag))
	}
	return out, nil
}

// Tagged returns the workflow a tag names now, and its version.
func (e *Engine) Tagged(ctx context.Context, tag string) (*ir.Workflow, Version, error) {
	v, err := e.tagged(ctx, tag)
	if err != nil {
		return nil, Version{}, err
	}
	w, err := e.StoredIR(ctx, v.Hash)
	if err != nil {
		return nil, Version{}, err
	}
	return w, v, nil
}

// tagged returns the version a tag names now.
func (e *Engine) tagged(ctx context.Context, tag string) (Version, error) {
	if !ValidTag(tag) {
		return Version{}, fmt.Errorf("runtime: bad tag %q", tag)
	}
	raw, err := e.st.rdb.LIndex(ctx, e.st.ks.tagKey(tag), -1).Result()
	if err == redis.Nil {
		return Version{}, fmt.Errorf("%w %s (deploy it with wfc deploy --tag %s)", ErrUnknownTag, tag, tag)
	}
	if err != nil {
		return Version{}, err
	}
	var r versionRec
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		return Version{}, fmt.Errorf("runtime: tag %s: %w", tag, err)
	}
	return r.of(tag), nil
}

// StoredIR returns the IR stored under hash (a copy the caller may
// modify).
func (e *Engine) StoredIR(ctx context.Context, hash string) (*ir.Workflow, error) {
	data, err := e.st.rdb.Get(ctx, e.st.ks.ir(hash)).Bytes()
	if err == redis.Nil {
		return nil, fmt.Errorf("runtime: IR %s is not stored", hash)
	}
	if err != nil {
		return nil, err
	}
	return ir.Decode(data)
}

// SubmitTag starts a run of the workflow tag names now (Submit's options
// apply) and records the run under the tag, for TagRuns. The run keeps
// that version when the tag moves.
func (e *Engine) SubmitTag(ctx context.Context, tag string, inputs map[string]any, opts ...SubmitOption) (string, Version, error) {
	v, err := e.tagged(ctx, tag)
	if err != nil {
		return "", Version{}, err
	}
	// The content under a hash never changes: a version this engine
	// planned before is not read, decoded and hashed again.
	p := e.cachedPlan(v.Hash)
	if p == nil {
		w, err := e.StoredIR(ctx, v.Hash)
		if err != nil {
			return "", Version{}, err
		}
		if p, err = e.plan(w); err != nil {
			return "", Version{}, err
		}
	}
	run, err := e.submitVersion(ctx, p, v, inputs, opts)
	return run, v, err
}

// SubmitVersion starts a run of w, the workflow of version v of a tag as
// Tagged returned them, and records the run under v.Tag, for TagRuns. A
// caller that read the tag once (to validate inputs, say) runs exactly
// that version with it, however the tag moved since: SubmitTag would read
// the tag again. w must hash to v.Hash.
func (e *Engine) SubmitVersion(ctx context.Context, w *ir.Workflow, v Version, inputs map[string]any, opts ...SubmitOption) (string, error) {
	p, err := e.plan(w)
	if err != nil {
		return "", err
	}
	return e.submitVersion(ctx, p, v, inputs, opts)
}

// submitVersion is SubmitVersion once w is planned (hashed once).
func (e *Engine) submitVersion(ctx context.Context, p *plan, v Version, inputs map[string]any, opts []SubmitOption) (string, error) {
	if !ValidTag(v.Tag) {
		return "", fmt.Errorf("runtime: bad tag %q", v.Tag)
	}
	if p.hash != v.Hash {
		return "", fmt.Errorf("runtime: the workflow is IR %s, not version %d of %s (IR %s)", p.hash, v.Version, v.Tag, v.Hash)
	}
	run, err := e.submit(ctx, p, inputs, opts)
	if err != nil {
		return "", err
	}
	if err := e.st.rdb.SAdd(ctx, e.st.ks.tagRuns(v.Tag), run).Err(); err != nil {
		return "", err
	}
	return run, nil
}

// TagRuns returns the runs started from a tag (SubmitTag) whose keys still
// exist, with their status; runs whose keys expired are dropped from the
// tag's list.
func (e *Engine) TagRuns(ctx context.Context, tag string) ([]*Status, error) {
	if !ValidTag(tag) {
		return nil, fmt.Errorf("runtime: bad tag %q", tag)
	}
	ids, err := e.st.rdb.SMembers(ctx, e.st.ks.tagRuns(tag)).Result()
	if err != nil {
		return nil, err
	}
	var out []*Status
	for _, id := range ids {
		st, err := e.Status(ctx, id)
		if errors.Is(err, ErrUnknownRun) {
			e.st.rdb.SRem(ctx, e.st.ks.tagRuns(tag), id)
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

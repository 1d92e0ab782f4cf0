package runtime

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The run index (docs/api.md, "Listing runs"): a sorted set per shard,
// "<prefix>:{shard}:runs", of run ids scored by their submission time in
// milliseconds. It lets `wfc serve` list and filter runs without scanning
// the keyspace. Submit writes every run's entry (runs of the CLI, of the Go
// API, child runs), in the round trip of the script that starts the run
// and before it (ZADD NX in the same pipeline: submitter.exec; a retried
// or fallback script writes it again, and the first time stays), so a run
// the index misses cannot exist; an entry whose run never started or
// whose keys expired (retention) is dropped by the listing that finds it
// gone. The index is thus as large as the runs kept, plus those dropped
// since the last listing.

// runIndex is the shard's sorted set of indexed runs.
func (k keyspace) runIndex(shard int) string { return k.tag(shard) + ":runs" }

// NewRunID returns a fresh run id, as Submit makes one: time-ordered, 26
// base32 digits. A caller that indexes a run before submitting it (IndexRun)
// picks the id with it and passes it to Submit with WithRunID.
func NewRunID() string { return newRunID() }

// IndexRun records run in the run index so that ListRuns finds it. Submit
// does it for every run; IndexRun is for a caller that wants the entry
// before the run (an entry without a run is harmless and dropped when
// listed). Indexing an indexed run keeps its first time.
func (e *Engine) IndexRun(ctx context.Context, run string) error {
	if !validRunID(run) {
		return fmt.Errorf("runtime: index: invalid run id %q", run)
	}
	idx := e.st.ks.runIndex(e.st.ks.shard(run))
	return e.st.rdb.ZAddNX(ctx, idx, redis.Z{Score: float64(nowMS()), Member: run}).Err()
}

// A RunQuery filters and pages ListRuns. Zero fields do not filter.
type RunQuery struct {
	State    string    // running, completed, failed, cancelled
	Workflow string    // the workflow's name
	From, To time.Time // submitted at or after From, before To
	// Limit is the page size (default 50, at most 500).
	Limit int
	// Cursor continues a listing: the Next of the previous page.
	Cursor string
}

// A RunSummary is one run of a listing.
type RunSummary struct {
	RunID    string    `json:"run_id"`
	Workflow string    `json:"workflow"`
	IR       string    `json:"ir"`
	State    string    `json:"state"`
	Created  time.Time `json:"created"`
	Ended    time.Time `json:"ended,omitzero"`
	Error    string    `json:"error,omitempty"`
}

// A RunPage is a page of a listing, newest first. Next, when not empty,
// is the cursor of the next page.
type RunPage struct {
	Runs []RunSummary `json:"runs"`
	Next string       `json:"next,omitempty"`
}

// ErrBadCursor is returned for a cursor ListRuns did not make.
var ErrBadCursor = errors.New("bad cursor")

// maxScanPerPage bounds how many index entries one ListRuns call reads
// when filters drop most of them; the page then ends early with a cursor.
const maxScanPerPage = 5000

// ListRuns returns the indexed runs that match q, newest first (by
// submission time, then run id). A page may hold fewer than Limit runs and
// still have a Next when the filters skipped many entries (a call reads at
// most maxScanPerPage of them).
func (e *Engine) ListRuns(ctx context.Context, q RunQuery) (*RunPage, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = 50
	}
	limit = min(limit, 500)
	maxScore := "+inf"
	if !q.To.IsZero() {
		maxScore = "(" + strconv.FormatInt(q.To.UnixMilli(), 10)
	}
	minScore := "-inf"
	if !q.From.IsZero() {
		minScore = strconv.FormatInt(q.From.UnixMilli(), 10)
	}
	// cur is the position: the listing continues with the entries after
	// it in the order (older, or as old with a smaller id).
	var cur *indexEntry
	if q.Cursor != "" {
		ms, id, ok := strings.Cut(q.Cursor, ".")
		n, err := strconv.ParseInt(ms, 10, 64)
		if !ok || err != nil || !validRunID(id) {
			return nil, fmt.Errorf("runtime: %w %q", ErrBadCursor, q.Cursor)
		}
		cur = &indexEntry{n, id}
		if q.To.IsZero() || n < q.To.UnixMilli() {
			maxScore = strconv.FormatInt(n, 10)
		}
	}
	after := func(en indexEntry) bool {
		return cur == nil || en.ms < cur.ms || en.ms == cur.ms && en.id < cur.id
	}
	page := &RunPage{Runs: []RunSummary{}}
	const batch = 1000
	for scanned := 0; scanned < maxScanPerPage; {
		var cands []indexEntry
		cutoff := int64(-1 << 62) // entries above it are known in order across the shards
		full := false
		for s := 0; s < max(e.st.ks.shards, 1); s++ {
			zs, err := e.st.rdb.ZRevRangeByScoreWithScores(ctx, e.st.ks.runIndex(s), &redis.ZRangeBy{
				Max: maxScore, Min: minScore, Count: batch,
			}).Result()
			if err != nil {
				return nil, err
			}
			if len(zs) == batch {
				full = true
				cutoff = max(cutoff, int64(zs[len(zs)-1].Score))
			}
			for _, z := range zs {
				id, _ := z.Member.(string)
				if en := (indexEntry{int64(z.Score), id}); after(en) {
					cands = append(cands, en)
				}
			}
		}
		slices.SortFunc(cands, func(a, b indexEntry) int {
			if a.ms != b.ms {
				return cmp.Compare(b.ms, a.ms)
			}
			return strings.Compare(b.id, a.id)
		})
		// Past the cutoff a shard that returned a full batch may hold
		// entries not read yet; take those at the cutoff only when nothing
		// is above it (a tie of more than a batch in one millisecond).
		n := 0
		for n < len(cands) && cands[n].ms > cutoff {
			n++
		}
		if n == 0 {
			n = len(cands)
		}
		cands = cands[:min(n, limit-len(page.Runs)+64, maxScanPerPage-scanned)]
		if len(cands) == 0 {
			return page, nil
		}
		pipe := e.st.rdb.Pipeline()
		cmds := make([]*redis.SliceCmd, len(cands))
		for i, en := range cands {
			cmds[i] = e.st.ks.readMetaLean(ctx, pipe, en.id)
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return nil, err
		}
		var gone []indexEntry
		for i, en := range cands {
			scanned++
			c := en
			cur = &c
			m, err := parseMeta(en.id, metaMapLean(cmds[i].Val()))
			if err != nil {
				gone = append(gone, en)
			} else if (q.State == "" || m.Status == q.State) && (q.Workflow == "" || m.Workflow == q.Workflow) {
				page.Runs = append(page.Runs, RunSummary{
					RunID: en.id, Workflow: m.Workflow, IR: m.IR, State: m.Status,
					Created: msTime(m.Created), Ended: msTime(m.Ended), Error: m.Error,
				})
			}
			if len(page.Runs) == limit {
				break
			}
		}
		e.dropIndexed(ctx, gone)
		if len(page.Runs) == limit {
			break
		}
		if !full && len(cands) == n {
			return page, nil // every shard was read to its end
		}
		maxScore = strconv.FormatInt(cur.ms, 10)
	}
	page.Next = strconv.FormatInt(cur.ms, 10) + "." + cur.id
	return page, nil
}

// An indexEntry is a run of the index and its submission time (ms).
type indexEntry struct {
	ms int64
	id string
}

// dropIndexed removes index entries whose run is gone (expired, or never
// started). An entry younger than a minute is kept: its run may be being
// submitted (IndexRun comes first). A failure only leaves them for the
// next listing.
func (e *Engine) dropIndexed(ctx context.Context, gone []indexEntry) {
	old := nowMS() - time.Minute.Milliseconds()
	byShard := map[int][]any{}
	for _, en := range gone {
		if en.ms < old {
			s := e.st.ks.shard(en.id)
			byShard[s] = append(byShard[s], en.id)
		}
	}
	for s, ids := range byShard {
		if err := e.st.rdb.ZRem(ctx, e.st.ks.runIndex(s), ids...).Err(); err != nil {
			e.log.Warn("wfc: pruning the run index", "err", err)
		}
	}
}

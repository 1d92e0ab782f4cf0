package runtime

import (
	"context"
	goruntime "runtime"
	"sync"
	"time"
)

// Adaptive concurrency. A worker without an explicit Concurrency sizes its
// handling slots itself: more slots help as long as the worker waits on
// something that does not slow down when more of it is asked for (a
// handler's HTTP call, a Redis round trip that a bigger pipeline shares),
// and stop helping once the CPU or Redis is saturated: from then on each
// slot more only adds queueing, so an execution's latency grows as fast as
// the concurrency and throughput stays flat (Little's law: throughput =
// in flight / latency). The limiter climbs that curve (hill climbing on
// throughput, as .NET's thread pool does; the same signal as a latency
// gradient against the concurrency): each interval it moves the limit one
// step, keeps going while a step up buys at least limitGain more
// throughput or a step down costs less than that, and turns around
// otherwise, so that it settles around the knee, the smallest limit that
// gets the most throughput, between a floor and a ceiling. An interval in
// which the handlers kept fewer than half the slots busy says nothing
// about the limit (the queues ran dry): it is not compared. Where a
// worker measures what saturates (saturation.go) and finds nothing
// saturated, a step that did not cost throughput leads to another step up
// (a throughput gain smaller than the noise is still a gain while the CPU
// and Redis have room); once something is saturated, the rule above
// finds the knee.

const (
	// limitStep is the factor of one step of the limit (at least 1 slot
	// up, or down).
	limitStep = 1.25
	// limitGain is the relative throughput change a step must make to
	// count: a smaller one is noise, and the limiter then prefers the
	// smaller limit.
	limitGain = 0.05
	// limitInterval is the shortest measurement interval; an interval
	// also lasts until as many executions ended as the limit (every
	// slot's latency counted once, on average).
	limitInterval = 100 * time.Millisecond
	// DefaultMaxConcurrency is the ceiling of an adaptive worker's
	// concurrency (WorkerOptions.MaxConcurrency).
	DefaultMaxConcurrency = 256
)

// adaptiveStart is where an adaptive worker's limit starts: 16 slots per
// CPU (measured: a 2-CPU worker of noop and CEL handlers ran 1.4–1.7
// times faster at 32 than at 8), between 16 and 64.
func adaptiveStart(ceil int) int {
	return min(ceil, max(16, min(64, 16*goruntime.GOMAXPROCS(0))))
}

// AdaptiveStart is the limit an adaptive worker (WorkerOptions without a
// Concurrency) starts at on this machine.
func AdaptiveStart() int { return adaptiveStart(DefaultMaxConcurrency) }

// adaptiveFloor is the lowest limit: one slot per CPU, and at least 4.
func adaptiveFloor(ceil int) int { return min(ceil, max(4, goruntime.GOMAXPROCS(0))) }

// A limiter adjusts a concurrency limit to measured executions. It is
// fed with begin and end (with explicit times, so that tests can drive it
// with synthetic latencies) and is safe for concurrent use.
type limiter struct {
	floor, ceil int
	// sat reports whether the CPU or Redis is saturated, and whether that
	// is known (nil: never known).
	sat func() (sat, known bool)

	mu       sync.Mutex
	limit    int
	inflight int
	// The current interval: its start, executions ended, their summed
	// latency, the integral of executions in flight over time (slot-ns),
	// and when inflight last changed.
	start   time.Time
	n       int
	latency time.Duration
	busy    float64
	last    time.Time
	// The previous interval compared: its limit and throughput (0: none).
	prevLimit int
	prevRate  float64
	up        bool // the direction of the last step
	// settling: the limit just changed, and the interval running is
	// not measured: the executions of the old limit are still ending.
	settling bool
	peak     int // the highest limit yet (tests)
}

func newLimiter(floor, start, ceil int) *limiter {
	floor = max(1, min(floor, ceil))
	start = min(ceil, max(floor, start))
	return &limiter{floor: floor, ceil: ceil, limit: start, peak: start, up: true}
}

// A limitChange reports a new limit and what it was decided on.
type limitChange struct {
	Limit, From int
	Rate        float64       // executions per second in the interval
	Latency     time.Duration // their mean latency
	Busy        float64       // mean share of the slots busy
	// Room: nothing was saturated (known by measuring); a step up that
	// did not cost throughput was followed by another.
	Room bool
}

// begin counts an execution starting at now.
func (l *limiter) begin(now time.Time) {
	l.mu.Lock()
	l.advance(now)
	l.inflight++
	l.mu.Unlock()
}

// advance adds the time since the last change to the busy integral.
func (l *limiter) advance(now time.Time) {
	if l.start.IsZero() {
		l.start, l.last = now, now
	}
	if d := now.Sub(l.last); d > 0 {
		l.busy += float64(l.inflight) * float64(d)
		l.last = now
	}
}

// end counts an execution that began at began and ended at now; when that
// closes an interval that moves the limit, it returns the change.
func (l *limiter) end(began, now time.Time) (limitChange, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.advance(now)
	l.inflight--
	l.n++
	l.latency += now.Sub(began)
	dt := now.Sub(l.start)
	if dt < limitInterval || l.n < l.limit {
		return limitChange{}, false
	}
	c := limitChange{
		From: l.limit, Rate: float64(l.n) / dt.Seconds(), Latency: l.latency / time.Duration(l.n),
		Busy: l.busy / (float64(l.limit) * float64(dt)),
	}
	l.start, l.n, l.latency, l.busy = now, 0, 0, 0
	if l.settling {
		l.settling = false
		return limitChange{}, false
	}
	if c.Busy < 0.5 {
		// The queues ran dry: the limit was not what bounded throughput.
		l.prevLimit, l.prevRate = 0, 0
		return limitChange{}, false
	}
	if l.sat != nil {
		sat, known := l.sat()
		c.Room = known && !sat
	}
	switch {
	case l.prevLimit == 0:
		// Nothing to compare with: probe upwards.
		l.up = true
	case l.limit > l.prevLimit && c.Room:
		// Room left: up again unless the step cost throughput.
		l.up = c.Rate >= l.prevRate*(1-limitGain)
	case l.limit > l.prevLimit:
		l.up = c.Rate >= l.prevRate*(1+limitGain)
	case l.limit < l.prevLimit && c.Room:
		// Room left: back up unless the step down bought throughput.
		l.up = c.Rate < l.prevRate*(1+limitGain)
	case l.limit < l.prevLimit:
		l.up = c.Rate < l.prevRate*(1-limitGain)
	default:
		// At a bound: turn around, but for the ceiling with room left,
		// where a step down would only give up slots that cost nothing.
		l.up = l.limit == l.floor || c.Room && l.limit == l.ceil
	}
	l.prevLimit, l.prevRate = l.limit, c.Rate
	var next int
	if l.up {
		next = min(l.ceil, max(l.limit+1, int(float64(l.limit)*limitStep)))
	} else {
		next = max(l.floor, min(l.limit-1, int(float64(l.limit)/limitStep)))
	}
	if next == l.limit {
		return limitChange{}, false
	}
	l.limit, c.Limit = next, next
	l.peak = max(l.peak, next)
	l.settling = true
	return c, true
}

// current returns the limit.
func (l *limiter) current() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.limit
}

// slots is a worker's resizable set of handling slots: a counting
// semaphore whose limit may change while slots are held. Lowered below
// the slots in use, it takes effect as they are released.
type slots struct {
	mu      sync.Mutex
	used    int
	limit   int
	waiters []chan struct{} // first come, first served; each is given one slot
}

func newSlots(limit int) *slots { return &slots{limit: limit} }

// acquire takes between 1 and n slots, waiting for the first; it returns
// 0 when ctx is done.
func (s *slots) acquire(ctx context.Context, n int) int {
	s.mu.Lock()
	if len(s.waiters) == 0 && s.used < s.limit {
		got := min(n, s.limit-s.used)
		s.used += got
		s.mu.Unlock()
		return got
	}
	ch := make(chan struct{}, 1)
	s.waiters = append(s.waiters, ch)
	s.mu.Unlock()
	select {
	case <-ch:
	case <-ctx.Done():
		s.mu.Lock()
		for i, c := range s.waiters {
			if c == ch {
				s.waiters = append(s.waiters[:i], s.waiters[i+1:]...)
				s.mu.Unlock()
				return 0
			}
		}
		// Given a slot meanwhile: give it back.
		s.mu.Unlock()
		s.release(1)
		return 0
	}
	return 1 + s.tryAcquire(n-1)
}

// tryAcquire takes up to n slots without waiting.
func (s *slots) tryAcquire(n int) int {
	if n <= 0 {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.waiters) > 0 {
		return 0
	}
	got := max(0, min(n, s.limit-s.used))
	s.used += got
	return got
}

// release gives back n slots.
func (s *slots) release(n int) {
	if n <= 0 {
		return
	}
	s.mu.Lock()
	s.used -= n
	s.wake()
	s.mu.Unlock()
}

// setLimit changes the limit.
func (s *slots) setLimit(limit int) {
	s.mu.Lock()
	s.limit = limit
	s.wake()
	s.mu.Unlock()
}

// reusable returns how many of k held slots may pass to new messages
// without release: those over a lowered limit may not.
func (s *slots) reusable(k int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return max(0, k-max(0, s.used-s.limit))
}

// inUse returns the slots held.
func (s *slots) inUse() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used
}

// wake gives free slots to waiters, first come first served.
func (s *slots) wake() {
	for len(s.waiters) > 0 && s.used < s.limit {
		s.used++
		s.waiters[0] <- struct{}{}
		s.waiters = s.waiters[1:]
	}
}

// Admission. A worker admits new runs (take.lua moves their entry tokens
// into the queues' streams) only while its executions running are fewer
// than its admission target; the work of runs in progress may use every
// slot. Slots beyond what saturates the CPU or Redis buy little
// throughput, and a backlog admitted into all of them starts that many
// runs at once, which then advance together: each takes as long as all
// of them (Little's law). The target starts at admissionFloor and moves
// by the limiter's knee rule (without the room rule: that the machine
// has room does not make more runs at once worth their latency) up to
// the slots while admitting more buys throughput, as it does for
// handlers that wait (I/O).

// admissionFloor is the lowest admission target of a worker with up to
// ceil slots: half of them, and at least adaptiveStart. Measured on a
// 5,000-run cel-diamond backlog with 256 slots: a target of 128 kept the
// throughput without a target (within 2 %) at 40 % less run latency; 32 or 64 cost
// 20 % or 10 % of the throughput, which a backlog's wait pays for more
// than the runs' shorter latency saves (docs/performance.md).
func admissionFloor(ceil int) int {
	return min(ceil, max(adaptiveStart(ceil), ceil/2))
}

package heapfloor

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// Default is the floor `wfc` uses: the heap of a loaded worker stays under
// it, and 64 MiB is little for a server process.
const Default = 64 << 20

const (
	// basePercent is Go's default target (GOGC=100): the target while the
	// live heap is half the floor or more.
	basePercent = 100
	// maxPercent bounds the target for a tiny live heap: the target is
	// set again after every collection (below), but a live heap that grew
	// a lot between two collections would otherwise be given a target of
	// hundreds of times its size until then.
	maxPercent = 1000
)

// percent is the GC target (GOGC) that lets a heap whose live part is live
// bytes grow to floor before the next collection: the heap goal is live ×
// (1 + percent/100). It is basePercent when that would be less, and at
// most maxPercent.
func percent(live, floor uint64) int {
	if live == 0 {
		return maxPercent
	}
	p := (float64(floor)/float64(live) - 1) * 100
	return int(min(max(p, basePercent), maxPercent))
}

// A tuner sets the target after each collection from the live heap it
// measured.
type tuner struct {
	floor   uint64
	mu      sync.Mutex
	stopped bool
	set     int // the target set last
	prev    int // the target before Start
	sample  []metrics.Sample
}

// Start sets the collector's target from the live heap after every
// collection, so that the heap may grow to floor bytes before the next one
// while its live part is small, and returns a function that stops doing so
// and restores the target that was in force before. Only one should run
// at a time in a process (each sets the process's target).
func Start(floor uint64) (stop func()) {
	t := &tuner{floor: floor, sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
	t.prev = debug.SetGCPercent(basePercent)
	t.set = basePercent
	t.tune()
	t.arm()
	return func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if !t.stopped {
			t.stopped = true
			debug.SetGCPercent(t.prev)
		}
	}
}

// A sentinel is garbage as soon as it is made; its cleanup runs after the
// collection that finds it, tunes, and makes the next one. (Big enough not
// to share a tiny allocation block, whose cleanups may never run.)
type sentinel struct{ _ [32]byte }

func (t *tuner) arm() {
	runtime.AddCleanup(new(sentinel), func(t *tuner) {
		t.mu.Lock()
		stopped := t.stopped
		t.mu.Unlock()
		if stopped {
			return
		}
		t.tune()
		t.arm()
	}, t)
}

func (t *tuner) tune() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return
	}
	metrics.Read(t.sample)
	if t.sample[0].Value.Kind() != metrics.KindUint64 {
		return // not measured by this Go: leave the default
	}
	if p := percent(t.sample[0].Value.Uint64(), t.floor); p != t.set {
		debug.SetGCPercent(p)
		t.set = p
	}
}

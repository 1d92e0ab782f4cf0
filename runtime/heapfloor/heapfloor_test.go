package heapfloor

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live, floor uint64
		want        int
	}{
		{0, 64 * mib, maxPercent},
		{1 * mib, 64 * mib, maxPercent},    // 6,300 wanted: bounded
		{8 * mib, 64 * mib, 700},           // 8 MiB × 8 = 64
		{16 * mib, 64 * mib, 300},          // 16 × 4
		{32 * mib, 64 * mib, basePercent},  // Go's default reaches the floor
		{48 * mib, 64 * mib, basePercent},  // never less than the default
		{500 * mib, 64 * mib, basePercent}, // a big heap: as without the package
		{10 * mib, 64 * mib, 540},          // 10 × 6.4
		{64 * mib, 64 * mib, basePercent},  // at the floor
	} {
		if got := percent(c.live, c.floor); got != c.want {
			t.Errorf("percent(%d MiB, %d MiB) = %d, want %d", c.live/mib, c.floor/mib, got, c.want)
		}
	}
}

func gogc() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}

// waitGOGC collects until the tuner set want (its cleanup runs after a
// collection, on another goroutine) or fails after a while.
func waitGOGC(t *testing.T, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for gogc() != want {
		if time.Now().After(deadline) {
			t.Fatalf("GOGC is %d, want %d", gogc(), want)
		}
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
	}
}

var keep [][]byte

// TestStart: with a small live heap the target lets the heap reach the
// floor; a live heap above half the floor gets Go's default back; stop
// restores the target set before Start.
func TestStart(t *testing.T) {
	old := debug.SetGCPercent(150)
	defer debug.SetGCPercent(old)
	const floor = 256 << 20
	stop := Start(floor)
	// The test binary's live heap is a few MiB: the target is high.
	deadline := time.Now().Add(10 * time.Second)
	for gogc() <= basePercent {
		if time.Now().After(deadline) {
			t.Fatalf("GOGC stayed %d with a small heap", gogc())
		}
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
	}
	// Keep 160 MiB live: over half the floor.
	for range 160 {
		keep = append(keep, make([]byte, 1<<20))
	}
	waitGOGC(t, basePercent)
	keep = nil
	runtime.GC()
	deadline = time.Now().Add(10 * time.Second)
	for gogc() <= basePercent {
		if time.Now().After(deadline) {
			t.Fatalf("GOGC stayed %d once the heap was small again", gogc())
		}
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
	}
	stop()
	if got := gogc(); got != 150 {
		t.Errorf("after stop, GOGC is %d, want 150 (as before Start)", got)
	}
	// After stop, collections leave the target alone.
	debug.SetGCPercent(120)
	for range 3 {
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
	}
	if got := gogc(); got != 120 {
		t.Errorf("a stopped tuner changed GOGC to %d", got)
	}
}

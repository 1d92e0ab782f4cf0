package main

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

func gogcNow() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}

// TestSetGCTarget: build and check get 400; the commands that run
// workflows a heap floor (the test binary's live heap is small, so the
// target rises over Go's default); the others, and any command when GOGC
// is set, keep the target they found.
func TestSetGCTarget(t *testing.T) {
	old := debug.SetGCPercent(100)
	defer debug.SetGCPercent(old)
	for _, c := range []struct {
		cmd, gogc string
		check     func(int) bool
		want      string
	}{
		{"build", "", func(p int) bool { return p == 400 }, "400"},
		{"check", "", func(p int) bool { return p == 400 }, "400"},
		{"worker", "", func(p int) bool { return p > 100 }, "over 100 (the floor)"},
		{"run", "", func(p int) bool { return p > 100 }, "over 100 (the floor)"},
		{"serve", "", func(p int) bool { return p > 100 }, "over 100 (the floor)"},
		{"bench", "", func(p int) bool { return p > 100 }, "over 100 (the floor)"},
		{"lsp", "", func(p int) bool { return p == 100 }, "100 (unchanged)"},
		{"fmt", "", func(p int) bool { return p == 100 }, "100 (unchanged)"},
		{"worker", "100", func(p int) bool { return p == 100 }, "100 (GOGC set)"},
		{"build", "50", func(p int) bool { return p == 100 }, "100 (GOGC set)"},
	} {
		undo := setGCTarget(c.cmd, c.gogc)
		got := gogcNow()
		for deadline := time.Now().Add(5 * time.Second); !c.check(got) && time.Now().Before(deadline); got = gogcNow() {
			runtime.GC() // the floor sets the target after a collection
			time.Sleep(5 * time.Millisecond)
		}
		undo()
		if !c.check(got) {
			t.Errorf("%s with GOGC=%q: target %d, want %s", c.cmd, c.gogc, got, c.want)
		}
		if p := gogcNow(); p != 100 {
			t.Fatalf("%s: after undo the target is %d, want 100", c.cmd, p)
		}
	}
}

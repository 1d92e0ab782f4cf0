package main

import (
	"strings"
	"testing"
	"time"

	"github.com/wfc-lang/wfc/runtime"
)

// TestStatusWaitDue: wfc status shows when a waiting wait task is due.
func TestStatusWaitDue(t *testing.T) {
	due := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	st := &runtime.Status{RunID: "r1", Workflow: "w", State: runtime.RunRunning, Nodes: map[string]*runtime.NodeStatus{
		"cool_off": {Node: "cool_off", State: runtime.NodeWaiting, Due: due},
	}}
	var b strings.Builder
	writeStatus(&b, st)
	if !strings.Contains(b.String(), "  cool_off                 waiting until 2026-12-01T09:00:00Z\n") {
		t.Fatalf("status:\n%s", b.String())
	}
}

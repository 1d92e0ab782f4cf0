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

// TestStatusChildren: wfc status names a flow node's child run, and the
// child runs of for_each items and earlier attempts.
func TestStatusChildren(t *testing.T) {
	st := &runtime.Status{RunID: "r1", Workflow: "w", State: runtime.RunRunning, Nodes: map[string]*runtime.NodeStatus{
		"sub":  {Node: "sub", State: runtime.NodeWaiting, Child: "r1.sub.2"},
		"each": {Node: "each", State: runtime.NodeRunning},
	}, Children: map[string]string{"r1.sub.1": "sub", "r1.sub.2": "sub", "r1.each.b": "each#1", "r1.each.a": "each#0"}}
	var b strings.Builder
	writeStatus(&b, st)
	want := "  each                     running\n" +
		"  sub                      waiting (child run r1.sub.2)\n" +
		"  child run r1.each.a of each#0\n" +
		"  child run r1.each.b of each#1\n" +
		"  child run r1.sub.1 of sub\n"
	if !strings.Contains(b.String(), want) {
		t.Fatalf("status:\n%s\nwant:\n%s", b.String(), want)
	}
}

// TestStatusSignal: wfc status shows the signal a signal task waits for.
func TestStatusSignal(t *testing.T) {
	due := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	st := &runtime.Status{RunID: "r1", Workflow: "w", State: runtime.RunRunning, Nodes: map[string]*runtime.NodeStatus{
		"reply": {Node: "reply", State: runtime.NodeWaiting, Due: due, Signal: "customer_reply", Correlation: "o-17"},
		"other": {Node: "other", State: runtime.NodeWaiting, Signal: "ping"},
	}}
	var b strings.Builder
	writeStatus(&b, st)
	for _, want := range []string{
		"  reply                    waiting for signal \"customer_reply\" correlation \"o-17\" (times out at 2026-12-01T09:00:00Z)\n",
		"  other                    waiting for signal \"ping\"\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("status:\n%s\nwant %q", b.String(), want)
		}
	}
}

// TestProgressSignal: wfc run --redis and submit --wait show a signal
// taken.
func TestProgressSignal(t *testing.T) {
	var b strings.Builder
	p := &progressPrinter{w: &b, state: map[string]string{}}
	p.event(runtime.Event{Type: "node.waiting", Fields: map[string]string{"x": "reply", "signal": "customer_reply", "due": "0"}})
	p.event(runtime.Event{Type: "signal.received", Fields: map[string]string{"x": "reply", "signal": "customer_reply"}})
	if want := "  reply                    waiting\n  reply                    signal \"customer_reply\" received\n"; b.String() != want {
		t.Fatalf("got %q, want %q", b.String(), want)
	}
}

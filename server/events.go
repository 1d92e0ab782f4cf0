package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/wfc-lang/wfc/runtime"
)

// runEvents answers a run's event log: as a JSON document, or, when the
// client accepts text/event-stream, as a stream of Server-Sent Events
// (docs/api.md, "Following a run"): each event's id is its id in the log,
// so a client that reconnects with Last-Event-ID (or ?after=) resumes
// after it. The stream ends with an "end" event once the run is done, or
// a "shutdown" event when the server stops.
func (s *Server) runEvents(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	run := r.PathValue("run")
	after := r.URL.Query().Get("after")
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		after = id
	}
	if after != "" && !validEventID(after) {
		writeProblem(w, r, http.StatusBadRequest, "bad-request", "an event id is MS-SEQ, as the events' ids")
		return
	}
	if _, err := s.eng.Status(ctx, run); err != nil {
		s.runtimeError(w, r, err)
		return
	}
	if !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		evs, err := s.eng.EventsAfter(ctx, run, after, 1000, 0)
		if err != nil {
			s.runtimeError(w, r, err)
			return
		}
		if evs == nil {
			evs = []runtime.Event{}
		}
		writeJSON(w, http.StatusOK, map[string]any{"events": evs})
		return
	}
	select {
	case s.streams <- struct{}{}:
	default:
		w.Header().Set("Retry-After", "5")
		writeProblem(w, r, http.StatusServiceUnavailable, "too-many-streams", fmt.Sprintf("the server streams %d runs already, its limit", cap(s.streams)))
		return
	}
	s.wg.Add(1)
	defer func() { <-s.streams; s.wg.Done() }()
	select {
	case <-s.done:
		writeProblem(w, r, http.StatusServiceUnavailable, "unavailable", "the server is shutting down")
		return
	default:
	}
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	send := func(id, typ string, data []byte) bool {
		var b strings.Builder
		if id != "" {
			b.WriteString("id: " + id + "\n")
		}
		b.WriteString("event: " + typ + "\ndata: ")
		b.Write(data)
		b.WriteString("\n\n")
		// A stream outlives the http.Server's WriteTimeout: each write
		// gets its own deadline instead (a stuck client still ends).
		_ = rc.SetWriteDeadline(time.Now().Add(s.cfg.Heartbeat + 30*time.Second))
		if _, err := w.Write([]byte(b.String())); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	fmt.Fprint(w, "retry: 2000\n\n")
	rc.Flush()
	beat := time.NewTicker(s.cfg.Heartbeat)
	defer beat.Stop()
	poll := time.NewTimer(0)
	defer poll.Stop()
	idle := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.done:
			send("", "shutdown", []byte(`{"reason":"the server is shutting down; reconnect with Last-Event-ID"}`))
			return
		case <-beat.C:
			if _, err := fmt.Fprint(w, ": heartbeat\n\n"); err != nil || rc.Flush() != nil {
				return
			}
			continue
		case <-poll.C:
		}
		evs, err := s.eng.EventsAfter(ctx, run, after, 100, 0)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("wfc serve: reading events", "run", run, "err", err)
			}
			return
		}
		check := idle >= int(5*time.Second/s.cfg.Poll)
		for _, ev := range evs {
			data, _ := json.Marshal(ev)
			if !send(ev.ID, ev.Type, data) {
				return
			}
			after = ev.ID
			switch ev.Type {
			case "run.completed", "run.failed", "run.cancelled", "comp.done", "finally.done", "finally.failed":
				check = true
			}
		}
		if len(evs) == 0 {
			idle++
		} else {
			idle = 0
		}
		if check {
			idle = 0
			st, err := s.eng.Status(ctx, run)
			if err != nil {
				return
			}
			if st.Done() {
				// Deliver what came before the final state, then end.
				if more, err := s.eng.EventsAfter(ctx, run, after, 1000, 0); err == nil {
					for _, ev := range more {
						data, _ := json.Marshal(ev)
						if !send(ev.ID, ev.Type, data) {
							return
						}
					}
				}
				data, _ := json.Marshal(map[string]string{"state": st.State})
				send("", "end", data)
				return
			}
		}
		if len(evs) == 100 {
			poll.Reset(0)
		} else {
			poll.Reset(s.cfg.Poll)
		}
	}
}

func validEventID(id string) bool {
	ms, seq, ok := strings.Cut(id, "-")
	if _, err := strconv.ParseUint(ms, 10, 64); err != nil {
		return false
	}
	if ok {
		if _, err := strconv.ParseUint(seq, 10, 64); err != nil {
			return false
		}
	}
	return true
}

package runtime

import (
	"slices"
	"sync"
)

// A commitGroup is group commit for calls made by concurrent goroutines,
// shared by the worker's completions (batcher) and by Submit (submitter).
// A call made while fewer than lanes batches are in flight is sent at
// once, alone; calls made while all lanes are busy queue, and the caller
// whose batch returns hands the lead to the first of them, which sends
// them all (up to max) in the next. So a lone call waits for nothing, and
// under load many share one round trip.
type commitGroup[C turner] struct {
	max   int // calls per batch
	lanes int // batches in flight at once

	mu      sync.Mutex
	sending int // leaders sending, at most lanes
	pending []C
}

// A groupTurn is a call's place in a commitGroup: wake is closed when its
// batch is done, or when it is to lead the next one (lead).
type groupTurn struct {
	wake chan struct{}
	lead bool
}

func (t *groupTurn) turn() *groupTurn { return t }

// A turner is a call that has a groupTurn (a pointer to a struct
// embedding it).
type turner interface {
	comparable
	turn() *groupTurn
}

// do has c sent by send, in a batch that it leads or another caller does,
// and returns when that batch is done. A call still queued when cancel is
// closed (nil: never) leaves the queue unsent, and do reports false; once
// taken into a batch, it is waited for.
func (g *commitGroup[C]) do(c C, cancel <-chan struct{}, send func(batch []C)) (sent bool) {
	t := c.turn()
	t.wake = make(chan struct{})
	g.mu.Lock()
	if g.sending >= g.lanes {
		g.pending = append(g.pending, c)
		g.mu.Unlock()
		select {
		case <-t.wake:
		case <-cancel:
			g.mu.Lock()
			if i := slices.Index(g.pending, c); i >= 0 {
				g.pending = slices.Delete(g.pending, i, i+1)
				g.mu.Unlock()
				return false
			}
			g.mu.Unlock()
			<-t.wake // taken into a batch, or to lead one
		}
		if !t.lead {
			return true
		}
		g.mu.Lock()
	} else {
		g.sending++
	}
	n := min(len(g.pending), g.max-1)
	batch := make([]C, 0, n+1)
	batch = append(append(batch, c), g.pending[:n]...)
	g.pending = slices.Delete(g.pending, 0, n)
	g.mu.Unlock()

	send(batch)

	g.mu.Lock()
	if len(g.pending) > 0 {
		next := g.pending[0].turn()
		g.pending = slices.Delete(g.pending, 0, 1)
		next.lead = true
		close(next.wake)
	} else {
		g.sending--
	}
	g.mu.Unlock()
	for _, o := range batch[1:] {
		close(o.turn().wake)
	}
	return true
}

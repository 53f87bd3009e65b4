package turns

import (
	"context"
	"time"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/engine"
)

// write is one write's part in the hand-over (engine.Contender), used by
// its delivery's goroutine.
type write struct {
	l     *Layer
	env   *engine.Env
	based bool      // the delivery's mode is Based: its sends time the key's service
	rmw   bool      // a read-modify-write: it may wait for its turn (engine.Options.TakeTurns)
	began time.Time // when the delivery began

	lost     bool        // some attempt lost a race
	claimed  string      // the key whose senior place w holds (claim)
	turnEnds int         // turns' ends seen while waiting (wait.go)
	turnEnd  driver.ETag // the last one's
	awaited  bool        // this attempt waited for its turn
	last     bool        // this attempt's send ends the Store's turn (pause)
}

// Await waits for the key's turn after a lost race (wait.go); a write
// that lost none, did not read its base for this attempt, or is not a
// read-modify-write goes on at once.
func (w *write) Await(ctx context.Context, d *engine.Delivery, base []engine.Version, read bool) ([]engine.Version, error) {
	w.awaited, w.last = false, false
	if !w.lost || !read || !w.rmw {
		return base, nil
	}
	return w.awaitTurn(ctx, d, base)
}

// Dispatch pauses a Based write built on a copy when its Store has held
// the key long enough while others also write it, and marks the write
// before the pause as the end of the Store's turn (pause).
func (w *write) Dispatch(ctx context.Context, key string, req engine.Request, copy bool) (engine.Request, error) {
	w.last = false
	if !w.based || !copy {
		return req, nil
	}
	clock := w.env.Clock
	pause, last := w.l.pause(key, clock)
	if pause > 0 {
		if err := clock.Sleep(ctx, pause); err != nil {
			return nil, err
		}
	}
	w.last = last
	if last && len(req) == 1 && req[0].Write.Meta != "" { // a merge carries no bookkeeping to mark
		req = engine.Request{mark(req[0], w.l.name())}
	}
	return req, nil
}

// Answered records how an attempt ended: a landed send of a Based write
// times the key's service (won), and ends the Store's turn when Dispatch
// said it would (ended); a lost race is a sign of a rival (rival), and
// tried again at once when the write waited for its turn.
func (w *write) Answered(key string, a engine.Answer) (atOnce bool) {
	last, awaited := w.last, w.awaited
	w.last, w.awaited = false, false
	switch {
	case a.Landed:
		if a.Timed && w.based {
			w.l.won(key, a.Took, a.Copy, a.ETag, w.env.Clock)
		}
		if last {
			w.l.ended(key, w.env.Clock) // the turn ended with this write
		}
	case a.Raced:
		w.lost = true
		w.l.rival(key, w.env.Clock)
		if a.Timed && w.based {
			w.l.sent(key, a.Took)
		}
		return awaited // waiting for the next turn's end is its backoff
	}
	return false
}

// Backoff shrinks the cap of a write that has waited its patience, if it
// is its Store's senior write of the key (seniority).
func (w *write) Backoff(key string, limit, took, waited time.Duration) time.Duration {
	if !patient(took, waited) || !w.senior(key) {
		return limit
	}
	return seniority(limit, took, waited, w.env.Policy.InitialInterval)
}

// Leave keeps the key's state while the Store writes it (touch), and
// gives up w's senior place.
func (w *write) Leave(key string, attempts int) {
	if attempts > 0 && key != "" {
		w.l.touch(key, attempts, w.env.Clock)
	}
	w.retire()
}

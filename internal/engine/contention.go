package engine

import (
	"context"
	"errors"
	"time"

	"github.com/etagstore/etagstore/driver"
)

// Contention is the layer between a Store's writes of a contended key and
// the other Stores writing it (internal/turns: the hot-key hand-over). A
// Store's deliveries share one (Env.Contention; nil: none). A write that
// is not Blind enters it as its delivery starts, and the delivery calls
// its Contender at three points of each attempt: before it builds
// (Await), before it sends (Dispatch), after the answer (Answered, and
// Backoff for the pause after a lost race); and Leave as it ends.
type Contention interface {
	// Enter is the part in the layer of a write delivered with env in
	// mode; rmw says it is a read-modify-write, built again over whatever
	// version is current (Options.TakeTurns), which may wait for the key.
	Enter(env *Env, mode Mode, rmw bool) Contender
}

// Contender is one write's part in a Contention, used by its delivery's
// goroutine. key names the write at each call (a transaction's first key
// may change as it reads).
type Contender interface {
	// Await is called before each build that follows a lost race (an
	// Answer with Raced, earlier in the delivery), with the base the
	// attempt builds over (read: read for this attempt, by d.Read). It
	// returns that base, or the version to build over once the key is
	// handed over; an error ends the attempt (ErrDisplaced: it backs off
	// as after a lost race).
	Await(ctx context.Context, d *Delivery, base []Version, read bool) ([]Version, error)
	// Dispatch is called before each send of req (copy: built over a
	// version not read during the call), unless ctx is done. It may pause
	// first, and returns the request to send.
	Dispatch(ctx context.Context, key string, req Request, copy bool) (Request, error)
	// Answered is called after each answer, and after an attempt that lost
	// a race without sending. atOnce says a lost race is tried again
	// without a backoff: the write waited for the key (its wait was it).
	Answered(key string, a Answer) (atOnce bool)
	// Backoff is the cap of the pause after a lost race: limit, or less
	// for a write that has waited long (took: the last attempt; waited:
	// since the delivery began).
	Backoff(key string, limit, took, waited time.Duration) time.Duration
	// Leave is called once as the delivery ends, after attempts (0: its
	// plan panicked).
	Leave(key string, attempts int)
}

// Answer is how an attempt ended, for Contender.Answered.
type Answer struct {
	Landed bool // the request landed (its answer, or a read after it was lost, says so)
	Raced  bool // it lost a race: a 412 or a create beaten to it, a copy found stale, its reads changed
	Timed  bool // Took is how long its send took (a landed send, a lost race)
	Took   time.Duration
	Copy   bool        // it was built on a copy
	ETag   driver.ETag // the one version it made, when Timed and landed ("": not known)
}

// ErrDisplaced is what Contender.Await returns when an older write of the
// Store takes the key's wait from the write: it backs off as after a lost
// race.
var ErrDisplaced = errors.New("an older write of the key waits for its turn")

// Key is the key that names the write (its first).
func (d *Delivery) Key() string { return d.key }

// Read reads the write's keys, as each attempt's base is read
// (Hooks.Read).
func (d *Delivery) Read(ctx context.Context) ([]Version, error) { return d.read(ctx, d.keys) }

// contender is the write's part in the Store's Contention, nil when it has
// none or no key yet.
func (d *Delivery) contender() Contender {
	if len(d.keys) == 0 {
		return nil
	}
	return d.part
}

// backoff is the cap of the pause after a lost race, as the write's
// Contender says (Contender.Backoff).
func (d *Delivery) backoff(limit, took, waited time.Duration) time.Duration {
	if c := d.contender(); c != nil {
		return c.Backoff(d.key, limit, took, waited)
	}
	return limit
}

// answered tells the write's Contender, if any, how an attempt ended; a
// lost race makes it ask the Contender's Await from then on.
func (d *Delivery) answered(a Answer) (atOnce bool) {
	if c := d.contender(); c != nil {
		d.lost = d.lost || a.Raced && !a.Landed
		return c.Answered(d.key, a)
	}
	return false
}

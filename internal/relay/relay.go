// Package relay relays an outbox's committed events to a publisher, in
// order per partition, at least once: each is published, then marked
// sent. It is the machinery behind the root's Outbox.Relay and its
// kin: a pass over the partitions with pending events, each one's wait
// after a failed publish, the calls of the publisher (publish.go) and
// the marks behind them (mark.go). It knows the records' layout
// (internal/outbox) and no event type: V is the root's Event[E], which it
// reaches through Records.
package relay

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/codec"
	"github.com/etagstore/etagstore/internal/index"
	"github.com/etagstore/etagstore/internal/outbox"
	"github.com/etagstore/etagstore/internal/telemetry"
)

// This file is one relay pass: the pending events of every partition
// listed, up to partitionsAtOnce partitions relayed at once, and in each
// the run that follows its cursor without a gap.

// Records is a relay's seam to the outbox it relays (the root's
// Outbox[E]), whose records its Store keeps: V is an event as publish
// takes it.
type Records[V any] interface {
	// Cursor reads scope's cursor: the last Seq relayed (a missing one
	// matches driver.ErrNotFound).
	Cursor(ctx context.Context, scope string) (int64, error)
	// Event is it, a pending record of scope, decoded.
	Event(scope string, it driver.Item) (V, error)
	// Placed is ev's Seq and when it was emitted.
	Placed(ev V) (seq int64, emitted time.Time)
	// MarkSent moves events, published in order from the cursor on, from
	// pending to sent and advances scope's cursor past them, in one
	// request conditioned on all of them, and returns how many it moved
	// (outbox.Layout.MarkSent).
	MarkSent(ctx context.Context, scope string, events []driver.Item) (int, error)
}

// Relay relays the events of one outbox.
type Relay[V any] struct {
	Layout   outbox.Layout
	Records  Records[V]
	Now      func() time.Time
	InFlight int                 // OutboxOptions.InFlight
	Obs      *telemetry.Recorder // the outbox's Store's: each pass is recorded (Relayed)
}

// Waits are the partitions waiting after a failed publish, kept from one
// pass to the next (nil: none kept).
type Waits map[string]*partitionWait

// partitionWait is a partition whose publish failed: when it may be tried
// again.
type partitionWait struct {
	b    *backoff.ExponentialBackOff
	next time.Time
}

// partitionsAtOnce is how many partitions a pass relays at once.
const partitionsAtOnce = 8

// Pass is one relay pass; waits (nil: none kept) holds the partitions
// waiting after a failed publish. Partitions are relayed concurrently,
// partitionsAtOnce at a time; each one's events in order. It returns how
// many events its marks moved, and the first failure.
func (r *Relay[V]) Pass(ctx context.Context, publish Publisher[V], waits Waits) (int, error) {
	start := r.Now()
	var (
		mu    sync.Mutex // over st, first and waits
		st    telemetry.RelayPass
		first error
		wg    sync.WaitGroup
		slots = make(chan struct{}, partitionsAtOnce)
	)
	relay := func(scope string, pending []driver.Item) {
		defer func() { <-slots; wg.Done() }()
		n, err := r.partition(ctx, scope, pending, publish, waits, &mu, &st)
		mu.Lock()
		defer mu.Unlock()
		st.Published += n
		if first == nil {
			first = err
		}
	}
	for run, err := range index.ByScope(r.Layout.AllPending(ctx), r.Layout.Space, 0) {
		if err != nil {
			mu.Lock()
			first = err
			mu.Unlock()
			break
		}
		slots <- struct{}{}
		wg.Add(1)
		go relay(run.Scope, run.Items)
	}
	wg.Wait()
	st.Took, st.Err = r.Now().Sub(start), first
	if ctx.Err() == nil || first == nil { // a pass cut short by its caller is no failure to log
		r.Obs.Relayed(ctx, st)
	}
	return st.Published, first
}

// partition relays scope's pending events (as listed, in order): the
// run that follows the cursor without a gap, published InFlight at a
// time (one by one by default; started in order, a window sliding past
// each one that lands) and marked sent markBatch at a time while the
// publishes go on (one mark request at a time, in order). A publish that
// fails ends it: the events before it are marked, and the partition
// waits (waits) before it is tried again. A mark that fails ends it too.
func (r *Relay[V]) partition(ctx context.Context, scope string, pending []driver.Item, publish Publisher[V], waits Waits, mu *sync.Mutex, st *telemetry.RelayPass) (int, error) {
	now := r.Now()
	mu.Lock()
	w := waits[scope]
	mu.Unlock()
	if w != nil && now.Before(w.next) {
		return 0, nil // backing off after a failed publish
	}
	cursor, err := r.Records.Cursor(ctx, scope)
	if err != nil && !errors.Is(err, driver.ErrNotFound) {
		return 0, err
	}
	run, evs, err := r.run(scope, pending, cursor)
	if len(evs) > 0 {
		_, emitted := r.Records.Placed(evs[0])
		mu.Lock()
		st.Lag = max(st.Lag, now.Sub(emitted))
		mu.Unlock()
	}
	m := r.marker(ctx, scope)
	ok, perr := publish.inOrder(ctx, evs, r.InFlight, func(k int) bool { return m.upTo(run[:k], false) })
	m.upTo(run[:ok], true)
	n, merr := m.wait()
	if perr == nil {
		mu.Lock()
		delete(waits, scope)
		mu.Unlock()
		return n, cmp.Or(merr, err)
	}
	mu.Lock()
	st.Failed++
	if ok > 0 {
		delete(waits, scope) // it moved: the backoff starts again
	}
	waits.wait(scope, now)
	mu.Unlock()
	switch {
	case ctx.Err() != nil:
		return n, ctx.Err() // the pass was cut short: a done context is its own error
	case merr != nil:
		// A mark failed: it stopped the publishes, and it is the error
		// (one failure, one sentinel); the publish's still backs the
		// partition off.
		return n, merr
	}
	seq, _ := r.Records.Placed(evs[ok])
	return n, codec.Prefixed(fmt.Sprintf("relay of event %d of", seq), scope, perr)
}

// run is the pending events (as listed, in order) that follow cursor
// without a gap, with their events; err, an event that cannot be read,
// ends it.
func (r *Relay[V]) run(scope string, pending []driver.Item, cursor int64) ([]driver.Item, []V, error) {
	var run []driver.Item
	var evs []V
	next := cursor + 1
	for _, it := range pending {
		seq, ok := r.Layout.Seq(it.Key)
		if !ok || seq < next {
			continue // marked sent since the listing
		}
		if seq > next {
			break // a gap: an earlier event not visible yet; the next pass
		}
		ev, err := r.Records.Event(scope, it)
		if err != nil {
			return run, evs, err
		}
		run, evs = append(run, it), append(evs, ev)
		next++
	}
	return run, evs, nil
}

// wait backs scope off after a failed publish at now.
func (waits Waits) wait(scope string, now time.Time) {
	if waits == nil {
		return
	}
	w := waits[scope]
	if w == nil {
		b := backoff.NewExponentialBackOff()
		b.InitialInterval, b.MaxInterval, b.MaxElapsedTime = 100*time.Millisecond, time.Minute, 0
		b.Multiplier, b.RandomizationFactor = 2, 0.2
		b.Reset()
		w = &partitionWait{b: b}
		waits[scope] = w
	}
	w.next = now.Add(w.b.NextBackOff())
}

package etagstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/index"
	"github.com/etagstore/etagstore/internal/telemetry"
)

// This file relays an Outbox's committed events to a publisher, in order
// per partition, at least once: each is published, then marked sent.

// Relay publishes every committed event, in order per partition, at
// least once, then marks it sent, until ctx is done (then it returns
// nil). It makes a pass every Poll (OutboxOptions), and the next at once
// after a pass that published something, so that a backlog is worked off
// without a Poll between its parts. A pass lists the pending events of
// every partition (one query on tables), and relays up to 8 partitions at
// once; in each it reads the cursor (the last Seq relayed) and publishes
// the events that follow it without a gap, one after another (InFlight at
// a time, if more than one). Published events are marked sent behind the
// publishes, up to 32 to a request, one request at a time: a mark moves
// them from pending to sent and advances the cursor, conditioned on all
// of them, so that two relays never mark one event twice. A publish that
// fails (or panics) stops its partition: it is tried again after a
// backoff (from 100 ms, doubling, ±20%, up to a minute), and no later
// event of the partition goes before it (with InFlight 1). Relayed events
// past the retention are deleted by the passes.
//
// With lock, only the process holding the lock named "etagstore-relay-"
// and the outbox's name relays; the others stand by. Without one, several
// relays are safe, but each publishes what it lists until a mark lands:
// most events are then published by every relay (at least once allows
// it; consumers drop repeats by ID), and each is marked sent once.
func (o *Outbox[E]) Relay(ctx context.Context, publish func(context.Context, Event[E]) error, lock Locker) error {
	if o.err != nil {
		return o.err
	}
	if publish == nil {
		return errorf(ErrInvalidInput, "Relay: publish is nil")
	}
	return o.relay(ctx, singly(publish), lock)
}

// RelayBatches is Relay with a publisher of batches: each call of publish
// carries up to OutboxOptions.Batch consecutive events of one partition,
// in Seq order, and returns nil only once every one of them is published
// (azqueuepub.NewBatches packs them into as few queue messages as fit).
// One call at a time per partition (InFlight at a time, if more than
// one): a failed call stops its partition as a failed publish does, and
// the whole batch is published again after the backoff, so no later
// event goes before an earlier one. At a 10 ms round trip, batches of 32
// to Azure Queue storage relay one partition's events about 13 times as
// fast as Relay (about 1,000 a second, against 80).
func (o *Outbox[E]) RelayBatches(ctx context.Context, publish func(context.Context, []Event[E]) error, lock Locker) error {
	if o.err != nil {
		return o.err
	}
	if publish == nil {
		return errorf(ErrInvalidInput, "RelayBatches: publish is nil")
	}
	return o.relay(ctx, batches[E]{publish, o.batch}, lock)
}

func (o *Outbox[E]) relay(ctx context.Context, p batches[E], lock Locker) error {
	waits := map[string]*partitionWait{}
	var swept time.Time
	o.store.every(ctx, o.poll, lock, "etagstore-relay-"+o.layout.Name, func(ctx context.Context) bool {
		n, _ := o.pass(ctx, p, waits)
		if now := o.clock.Now(); now.Sub(swept) >= retentionSweep {
			swept = now
			_, _ = o.store.Sweep(ctx) // past the retention
		}
		return n > 0
	})
	return nil
}

// retentionSweep is how often Relay deletes the events past the
// retention: a pass of the outbox Store's Sweep (logged, as every Sweep).
const retentionSweep = time.Minute

// RelayOnce makes one pass of Relay and returns how many events it
// published and marked sent: every partition's pending events that
// follow its cursor without a gap, up to the first that fails to
// publish. Its error is the first failure (a publish's, or a request's);
// the other partitions go on. It deletes no event past the retention:
// Relay's passes do, once a minute.
func (o *Outbox[E]) RelayOnce(ctx context.Context, publish func(context.Context, Event[E]) error) (int, error) {
	if o.err != nil {
		return 0, o.err
	}
	if publish == nil {
		return 0, errorf(ErrInvalidInput, "RelayOnce: publish is nil")
	}
	return o.pass(ctx, singly(publish), nil)
}

// RelayBatchesOnce makes one pass of RelayBatches, as RelayOnce makes one
// of Relay.
func (o *Outbox[E]) RelayBatchesOnce(ctx context.Context, publish func(context.Context, []Event[E]) error) (int, error) {
	if o.err != nil {
		return 0, o.err
	}
	if publish == nil {
		return 0, errorf(ErrInvalidInput, "RelayBatchesOnce: publish is nil")
	}
	return o.pass(ctx, batches[E]{publish, o.batch}, nil)
}

// partitionWait is a partition whose publish failed: when it may be tried
// again.
type partitionWait struct {
	b    *backoff.ExponentialBackOff
	next time.Time
}

// partitionsAtOnce is how many partitions a pass relays at once.
const partitionsAtOnce = 8

// pass is one relay pass; waits (nil: none kept) holds the partitions
// waiting after a failed publish. Partitions are relayed concurrently,
// partitionsAtOnce at a time; each one's events in order.
func (o *Outbox[E]) pass(ctx context.Context, publish batches[E], waits map[string]*partitionWait) (int, error) {
	start := o.clock.Now()
	var (
		mu    sync.Mutex // over st, first and waits
		st    telemetry.RelayPass
		first error
		wg    sync.WaitGroup
		slots = make(chan struct{}, partitionsAtOnce)
	)
	relay := func(scope string, pending []driver.Item) {
		defer func() { <-slots; wg.Done() }()
		n, err := o.relayPartition(ctx, scope, pending, publish, waits, &mu, &st)
		mu.Lock()
		defer mu.Unlock()
		st.Published += n
		if first == nil {
			first = err
		}
	}
	for run, err := range index.ByScope(o.layout.AllPending(ctx), o.layout.Space, 0) {
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
	st.Took, st.Err = o.clock.Now().Sub(start), first
	if ctx.Err() == nil || first == nil { // a pass cut short by its caller is no failure to log
		o.store.obs.Relayed(ctx, st)
	}
	return st.Published, first
}

// markBatch is how many published events one request marks sent at most:
// each moves (a delete and a create) beside the cursor, within a table's
// 100 actions.
const markBatch = 32

// relayPartition relays scope's pending events (as listed, in order): the
// run that follows the cursor without a gap, published InFlight at a
// time (one by one by default; started in order, a window sliding past
// each one that lands) and marked sent markBatch at a time while the
// publishes go on (one mark request at a time, in order). A publish that
// fails ends it: the events before it are marked, and the partition
// waits (waits) before it is tried again. A mark that fails ends it too.
func (o *Outbox[E]) relayPartition(ctx context.Context, scope string, pending []driver.Item, publish batches[E], waits map[string]*partitionWait, mu *sync.Mutex, st *telemetry.RelayPass) (int, error) {
	now := o.clock.Now()
	mu.Lock()
	w := waits[scope]
	mu.Unlock()
	if w != nil && now.Before(w.next) {
		return 0, nil // backing off after a failed publish
	}
	cursor, err := o.store.Get(ctx, o.layout.Cursor(scope))
	if err != nil && !errors.Is(err, ErrNotFound) {
		return 0, err
	}
	run, evs, err := o.run(scope, pending, cursor.Value.Seq)
	if len(evs) > 0 {
		mu.Lock()
		st.Lag = max(st.Lag, now.Sub(evs[0].Time))
		mu.Unlock()
	}
	m := o.marker(ctx, scope)
	ok, perr := publish.inOrder(ctx, evs, o.inFlight, func(k int) bool { return m.upTo(run[:k], false) })
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
	o.wait(waits, scope, now)
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
	return n, prefixed(fmt.Sprintf("relay of event %d of", evs[ok].Seq), scope, perr)
}

// run is the pending events (as listed, in order) that follow cursor
// without a gap, with their Events; err, an event that cannot be read,
// ends it.
func (o *Outbox[E]) run(scope string, pending []driver.Item, cursor int64) ([]driver.Item, []Event[E], error) {
	var run []driver.Item
	var evs []Event[E]
	next := cursor + 1
	for _, it := range pending {
		seq, ok := o.layout.Seq(it.Key)
		if !ok || seq < next {
			continue // marked sent since the listing
		}
		if seq > next {
			break // a gap: an earlier event not visible yet; the next pass
		}
		ev, err := o.event(scope, it)
		if err != nil {
			return run, evs, err
		}
		run, evs = append(run, it), append(evs, ev)
		next++
	}
	return run, evs, nil
}

// wait backs scope off after a failed publish at now.
func (o *Outbox[E]) wait(waits map[string]*partitionWait, scope string, now time.Time) {
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

// markSent moves events, published in order from the cursor on, from
// pending to sent and advances scope's cursor past them, in one request
// conditioned on all of them, and returns how many it moved: events
// another relay marked first are left as they are, and not counted.
func (o *Outbox[E]) markSent(ctx context.Context, scope string, events []driver.Item) (int, error) {
	last, _ := o.layout.Seq(events[len(events)-1].Key)
	for _, it := range events {
		o.store.cache.Note(it.Key, it, nil) // the versions listed: the first run reads none of them again
	}
	moved := 0 // by the run of fn that committed
	_, err := o.store.Transact(ctx, func(tx *Tx[record]) error {
		moved = 0
		cur, err := tx.Get(o.layout.Cursor(scope))
		if err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		sent := o.clock.Now().UTC()
		for _, it := range events {
			seq, _ := o.layout.Seq(it.Key)
			if seq <= cur.Seq {
				continue // another relay marked it
			}
			r, err := tx.Get(it.Key)
			if err != nil {
				return err
			}
			r.Sent = sent
			if err := tx.Delete(it.Key); err != nil {
				return err
			}
			if err := tx.createUnread(o.layout.Sent(scope, seq), r, true); err != nil {
				return err
			}
			moved++
		}
		if cur.Seq >= last {
			return nil
		}
		return tx.Put(o.layout.Cursor(scope), record{Seq: last})
	})
	if err != nil {
		return 0, err
	}
	return moved, nil
}

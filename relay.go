package etagstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/telemetry"
)

// This file relays an Outbox's committed events to a publisher, in order
// per partition, at least once: each is published, then marked sent.

// Relay publishes every committed event, in order per partition, at
// least once, then marks it sent, until ctx is done (then it returns
// nil). Every Poll (OutboxOptions) it makes a pass: it lists the pending
// events of every partition (one query on tables), reads each
// partition's cursor (the last Seq relayed), and publishes the events
// that follow it without a gap, one at a time; each published event is
// marked sent in one request that moves it from pending to sent and
// advances the cursor, conditioned on both, so that two relays never mark
// one event twice. A publish that fails (or panics) stops its partition:
// it is tried again after a backoff (from 100 ms, doubling, up to a
// minute), and no later event of the partition goes before it. Relayed
// events past the retention are deleted by the passes.
//
// With lock, only the process holding the lock named "etagstore-relay-"
// and the outbox's name relays; the others stand by. Without one, several
// relays are safe: an event may then be published more than once (which
// at least once allows), and each is marked sent once.
func (o *Outbox[E]) Relay(ctx context.Context, publish func(context.Context, Event[E]) error, lock Locker) error {
	if o.err != nil {
		return o.err
	}
	if publish == nil {
		return errorf(ErrInvalidInput, "Relay: publish is nil")
	}
	waits := map[string]*partitionWait{}
	o.store.every(ctx, o.poll, lock, "etagstore-relay-"+o.layout.Name, func(ctx context.Context) {
		_, _ = o.pass(ctx, publish, waits)
		_, _ = o.store.Sweep(ctx) // past the retention
	})
	return nil
}

// RelayOnce makes one pass of Relay and returns how many events it
// published: every partition's pending events that follow its cursor
// without a gap, up to the first that fails to publish. Its error is the
// first failure (a publish's, or a request's); the other partitions go
// on.
func (o *Outbox[E]) RelayOnce(ctx context.Context, publish func(context.Context, Event[E]) error) (int, error) {
	if o.err != nil {
		return 0, o.err
	}
	if publish == nil {
		return 0, errorf(ErrInvalidInput, "RelayOnce: publish is nil")
	}
	return o.pass(ctx, publish, nil)
}

// partitionWait is a partition whose publish failed: when it may be tried
// again.
type partitionWait struct {
	b    *backoff.ExponentialBackOff
	next time.Time
}

// pass is one relay pass; waits (nil: none kept) holds the partitions
// waiting after a failed publish.
func (o *Outbox[E]) pass(ctx context.Context, publish func(context.Context, Event[E]) error, waits map[string]*partitionWait) (int, error) {
	start := o.clock.Now()
	var (
		st       telemetry.RelayPass
		first    error
		scope    string
		batch    []driver.Item
		relayOne = func() {
			n, err := o.relayPartition(ctx, scope, batch, publish, waits, &st)
			st.Published += n
			if first == nil {
				first = err
			}
		}
	)
	for it, err := range o.layout.AllPending(ctx) {
		if err != nil {
			first = err
			break
		}
		sc, err := o.layout.Space.Scope(it.Key)
		if err != nil {
			continue
		}
		if len(batch) > 0 && sc != scope {
			relayOne()
			batch = batch[:0]
		}
		scope = sc
		batch = append(batch, it)
	}
	if len(batch) > 0 {
		relayOne()
	}
	st.Took, st.Err = o.clock.Now().Sub(start), first
	o.store.obs.Relayed(ctx, st)
	return st.Published, first
}

// markBatch is how many published events one request marks sent at most:
// each moves (a delete and a create) beside the cursor, within a table's
// 100 actions.
const markBatch = 32

// relayPartition relays scope's pending events (as listed, in order): it
// publishes them one by one, and marks them sent markBatch at a time.
func (o *Outbox[E]) relayPartition(ctx context.Context, scope string, pending []driver.Item, publish func(context.Context, Event[E]) error, waits map[string]*partitionWait, st *telemetry.RelayPass) (int, error) {
	now := o.clock.Now()
	if w := waits[scope]; w != nil && now.Before(w.next) {
		return 0, nil // backing off after a failed publish
	}
	cursor, err := o.store.Get(ctx, o.layout.Cursor(scope))
	if err != nil && !errors.Is(err, ErrNotFound) {
		return 0, err
	}
	next := cursor.Value.Seq + 1
	var published []driver.Item // not marked yet
	n := 0
	mark := func() error {
		if len(published) == 0 {
			return nil
		}
		err := o.markSent(ctx, scope, published)
		if err == nil {
			n += len(published)
		}
		published = published[:0]
		return err
	}
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
			return n, errors.Join(err, mark())
		}
		st.Lag = max(st.Lag, now.Sub(ev.Time))
		if err := callPublish(ctx, publish, ev); err != nil {
			st.Failed++
			o.wait(waits, scope, now)
			return n, errors.Join(fmt.Errorf("relay of event %d of %q: %w", seq, scope, err), mark())
		}
		delete(waits, scope)
		if published = append(published, it); len(published) == markBatch {
			if err := mark(); err != nil {
				return n, err
			}
		}
		next++
	}
	return n, mark()
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
		b.Reset()
		w = &partitionWait{b: b}
		waits[scope] = w
	}
	w.next = now.Add(w.b.NextBackOff())
}

// markSent moves events, published in order from the cursor on, from
// pending to sent and advances scope's cursor past them, in one request
// conditioned on all of them: events another relay marked first are left
// as they are.
func (o *Outbox[E]) markSent(ctx context.Context, scope string, events []driver.Item) error {
	last, _ := o.layout.Seq(events[len(events)-1].Key)
	for _, it := range events {
		o.store.cache.Note(it.Key, it, nil) // the versions listed: the first run reads none of them again
	}
	_, err := o.store.Transact(ctx, func(tx *Tx[record]) error {
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
			if err := tx.createUnread(o.layout.Sent(scope, seq), r); err != nil {
				return err
			}
		}
		if cur.Seq >= last {
			return nil
		}
		return tx.Put(o.layout.Cursor(scope), record{Seq: last})
	})
	return err
}

// callPublish is publish(ctx, ev); a panic in it is its error.
func callPublish[E any](ctx context.Context, publish func(context.Context, Event[E]) error, ev Event[E]) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("publish panicked: %v", r)
		}
	}()
	return publish(ctx, ev)
}

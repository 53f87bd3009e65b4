package etagstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"reflect"
	"time"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/core"
	"github.com/etagstore/etagstore/internal/index"
	"github.com/etagstore/etagstore/internal/outbox"
	"github.com/etagstore/etagstore/internal/retry"
)

// This file keeps a transactional outbox: events a transaction emits
// commit in the same atomic request as its documents, in their partition,
// numbered in commit order (Seq); Relay publishes them (relay.go). The
// records, their layout and their writes are internal/outbox's; see
// docs/outbox.md.

// Event is an event an Outbox holds: emitted in a transaction, relayed,
// or read back.
type Event[E any] struct {
	// ID is the event's own, made when it was emitted: the same on every
	// delivery of it, for a consumer to drop repeats.
	ID string
	// Partition is the commit scope of the documents of the transaction
	// that emitted it, as a key prefix: on tables "pk/" (with
	// tablestore's Options.Partition, ""); on memstore "".
	Partition string
	// Seq is its place among the partition's events: 1, 2, 3… in the
	// order their transactions committed.
	Seq int64
	// Time is when it was emitted, by the outbox's clock.
	Time  time.Time
	Value E
}

// OutboxOptions configure an Outbox. Nil means the defaults.
type OutboxOptions struct {
	// Options are those of the Store that keeps the outbox's records:
	// Clock, Retry, the telemetry providers, Logger (its Codec is the
	// backend's own).
	Options
	// Name tells outboxes of one table apart: 1 to 29 letters, digits,
	// "_" or "-". Default: from E's type, as an Expiry index is named.
	Name string
	// Retention is how long an event is kept once relayed, for Read;
	// then Relay's passes delete it. Default: 7 days.
	Retention time.Duration
	// Poll is how long Relay waits between passes. Default: 250 ms.
	Poll time.Duration
	// InFlight is how many events of one partition Relay publishes at
	// once. Default (1): one after another, so that a failed publish
	// stops its partition before any later event goes. More is faster
	// where each publish is a round trip (Azure Queue storage takes one
	// message a request: about 80 events a second at 10 ms, against
	// 370 to 970 with 16), but the publishes of a window may land in any
	// order, and a later event may be published before an earlier one
	// whose publish fails (it is published again after it; consumers
	// order by Seq). A window slides: one more starts as each lands.
	// RelayBatches keeps the order and goes faster still.
	InFlight int
	// Batch is how many events of one partition RelayBatches hands its
	// publish at most in one call. Default: 32. (Relay's publish takes
	// one.)
	Batch int
}

// maxOutboxName bounds OutboxOptions.Name: its retention index's name,
// "xo-" and Name, is an index name (at most 32 bytes).
const maxOutboxName = 29

// MaxEventSize bounds an event as a queue message carries it: the JSON
// of its Event, at most 48 KiB, which Azure Queue storage's 64 KiB
// message holds in base64.
const MaxEventSize = 48 << 10

// Outbox is a transactional outbox of events of type E: Emit adds an
// event to a transaction (In), committed with its documents or not at
// all; Relay publishes the committed ones in order, and Read reads them
// back. It is safe for concurrent use.
type Outbox[E any] struct {
	layout outbox.Layout
	store  *Store[outbox.Record] // its records, over an outbox.Backend
	err    error                 // NewOutbox's refusal: every call fails with it
	clock  Clock
	poll   time.Duration
	// inFlight is OutboxOptions.InFlight; batch, OutboxOptions.Batch.
	inFlight, batch int
}

// NewOutbox returns the outbox of events of type E kept beside the
// documents of b. Over a backend that keeps no entries (blobs) every
// call fails with errors.ErrUnsupported; an invalid Name, with
// ErrInvalidInput.
func NewOutbox[E any](b driver.Backend, opts *OutboxOptions) *Outbox[E] {
	var o OutboxOptions
	if opts != nil {
		o = *opts
	}
	if o.Name == "" {
		o.Name = "o" + index.ExpiryName(reflect.TypeFor[E]())[1:]
	}
	if o.Retention <= 0 {
		o.Retention = 7 * 24 * time.Hour
	}
	if o.Poll <= 0 {
		o.Poll = 250 * time.Millisecond
	}
	if o.InFlight <= 0 {
		o.InFlight = 1
	}
	if o.Batch <= 0 {
		o.Batch = 32
	}
	if o.Clock == nil {
		o.Clock = retry.System{}
	}
	x := &Outbox[E]{clock: o.Clock, poll: o.Poll, inFlight: o.InFlight, batch: o.Batch}
	if x.err = index.CheckName(o.Name); x.err == nil && len(o.Name) > maxOutboxName {
		x.err = errorf(ErrInvalidInput, "outbox name %q: at most %d letters, digits, '_' or '-' (its retention index is named after it)", o.Name, maxOutboxName)
	}
	if x.err != nil {
		return x
	}
	if x.err = outbox.Usable(b); x.err != nil {
		return x
	}
	x.layout = outbox.Layout{Name: o.Name, Space: b.Abilities().Entries}
	so := o.Options
	so.Codec = nil // the backend's: a table's entity of properties
	retention := o.Retention
	x.store = New(driver.Backend(outbox.Backend{Backend: b, Layout: x.layout}), &so,
		expiryIndex("xo-"+o.Name, func(r outbox.Record) time.Time {
			if r.Sent.IsZero() {
				return time.Time{}
			}
			return r.Sent.Add(retention)
		}))
	return x
}

// Emitter is an Outbox's view of a transaction (Outbox.In).
type Emitter[E any] struct {
	o  *Outbox[E]
	tx *Txn
}

// In returns the outbox's view of tx, through which fn emits events.
func (o *Outbox[E]) In(tx *Txn) *Emitter[E] { return &Emitter[E]{o: o, tx: tx} }

// Emit adds v to the transaction as the next event of its partition (the
// commit scope of the documents it has used so far): committed in the
// same atomic request as its documents, or not at all. A run of fn that
// fails, panics or runs again leaves no event. It reads the partition's
// head (the last Seq assigned), as a transactional read, and writes it
// with the event: two transactions that emit in one partition commit one
// after the other, in the order of their Seqs. Emit before fn has used
// a document, or outside a transaction, matches ErrInvalidInput; an
// event whose Event is over MaxEventSize as JSON, ErrTooLarge; on a
// backend that keeps no entries (blobs), errors.ErrUnsupported.
func (e *Emitter[E]) Emit(v E) error {
	o := e.o
	switch {
	case o.err != nil:
		return o.err
	case e.tx == nil || e.tx.h == nil:
		return errorf(ErrInvalidInput, "Emit outside a transaction: call it in Transact's fn, through outbox.In(tx)")
	}
	touched := e.tx.h.Touched()
	if len(touched) == 0 {
		return errorf(ErrInvalidInput, "Emit before the transaction used a document: its partition is not known yet")
	}
	scope, err := o.layout.Space.Scope(touched[0])
	if err != nil {
		return err
	}
	value, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("%w: Emit: encode %T: %v", ErrInvalidInput, v, err)
	}
	ev := Event[json.RawMessage]{ID: outbox.NewID(), Partition: scope, Seq: 1e15, Time: o.clock.Now().UTC(), Value: value}
	if msg, _ := json.Marshal(ev); len(msg) > MaxEventSize {
		return errorf(ErrTooLarge, "Emit: the event is %d bytes as JSON, over MaxEventSize (%d)", len(msg), MaxEventSize)
	}
	return o.layout.Emit(recordTx{o.store.In(e.tx)}, scope, outbox.Record{ID: ev.ID, Time: ev.Time, Value: value})
}

// recordTx is a transaction's view of an outbox's records (outbox.Tx).
type recordTx struct{ *Tx[outbox.Record] }

func (t recordTx) CreateFresh(key string, r outbox.Record) error { return t.createUnread(key, r, true) }

// Read yields partition's events after Seq after, in order: those not
// relayed yet and those relayed within the retention. It reads the
// partition's head first and yields no event past it, so that a reader
// that has passed Seq n never later meets a committed event below n: an
// event below the head committed before the head was read, and every
// event above it is left for a later Read. An error is yielded once and
// ends the sequence; a partition that is not one (see Event.Partition)
// matches ErrInvalidInput.
func (o *Outbox[E]) Read(ctx context.Context, partition string, after int64) iter.Seq2[Event[E], error] {
	return func(yield func(Event[E], error) bool) {
		evs, err := o.read(ctx, partition, after)
		if err != nil {
			yield(Event[E]{}, err)
			return
		}
		for _, ev := range evs {
			if !yield(ev, nil) {
				return
			}
		}
	}
}

func (o *Outbox[E]) read(ctx context.Context, partition string, after int64) ([]Event[E], error) {
	if o.err != nil {
		return nil, o.err
	}
	if err := o.layout.CheckPartition(partition); err != nil {
		return nil, err
	}
	head, err := o.store.Get(ctx, o.layout.Head(partition))
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	}
	event := func(it driver.Item) (Event[E], error) { return o.event(partition, it) }
	return outbox.Read(ctx, o.layout, o.store.core.Backend, partition, after, head.Value.Seq, event, core.IsExpired)
}

// event is it, a record of partition, as an Event (a *core.ExpiredError when
// past its retention).
func (o *Outbox[E]) event(partition string, it driver.Item) (Event[E], error) {
	d, err := o.store.decode(it)
	if err != nil {
		return Event[E]{}, err
	}
	r := d.Value
	ev := Event[E]{ID: r.ID, Partition: partition, Seq: r.Seq, Time: r.Time}
	if err := json.Unmarshal(r.Value, &ev.Value); err != nil {
		return Event[E]{}, fmt.Errorf("%w: decode event %d of %q: %v", ErrInvalidInput, r.Seq, partition, err)
	}
	return ev, nil
}

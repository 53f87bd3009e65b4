package etagstore

import (
	"bytes"
	"cmp"
	"context"
	"errors"

	"github.com/etagstore/etagstore/internal/engine"
	"github.com/etagstore/etagstore/internal/fence"
	"github.com/etagstore/etagstore/internal/plan"
	"github.com/etagstore/etagstore/internal/telemetry"
	"github.com/etagstore/etagstore/internal/updategroup"
)

// UpdateOption changes how Update behaves.
type UpdateOption func(*updateConfig)

type updateConfig struct {
	create bool
}

// CreateIfMissing makes Update create a missing document: mutate receives
// the zero T and the write is create-only, made even when mutate changes
// nothing (the zero T is then stored); if another writer creates the key
// first, Update re-reads and continues as an ordinary update.
func CreateIfMissing() UpdateOption {
	return func(c *updateConfig) { c.create = true }
}

// Update reads the document under key, applies mutate to a fresh copy and
// writes the result with If-Match of the version it read. When another
// writer got there first (HTTP 412) it re-reads, re-applies mutate and
// retries with backoff (see RetryPolicy); mutate must therefore be free of
// side effects outside *T and may run more than once.
//
// Update returns the document as it stood right after its own mutation:
//
//   - mutate returning an error aborts: nothing is written and that error is
//     returned as is. A panic in mutate is this caller's own: it leaves
//     Update unrecovered, writes nothing and leaves the key usable.
//   - a mutation that leaves the encoded document unchanged writes nothing
//     and returns the current document, confirmed by a read; with
//     CreateIfMissing, a missing key is created all the same (a mutate
//     that changes nothing creates the zero T).
//   - a missing key matches ErrNotFound, unless CreateIfMissing is given.
//   - when every attempt lost its race, a *ConflictError[T] (ErrConflict).
//   - a done ctx returns ctx.Err() when nothing was sent for this call, and
//     an *OutcomeUnknownError (ErrOutcomeUnknown) when a write holding its
//     mutation was in flight.
//   - a mutate that writes key itself, through this Store (a nested
//     Update, Replace, Upsert, Delete, Save or Create of key, made on
//     mutate's goroutine, whatever its ctx), fails the Update as soon as
//     mutate returns nil, with an error matching ErrInvalidInput that says
//     so, and nothing of this Update is sent; the nested write stays,
//     landed once. It is the caller's mistake, not contention: the nested
//     write beats this Update's, so every retry would run mutate, and
//     write, again, until the retry policy ends. Hence ErrInvalidInput,
//     which nobody retries, rather than ErrConflict, on which callers
//     retry and Transact runs its fn again. Writes by other goroutines,
//     even from inside a mutate of another key, are contention as ever.
//
// Concurrent Updates of one key in one Store are committed together (group
// commit): one read, then each caller's mutate runs in its own goroutine,
// in arrival order, on the state the one before it left, and one
// conditional write commits them all. Each caller gets the state right after
// its own mutation. A caller whose state is the version written (the last
// to change the document, and any after it that changed nothing) gets that
// version's ETag; the others get a superseded ETag (see Doc), because the
// state they hold was never stored as a version of its own: a conditional
// write with it is a *ConflictError holding the current document, and can
// never overwrite the mutations that followed.
// A failing, panicking or slow mutate fails or delays only its own caller: a
// caller whose mutate has not returned within a few milliseconds is left
// out of the batch and runs on its own afterwards. An Update nested in a
// mutate, on the same key of the same Store, is not grouped (see above).
// Options.DisableGroupCommit switches grouping off.
//
// A write whose response was lost is resolved by reading (see "Exactly
// once" in the package documentation); the mutation is never applied twice.
func (s *Store[T]) Update(ctx context.Context, key string, mutate func(*T) error, opts ...UpdateOption) (Doc[T], error) {
	var cfg updateConfig
	for _, o := range opts {
		o(&cfg)
	}
	ctx, sp := s.core.Obs.Begin(ctx, telemetry.OpUpdate, key)
	defer sp.EndOnPanic()
	// Grouped unless fenced, leased or nested in a mutate of key: a nested
	// Update's write must land on this goroutine, where the mutate it is
	// nested in sees it.
	var d Doc[T]
	err := cmp.Or(s.core.CheckKey(key), ctx.Err())
	switch {
	case err != nil:
	case s.core.Grouped && !fence.Ungrouped(ctx) && !s.core.Reentry.Inside(key):
		d, err = s.updateGrouped(ctx, key, cfg.create, mutate, &sp.Stats)
	default:
		d, err = s.updateUngrouped(ctx, key, cfg.create, mutate, nil, &sp.Stats)
	}
	sp.End(err)
	return d, err
}

// updateUngrouped runs one Update on its own: read (or start from the cached
// version), mutate, conditional write, retried. o, when set, is told when
// mutate starts and ends.
func (s *Store[T]) updateUngrouped(ctx context.Context, key string, create bool, mutate func(*T) error, o *updategroup.Group[T, Extra], st *telemetry.Stats) (Doc[T], error) {
	mut := &mutation[T]{s: s, key: key, mutate: mutate, o: o}
	res, extra, err := s.modify(ctx, telemetry.OpUpdate, key, create, s.core.Cached(ctx, key, ""), &mut.mine, mut.change, nil)
	st.Attempts, st.Batch, st.CacheHit = res.Attempts, 1, res.FromCopy
	if err != nil {
		return Doc[T]{}, err
	}
	if len(res.Sent) > 0 {
		s.core.Obs.Committed(ctx, 1)
	}
	return s.dated(Doc[T]{Key: key, Value: mut.mine, ETag: res.Out[0].ETag, Extra: extra}), nil
}

// mutation is the change of a plain Update: mutate applied to a fresh copy
// of the version's value; mine is the value it made.
type mutation[T any] struct {
	s      *Store[T]
	key    string
	mutate func(*T) error
	o      *updategroup.Group[T, Extra] // the group whose first caller it is (nil: none)
	mine   T
}

func (m *mutation[T]) change(b version) ([]byte, []byte, bool, error) {
	v, baseline, err := m.s.enc.StartFrom(b)
	if err != nil {
		return nil, nil, false, err
	}
	if m.o != nil {
		m.o.Enter()
		defer m.o.Leave()
	}
	if err := m.s.core.Reentry.Run(opUpdate, m.key, func() error { return m.mutate(v) }); err != nil { // see opUpdate
		return nil, nil, false, err
	}
	m.mine = *v
	data, err := m.s.enc.Encode(m.key, *v)
	return data, baseline, !b.Exists || !bytes.Equal(data, baseline), err
}

// opUpdate names an Update in the Reentry (internal/reentry), through
// which every mutate of an Update runs, grouped (groupWork.Mutate) or not
// (mutation.change): the Reentry sees a write of the key made from inside
// it, and returns mutate's own error, or, when mutate wrote the key
// itself (a nested Update, Replace, Upsert, Delete, Save, Create...), a
// *reentry.SelfWriteError matching ErrInvalidInput, and the Update ends
// before it sends anything. That write landed after the version mutate
// started from was read, so the Update can only lose its race to it, and
// every retry would run mutate, and write, again: the caller's mistake,
// which no retry mends. ErrInvalidInput says so; ErrConflict would
// invite the retries (a caller's loop, Transact running its fn again, an
// HTTP client told 412) that write again.
var opUpdate = telemetry.OpUpdate.String()

// modify delivers a read-modify-write of key — an Update, a Save, a
// group-commit batch — through the engine: each attempt starts from start
// (first) or a read, and ch computes the new encoding from that version
// and reports whether it differs; the change is applied to that version's
// document (codec.Of.Apply; plan.Modification). *mine is the value the last change computed, for
// a *ConflictError when every attempt lost its race. It returns the
// engine's result and the Extra of the document written.
func (s *Store[T]) modify(ctx context.Context, op telemetry.Op, key string, create bool, start []version, mine *T, ch plan.Change, f engine.Flight) (engine.Result, Extra, error) {
	m := &plan.Modification{Create: create, Change: ch, Apply: s.enc.Apply}
	res, err := s.core.Delivery(ctx, op, engine.Based, []string{key}, m, engine.Options{Start: start, Flight: f, TakeTurns: true}).Run(ctx)
	if err == nil {
		s.core.Cache.Written(res, m.Last.Canonical)
		return res, s.extraOf(res.Out[0], m.Mine), nil
	}
	if res.Raced && ctx.Err() == nil && (errors.Is(err, ErrConflict) || errors.Is(err, ErrExists)) {
		err = s.conflictNow(ctx, key, res.Held, *mine, res.Attempts)
	}
	return res, Extra{}, err
}

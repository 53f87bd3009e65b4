package etagstore

import (
	"context"
	"errors"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/engine"
	"github.com/etagstore/etagstore/internal/telemetry"
)

// Transact runs fn, which reads documents through tx and buffers writes
// in it, and commits every write fn made in one atomic, conditional
// request (tables: one entity group transaction, in one partition, at
// most 100 entities; memstore: any keys). It returns the documents fn put,
// in the order fn first touched their keys, with their new ETags.
//
// Transactions are serializable, with one exception on tables. Every
// document fn read is checked at commit, whether fn wrote it or not, so
// no two transactions can both commit on reads the other invalidated (no
// write skew): a document fn read and did not write is sent as a check of
// its ETag (on tables, a Merge Entity without properties, which gives it
// a new ETag). A Put or Delete of a key fn did not read is conditioned on
// the version tx reads for it first. A transaction that writes nothing is
// checked at one instant on a backend with pure checks (memstore), and
// otherwise by reading its documents again. The exception: on tables a
// key fn found missing and did not write cannot be checked without
// creating it, and is not checked, so two transactions that read the same
// missing keys and each create a different one can both commit (write
// skew over absent keys; make them write one document in common).
//
// When a document changed before the commit, fn runs again on fresh reads,
// after the Store's backoff, within its RetryPolicy; fn must therefore be
// free of side effects outside tx. An error Transact returns from fn was
// made on reads that were all current together: when fn returns an error
// or panics, its reads are checked first, and if one changed fn runs
// again instead. An error of fn that matches ErrConflict runs it again
// too; a refusal another run cannot change (a caller's stale version)
// must be an error of fn's own that does not match ErrConflict. Failures:
//
//   - fn's error aborts with nothing written and is returned as is; a
//     panic in fn goes on up the caller's stack, with nothing written.
//   - every attempt lost its race, while the policy's time lasted: an
//     error matching ErrConflict (never ErrExists or ErrNotFound of the
//     last refusal).
//   - every attempt was throttled: ErrUnavailable.
//   - a backend that cannot commit several documents atomically (blobs):
//     errors.ErrUnsupported, before anything is read.
//   - keys in more than one partition, or more documents than the backend
//     commits at once: ErrInvalidInput, before anything is sent.
//   - a document holding a newer fencing token than ctx's (WithFence):
//     ErrFenced. Written documents record the token.
//   - a done ctx before the commit is sent returns ctx.Err(); a commit
//     whose answer was lost is resolved by reading its documents (never
//     applied twice), and is an *OutcomeUnknownError only where no read
//     can tell.
func (s *Store[T]) Transact(ctx context.Context, fn func(tx *Tx[T]) error) ([]Doc[T], error) {
	ctx, sp := s.obs.Begin(ctx, telemetry.OpTransact, "")
	defer sp.EndOnPanic()
	docs, err := s.transact(ctx, fn, &sp.Stats)
	sp.End(err)
	return docs, err
}

func (s *Store[T]) transact(ctx context.Context, fn func(tx *Tx[T]) error, st *telemetry.Stats) ([]Doc[T], error) {
	if s.abilities.Commit == nil {
		return nil, errorf(errors.ErrUnsupported, "Transact: %s cannot commit several documents atomically", backendName(s.b))
	}
	var tx *Tx[T]
	p := engine.PlanFunc(func(d *engine.Delivery, _ []version) (request, error) {
		tx = &Tx[T]{s: s, ctx: ctx, reads: map[string]version{}, writes: map[string]txWrite[T]{}}
		if err := tx.run(fn); err != nil {
			return nil, err
		}
		req, err := tx.request(d)
		d.SetKeys(tx.order)
		return req, err
	})
	res, err := s.deliver(ctx, s.delivery(ctx, telemetry.OpTransact, engine.SelfReading, nil, p, nil, nil))
	st.Attempts = res.Attempts
	if err != nil {
		return nil, err
	}
	st.Batch = len(res.Out)
	if len(res.Sent) > 0 {
		s.obs.Committed(ctx, len(res.Out))
	}
	return tx.written(res.Out), nil
}

// run runs fn on tx. An error or a panic of fn counts only when the reads
// fn saw were current together: they are read again first, and if one
// changed fn acted on a torn view and runs again (engine.ErrStale). An
// error matching ErrConflict runs fn again too, within the policy.
func (tx *Tx[T]) run(fn func(tx *Tx[T]) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			if tx.revalidate() != nil {
				err = engine.ErrStale // a panic on a torn view: run again
				return
			}
			panic(p)
		}
	}()
	err = fn(tx)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrConflict):
		return engine.Rerun(err)
	}
	if stale := tx.revalidate(); stale != nil {
		return stale
	}
	return err
}

// Tx is one attempt of a transaction: what fn read and what it wrote. It is
// valid only during fn and, like fn, not safe for concurrent use.
type Tx[T any] struct {
	s      *Store[T]
	ctx    context.Context
	reads  map[string]version // the version read of every key touched (missing ones too)
	order  []string           // the keys touched, in order
	writes map[string]txWrite[T]
}

type txWrite[T any] struct {
	del   bool
	value T
	data  []byte
}

// Get returns the document under key as the transaction sees it: its own
// write if it made one, otherwise the version it read (read now, the first
// time). A missing document matches ErrNotFound.
func (tx *Tx[T]) Get(key string) (T, error) {
	var zero T
	if w, ok := tx.writes[key]; ok {
		if w.del {
			return zero, errorf(ErrNotFound, "%q was deleted in this transaction", key)
		}
		return w.value, nil
	}
	b, err := tx.version(key)
	if err != nil {
		return zero, err
	}
	if !b.Exists {
		return zero, b.Missing
	}
	d, err := tx.s.decode(b.Item)
	return d.Value, err
}

// Put buffers a write of v under key: a create if the transaction found it
// missing, otherwise a replace conditioned on the version it read. An
// invalid key or a value that cannot be stored is returned now.
func (tx *Tx[T]) Put(key string, v T) error {
	if _, err := tx.version(key); err != nil {
		return err
	}
	data, err := tx.s.encode(key, v)
	if err != nil {
		return err
	}
	tx.writes[key] = txWrite[T]{value: v, data: data}
	return nil
}

// Delete buffers the delete of key, conditioned on the version the
// transaction read. A key that is missing (or that this transaction
// deleted) matches ErrNotFound now; deleting a key this transaction created
// cancels its Put.
func (tx *Tx[T]) Delete(key string) error {
	b, err := tx.version(key)
	if err != nil {
		return err
	}
	if w, ok := tx.writes[key]; ok && !w.del && !b.Exists {
		delete(tx.writes, key) // created here: the delete cancels it
		return nil
	}
	if w, ok := tx.writes[key]; !b.Exists || ok && w.del {
		return errorf(ErrNotFound, "%q", key)
	}
	tx.writes[key] = txWrite[T]{del: true}
	return nil
}

// ETag returns the ETag of the version of key the transaction read (read
// now, the first time), or "" when the key was missing: what a caller
// holding a version from an earlier read (a docstore revision, say) checks
// it against inside the transaction. The check is part of the commit: a
// version that changes before it commits makes fn run again. An invalid
// key matches ErrInvalidKey.
func (tx *Tx[T]) ETag(key string) (ETag, error) {
	b, err := tx.version(key)
	if err != nil || !b.Exists {
		return "", err
	}
	return b.ETag, nil
}

// version returns the version of key the transaction read, reading it the
// first time.
func (tx *Tx[T]) version(key string) (version, error) {
	if b, ok := tx.reads[key]; ok {
		return b, nil
	}
	if err := tx.s.checkKey(key); err != nil {
		return version{}, err
	}
	if err := tx.ctx.Err(); err != nil {
		return version{}, err
	}
	b, err := hooks{&tx.s.core}.Read(tx.ctx, key)
	if err != nil {
		return version{}, err
	}
	tx.reads[key], tx.order = b, append(tx.order, key)
	return b, nil
}

// request is the commit of the transaction: every key it touched, in
// order — its write, or a check of the version it read. A transaction
// that writes nothing has nothing to send: its reads are checked by
// reading again (engine.ErrStale when one changed).
func (tx *Tx[T]) request(d *engine.Delivery) (request, error) {
	_, fenced := FenceFrom(tx.ctx)
	req := make(request, 0, len(tx.order))
	for _, key := range tx.order {
		b := tx.reads[key]
		if fenced {
			if err := engine.CheckFence(key, b.Meta, d.Fence()); err != nil {
				return nil, err
			}
		}
		w, written := tx.writes[key]
		switch {
		case !written:
			req = append(req, engine.Check(b))
		case w.del:
			req = append(req, engine.DeleteOf(key, b.ETag))
		default:
			req = append(req, d.Over(b, withExtra(b, w.data)))
		}
	}
	if len(tx.writes) == 0 {
		return nil, tx.revalidate()
	}
	if chk := tx.s.abilities.CheckCommit; chk != nil {
		if err := chk(req.Actions()); err != nil {
			return nil, err
		}
	}
	return req, nil
}

// revalidate checks that every read of tx is still current (engine.ErrStale
// when one is not). On a backend with PureChecks it commits checks of
// them all, which write nothing: all were current at that instant,
// absences included. Otherwise it reads every key again: a document
// whose ETag did not change was current throughout, but a key missing
// at both reads may have existed between them.
func (tx *Tx[T]) revalidate() error {
	if a := tx.s.abilities; a.PureChecks && a.Commit != nil {
		if len(tx.order) == 0 {
			return nil
		}
		checks := make([]driver.Action, len(tx.order))
		for i, key := range tx.order {
			checks[i] = engine.Check(tx.reads[key]).Action
		}
		_, err := a.Commit(tx.ctx, checks)
		if errors.Is(err, ErrConflict) || errors.Is(err, ErrExists) || errors.Is(err, ErrNotFound) {
			return engine.ErrStale
		}
		return err
	}
	for _, key := range tx.order {
		it, err := tx.s.b.Read(tx.ctx, key)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		if b := tx.reads[key]; b.Exists != (err == nil) || b.ETag != it.ETag {
			return engine.ErrStale
		}
	}
	return nil
}

// written is the documents the transaction put, with the versions out
// (the engine's, in request order) says they have.
func (tx *Tx[T]) written(out []driver.Item) []Doc[T] {
	var docs []Doc[T]
	for i, key := range tx.order {
		w, ok := tx.writes[key]
		if !ok || w.del {
			continue
		}
		d := Doc[T]{Key: key, Value: w.value}
		if i < len(out) {
			d.ETag, d.Extra = out[i].ETag, extraOf(out[i], tx.s.known)
		}
		docs = append(docs, d)
	}
	return docs
}

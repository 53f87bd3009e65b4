package etagstore

import (
	"bytes"
	"context"
	"errors"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/meta"
)

// UpdateOption changes how Update behaves.
type UpdateOption func(*updateConfig)

type updateConfig struct {
	create bool
}

// CreateIfMissing makes Update create a missing document: mutate receives
// the zero T and the write is create-only; if another writer creates the
// key first, Update re-reads and continues as an ordinary update.
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
//     and returns the current document, confirmed by a read.
//   - a missing key matches ErrNotFound, unless CreateIfMissing is given.
//   - when every attempt lost its race, a *ConflictError[T] (ErrConflict).
//   - a done ctx returns ctx.Err() when nothing was sent for this call, and
//     an *OutcomeUnknownError (ErrOutcomeUnknown) when a write holding its
//     mutation was in flight.
//
// Concurrent Updates of one key in one Store are committed together (group
// commit): one read, then each caller's mutate runs in its own goroutine,
// in arrival order, on the state the one before it left, and one
// conditional write commits them all. Each caller gets the state right after
// its own mutation. A caller whose state is the version written (the last
// to change the document, and any after it that changed nothing) gets that
// version's ETag; the others get an empty ETag, because the state they hold
// was never stored as a version of its own (Get the document to write on
// from it; an empty ETag can never overwrite the mutations that followed).
// A failing, panicking or slow mutate fails or delays only its own caller: a
// caller whose mutate has not returned within a few milliseconds is left
// out of the batch and runs on its own afterwards, which also makes an
// Update nested in a mutate, on the same key of the same Store, work as it
// does without group commit. Options.DisableGroupCommit turns grouping off.
//
// A write whose response was lost is resolved by reading (see "Exactly
// once" in the package documentation); the mutation is never applied twice.
func (s *Store[T]) Update(ctx context.Context, key string, mutate func(*T) error, opts ...UpdateOption) (Doc[T], error) {
	var cfg updateConfig
	for _, o := range opts {
		o(&cfg)
	}
	ctx, sp := s.obs.begin(ctx, opUpdate, key)
	defer sp.endOnPanic()
	d, err := s.update(ctx, key, cfg.create, mutate, &sp.stats)
	sp.end(err)
	return d, err
}

func (s *Store[T]) update(ctx context.Context, key string, create bool, mutate func(*T) error, st *opStats) (Doc[T], error) {
	if err := s.checkKey(key); err != nil {
		return Doc[T]{}, err
	}
	if err := ctx.Err(); err != nil {
		return Doc[T]{}, err
	}
	if s.grouped && !isUngrouped(ctx) {
		return s.updateGrouped(ctx, key, create, mutate, st)
	}
	return s.updateAlone(ctx, key, create, mutate, solo[T]{}, st)
}

// updateAlone runs one Update on its own: read, mutate, conditional write,
// retried. o, when set, is told when mutate starts and ends.
func (s *Store[T]) updateAlone(ctx context.Context, key string, create bool, mutate func(*T) error, o solo[T], st *opStats) (Doc[T], error) {
	e := s.newRMW(ctx, "Update", key, create, nil)
	e.mutate, e.solo = mutate, o
	if s.cache != nil {
		start, ok := s.cache.get(key)
		if ok {
			e.setNext(version{Item: start, exists: true, meta: meta.Parse(start.Meta), metaKnown: true, canonical: s.verbatim})
		}
		s.obs.cacheLookup(ctx, ok, false)
	}
	out, err := e.run(ctx)
	st.attempts, st.batch, st.cacheHit = e.attempts, 1, e.cachedWon
	if err != nil {
		return Doc[T]{}, err
	}
	return Doc[T]{Key: key, Value: e.mine, ETag: out.etag}, nil
}

// applyMutate is the apply step of a plain Update: mutate a fresh copy of
// b's value.
func (e *rmw[T]) applyMutate(b version) ([]byte, bool, error) {
	v, baseline, err := e.s.startFrom(b)
	if err != nil {
		return nil, false, err
	}
	if e.solo.g != nil {
		e.solo.enter()
		defer e.solo.leave()
	}
	if err := e.mutate(v); err != nil {
		return nil, false, err
	}
	e.mine = *v
	data, err := e.s.encode(e.key, *v)
	return data, !b.exists || !bytes.Equal(data, baseline), err
}

// startFrom decodes the base version b into a fresh value for a mutation,
// and returns the encoding an unchanged value would have, taken before the
// mutation runs (it may change maps or pointers the value shares).
func (s *Store[T]) startFrom(b version) (v *T, baseline []byte, err error) {
	v = new(T)
	if !b.exists {
		return v, nil, nil
	}
	if err := s.codec.Unmarshal(b.Data, v); err != nil {
		return v, nil, decodeError(b.Key, err)
	}
	if b.canonical {
		return v, b.Data, nil
	}
	baseline, err = s.encode(b.Key, *v)
	return v, baseline, err
}

// version is the base an attempt of a read-modify-write starts from.
type version struct {
	driver.Item
	meta      meta.Meta
	exists    bool
	verified  bool  // read during this call: current at some instant of it
	metaKnown bool  // false for Save's base, whose bookkeeping the caller does not hold
	canonical bool  // Data is exactly what the codec makes of its value
	missing   error // why it does not exist, when read so (matches ErrNotFound)
}

// ended is how a read-modify-write ended well.
type ended struct {
	etag ETag        // of the version holding the change; "" when later writes followed it
	item driver.Item // the version stored, when etag is set
}

// rmw is one read-modify-write — an Update, a Save, a fenced Replace or a
// group-commit batch — run by retry as a short sequence of named steps:
// base (read, unless a version is already known), apply (the caller's
// change), send (the conditional write) and settle (resolve a lost answer
// by reading).
type rmw[T any] struct {
	s      *Store[T]
	op     string
	key    string
	create bool
	fence  int64
	fenced bool
	// apply computes the new encoding from base b and reports whether it
	// differs from b's. The typed results stay with the caller. Nil means
	// applyMutate: run mutate (with hooks) on a copy of b's value.
	apply  func(b version) (data []byte, changed bool, err error)
	mutate func(*T) error
	solo   solo[T] // set for the first caller of an idle key (group.go)
	// mine is the value the last apply computed, for the result and a
	// *ConflictError.
	mine T
	// sending, when set, is told that a write holding the applied changes
	// is about to be sent (true) or was refused (false); it may veto the
	// send (a group member gave up), and the attempt then starts again.
	sending func(bool) bool

	next    version   // the base of the next attempt when hasNext: known without a read
	hasNext bool      //
	resend  sentWrite // a write whose answer was lost and has not landed yet, when resending
	refused sentWrite // the last write refused with 412, checked by the next read, when checkRefused

	resending, checkRefused bool
	lost                    error // what lost the answer of the unsettled write
	raced                   bool  // the last write lost a race
	attempts                int   // how many attempts run made
	cachedWon               bool  // the first write, on a version not read, went through
	held                    ETag  // the ETag the last write was conditioned on
	out                     ended
}

func (s *Store[T]) newRMW(ctx context.Context, op, key string, create bool, apply func(version) ([]byte, bool, error)) *rmw[T] {
	fence, fenced := FenceFrom(ctx)
	return &rmw[T]{s: s, op: op, key: key, create: create, fence: fence, fenced: fenced, apply: apply}
}

// setNext makes b the base of the next attempt.
func (e *rmw[T]) setNext(b version) { e.next, e.hasNext = b, true }

// run runs the read-modify-write under the Store's retry policy.
func (e *rmw[T]) run(ctx context.Context) (ended, error) {
	if e.fenced {
		e.hasNext = false // the token is checked against a version read now
	}
	attempts, err := retry(ctx, e.s.retry, e.s.clock, e.attempt, e.s.heat.warmth(e.key), e.s.obs, e.op)
	e.s.heat.observe(e.key, attempts)
	e.attempts = attempts
	switch {
	case err == nil:
		if e.out.etag != "" {
			e.s.cache.put(e.key, e.out.item)
		}
		return e.out, nil
	case e.lost != nil:
		if errors.Is(err, ErrOutcomeUnknown) {
			return ended{}, err
		}
		return ended{}, outcomeUnknown(e.op, e.key, errors.Join(e.lost, err))
	case e.raced && ctx.Err() == nil && (errors.Is(err, ErrConflict) || errors.Is(err, ErrExists)):
		return ended{}, e.s.conflictNow(ctx, e.key, e.held, e.mine, attempts)
	}
	return ended{}, err
}

// attempt is one step of the retry loop.
func (e *rmw[T]) attempt(ctx context.Context, n int) (next, error) {
	if e.raced {
		e.s.obs.absorbedConflict(ctx) // the last attempt's 412, retried now
		e.raced = false
	}
	if e.resending {
		e.resending = false
		// A write whose answer was lost goes again as it is; one refused
		// unapplied goes again unless a group member it holds has left.
		if e.lost != nil || e.sending == nil || e.sending(true) {
			return e.send(ctx, e.resend, true)
		}
	}
	b, err := e.base(ctx)
	if err != nil {
		return stop, err
	}
	if e.refusedLanded(b) {
		return stop, nil
	}
	if err := e.admit(b); err != nil {
		return stop, err
	}
	data, changed, err := e.change(b)
	if err != nil {
		return stop, err
	}
	if !changed {
		return e.confirm(ctx, b)
	}
	if err := ctx.Err(); err != nil {
		return stop, err // nothing sent; run reports an unsettled earlier write as unknown
	}
	if e.sending != nil && !e.sending(true) {
		e.setNext(b) // a member left the batch: apply it again without
		return redo, nil
	}
	return e.send(ctx, e.write(b, data), b.verified)
}

// refusedLanded reports whether the last write refused with 412 is found in
// b after all: the 412 answered a retry, by a layer below, of this very
// write after its answer was lost.
func (e *rmw[T]) refusedLanded(b version) bool {
	if !e.checkRefused || !b.verified {
		return false
	}
	e.checkRefused = false
	if b.exists && resolve(e.refused, observe(b.Item, nil)) == committed {
		e.out = foundIn(e.refused, b.Item, b.meta)
		return true
	}
	if e.sending != nil {
		e.sending(false) // now known not to have landed
	}
	return false
}

// admit checks that a change may be made to b: it exists (or may be
// created) and no newer fencing token holds it.
func (e *rmw[T]) admit(b version) error {
	if !b.exists && !e.create {
		if b.missing != nil {
			return b.missing // the read's ErrNotFound, in the backend's words
		}
		return errorf(ErrNotFound, "%q", e.key)
	}
	if e.fenced {
		return checkFence(e.key, b.meta, e.fence)
	}
	return nil
}

// change runs the apply step on b.
func (e *rmw[T]) change(b version) ([]byte, bool, error) {
	if e.apply != nil {
		return e.apply(b)
	}
	return e.applyMutate(b)
}

// base returns the version the attempt starts from: the one already known,
// or a read.
func (e *rmw[T]) base(ctx context.Context) (version, error) {
	if e.hasNext {
		e.hasNext = false
		return e.next, nil
	}
	it, err := e.s.b.Read(ctx, e.key)
	e.s.cache.note(e.key, it, err)
	switch {
	case err == nil:
		return version{Item: it, meta: meta.Parse(it.Meta), exists: true, verified: true, metaKnown: true, canonical: e.s.verbatim}, nil
	case errors.Is(err, ErrNotFound):
		return version{Item: driver.Item{Key: e.key}, verified: true, metaKnown: true, missing: err}, nil
	}
	return version{}, err
}

// confirm ends an attempt whose change left b unchanged: nothing is
// written. A version not read during this call is confirmed by a read
// first; if it moved on, the change is applied again to the new one.
func (e *rmw[T]) confirm(ctx context.Context, b version) (next, error) {
	if !b.verified {
		cur, err := e.base(ctx)
		if err != nil {
			return stop, err
		}
		if cur.exists != b.exists || cur.ETag != b.ETag {
			e.setNext(cur) // moved on: apply the change to the current version
			return redo, nil
		}
	}
	e.out = ended{etag: b.ETag, item: b.Item}
	return stop, nil
}

// write builds the conditional write of data over b: create-only when b
// is missing, otherwise If-Match b's ETag continuing b's history (or
// starting a new one when b's bookkeeping is unknown).
func (e *rmw[T]) write(b version, data []byte) sentWrite {
	switch {
	case !b.exists:
		return newSentWrite(driver.Cond{Kind: driver.CondCreate}, data, meta.Fresh(meta.NewID(), e.fence))
	case !b.metaKnown:
		return newSentWrite(driver.IfMatch(b.ETag), data, meta.Fresh(meta.NewID(), e.fence))
	}
	return newSentWrite(driver.IfMatch(b.ETag), data, b.meta.Then("", e.s.keepIDs, e.fence))
}

// send sends w. A lost answer (or any failure of a write sent again after
// one) is settled by reading; a lost race is retried after a pause, at once
// when the base was only a copy (verified false).
func (e *rmw[T]) send(ctx context.Context, w sentWrite, verified bool) (next, error) {
	if err := ctx.Err(); err != nil {
		return stop, err // nothing sent; run reports an unsettled earlier write as unknown
	}
	e.held = w.w.Cond.ETag
	etag, err := e.s.b.Write(ctx, e.key, w.w)
	switch {
	case err == nil:
		e.lost = nil
		e.out = ended{etag: etag, item: driver.Item{Key: e.key, Data: w.w.Data, Meta: w.w.Meta, ETag: etag}}
		e.cachedWon = !verified
		return stop, nil
	case e.lost != nil || ambiguous(err):
		if e.lost == nil {
			e.lost = err
		}
		return e.settle(ctx, w)
	}
	return e.refusal(ctx, w, verified, err)
}

// refusal acts on a definite refusal of w: a lost race is retried (at once
// when the base was only a copy); anything else ends the call with err
// (a 404 to an If-Match write: deleted meanwhile; to a create: no table or
// container).
func (e *rmw[T]) refusal(ctx context.Context, w sentWrite, verified bool, err error) (next, error) {
	conflict := errors.Is(err, ErrConflict)
	switch {
	case errors.Is(err, driver.ErrNotApplied):
		// Refused unapplied (throttled): the same write again after a
		// pause; nothing changed, so it needs no new read.
		if e.sending != nil {
			e.sending(false)
		}
		e.resend, e.resending = w, true
		return afterPause, err
	case !verified && (conflict || errors.Is(err, ErrNotFound)):
		e.s.cache.drop(e.key)
		e.refused, e.checkRefused = w, true
		if conflict {
			e.s.obs.absorbedConflict(ctx)
		}
		return now, err // the copy was stale: read and try again at once
	case conflict, errors.Is(err, ErrExists), errors.Is(err, ErrNotFound) && e.create && w.w.Cond.Kind != driver.CondCreate:
		// Refused; the next read also checks that the refusal was not the
		// answer to a lower layer's retry of this very write (the batch's
		// write counts as in flight until then).
		e.raced, e.refused, e.checkRefused = true, w, true
		return afterPause, err
	}
	if e.sending != nil {
		e.sending(false)
	}
	return stop, err
}

// settle reads after w's answer was lost and acts on resolve's verdict.
func (e *rmw[T]) settle(ctx context.Context, w sentWrite) (next, error) {
	it, o, v, err := e.s.readAfterLoss(ctx, e.op, e.key, w, e.lost)
	if err != nil {
		return stop, err
	}
	switch v {
	case committed:
		e.lost = nil
		e.out = foundIn(w, it, o.Meta)
		return stop, nil
	case notLanded:
		e.resend, e.resending = w, true
		return now, outcomeUnknown(e.op, e.key, e.lost)
	case notApplied:
		e.lost = nil
		if e.sending != nil {
			e.sending(false)
		}
		e.setNext(version{Item: it, meta: o.Meta, exists: true, verified: true, metaKnown: true, canonical: e.s.verbatim})
		e.raced = true
		return afterPause, errorf(ErrConflict, "%q moved on", e.key)
	}
	return stop, outcomeUnknown(e.op, e.key, e.lost)
}

package etagstore

import (
	"context"
	"errors"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/codec"
	"github.com/etagstore/etagstore/internal/engine"
	"github.com/etagstore/etagstore/internal/extra"
	"github.com/etagstore/etagstore/internal/plan"
	"github.com/etagstore/etagstore/internal/telemetry"
)

// This file holds the single-document writes — Create, Replace, Upsert and
// Delete — as the engine (internal/engine) delivers them: blind (the same
// request on every attempt) or conditioned on a version read (fenced).

// Create stores v under key only if the key does not exist yet (If-None-Match:
// * on blobs, Insert Entity on tables). An existing key matches ErrExists;
// with a fencing token (WithFence) lower than the one a fenced Delete of
// the key kept, ErrFenced.
// A create whose response was lost is resolved by reading: if the stored
// document is this call's, Create succeeds; if no read can tell, the error
// is an *OutcomeUnknownError (ErrOutcomeUnknown).
func (s *Store[T]) Create(ctx context.Context, key string, v T) (Doc[T], error) {
	ctx, sp := s.core.Obs.Begin(ctx, telemetry.OpCreate, key)
	d, err := s.create(ctx, key, v)
	sp.End(err)
	return d, err
}

func (s *Store[T]) create(ctx context.Context, key string, v T) (Doc[T], error) {
	if err := s.core.CheckKey(key); err != nil {
		return Doc[T]{}, err
	}
	data, err := s.enc.Encode(key, v)
	if err != nil {
		return Doc[T]{}, err
	}
	fence, _ := FenceFrom(ctx)
	w := engine.Fresh(key, driver.Cond{Kind: driver.CondCreate}, data, fence).Replacing(version{Item: driver.Item{Key: key}})
	it, err := s.core.Blind(ctx, telemetry.OpCreate, w)
	if errors.Is(err, ErrExists) && s.core.Life != nil {
		it, err = s.core.Based(ctx, telemetry.OpCreate, key, plan.CreateOver(key, data, fence), nil) // over an expired version? A live one matches ErrExists
	}
	if err != nil {
		return Doc[T]{}, err
	}
	return s.dated(Doc[T]{Key: key, Value: v, ETag: it.ETag, Extra: s.extraOf(driver.Item{Key: key, Data: data, ETag: it.ETag, Meta: it.Meta}, nil)}), nil
}

// Replace writes d.Value under d.Key only if the stored ETag is still d.ETag
// (If-Match). A Doc a read or write returned writes its change to the
// document it was read from (d.Extra): what T does not know, at any depth,
// and what d.Value did not change stay as stored; a Doc built by hand
// writes T alone (see Doc).
//
// d.ETag == ETagAny is the last-writer-wins opt-out, and still requires
// the document to exist. With a Doc a read or write returned, Replace
// reads the current version and writes the Doc's change onto it,
// conditioned on that version (read again on a race): the caller's
// change wins, and what others changed since the Doc's read stays. A Doc
// built by hand overwrites whatever is stored with T.
//
// An empty ETag matches ErrETagRequired and nothing is sent; a stale ETag
// returns a *ConflictError[T] (matching ErrConflict) holding the current
// document; a missing document matches ErrNotFound. A write whose response
// was lost is resolved by reading; where no read can tell, the error is an
// *OutcomeUnknownError.
func (s *Store[T]) Replace(ctx context.Context, d Doc[T]) (Doc[T], error) {
	ctx, sp := s.core.Obs.Begin(ctx, telemetry.OpReplace, d.Key)
	d, err := s.replace(ctx, d)
	sp.End(err)
	return d, err
}

func (s *Store[T]) replace(ctx context.Context, d Doc[T]) (Doc[T], error) {
	if err := s.core.CheckKey(d.Key); err != nil {
		return Doc[T]{}, err
	}
	if d.ETag == "" {
		return Doc[T]{}, errorf(ErrETagRequired, "Replace %q", d.Key)
	}
	mine, err := s.enc.Encode(d.Key, d.Value)
	if err != nil {
		return Doc[T]{}, err
	}
	w, err := s.onto(d.Key, d.ETag, d.Extra, mine)
	if err != nil {
		return Doc[T]{}, err
	}
	var it driver.Item
	if _, fenced := FenceFrom(ctx); fenced || d.ETag == ETagAny && d.Extra.x.Base != "" || s.idx != nil && !d.Extra.x.At(d.ETag) {
		// Read first, and write the Doc's change onto the version read,
		// conditioned on it: with ETagAny, a version other writers made
		// since the Doc's read keeps their changes.
		it, err = s.conditioned(ctx, telemetry.OpReplace, d.Key, d.ETag, d.Value, func(e *engine.Delivery, b version) (keyWrite, error) {
			if w, err = s.changeOnto(b, d.Extra, mine); err != nil {
				return keyWrite{}, err
			}
			if !fenced { // an unfenced Replace starts a new history, as a blind one does (see WithFence)
				return w.Fresh(d.Key, b.ETag).Replacing(b), nil
			}
			return w.Over(e, b), nil
		})
	} else {
		it, err = s.replaceOn(ctx, d, w)
	}
	if err != nil {
		return Doc[T]{}, err
	}
	return s.dated(Doc[T]{Key: d.Key, Value: d.Value, ETag: it.ETag, Extra: s.extraOf(driver.Item{Key: d.Key, Data: w.Data, ETag: it.ETag, Meta: it.Meta}, mine)}), nil
}

// replaceOn writes w, d's value over the version its ETag names, with
// that ETag as the condition and no read; a refusal is told as a
// conflict with the document stored now (refused).
func (s *Store[T]) replaceOn(ctx context.Context, d Doc[T], w codec.Written) (driver.Item, error) {
	fresh := w.Fresh(d.Key, d.ETag)
	if d.Extra.x.At(d.ETag) { // the version it replaces is the Doc's read (an index's base)
		b := s.core.Life.Judged(version{Item: driver.Item{Key: d.Key, Data: []byte(d.Extra.x.Stored()), ETag: d.ETag}, Exists: true})
		if !b.Exists {
			return driver.Item{}, b.Missing // expired since it was read
		}
		fresh = fresh.Replacing(b)
	}
	it, err := s.core.Blind(ctx, telemetry.OpReplace, fresh)
	if errors.Is(err, ErrConflict) {
		err = s.refused(ctx, d.Key, d.ETag, d.Value)
	}
	return it, err
}

// onto is the write of mine, T's encoding of a Doc's value, over the
// document x holds (extra.Onto).
func (s *Store[T]) onto(key string, etag ETag, x Extra, mine []byte) (codec.Written, error) {
	return extra.Onto(s.enc, key, etag, x.x, mine)
}

// changeOnto is the write of mine, T's encoding of a Doc's value, over b,
// a version of the Doc's key read just now (extra.ChangeOnto).
func (s *Store[T]) changeOnto(b version, x Extra, mine []byte) (codec.Written, error) {
	return extra.ChangeOnto(s.enc, b, x.x, mine)
}

// conditioned delivers a write of key conditioned on the version it
// reads, which must hold held (ETagAny: any version): a fenced Replace or
// Delete, a table merge. write builds the request over the version read.
// A version that holds another ETag is a *ConflictError; a lost race with
// ETagAny is retried on the new version.
func (s *Store[T]) conditioned(ctx context.Context, op telemetry.Op, key string, held ETag, mine T, write func(*engine.Delivery, version) (keyWrite, error)) (driver.Item, error) {
	conflict := func(b version, attempts int) error { return s.conflictWith(b.Item, held, mine, attempts) }
	p := plan.Conditioned(key, held, conflict, write)
	res, err := s.core.Deliver(ctx, s.core.Delivery(ctx, op, engine.Based, []string{key}, p, engine.Options{}))
	if err != nil && res.Raced && ctx.Err() == nil && errors.Is(err, ErrConflict) {
		err = s.conflictNow(ctx, key, res.Held, mine, res.Attempts) // every attempt lost its race
	}
	if err != nil {
		return driver.Item{}, err
	}
	return res.Out[0], nil
}

// Upsert stores v under key whether or not it exists and whatever its ETag
// (Insert or Replace Entity; an unconditional blob upload). It is the
// documented bypass of the concurrency check: the last writer wins. A
// fenced context (WithFence) matches ErrInvalidInput: Upsert checks nothing.
// A lost response is resolved by reading; where no read can tell, the error
// is an *OutcomeUnknownError.
func (s *Store[T]) Upsert(ctx context.Context, key string, v T) (Doc[T], error) {
	ctx, sp := s.core.Obs.Begin(ctx, telemetry.OpUpsert, key)
	d, err := s.upsert(ctx, key, v)
	sp.End(err)
	return d, err
}

func (s *Store[T]) upsert(ctx context.Context, key string, v T) (Doc[T], error) {
	if err := s.core.CheckKey(key); err != nil {
		return Doc[T]{}, err
	}
	if _, fenced := FenceFrom(ctx); fenced {
		return Doc[T]{}, errorf(ErrInvalidInput, "Upsert %q checks nothing and cannot honour a fencing token; use Update or Replace with ETagAny", key)
	}
	data, err := s.enc.Encode(key, v)
	if err != nil {
		return Doc[T]{}, err
	}
	var it driver.Item
	if s.idx.KeepsEntries() {
		it, err = s.core.Based(ctx, telemetry.OpUpsert, key, plan.UpsertOver(key, data), s.core.Cached(ctx, key, "")) // the entries need the version it replaces
	} else {
		it, err = s.core.Blind(ctx, telemetry.OpUpsert, engine.Fresh(key, driver.Cond{Kind: driver.CondNone}, data, 0))
	}
	if err != nil {
		return Doc[T]{}, err
	}
	return s.dated(Doc[T]{Key: key, Value: v, ETag: it.ETag, Extra: s.extraOf(driver.Item{Key: key, Data: data, ETag: it.ETag, Meta: it.Meta}, nil)}), nil
}

// Delete removes key only if its stored ETag is still etag (If-Match);
// ETagAny deletes whatever version is stored.
//
// An empty etag matches ErrETagRequired and nothing is sent; a stale etag
// returns a *ConflictError[T] holding the current document; a missing key
// matches ErrNotFound. A delete whose response was lost is sent again only
// while a read shows the version it names; a key found gone (by this delete
// or another) or holding another version is an *OutcomeUnknownError.
// A fenced Delete (WithFence) reads first and deletes the version whose
// token it checked; with ETagAny, a version that changes meanwhile is
// checked and deleted in its turn. The key keeps the token once the
// document is gone: a fenced create carrying a lower one matches ErrFenced
// (see WithFence).
func (s *Store[T]) Delete(ctx context.Context, key string, etag ETag) error {
	ctx, sp := s.core.Obs.Begin(ctx, telemetry.OpDelete, key)
	err := s.delete(ctx, key, etag)
	sp.End(err)
	return err
}

func (s *Store[T]) delete(ctx context.Context, key string, etag ETag) error {
	if err := s.core.CheckKey(key); err != nil {
		return err
	}
	if etag == "" {
		return errorf(ErrETagRequired, "Delete %q", key)
	}
	start := s.core.Cached(ctx, key, etag) // an index's base, when the cache holds it
	s.core.Cache.Drop(key)
	if _, fenced := FenceFrom(ctx); fenced || s.idx != nil && start == nil {
		_, err := s.conditioned(ctx, telemetry.OpDelete, key, etag, *new(T), func(e *engine.Delivery, b version) (keyWrite, error) {
			return e.DeleteOver(b, s.core.Abilities.Tombstones), nil
		})
		return err
	}
	w := engine.DeleteOf(key, etag)
	if s.idx != nil {
		if !start[0].Exists {
			return start[0].Missing // the version named has expired
		}
		w = w.Replacing(start[0])
	}
	_, err := s.core.Blind(ctx, telemetry.OpDelete, w)
	if errors.Is(err, ErrConflict) {
		return s.refused(ctx, key, etag, *new(T))
	}
	return err
}

// refused is the error of a Replace or Delete holding held that was
// refused with 412. With ETagAny that can only mean the document was
// missing (Azure blobs answer 412 to If-Match: * on a missing blob).
func (s *Store[T]) refused(ctx context.Context, key string, held ETag, mine T) error {
	if held == ETagAny {
		return errorf(ErrNotFound, "%q", key)
	}
	return s.conflictNow(ctx, key, held, mine, 1)
}

// conflictNow builds the *ConflictError of a write or delete holding held
// that was refused with 412, from the current version; a document found
// gone matches ErrNotFound (Azure blobs answer 412 for both).
func (s *Store[T]) conflictNow(ctx context.Context, key string, held ETag, mine T, attempts int) error {
	it, err := s.core.Backend.Read(ctx, key)
	s.core.Cache.Note(key, it, err)
	switch {
	case errors.Is(err, ErrNotFound):
		return errorf(ErrNotFound, "%q was deleted", key)
	case err != nil:
		return errorf(ErrConflict, "%q changed (reading the current version failed: %v)", key, err)
	}
	return s.conflictWith(it, held, mine, attempts)
}

// conflictWith builds the *ConflictError for a write holding ETag held that
// found it, the current version.
func (s *Store[T]) conflictWith(it driver.Item, held ETag, mine T, attempts int) error {
	theirs, err := s.decode(it)
	if err != nil {
		return err // an expired version: ErrNotFound
	}
	return &ConflictError[T]{Key: it.Key, ETag: held, Mine: mine, Theirs: theirs, Attempts: attempts}
}

package etagstore

import (
	"context"
	"errors"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/meta"
)

// This file holds the single-request writes — Create, Replace, Upsert and
// Delete — and send, the loop they share: send the request, and when its
// answer is lost, read and let resolve (resolve.go) decide.

// Create stores v under key only if the key does not exist yet (If-None-Match:
// * on blobs, Insert Entity on tables). An existing key matches ErrExists.
// A create whose response was lost is resolved by reading: if the stored
// document is this call's, Create succeeds; if no read can tell, the error
// is an *OutcomeUnknownError (ErrOutcomeUnknown).
func (s *Store[T]) Create(ctx context.Context, key string, v T) (Doc[T], error) {
	ctx, sp := s.obs.begin(ctx, opCreate, key)
	d, err := s.create(ctx, key, v)
	sp.end(err)
	return d, err
}

func (s *Store[T]) create(ctx context.Context, key string, v T) (Doc[T], error) {
	if err := s.checkKey(key); err != nil {
		return Doc[T]{}, err
	}
	data, err := s.encode(key, v)
	if err != nil {
		return Doc[T]{}, err
	}
	fence, _ := FenceFrom(ctx)
	etag, err := s.send(ctx, "Create", key, newSentWrite(driver.Cond{Kind: driver.CondCreate}, data, meta.Fresh(meta.NewID(), fence)))
	if err != nil {
		return Doc[T]{}, err
	}
	return Doc[T]{Key: key, Value: v, ETag: etag}, nil
}

// Replace writes d.Value under d.Key only if the stored ETag is still d.ETag
// (If-Match). d.ETag == ETagAny overwrites whatever is stored (last writer
// wins) but still requires the document to exist.
//
// An empty ETag matches ErrETagRequired and nothing is sent; a stale ETag
// returns a *ConflictError[T] (matching ErrConflict) holding the current
// document; a missing document matches ErrNotFound. A write whose response
// was lost is resolved by reading; where no read can tell, the error is an
// *OutcomeUnknownError.
func (s *Store[T]) Replace(ctx context.Context, d Doc[T]) (Doc[T], error) {
	ctx, sp := s.obs.begin(ctx, opReplace, d.Key)
	d, err := s.replace(ctx, d)
	sp.end(err)
	return d, err
}

func (s *Store[T]) replace(ctx context.Context, d Doc[T]) (Doc[T], error) {
	if err := s.checkKey(d.Key); err != nil {
		return Doc[T]{}, err
	}
	if d.ETag == "" {
		return Doc[T]{}, errorf(ErrETagRequired, "Replace %q", d.Key)
	}
	if _, fenced := FenceFrom(ctx); fenced {
		return s.replaceFenced(ctx, d)
	}
	data, err := s.encode(d.Key, d.Value)
	if err != nil {
		return Doc[T]{}, err
	}
	etag, err := s.send(ctx, "Replace", d.Key, newSentWrite(driver.IfMatch(d.ETag), data, meta.Fresh(meta.NewID(), 0)))
	if errors.Is(err, ErrConflict) {
		return Doc[T]{}, s.refused(ctx, d.Key, d.ETag, d.Value)
	}
	if err != nil {
		return Doc[T]{}, err
	}
	return Doc[T]{Key: d.Key, Value: d.Value, ETag: etag}, nil
}

// replaceFenced checks the fencing token against the stored version and
// writes with If-Match of the version it checked, so the check is atomic.
func (s *Store[T]) replaceFenced(ctx context.Context, d Doc[T]) (Doc[T], error) {
	e := s.newRMW(ctx, "Replace", d.Key, false, func(b version) ([]byte, bool, error) {
		if d.ETag != ETagAny && b.ETag != d.ETag {
			return nil, false, s.conflictWith(b.Item, d.ETag, d.Value, 1)
		}
		data, err := s.encode(d.Key, d.Value)
		return data, true, err
	})
	e.mine = d.Value
	out, err := e.run(ctx)
	if err != nil {
		return Doc[T]{}, err
	}
	return Doc[T]{Key: d.Key, Value: d.Value, ETag: out.etag}, nil
}

// Upsert stores v under key whether or not it exists and whatever its ETag
// (Insert or Replace Entity; an unconditional blob upload). It is the
// documented bypass of the concurrency check: the last writer wins. A
// fenced context (WithFence) matches ErrInvalidInput: Upsert checks nothing.
// A lost response is resolved by reading; where no read can tell, the error
// is an *OutcomeUnknownError.
func (s *Store[T]) Upsert(ctx context.Context, key string, v T) (Doc[T], error) {
	ctx, sp := s.obs.begin(ctx, opUpsert, key)
	d, err := s.upsert(ctx, key, v)
	sp.end(err)
	return d, err
}

func (s *Store[T]) upsert(ctx context.Context, key string, v T) (Doc[T], error) {
	if err := s.checkKey(key); err != nil {
		return Doc[T]{}, err
	}
	if _, fenced := FenceFrom(ctx); fenced {
		return Doc[T]{}, errorf(ErrInvalidInput, "Upsert %q checks nothing and cannot honour a fencing token; use Update or Replace with ETagAny", key)
	}
	data, err := s.encode(key, v)
	if err != nil {
		return Doc[T]{}, err
	}
	etag, err := s.send(ctx, "Upsert", key, newSentWrite(driver.Cond{Kind: driver.CondNone}, data, meta.Fresh(meta.NewID(), 0)))
	if err != nil {
		return Doc[T]{}, err
	}
	return Doc[T]{Key: key, Value: v, ETag: etag}, nil
}

// Delete removes key only if its stored ETag is still etag (If-Match);
// ETagAny deletes whatever version is stored.
//
// An empty etag matches ErrETagRequired and nothing is sent; a stale etag
// returns a *ConflictError[T] holding the current document; a missing key
// matches ErrNotFound. A delete whose response was lost is sent again only
// while a read shows the version it names; a key found gone (by this delete
// or another) or holding another version is an *OutcomeUnknownError.
func (s *Store[T]) Delete(ctx context.Context, key string, etag ETag) error {
	ctx, sp := s.obs.begin(ctx, opDelete, key)
	err := s.delete(ctx, key, etag)
	sp.end(err)
	return err
}

func (s *Store[T]) delete(ctx context.Context, key string, etag ETag) error {
	if err := s.checkKey(key); err != nil {
		return err
	}
	if etag == "" {
		return errorf(ErrETagRequired, "Delete %q", key)
	}
	held := etag
	if token, fenced := FenceFrom(ctx); fenced {
		it, err := s.b.Read(ctx, key)
		if err != nil {
			return err
		}
		if etag != ETagAny && it.ETag != etag {
			return s.conflictWith(it, etag, *new(T), 1)
		}
		if err := checkFence(key, meta.Parse(it.Meta), token); err != nil {
			return err
		}
		held = it.ETag // atomic with the check
	}
	s.cache.drop(key)
	_, err := s.send(ctx, "Delete", key, sentWrite{del: true, w: driver.Write{Cond: driver.IfMatch(held)}})
	if errors.Is(err, ErrConflict) {
		return s.refused(ctx, key, held, *new(T)) // held: the version a fenced delete checked
	}
	return err
}

func newSentWrite(c driver.Cond, data []byte, m meta.Meta) sentWrite {
	return sentWrite{w: driver.Write{Data: data, Cond: c, Meta: m.String()}, meta: m}
}

// send sends w until its fate is known and returns the ETag of the version
// it wrote ("" when it was found committed with later writes after it). A
// definite refusal of the first try is returned as the backend reported it
// (ErrExists, ErrConflict, ErrNotFound, ...). When the answer is lost, send
// reads and resolves: committed is a success, not landed is sent again,
// anything else is an *OutcomeUnknownError. A context that ended before the
// request was sent returns its error.
func (s *Store[T]) send(ctx context.Context, op, key string, w sentWrite) (ETag, error) {
	var lost error // the failure that left an earlier try unsettled
	var etag ETag
	_, err := retry(ctx, s.retry, s.clock, func(ctx context.Context, attempt int) (next, error) {
		var err error
		if w.del {
			err = s.b.Delete(ctx, key, w.w.Cond.ETag)
		} else {
			etag, err = s.b.Write(ctx, key, w.w)
		}
		switch {
		case err == nil:
			lost = nil
			s.cacheWrite(key, w, etag)
			return stop, nil
		case lost == nil && errors.Is(err, driver.ErrNotApplied):
			return afterPause, err // refused unapplied (throttled): the same again, after a pause
		case lost == nil && !ambiguous(err):
			return stop, err // a definite answer to the only try
		}
		lost = err
		it, o, v, rerr := s.readAfterLoss(ctx, op, key, w, err)
		if rerr != nil {
			return stop, rerr
		}
		switch v {
		case committed:
			lost, etag = nil, foundIn(w, it, o.Meta).etag
			return stop, nil
		case notLanded:
			return now, outcomeUnknown(op, key, err) // send it again
		}
		return stop, outcomeUnknown(op, key, err)
	}, 0, s.obs, op)
	if err != nil && lost != nil && !errors.Is(err, ErrOutcomeUnknown) {
		err = outcomeUnknown(op, key, errors.Join(lost, err)) // the context ended with a try unsettled
	}
	return etag, err
}

// readAfterLoss reads key after the answer to w was lost (to lost) and
// resolves w from what it finds; a read that fails otherwise than "not
// found" leaves the outcome unknown.
func (s *Store[T]) readAfterLoss(ctx context.Context, op, key string, w sentWrite, lost error) (driver.Item, observed, verdict, error) {
	it, err := s.b.Read(ctx, key)
	s.cache.note(key, it, err)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return it, observed{}, unknown, outcomeUnknown(op, key, errors.Join(lost, err))
	}
	o := observe(it, err)
	v := resolve(w, o)
	s.obs.lostResponse(ctx, op, key, v)
	return it, o, v, nil
}

// foundIn is the outcome of w, found committed in it: it itself when w
// made it, otherwise no ETag, for later writes followed w.
func foundIn(w sentWrite, it driver.Item, stored meta.Meta) ended {
	if stored.LastID() == w.meta.LastID() {
		return ended{etag: it.ETag, item: it}
	}
	return ended{}
}

// cacheWrite records in the version cache what a write made of key.
func (s *Store[T]) cacheWrite(key string, w sentWrite, etag ETag) {
	if w.del || etag == "" {
		s.cache.drop(key)
		return
	}
	s.cache.put(key, driver.Item{Key: key, Data: w.w.Data, Meta: w.w.Meta, ETag: etag})
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
	it, err := s.b.Read(ctx, key)
	s.cache.note(key, it, err)
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
		return err
	}
	return &ConflictError[T]{Key: it.Key, ETag: held, Mine: mine, Theirs: theirs, Attempts: attempts}
}

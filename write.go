package etagstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
)

// This file holds every write path of the Store and how each resolves a
// write whose outcome was lost.
//
// A conditional write whose response is lost may have committed. The
// backend reports that as an ambiguous error: a transport failure or
// timeout (unclassified), or a 412/409/404 answered to a retry of a request
// whose earlier try got no response (marked ErrAmbiguous). Each path then
// re-reads the document and decides from its write ids, lineage and ETag:
// committed (a success, never applied twice), not committed (retried), or —
// where no read can tell — ErrOutcomeUnknown. Nothing is guessed.

// ambiguous reports whether a write or delete that failed with err may
// nevertheless have been applied.
func ambiguous(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrAmbiguous) {
		return true
	}
	for _, definite := range []error{ErrNotFound, ErrExists, ErrConflict, ErrETagRequired, ErrInvalidKey,
		ErrTooLarge, ErrInvalidInput, ErrFenced, ErrLocked, ErrLockLost} {
		if errors.Is(err, definite) {
			return false
		}
	}
	return true // transport failure, timeout, cancellation, 5xx after the SDK's retries
}

// outcomeUnknown wraps the error of a write whose outcome cannot be known.
func outcomeUnknown(op, key string, cause error) error {
	return fmt.Errorf("%w: %s %q: %w", ErrOutcomeUnknown, op, key, cause)
}

// Create stores v under key only if the key does not exist yet (If-None-Match:
// * on blobs, Insert Entity on tables). An existing key matches ErrExists.
// A create whose response was lost is resolved by reading: if the stored
// document is this call's, Create succeeds.
func (s *Store[T]) Create(ctx context.Context, key string, v T) (Doc[T], error) {
	if err := s.checkKey(key); err != nil {
		return Doc[T]{}, err
	}
	data, err := s.encode(key, v)
	if err != nil {
		return Doc[T]{}, err
	}
	fence, _ := FenceFrom(ctx)
	m := fresh(newWriteID(), fence)
	var result Doc[T]
	_, err = retry(ctx, s.retry, s.clock, func(ctx context.Context, attempt int) (next, error) {
		etag, err := s.b.Write(ctx, key, Write{Data: data, Cond: Cond{Kind: CondCreate}, Meta: m.String()})
		switch {
		case err == nil:
			result = Doc[T]{Key: key, Value: v, ETag: etag}
			s.cache.put(key, Item{Key: key, Data: data, Meta: m.String(), ETag: etag})
			return stop, nil
		case errors.Is(err, ErrExists), ambiguous(err):
			// An SDK retry of our own committed create also answers 409.
			it, rerr := s.b.Read(ctx, key)
			switch {
			case rerr == nil && parseMeta(it.Meta).mine(m):
				result, err = s.ours(it, m, v)
				return stop, err
			case rerr == nil:
				return stop, errorf(ErrExists, "%q", key)
			case errors.Is(rerr, ErrNotFound) && ambiguous(err):
				return afterPause, outcomeUnknown("Create", key, err) // not there yet: try again
			case errors.Is(rerr, ErrNotFound):
				return stop, err
			}
			if ambiguous(err) {
				return stop, outcomeUnknown("Create", key, err)
			}
			return stop, err
		}
		return stop, err
	}, 0)
	return result, err
}

// Replace writes d.Value under d.Key only if the stored ETag is still d.ETag
// (If-Match). d.ETag == ETagAny overwrites whatever is stored (last writer
// wins) but still requires the document to exist.
//
// An empty ETag matches ErrETagRequired and nothing is sent; a stale ETag
// returns a *ConflictError[T] (matching ErrConflict) holding the current
// document; a missing document matches ErrNotFound. A write whose response
// was lost is resolved by reading: committed is a success, still
// applicable is retried.
func (s *Store[T]) Replace(ctx context.Context, d Doc[T]) (Doc[T], error) {
	if err := s.checkKey(d.Key); err != nil {
		return Doc[T]{}, err
	}
	if d.ETag == "" {
		return Doc[T]{}, errorf(ErrETagRequired, "Replace %q", d.Key)
	}
	if _, fenced := FenceFrom(ctx); fenced {
		// The token must be checked against the stored version: read it,
		// and write with If-Match of the version read.
		return s.readModifyWrite(ctx, d.Key, false, nil, func(cur Doc[T]) (T, error) {
			if d.ETag != ETagAny && cur.ETag != d.ETag {
				return d.Value, &ConflictError[T]{Key: d.Key, ETag: d.ETag, Mine: d.Value, Theirs: cur, Attempts: 1}
			}
			return d.Value, nil
		})
	}
	data, err := s.encode(d.Key, d.Value)
	if err != nil {
		return Doc[T]{}, err
	}
	m := fresh(newWriteID(), 0)
	var result Doc[T]
	_, err = retry(ctx, s.retry, s.clock, func(ctx context.Context, attempt int) (next, error) {
		etag, err := s.b.Write(ctx, d.Key, Write{Data: data, Cond: IfMatch(d.ETag), Meta: m.String()})
		switch {
		case err == nil:
			result = Doc[T]{Key: d.Key, Value: d.Value, ETag: etag}
			s.cache.put(d.Key, Item{Key: d.Key, Data: data, Meta: m.String(), ETag: etag})
			return stop, nil
		case errors.Is(err, ErrConflict), ambiguous(err):
			it, rerr := s.b.Read(ctx, d.Key)
			switch {
			case rerr == nil && parseMeta(it.Meta).mine(m):
				result, err = s.ours(it, m, d.Value)
				return stop, err
			case rerr == nil && ambiguous(err) && (d.ETag == ETagAny || it.ETag == d.ETag):
				return afterPause, outcomeUnknown("Replace", d.Key, err) // ours did not land: send it again
			case rerr == nil && ambiguous(err):
				// Another version, not ours: either ours never landed, or it
				// did and a new history (replace, delete and create) followed.
				return stop, outcomeUnknown("Replace", d.Key, err)
			case rerr == nil:
				theirs, derr := s.decode(it)
				if derr != nil {
					return stop, derr
				}
				return stop, &ConflictError[T]{Key: d.Key, ETag: d.ETag, Mine: d.Value, Theirs: theirs, Attempts: attempt}
			case errors.Is(rerr, ErrNotFound):
				return stop, errorf(ErrNotFound, "%q was deleted", d.Key)
			case ambiguous(err):
				return stop, outcomeUnknown("Replace", d.Key, err)
			}
			return stop, err
		}
		return stop, err
	}, 0)
	return result, err
}

// Upsert stores v under key whether or not it exists and whatever its ETag
// (Insert or Replace Entity; an unconditional blob upload). It is the
// documented bypass of the concurrency check: the last writer wins.
func (s *Store[T]) Upsert(ctx context.Context, key string, v T) (Doc[T], error) {
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
	m := fresh(newWriteID(), 0)
	var result Doc[T]
	_, err = retry(ctx, s.retry, s.clock, func(ctx context.Context, attempt int) (next, error) {
		etag, err := s.b.Write(ctx, key, Write{Data: data, Cond: Cond{Kind: CondNone}, Meta: m.String()})
		if err == nil {
			result = Doc[T]{Key: key, Value: v, ETag: etag}
			s.cache.put(key, Item{Key: key, Data: data, Meta: m.String(), ETag: etag})
			return stop, nil
		}
		if !ambiguous(err) {
			return stop, err
		}
		if it, rerr := s.b.Read(ctx, key); rerr == nil && parseMeta(it.Meta).mine(m) {
			result, err = s.ours(it, m, v)
			return stop, err
		}
		return afterPause, outcomeUnknown("Upsert", key, err) // last writer wins: sending it again is safe
	}, 0)
	return result, err
}

// Delete removes key only if its stored ETag is still etag (If-Match);
// ETagAny deletes whatever version is stored.
//
// An empty etag matches ErrETagRequired and nothing is sent; a stale etag
// returns a *ConflictError[T] holding the current document; a missing key
// matches ErrNotFound. A delete whose response was lost is resolved by
// reading: still there is retried; gone matches ErrOutcomeUnknown (and
// ErrNotFound), since a read cannot tell whose delete it was.
func (s *Store[T]) Delete(ctx context.Context, key string, etag ETag) error {
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
		if err := checkFence(key, parseMeta(it.Meta), token); err != nil {
			return err
		}
		held = it.ETag // atomic with the check
	}
	s.cache.drop(key)
	_, err := retry(ctx, s.retry, s.clock, func(ctx context.Context, attempt int) (next, error) {
		err := s.b.Delete(ctx, key, IfMatch(held))
		switch {
		case err == nil:
			return stop, nil
		case errors.Is(err, ErrConflict), ambiguous(err):
			it, rerr := s.b.Read(ctx, key)
			switch {
			case rerr == nil && ambiguous(err) && (held == ETagAny || it.ETag == held):
				return afterPause, outcomeUnknown("Delete", key, err) // still there: delete again
			case rerr == nil && ambiguous(err):
				// Another version: either ours never landed, or it did and
				// the key was created again.
				return stop, outcomeUnknown("Delete", key, err)
			case rerr == nil:
				return stop, s.conflictWith(it, etag, *new(T), attempt)
			case errors.Is(rerr, ErrNotFound) && ambiguous(err):
				return stop, fmt.Errorf("%w (%w: %q is gone, by this delete or another)", outcomeUnknown("Delete", key, err), ErrNotFound, key)
			case errors.Is(rerr, ErrNotFound):
				return stop, errorf(ErrNotFound, "%q was deleted", key)
			}
			return stop, err
		}
		return stop, err
	}, 0)
	return err
}

// readModifyWrite is the engine of Update and Save, run inside the retry
// loop: read the current version (or take start on the first attempt),
// compute the new value with modify, and write it with If-Match of the
// version read (create-only when missing and create is set). A lost race is
// retried; an unchanged encoding writes nothing. cur has an empty ETag when
// the document is missing.
//
// A write whose outcome was lost stays pending; every later read judges it
// (see pending.judge) before anything else is written, so a mutation is
// never applied twice: committed returns the stored document, unknowable
// returns ErrOutcomeUnknown.
func (s *Store[T]) readModifyWrite(ctx context.Context, key string, create bool, start *Item, modify func(cur Doc[T]) (T, error)) (Doc[T], error) {
	var (
		result  Doc[T]
		sent    []sentWrite[T] // the writes this call has sent
		open    []pending      // writes whose outcome is not known yet
		held    ETag           // the ETag of the last version read
		mine    T              // the last value computed
		lost    bool           // the last attempt's write lost a race
		lastErr error          // the last ambiguous write error
	)
	fence, fenced := FenceFrom(ctx)

	// observe reads the current version and judges this call's earlier
	// writes by it. done reports that the call is over (result or err).
	observe := func(ctx context.Context) (it Item, exists, done bool, err error) {
		it, err = s.b.Read(ctx, key)
		exists = err == nil
		s.cache.note(key, it, err)
		switch {
		case errors.Is(err, ErrNotFound) && (create || len(open) > 0):
		case err != nil && len(open) > 0:
			return it, false, true, outcomeUnknown("Update", key, errors.Join(lastErr, err))
		case err != nil:
			return it, false, true, err
		}
		stored := parseMeta(it.Meta)
		for _, w := range sent {
			if exists && stored.mine(w.meta) {
				// One of our earlier writes committed after all.
				result, err = s.ours(it, w.meta, w.value)
				return it, true, true, err
			}
		}
		still := open[:0]
		for _, p := range open {
			switch p.judge(exists, stored, s.keepIDs) {
			case committed:
				result, err = s.ours(it, p.w, p.value.(T))
				return it, true, true, err
			case unknown:
				return it, exists, true, outcomeUnknown("Update", key, lastErr)
			case notYet:
				still = append(still, p)
			}
		}
		open = still
		if !exists && !create {
			return it, false, true, outcomeUnknown("Update", key, lastErr) // deleted after a write we cannot see
		}
		return it, exists, false, nil
	}

	attempts, err := retry(ctx, s.retry, s.clock, func(ctx context.Context, attempt int) (next, error) {
		lost = false
		var (
			it     Item
			exists = true
		)
		// The first attempt may start from a version already known: Save's
		// base (whose bookkeeping is unknown), or the cache's copy of the
		// version this Store last read or wrote. A stale one costs a 412.
		fromStart := attempt == 1 && start != nil && !fenced
		fromCache := false
		if attempt == 1 && !fromStart {
			it, fromCache = s.cache.get(key)
		}
		if fromStart {
			it = *start
		} else if !fromCache {
			var done bool
			var err error
			if it, exists, done, err = observe(ctx); done {
				return stop, err
			}
		}
		stored := parseMeta(it.Meta)
		cur := Doc[T]{Key: key}
		if exists {
			var err error
			if cur, err = s.decode(it); err != nil {
				return stop, err
			}
		}
		held = it.ETag
		if fenced {
			if err := checkFence(key, stored, fence); err != nil {
				return stop, err
			}
		}
		// The bytes an unchanged document would encode to, taken before
		// modify runs: it may change maps or pointers that cur shares.
		var baseline []byte
		if exists {
			baseline = it.Data
			if !s.verbatim && !fromStart {
				var err error
				if baseline, err = s.codec.Marshal(cur.Value); err != nil {
					return stop, err
				}
			}
		}
		var err error
		if mine, err = modify(cur); err != nil {
			return stop, err
		}
		data, err := s.encode(key, mine)
		if err != nil {
			return stop, err
		}
		if exists && len(open) == 0 && bytes.Equal(data, baseline) {
			if fromCache {
				return now, nil // unchanged against a copy: check against the stored version
			}
			result = cur
			return stop, nil
		}
		id := newWriteID()
		w := Write{Data: data, Cond: Cond{Kind: CondCreate}}
		m := fresh(id, fence)
		switch {
		case fromStart: // the stored meta is unknown: start a new history, as Replace does
			w.Cond = IfMatch(it.ETag)
		case exists:
			w.Cond = IfMatch(it.ETag)
			m = stored.then(id, s.keepIDs, fence)
		}
		w.Meta = m.String()
		sent = append(sent, sentWrite[T]{meta: m, value: mine})
		etag, err := s.b.Write(ctx, key, w)
		switch {
		case err == nil:
			result = Doc[T]{Key: key, Value: mine, ETag: etag}
			s.cache.put(key, Item{Key: key, Data: data, Meta: w.Meta, ETag: etag})
			return stop, nil
		case ambiguous(err):
			s.cache.drop(key)
			// Judge it at once, before other writers can push it out of
			// the id window; if it did not land, try again after backoff.
			open = append(open, pending{w: m, create: w.Cond.Kind == CondCreate, value: mine})
			lastErr = err
			if _, _, done, err := observe(ctx); done {
				return stop, err
			}
			if len(open) > 0 {
				// It may still land: write again at once, so that one of
				// the two lands before others push it out of the id window.
				return now, outcomeUnknown("Update", key, lastErr)
			}
			return afterPause, outcomeUnknown("Update", key, lastErr)
		case (errors.Is(err, ErrConflict) || errors.Is(err, ErrNotFound)) && fromCache:
			s.cache.drop(key)
			return now, err // the copy was stale: read and try again at once
		case errors.Is(err, ErrConflict), errors.Is(err, ErrExists):
			lost = true
			return afterPause, err
		case errors.Is(err, ErrNotFound) && create:
			lost = true
			return afterPause, err // deleted since we read it: create it again
		default:
			return stop, err
		}
	}, s.heat.warmth(key))
	s.heat.observe(key, attempts)
	switch {
	case err == nil:
		return result, nil
	case len(open) > 0:
		if errors.Is(err, ErrOutcomeUnknown) {
			return Doc[T]{}, err
		}
		return Doc[T]{}, outcomeUnknown("Update", key, errors.Join(lastErr, err))
	case lost && ctx.Err() == nil:
		it, rerr := s.b.Read(ctx, key)
		switch {
		case errors.Is(rerr, ErrNotFound):
			return Doc[T]{}, errorf(ErrNotFound, "%q was deleted", key)
		case rerr != nil:
			return Doc[T]{}, fmt.Errorf("%w on %q (reading the current version failed: %w)", ErrConflict, key, rerr)
		}
		for _, w := range sent {
			if parseMeta(it.Meta).mine(w.meta) {
				return s.ours(it, w.meta, w.value)
			}
		}
		return Doc[T]{}, s.conflictWith(it, held, mine, attempts)
	}
	return Doc[T]{}, err
}

// sentWrite is a write an Update sent: its bookkeeping and value.
type sentWrite[T any] struct {
	meta  meta
	value T
}

// ours is the result of a write of v, with bookkeeping m, found committed
// in it: it itself when it is still the newest version; otherwise v with an
// empty ETag, because that version's ETag was never seen and later writes
// have followed it.
func (s *Store[T]) ours(it Item, m meta, v T) (Doc[T], error) {
	stored := parseMeta(it.Meta)
	if len(stored.ids) > 0 && stored.ids[len(stored.ids)-1] == m.ids[len(m.ids)-1] {
		return s.decode(it)
	}
	return Doc[T]{Key: it.Key, Value: v}, nil
}

// conflictWith builds the *ConflictError for a write holding ETag held that
// found it, the current version.
func (s *Store[T]) conflictWith(it Item, held ETag, mine T, attempts int) error {
	theirs, err := s.decode(it)
	if err != nil {
		return err
	}
	return &ConflictError[T]{Key: it.Key, ETag: held, Mine: mine, Theirs: theirs, Attempts: attempts}
}

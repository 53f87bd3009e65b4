package etagstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
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
	_, err = retry(ctx, s.retry, s.clock, func(ctx context.Context, attempt int) (bool, error) {
		etag, err := s.b.Write(ctx, key, Write{Data: data, Cond: Cond{Kind: CondCreate}, Meta: m.String()})
		switch {
		case err == nil:
			result = Doc[T]{Key: key, Value: v, ETag: etag}
			return false, nil
		case errors.Is(err, ErrExists), ambiguous(err):
			// An SDK retry of our own committed create also answers 409.
			it, rerr := s.b.Read(ctx, key)
			switch {
			case rerr == nil && parseMeta(it.Meta).mine(m):
				result, err = s.decode(it)
				return false, err
			case rerr == nil:
				return false, errorf(ErrExists, "%q", key)
			case errors.Is(rerr, ErrNotFound) && ambiguous(err):
				return true, outcomeUnknown("Create", key, err) // not there yet: try again
			case errors.Is(rerr, ErrNotFound):
				return false, err
			}
			if ambiguous(err) {
				return false, outcomeUnknown("Create", key, err)
			}
			return false, err
		}
		return false, err
	})
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
	_, err = retry(ctx, s.retry, s.clock, func(ctx context.Context, attempt int) (bool, error) {
		etag, err := s.b.Write(ctx, d.Key, Write{Data: data, Cond: IfMatch(d.ETag), Meta: m.String()})
		switch {
		case err == nil:
			result = Doc[T]{Key: d.Key, Value: d.Value, ETag: etag}
			return false, nil
		case errors.Is(err, ErrConflict), ambiguous(err):
			it, rerr := s.b.Read(ctx, d.Key)
			switch {
			case rerr == nil && parseMeta(it.Meta).mine(m):
				result, err = s.decode(it)
				return false, err
			case rerr == nil && ambiguous(err) && (d.ETag == ETagAny || it.ETag == d.ETag):
				return true, outcomeUnknown("Replace", d.Key, err) // ours did not land: send it again
			case rerr == nil:
				theirs, derr := s.decode(it)
				if derr != nil {
					return false, derr
				}
				return false, &ConflictError[T]{Key: d.Key, ETag: d.ETag, Mine: d.Value, Theirs: theirs, Attempts: attempt}
			case errors.Is(rerr, ErrNotFound):
				return false, errorf(ErrNotFound, "%q was deleted", d.Key)
			case ambiguous(err):
				return false, outcomeUnknown("Replace", d.Key, err)
			}
			return false, err
		}
		return false, err
	})
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
	_, err = retry(ctx, s.retry, s.clock, func(ctx context.Context, attempt int) (bool, error) {
		etag, err := s.b.Write(ctx, key, Write{Data: data, Cond: Cond{Kind: CondNone}, Meta: m.String()})
		if err == nil {
			result = Doc[T]{Key: key, Value: v, ETag: etag}
			return false, nil
		}
		if !ambiguous(err) {
			return false, err
		}
		if it, rerr := s.b.Read(ctx, key); rerr == nil && parseMeta(it.Meta).mine(m) {
			result, err = s.decode(it)
			return false, err
		}
		return true, outcomeUnknown("Upsert", key, err) // last writer wins: sending it again is safe
	})
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
	_, err := retry(ctx, s.retry, s.clock, func(ctx context.Context, attempt int) (bool, error) {
		err := s.b.Delete(ctx, key, IfMatch(held))
		switch {
		case err == nil:
			return false, nil
		case errors.Is(err, ErrConflict), ambiguous(err):
			it, rerr := s.b.Read(ctx, key)
			switch {
			case rerr == nil && ambiguous(err) && (held == ETagAny || it.ETag == held):
				return true, outcomeUnknown("Delete", key, err) // still there: delete again
			case rerr == nil:
				return false, s.conflictWith(it, etag, *new(T), attempt)
			case errors.Is(rerr, ErrNotFound) && ambiguous(err):
				return false, fmt.Errorf("%w (%w: %q is gone, by this delete or another)", outcomeUnknown("Delete", key, err), ErrNotFound, key)
			case errors.Is(rerr, ErrNotFound):
				return false, errorf(ErrNotFound, "%q was deleted", key)
			}
			return false, err
		}
		return false, err
	})
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
		ids     []string  // write ids this call has sent
		open    []pending // writes whose outcome is not known yet
		held    ETag      // the ETag of the last version read
		mine    T         // the last value computed
		lost    bool      // the last attempt's write lost a race
		lastErr error     // the last ambiguous write error
	)
	fence, fenced := FenceFrom(ctx)
	attempts, err := retry(ctx, s.retry, s.clock, func(ctx context.Context, attempt int) (bool, error) {
		lost = false
		var (
			it  Item
			err error
		)
		fromStart := attempt == 1 && start != nil && !fenced
		if fromStart {
			it = *start
		} else {
			it, err = s.b.Read(ctx, key)
		}
		exists := err == nil
		switch {
		case errors.Is(err, ErrNotFound) && (create || len(open) > 0):
		case err != nil:
			if len(open) > 0 {
				return false, outcomeUnknown("Update", key, errors.Join(lastErr, err))
			}
			return false, err
		}
		stored := parseMeta(it.Meta)
		if exists && slices.ContainsFunc(ids, stored.has) {
			// One of our earlier writes committed after all (its response
			// was lost and the SDK's retry saw 412).
			result, err = s.decode(it)
			return false, err
		}
		still := open[:0]
		for _, p := range open {
			switch p.judge(exists, stored, s.keepIDs) {
			case committed:
				result, err = s.decode(it)
				return false, err
			case unknown:
				return false, outcomeUnknown("Update", key, lastErr)
			case notYet:
				still = append(still, p)
			}
		}
		open = still
		if !exists && !create {
			return false, outcomeUnknown("Update", key, lastErr) // deleted after a write we cannot see
		}
		cur := Doc[T]{Key: key}
		if exists {
			if cur, err = s.decode(it); err != nil {
				return false, err
			}
		}
		held = it.ETag
		if fenced {
			if err := checkFence(key, stored, fence); err != nil {
				return false, err
			}
		}
		if mine, err = modify(cur); err != nil {
			return false, err
		}
		data, err := s.encode(key, mine)
		if err != nil {
			return false, err
		}
		if exists && len(open) == 0 && s.unchanged(data, it.Data, cur.Value) {
			result = cur
			return false, nil
		}
		id := newWriteID()
		ids = append(ids, id)
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
		etag, err := s.b.Write(ctx, key, w)
		switch {
		case err == nil:
			result = Doc[T]{Key: key, Value: mine, ETag: etag}
			return false, nil
		case ambiguous(err):
			open = append(open, pending{w: m, create: w.Cond.Kind == CondCreate})
			lastErr = err
			return true, outcomeUnknown("Update", key, err)
		case errors.Is(err, ErrConflict), errors.Is(err, ErrExists):
			lost = true
			return true, err
		case errors.Is(err, ErrNotFound) && create:
			lost = true
			return true, err // deleted since we read it: create it again
		default:
			return false, err
		}
	})
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
		case slices.ContainsFunc(ids, parseMeta(it.Meta).has):
			return s.decode(it)
		}
		return Doc[T]{}, s.conflictWith(it, held, mine, attempts)
	}
	return Doc[T]{}, err
}

// unchanged reports whether data, the encoding of the mutated value, is the
// stored version: byte-equal to what was read, or else to the encoding of
// the value decoded from it (a backend such as tables hands back the
// properties in its own layout).
func (s *Store[T]) unchanged(data, stored []byte, cur T) bool {
	if bytes.Equal(data, stored) {
		return true
	}
	again, err := s.codec.Marshal(cur)
	return err == nil && bytes.Equal(data, again)
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

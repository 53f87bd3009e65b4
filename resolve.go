package etagstore

import (
	"errors"
	"fmt"

	"github.com/etagstore/etagstore/internal/meta"
)

// This file decides what happened to a write whose response was lost. It
// is the one place that decision is made: every write path (Create,
// Replace, Upsert, Delete, Update, Save and group commit) sends a request
// described by a sentWrite, and when the answer is ambiguous it reads the
// key and asks resolve.
//
// A conditional write whose response is lost may have committed. The
// backend reports that as an ambiguous error: a transport failure or
// timeout (unclassified), or a 412/409/404 answered to a retry of a request
// whose earlier try got no response (marked ErrAmbiguous). The read that
// follows either proves what happened — the write's id or lineage is in the
// stored bookkeeping (committed), the version it was conditioned on is still
// there (not landed yet: the same request may be sent again), the history it
// continued went on without it (not applied) — or proves nothing, and the
// outcome is unknown. Nothing is guessed, and a write is sent again only
// when a read proves the earlier try has not landed.

// sentWrite is a write or delete as sent to the backend.
type sentWrite struct {
	del  bool // a Delete (meta is then empty)
	w    Write
	meta meta.Meta // the bookkeeping w.Meta holds: its last id is this write's
}

// observed is what a read found.
type observed struct {
	found bool
	etag  ETag
	meta  meta.Meta
}

func observe(it Item, err error) observed {
	if err != nil {
		return observed{}
	}
	return observed{found: true, etag: it.ETag, meta: meta.Parse(it.Meta)}
}

// verdict is what a read says of a write whose response was lost.
type verdict uint8

const (
	// unknown: the read cannot tell; the write may have landed and been
	// overwritten or deleted since.
	unknown verdict = iota
	// committed: the write landed (its id, or the lineage it started, is
	// stored).
	committed
	// notLanded: the version the write was conditioned on is still
	// current, so it has not landed yet; sending the same request again is
	// safe (at most one of the two can match).
	notLanded
	// notApplied: the history the write continued went on without it; it
	// can never land. The read is the current version.
	notApplied
)

func (v verdict) String() string {
	return [...]string{"unknown", "committed", "not landed", "not applied"}[v]
}

// resolve decides what became of s from o, a read made after s's response
// was lost. It is a pure function of the two.
func resolve(s sentWrite, o observed) verdict {
	if !s.del && o.found && s.meta.LandedIn(o.meta) {
		return committed
	}
	switch {
	case !o.found:
		// A delete may have been this one or another; a write may have
		// landed and been deleted since.
		return unknown
	case s.w.Cond.Kind == CondIfMatch && s.w.Cond.ETag != ETagAny && o.etag == s.w.Cond.ETag:
		return notLanded
	case s.del || s.meta.Seq <= 1 || o.meta.Lineage != s.meta.Lineage:
		// A write that started a history (or a delete) is not found, and
		// another history is stored: it never landed, or it did and the
		// history was cut (replace, upsert, delete) after it.
		return unknown
	case o.meta.Seq < s.meta.Seq || o.meta.Covers(s.meta.Seq):
		// The same history, and s's slot in it is either not reached
		// (the version s was conditioned on changed without a new write:
		// a merge) or in the stored window holding another id.
		return notApplied
	}
	return unknown // s's slot has left the window the document holds
}

// ambiguous reports whether a write or delete that failed with err may
// nevertheless have been applied.
func ambiguous(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrAmbiguous) {
		return true
	}
	return sentinelOf(err) == nil // transport failure, timeout, cancellation, 5xx
}

// sentinels are the package's error classes; every failure matches at most
// one of them.
var sentinels = []error{ErrNotFound, ErrExists, ErrConflict, ErrETagRequired, ErrInvalidKey,
	ErrTooLarge, ErrInvalidInput, ErrFenced, ErrLocked, ErrLockLost, ErrOutcomeUnknown}

// sentinelOf returns the sentinel err matches, or nil.
func sentinelOf(err error) error {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return s
		}
	}
	return nil
}

// OutcomeUnknownError reports a write or delete whose response was lost
// when no read can tell whether it was applied: it may have landed, and
// been overwritten or deleted since, or not. It matches ErrOutcomeUnknown
// and no other sentinel; Cause (not unwrapped) is what lost the response.
// Get the document to see where it stands.
type OutcomeUnknownError struct {
	Op    string // "Create", "Replace", "Upsert", "Update", "Save" or "Delete"
	Key   string
	Cause error
}

func (e *OutcomeUnknownError) Error() string {
	return fmt.Sprintf("etagstore: outcome unknown: %s %q may or may not have been applied: %v", e.Op, e.Key, e.Cause)
}

// Is makes errors.Is(err, ErrOutcomeUnknown) true.
func (e *OutcomeUnknownError) Is(target error) bool { return target == ErrOutcomeUnknown }

func outcomeUnknown(op, key string, cause error) error {
	return &OutcomeUnknownError{Op: op, Key: key, Cause: cause}
}

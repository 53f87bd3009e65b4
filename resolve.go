package etagstore

import (
	"errors"
	"fmt"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/meta"
	"github.com/etagstore/etagstore/internal/outcome"
)

// This file connects the Store's write paths to the one outcome resolver
// (package internal/outcome) and holds the error classes a failure is
// judged by: ambiguous (the request may have been applied) or one of the
// package's sentinels.

// sentWrite is a write or delete as sent to the backend.
type sentWrite struct {
	del  bool // a Delete (meta is then empty)
	w    driver.Write
	meta meta.Meta // the bookkeeping w.Meta holds: its last id is this write's
}

// observed is what a read found.
type observed = outcome.Observed

func observe(it driver.Item, err error) observed {
	if err != nil {
		return observed{}
	}
	return observed{Found: true, ETag: string(it.ETag), Meta: meta.Parse(it.Meta)}
}

// verdict is what a read says of a write whose response was lost (see
// package internal/outcome).
type verdict = outcome.Verdict

const (
	unknown    = outcome.Unknown
	committed  = outcome.Committed
	notLanded  = outcome.NotLanded
	notApplied = outcome.NotApplied
)

// resolve decides what became of s from o, a read made after s's response
// was lost: outcome.Resolve, the one function that decides it for every
// write path (backends that write on their own use it too).
func resolve(s sentWrite, o observed) verdict {
	sent := outcome.Sent{Delete: s.del, Meta: s.meta}
	if s.w.Cond.Kind == driver.CondIfMatch {
		sent.IfMatch = string(s.w.Cond.ETag)
	}
	return outcome.Resolve(sent, o)
}

// ambiguous reports whether a write or delete that failed with err may
// nevertheless have been applied.
func ambiguous(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, driver.ErrAmbiguous) {
		return true
	}
	if errors.Is(err, driver.ErrNotApplied) {
		return false
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

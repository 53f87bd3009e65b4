package etagstore

import (
	"errors"
	"fmt"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/outcome"
)

// This file connects the engine (engine.go) to the one outcome resolver
// (package internal/outcome) and holds the error classes a failure is
// judged by: ambiguous (the request may have been applied) or one of the
// package's sentinels.

// verdict is what a read says of a write whose response was lost (see
// package internal/outcome).
type verdict = outcome.Verdict

const (
	unknown    = outcome.Unknown
	committed  = outcome.Committed
	notLanded  = outcome.NotLanded
	notApplied = outcome.NotApplied
)

// resolveRequest decides what became of req from base, the versions of its
// keys read after its answer was lost, with outcome.Resolve, the one
// function that decides it. A request of several keys is applied all or
// nothing, so one key found committed proves the whole request committed,
// and one whose history went on without it proves none of it landed; one
// still at the version its write was conditioned on proves the request has
// not landed yet. A check (driver.Action.Check) tells nothing.
func resolveRequest(req request, base []version) verdict {
	verdicts := [4]bool{}
	for i, w := range req {
		if w.Check {
			continue
		}
		sent := outcome.Sent{Delete: w.Delete, Meta: w.meta}
		if w.Write.Cond.Kind == driver.CondIfMatch {
			sent.IfMatch = string(w.Write.Cond.ETag)
		}
		var o outcome.Observed
		if b := base[i]; b.exists {
			o = outcome.Observed{Found: true, ETag: string(b.ETag), Meta: b.meta}
		}
		verdicts[outcome.Resolve(sent, o)] = true
	}
	for _, v := range []verdict{committed, notApplied, notLanded} {
		if verdicts[v] {
			return v
		}
	}
	return unknown
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
	Op    string // "Create", "Replace", "Upsert", "Update", "Save", "Delete", "Merge", "UpsertMerge" or "Batch"
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

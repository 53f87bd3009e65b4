package driver

import (
	"errors"
	"fmt"
)

// The sentinel errors a backend returns are declared in driver.go and
// documented once, for users, in package etagstore (errors.go), which
// re-exports them. This file holds what a Store builds on them.

// Errorf returns an error that matches sentinel and says more: the one
// helper the Store and backends build their errors with.
func Errorf(sentinel error, format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{sentinel}, args...)...)
}

// sentinels are the error classes; every failure of a Store matches at
// most one of them.
var sentinels = []error{ErrNotFound, ErrStorageNotFound, ErrExists, ErrConflict, ErrETagRequired, ErrInvalidKey,
	ErrTooLarge, ErrInvalidInput, ErrFenced, ErrLocked, ErrLockLost, ErrOutcomeUnknown, ErrUnavailable}

// SentinelOf returns the sentinel error err matches, or nil.
func SentinelOf(err error) error {
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
// Get the document to see where it stands. Package etagstore re-exports
// it as etagstore.OutcomeUnknownError.
type OutcomeUnknownError struct {
	Op    string // "Create", "Replace", "Upsert", "Update", "Save", "Delete", "Merge", "UpsertMerge", "Batch" or "Transact"
	Key   string
	Cause error
}

func (e *OutcomeUnknownError) Error() string {
	return fmt.Sprintf("etagstore: outcome unknown: %s %q may or may not have been applied: %v", e.Op, e.Key, e.Cause)
}

// Is makes errors.Is(err, ErrOutcomeUnknown) true.
func (e *OutcomeUnknownError) Is(target error) bool { return target == ErrOutcomeUnknown }

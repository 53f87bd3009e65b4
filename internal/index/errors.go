package index

import (
	"errors"
	"fmt"

	"github.com/etagstore/etagstore/driver"
)

// UniqueError reports a write refused because a unique index's value is
// held by another document; nothing was written. It matches
// driver.ErrExists.
type UniqueError struct {
	Index string // the index's name
	Value string // the value, as the index function gave it
	Key   string // the document holding it
	By    string // the document whose write was refused

	pending bool // Key holds it in a write of the same request, not yet committed
	likely  bool // most likely held, read nothing of (Set.Pending): Key is "" (Likely)
	// With likely: the write that takes it, and the planner of its
	// request, for Confirm.
	plan *planned
	x    planner
}

// Likely reports whether e is a prediction, made reading nothing: the
// value is most likely held (its Store wrote its entry lately), by a
// document not named; the writer learns on its own whether it is. A
// function, not a method: UniqueError is the root's too, and a
// prediction never reaches a caller.
func Likely(e *UniqueError) bool { return e.likely }

// Pending reports whether the value is held by another write of the
// same request (a batch's earlier member), not by a stored document: if
// that write fails, the value may be free.
func (e *UniqueError) Pending() bool { return e.pending }

func (e *UniqueError) Error() string {
	return fmt.Sprintf("%v: index %q: %q holds the value %q, so %q cannot take it", driver.ErrExists, e.Index, e.Key, e.Value, e.By)
}

func (e *UniqueError) Unwrap() error { return driver.ErrExists }

// Duplicates are the unique values the writes of one request would take
// while others hold them: every one found, not only the first.
type Duplicates []*UniqueError

// err is ds as an error: the one UniqueError, or all of them.
func (ds Duplicates) err() error {
	if len(ds) == 1 {
		return ds[0]
	}
	return ds
}

func (ds Duplicates) Error() string {
	return fmt.Sprintf("%v (and %d more values held)", ds[0], len(ds)-1)
}

// Unwrap is every UniqueError: errors.As finds the first, and errors.Is
// matches driver.ErrExists.
func (ds Duplicates) Unwrap() []error {
	out := make([]error, len(ds))
	for i, d := range ds {
		out[i] = d
	}
	return out
}

// Takers are the documents whose writes err, a write's failure, says
// would take a unique value held elsewhere, each with its UniqueError.
func Takers(err error) map[string]*UniqueError {
	var ds Duplicates
	var one *UniqueError
	switch {
	case errors.As(err, &ds):
	case errors.As(err, &one):
		ds = Duplicates{one}
	default:
		return nil
	}
	out := make(map[string]*UniqueError, len(ds))
	for _, d := range ds {
		out[d.By] = d
	}
	return out
}

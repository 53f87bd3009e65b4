package etagstore

import (
	"errors"
	"fmt"
	"time"

	"github.com/etagstore/etagstore/internal/engine"
)

// This file is what the part of a Store that knows no T knows of expiry
// (Expiry, expiry.go): when a stored document expires, by which clock,
// and how a version that has expired reads.

// lifetimes is when a Store's stored documents expire (nil: never).
type lifetimes struct {
	at    func(key string, data []byte) (time.Time, error) // decodes data as T
	clock Clock
	skew  time.Duration // Options.ExpirySkew
}

// defaultSkew is Options.ExpirySkew's default.
const defaultSkew = 5 * time.Second

// newLifetimes is the lifetimes of documents whose expiry at gives,
// judged by clock; skew is Options.ExpirySkew.
func newLifetimes(at func(key string, data []byte) (time.Time, error), clock Clock, skew time.Duration) *lifetimes {
	switch {
	case skew == 0:
		skew = defaultSkew
	case skew < 0:
		skew = 0
	}
	return &lifetimes{at: at, clock: clock, skew: skew}
}

// passed reports whether at, a document's expiry, has passed.
func (l *lifetimes) passed(at time.Time) bool {
	return l != nil && !at.IsZero() && !l.clock.Now().Before(at)
}

// judged is v as its Store reads it: an existing version that has
// expired reads as missing (ErrNotFound), its ETag and data kept for the
// write that replaces it (Version.Stored). A document T cannot decode is
// left as it is: the read that decodes it reports that.
func (l *lifetimes) judged(v engine.Version) engine.Version {
	if l == nil || !v.Exists || v.Data == nil {
		return v
	}
	at, err := l.at(v.Key, v.Data)
	if err != nil || !l.passed(at) {
		return v
	}
	v.Exists, v.Missing = false, &expiredError{v.Key, at}
	return v
}

// expiredError is the error of a read of Key, which expired at At: it
// matches ErrNotFound, and a listing skips the document (isExpired).
type expiredError struct {
	Key string
	At  time.Time
}

func (e *expiredError) Error() string {
	return fmt.Sprintf("%v: %q expired at %s", ErrNotFound, e.Key, e.At.UTC().Format(time.RFC3339Nano))
}

func (e *expiredError) Unwrap() error { return ErrNotFound }

// isExpired reports whether err is a read's refusal of an expired
// document.
func isExpired(err error) bool {
	var e *expiredError
	return errors.As(err, &e)
}

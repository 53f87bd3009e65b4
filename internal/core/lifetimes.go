package core

import (
	"errors"
	"fmt"
	"time"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/engine"
	"github.com/etagstore/etagstore/internal/retry"
)

// This file is what the part of a Store that knows no T knows of expiry
// (the root's Expiry): when a stored document expires, by which clock,
// and how a version that has expired reads.

// Lifetimes is when a Store's stored documents expire (nil: never).
type Lifetimes struct {
	At    func(key string, data []byte) (time.Time, error) // decodes data as T
	clock retry.Clock
	Skew  time.Duration // Options.ExpirySkew
}

// defaultSkew is Options.ExpirySkew's default.
const defaultSkew = 5 * time.Second

// NewLifetimes is the lifetimes of documents whose expiry at gives,
// judged by clock; skew is Options.ExpirySkew.
func NewLifetimes(at func(key string, data []byte) (time.Time, error), clock retry.Clock, skew time.Duration) *Lifetimes {
	switch {
	case skew == 0:
		skew = defaultSkew
	case skew < 0:
		skew = 0
	}
	return &Lifetimes{At: at, clock: clock, Skew: skew}
}

// Passed reports whether at, a document's expiry, has passed.
func (l *Lifetimes) Passed(at time.Time) bool {
	return l != nil && !at.IsZero() && !l.clock.Now().Before(at)
}

// Judged is v as its Store reads it: an existing version that has
// expired reads as missing (ErrNotFound), its ETag and data kept for the
// write that replaces it (Version.Stored). A document T cannot decode is
// left as it is: the read that decodes it reports that.
func (l *Lifetimes) Judged(v engine.Version) engine.Version {
	if l == nil || !v.Exists || v.Data == nil {
		return v
	}
	at, err := l.At(v.Key, v.Data)
	if err != nil || !l.Passed(at) {
		return v
	}
	v.Exists, v.Missing = false, &ExpiredError{v.Key, at}
	return v
}

// ExpiredError is the error of a read of Key, which expired at At: it
// matches ErrNotFound, and a listing skips the document (IsExpired).
type ExpiredError struct {
	Key string
	At  time.Time
}

func (e *ExpiredError) Error() string {
	return fmt.Sprintf("%v: %q expired at %s", driver.ErrNotFound, e.Key, e.At.UTC().Format(time.RFC3339Nano))
}

func (e *ExpiredError) Unwrap() error { return driver.ErrNotFound }

// IsExpired reports whether err is a read's refusal of an expired
// document.
func IsExpired(err error) bool {
	var e *ExpiredError
	return errors.As(err, &e)
}

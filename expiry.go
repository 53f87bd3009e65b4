package etagstore

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/etagstore/etagstore/internal/index"
)

// This file makes documents expire (Expiry): every read hides an expired
// document from the instant it expires by the Store's clock, and a write
// over it replaces it on its ETag as if the key were missing. The sweeper
// that deletes expired documents is sweep.go's.

// Expiry is the index of when each document expires: at(v) is the
// instant (the zero time: never). A Store has at most one. From that
// instant by the Store's clock (Options.Clock), every read treats the
// document as missing: Get and GetBy match ErrNotFound, List, Page,
// ListBy and tablestore's Query skip it, a transaction reads it as
// missing; Create over it succeeds, replacing it on its ETag; Update
// runs mutate on a zero T as for a missing key; Replace and Delete with
// its ETag match ErrNotFound. Sweep deletes expired documents.
//
// Its entries (tables, memstore) commit with each document, as a Lookup
// index's do: a write that does not change the instant sends nothing
// for it. They are named after T's type (its name and a hash of its
// package path), so that Stores of several types in one table keep
// apart: renaming T or moving its package needs a Reindex. Over a
// backend that keeps no entries (blobs) an Expiry keeps none, and Sweep
// lists the documents. See docs/expiry.md.
func Expiry[T any](at func(T) time.Time) Index[T] {
	if at == nil {
		return Index[T]{name: expiryName(reflect.TypeFor[T]())} // refused by New: no function
	}
	return Index[T]{name: expiryName(reflect.TypeFor[T]()), at: at, of: func(v T) []string {
		if s := index.Stamp(at(v)); s != "" {
			return []string{s}
		}
		return nil
	}}
}

// expiryName names the Expiry index of documents of type t: "x" and its
// name's letters (up to 16), then 8 hex digits of a hash of its package
// path and name, within index.MaxName.
func expiryName(t reflect.Type) string {
	var b strings.Builder
	b.WriteString("x")
	for _, r := range t.Name() {
		if b.Len() == 17 {
			break
		}
		if r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_') {
			b.WriteRune(r)
		}
	}
	sum := sha256.Sum256([]byte(t.PkgPath() + "." + t.String()))
	return b.String() + "-" + hex.EncodeToString(sum[:4])
}

// lifetimes is what the core (which knows no T) knows of expiry: when a
// stored document expires, and the clock it is judged by.
type lifetimes struct {
	at    func(key string, data []byte) (time.Time, error) // decodes data as T
	clock Clock
	skew  time.Duration // Options.ExpirySkew
}

// defaultSkew is Options.ExpirySkew's default.
const defaultSkew = 5 * time.Second

// newLifetimes is the lifetimes of s's documents (nil: they never expire).
func newLifetimes[T any](s *Store[T], skew time.Duration) *lifetimes {
	d, ok := s.idx.expiry()
	if !ok {
		return nil
	}
	switch {
	case skew == 0:
		skew = defaultSkew
	case skew < 0:
		skew = 0
	}
	return &lifetimes{clock: s.clock, skew: skew, at: func(key string, data []byte) (time.Time, error) {
		var v T
		if err := s.codec.Unmarshal(data, &v); err != nil {
			return time.Time{}, decodeError(key, err)
		}
		return d.expires(key, v)
	}}
}

// passed reports whether at, a document's expiry, has passed.
func (l *lifetimes) passed(at time.Time) bool {
	return l != nil && !at.IsZero() && !l.clock.Now().Before(at)
}

// judged is v as its Store reads it: an existing version that has
// expired reads as missing (ErrNotFound), its ETag and data kept for the
// write that replaces it (Version.Stored). A document T cannot decode is
// left as it is: the read that decodes it reports that.
func (c *core) judged(v version) version {
	if c.life == nil || !v.Exists || v.Data == nil {
		return v
	}
	at, err := c.life.at(v.Key, v.Data)
	if err != nil || !c.life.passed(at) {
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

// expires is when v, the document of key, expires (Doc.Expires), by its
// Expiry index: the zero time without one. The index function's panic is
// an error of the read or write asking.
func (d Index[T]) expires(key string, v T) (at time.Time, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = errorf(ErrInvalidInput, "the Expiry function panicked on %q: %v", key, r)
		}
	}()
	return d.at(v), nil
}

// dated is d, which a write returns, with Expires set from its value
// (left zero when the Expiry function fails on it).
func (s *Store[T]) dated(d Doc[T]) Doc[T] {
	if e, ok := s.idx.expiry(); ok {
		d.Expires, _ = e.expires(d.Key, d.Value)
	}
	return d
}

// expiry is x's Expiry index, if it has one.
func (x *indexes[T]) expiry() (Index[T], bool) {
	if x == nil || x.err != nil {
		return Index[T]{}, false
	}
	for _, d := range x.defs {
		if d.at != nil {
			return d, true
		}
	}
	return Index[T]{}, false
}

// stamped is d with Expires set from its value; an *expiredError
// (ErrNotFound) when it has expired by the Store's clock.
func (s *Store[T]) stamped(d Doc[T]) (Doc[T], error) {
	e, ok := s.idx.expiry()
	if !ok {
		return d, nil
	}
	at, err := e.expires(d.Key, d.Value)
	if err != nil {
		return Doc[T]{}, err
	}
	if d.Expires = at; s.life.passed(at) {
		return Doc[T]{}, &expiredError{d.Key, at}
	}
	return d, nil
}

package etagstore

import (
	"crypto/sha256"
	"encoding/hex"
	"reflect"
	"strings"
	"time"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/core"
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
// missing; Create over it succeeds, replacing it on its ETag, and so
// does Upsert; Update matches ErrNotFound, as for a missing key; Replace
// and Delete with its ETag match ErrNotFound. Sweep deletes expired
// documents.
//
// Its entries (tables, memstore) commit with each document, as a Lookup
// index's do: a write that does not change the instant sends nothing
// for it. They are named after T's type (its name and a hash of its
// package path), so that Stores of several types in one table keep
// apart: renaming T or moving its package needs a Reindex. Over a
// backend that keeps no entries (blobs) an Expiry keeps none, and Sweep
// lists the documents. See docs/expiry.md.
func Expiry[T any](at func(T) time.Time) Index[T] {
	return expiryIndex(expiryName(reflect.TypeFor[T]()), at)
}

// expiryIndex is the Expiry index named name of at.
func expiryIndex[T any](name string, at func(T) time.Time) Index[T] {
	if at == nil {
		return Index[T]{name: name} // refused by New: no function
	}
	return Index[T]{name: name, at: at, of: func(v T) []string {
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

// lifetimes is the lifetimes of the documents of x's Expiry index, which
// decode reads from their data (nil without one).
func (x *indexes[T]) lifetimes(decode func(key string, data []byte) (T, error), clock Clock, skew time.Duration) *core.Lifetimes {
	d, ok := x.expiry()
	if !ok {
		return nil
	}
	return core.NewLifetimes(func(key string, data []byte) (time.Time, error) {
		v, err := decode(key, data)
		if err != nil {
			return time.Time{}, err
		}
		return d.expires(key, v)
	}, clock, skew)
}

// stamping is b, whose writes carry when their documents expire
// (index.Stamping), when the Store expires documents over a backend that
// keeps no entries (blobs: the instant goes in the blob's metadata, so
// that a sweep lists it); b itself otherwise.
func (x *indexes[T]) stamping(b driver.Backend, l *core.Lifetimes) driver.Backend {
	if l == nil || x == nil || x.set == nil || !x.set.Entryless() {
		return b
	}
	return index.Stamping(b, l.At)
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
func (x *indexes[T]) dated(d Doc[T]) Doc[T] {
	if e, ok := x.expiry(); ok {
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

// stamped is d with Expires set from its value; an *core.ExpiredError
// (ErrNotFound) when it has expired by the Store's clock.
func (x *indexes[T]) stamped(d Doc[T], l *core.Lifetimes) (Doc[T], error) {
	e, ok := x.expiry()
	if !ok {
		return d, nil
	}
	at, err := e.expires(d.Key, d.Value)
	if err != nil {
		return Doc[T]{}, err
	}
	if d.Expires = at; l.Passed(at) {
		return Doc[T]{}, &core.ExpiredError{Key: d.Key, At: at}
	}
	return d, nil
}

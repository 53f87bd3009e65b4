package etagstore

import (
	"reflect"
	"time"

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
	return expiryIndex(index.ExpiryName(reflect.TypeFor[T]()), at)
}

// expiryIndex is the Expiry index named name of at.
func expiryIndex[T any](name string, at func(T) time.Time) Index[T] {
	if at == nil {
		return Index[T]{index.Decl[T]{Name: name}} // refused by New: no function
	}
	return Index[T]{index.Decl[T]{Name: name, At: at, Of: func(v T) []string {
		if s := index.Stamp(at(v)); s != "" {
			return []string{s}
		}
		return nil
	}}}
}

// dated is d, which a write returns, with Expires set from its value
// (left zero when the Expiry function fails on it).
func (s *Store[T]) dated(d Doc[T]) Doc[T] {
	if s.idx != nil && s.idx.Expiring != nil {
		d.Expires, _ = s.idx.Expiring.Expires(d.Key, d.Value)
	}
	return d
}

// stamped is d with Expires set from its value; a *core.ExpiredError
// (ErrNotFound) when it has expired by the Store's clock.
func (s *Store[T]) stamped(d Doc[T]) (Doc[T], error) {
	e, ok := s.idx.Expiry()
	if !ok {
		return d, nil
	}
	at, err := e.Expires(d.Key, d.Value)
	if err != nil {
		return Doc[T]{}, err
	}
	if d.Expires = at; s.core.Life.Passed(at) {
		return Doc[T]{}, &core.ExpiredError{Key: d.Key, At: at}
	}
	return d, nil
}

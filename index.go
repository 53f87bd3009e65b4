package etagstore

import (
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/codec"
	"github.com/etagstore/etagstore/internal/index"
)

// Index is an index of a Store's documents, declared once, on the Store
// (New): Unique or Lookup. Every write of the Store keeps its entries in
// the same atomic request as the document, and GetBy and ListBy read
// them. See docs/indexes.md for the entries' layout and costs.
type Index[T any] struct {
	d index.Decl[T] // its name, its function, and an expiry index's instant
}

// Unique is an index in which at most one document holds each value:
// value(v) is the document's value, "" for none. A write that would give
// a second document a held value fails with a *UniqueError (matching
// ErrExists), and nothing is written. On tables a value is unique within
// its document's partition; on memstore within the backend.
func Unique[T any](name string, value func(T) string) Index[T] {
	return Index[T]{index.Decl[T]{Name: name, Unique: true, Of: func(v T) []string {
		if s := value(v); s != "" {
			return []string{s}
		}
		return nil
	}}}
}

// Lookup is an index in which several documents may hold each value:
// values(v) are the document's values ("" is ignored).
func Lookup[T any](name string, values func(T) []string) Index[T] {
	return Index[T]{index.Decl[T]{Name: name, Of: values}}
}

// UniqueError reports a write refused because a Unique index's value is
// held by another document: Index, Value, Key (the holder) and By (the
// document the refused write was for). Nothing was written, and the
// write is not retried. It matches ErrExists.
type UniqueError = index.UniqueError

func (d Index[T]) String() string { return d.d.String() }

// declare is the indexes idx declared for a Store of T encoded as enc
// over b (nil for none): checked, kept by index.Declared.
func declare[T any](b driver.Backend, enc codec.Of[T], idx []Index[T]) *index.Declared[T] {
	ds := make([]index.Decl[T], len(idx))
	for i, d := range idx {
		ds[i] = d.d
	}
	return index.Declare(b, enc.Decode, ds)
}

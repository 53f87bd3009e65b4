package etagstore

import (
	"fmt"
	"slices"
	"time"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/codec"
	"github.com/etagstore/etagstore/internal/engine"
	"github.com/etagstore/etagstore/internal/index"
)

// Index is an index of a Store's documents, declared once, on the Store
// (New): Unique or Lookup. Every write of the Store keeps its entries in
// the same atomic request as the document, and GetBy and ListBy read
// them. See docs/indexes.md for the entries' layout and costs.
type Index[T any] struct {
	name   string
	unique bool
	of     func(T) []string
	at     func(T) time.Time // an expiry index's: when v expires
}

// def is d as package index knows it.
func (d Index[T]) def() index.Def {
	return index.Def{Name: d.name, Unique: d.unique, Expires: d.at != nil}
}

// Unique is an index in which at most one document holds each value:
// value(v) is the document's value, "" for none. A write that would give
// a second document a held value fails with a *UniqueError (matching
// ErrExists), and nothing is written. On tables a value is unique within
// its document's partition; on memstore within the backend.
func Unique[T any](name string, value func(T) string) Index[T] {
	return Index[T]{name: name, unique: true, of: func(v T) []string {
		if s := value(v); s != "" {
			return []string{s}
		}
		return nil
	}}
}

// Lookup is an index in which several documents may hold each value:
// values(v) are the document's values ("" is ignored).
func Lookup[T any](name string, values func(T) []string) Index[T] {
	return Index[T]{name: name, of: values}
}

// UniqueError reports a write refused because a Unique index's value is
// held by another document: Index, Value, Key (the holder) and By (the
// document the refused write was for). Nothing was written, and the
// write is not retried. It matches ErrExists.
type UniqueError = index.UniqueError

// indexes are a Store's indexes: the untyped Set the engine asks for
// their entries (engine.Implier), and the typed functions.
type indexes[T any] struct {
	set  *index.Set
	defs []Index[T]
	err  error // the declaration's refusal: every write and read fails with it
}

// newIndexes are the indexes declared for a Store of T encoded as enc over b (nil
// for none).
func newIndexes[T any](b driver.Backend, enc codec.Of[T], defs []Index[T]) *indexes[T] {
	if len(defs) == 0 {
		return nil
	}
	x := &indexes[T]{defs: defs}
	ds := make([]index.Def, len(defs))
	for i, d := range defs {
		if d.of == nil {
			x.err = errorf(ErrInvalidInput, "index %q has no function (use Unique, Lookup or Expiry)", d.name)
			return x
		}
		if d.at != nil && slices.ContainsFunc(defs[:i], func(e Index[T]) bool { return e.at != nil }) {
			x.err = errorf(ErrInvalidInput, "a Store has one expiry index, not two")
			return x
		}
		ds[i] = d.def()
	}
	x.set, x.err = index.New(b, ds, func(key string, data []byte) ([][]string, error) {
		v, err := enc.Decode(key, data)
		if err != nil {
			return nil, err
		}
		return x.values(key, v)
	})
	return x
}

// values are the values v holds, per index (index.Values).
func (x *indexes[T]) values(key string, v T) (out [][]string, err error) {
	out = make([][]string, len(x.defs))
	for i, d := range x.defs {
		if out[i], err = index.Values(d.name, key, d.of, v); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// keepsEntries reports whether x keeps entries a write changes, which
// need the version it replaces (or refuses every write): false without
// indexes, and for an Expiry alone over a backend that keeps no entries.
func (x *indexes[T]) keepsEntries() bool {
	return x != nil && (x.set == nil || !x.set.Entryless())
}

// find is the index of s named as idx, or the error of a read by it.
func (x *indexes[T]) find(idx Index[T]) (Index[T], error) {
	if x == nil {
		return Index[T]{}, errorf(ErrInvalidInput, "index %q is not declared on this Store (pass it to New)", idx.name)
	}
	if x.err != nil {
		return Index[T]{}, x.err
	}
	for _, d := range x.defs {
		if d.name == idx.name {
			return d, nil
		}
	}
	return Index[T]{}, errorf(ErrInvalidInput, "index %q is not declared on this Store (pass it to New)", idx.name)
}

// holds reports whether v holds value in d.
func (d Index[T]) holds(key string, v T, value string) (bool, error) {
	vals, err := index.Values(d.name, key, d.of, v)
	return slices.Contains(vals, value), err
}

func (d Index[T]) String() string { return fmt.Sprintf("index %q", d.name) }

// implier is what the engine asks for the entries of x's writes: its Set,
// or, when the declaration was refused, a refusal of every write.
func (x *indexes[T]) implier() engine.Implier {
	if x.err != nil {
		return index.Refusing{Err: x.err}
	}
	return x.set
}

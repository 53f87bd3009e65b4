package etagstore

import (
	"context"
	"errors"
	"iter"

	"github.com/etagstore/etagstore/internal/core"
	"github.com/etagstore/etagstore/internal/index"
	"github.com/etagstore/etagstore/internal/telemetry"
)

// This file reads documents by an index's value (index.go).

// GetBy returns the document holding value in idx, a Unique index
// declared on s. value carries its scope as keys do: on a table without
// Options.Partition, "b1/ship it" is the value "ship it" in partition b1.
// It reads the entry, then the document (two reads), and returns the
// document only if it holds the value now: an entry a writer that did not
// declare the index left behind is not trusted. No document holding it
// matches ErrNotFound; an index not declared on s, or a Lookup index,
// ErrInvalidInput.
func (s *Store[T]) GetBy(ctx context.Context, idx Index[T], value string) (Doc[T], error) {
	ctx, sp := s.core.Obs.Begin(ctx, telemetry.OpGetBy, value)
	d, err := s.getBy(ctx, idx, value, &sp.Stats)
	sp.End(err)
	return d, err
}

func (s *Store[T]) getBy(ctx context.Context, idx Index[T], value string, st *telemetry.Stats) (Doc[T], error) {
	d, err := s.idx.Find(idx.d.Name)
	if err != nil {
		return Doc[T]{}, err
	}
	if !d.Unique {
		return Doc[T]{}, errorf(ErrInvalidInput, "GetBy %q: %s is not Unique (use ListBy for a Lookup; an expiry index is read by Sweep)", value, d)
	}
	e, err := s.idx.Set.Holder(ctx, d.Def(), value)
	if err != nil {
		return Doc[T]{}, err
	}
	doc, err := s.reader(d, func(ctx context.Context, key string) (Doc[T], error) { return s.get(ctx, key, st) }).Holding(ctx, e)
	if err == nil && doc == nil {
		err = errorf(ErrNotFound, "no document holds %q in index %q", value, d.Name)
	}
	if err != nil {
		return Doc[T]{}, err
	}
	return *doc, nil
}

// reader reads the documents of d's entries (index.Reader), get with
// each read.
func (s *Store[T]) reader(d index.Decl[T], get func(ctx context.Context, key string) (Doc[T], error)) index.Reader[Doc[T]] {
	return index.Reader[Doc[T]]{Get: get, Decode: s.decode, Skip: core.IsExpired, ReadMany: s.core.Abilities.ReadMany,
		Holds: func(doc Doc[T], value string) (bool, error) { return d.Holds(doc.Key, doc.Value, value) }}
}

// ListBy yields the documents holding value in idx, an index declared on
// s, in the order of their keys' bytes within the value's scope (see
// GetBy for how value carries it); a key longer than 76 bytes after its
// scope comes after the others, as its entry is named by its hash. It
// lists the value's entries in one query and reads their documents 16
// at a time (together where the backend can: one query per 14 keys on
// tables), yielding each only if it holds the value now. A failure is
// yielded once as the error, after which iteration stops; an index not
// declared on s matches ErrInvalidInput. For a Unique index it yields
// what GetBy returns, or nothing.
func (s *Store[T]) ListBy(ctx context.Context, idx Index[T], value string) iter.Seq2[Doc[T], error] {
	return func(yield func(Doc[T], error) bool) {
		ctx, sp := s.core.Obs.Begin(ctx, telemetry.OpListBy, value)
		failed := errPanicked // until the loop ends normally (yield may panic)
		defer func() { sp.End(failed) }()
		failed = s.listBy(ctx, idx, value, &sp.Stats, yield)
	}
}

func (s *Store[T]) listBy(ctx context.Context, idx Index[T], value string, st *telemetry.Stats, yield func(Doc[T], error) bool) error {
	d, err := s.idx.Find(idx.d.Name)
	if err != nil {
		yield(Doc[T]{}, err)
		return err
	}
	if d.At != nil {
		err := errorf(ErrInvalidInput, "ListBy %q: %s is an expiry index, read by Sweep", value, d)
		yield(Doc[T]{}, err)
		return err
	}
	if d.Unique {
		doc, err := s.getBy(ctx, idx, value, st)
		switch {
		case errors.Is(err, ErrNotFound):
			return nil
		case err != nil:
			yield(Doc[T]{}, err)
			return err
		}
		yield(doc, nil)
		return nil
	}
	get := func(ctx context.Context, key string) (Doc[T], error) { return s.get(ctx, key, new(telemetry.Stats)) }
	return s.reader(d, get).List(ctx, s.idx.Set.Holders(ctx, d.Def(), value), yield)
}

package etagstore

import (
	"context"
	"errors"
	"iter"
	"sync"

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
	ctx, sp := s.obs.Begin(ctx, telemetry.OpGetBy, value)
	d, err := s.getBy(ctx, idx, value, &sp.Stats)
	sp.End(err)
	return d, err
}

func (s *Store[T]) getBy(ctx context.Context, idx Index[T], value string, st *telemetry.Stats) (Doc[T], error) {
	d, err := s.idx.find(idx)
	if err != nil {
		return Doc[T]{}, err
	}
	if !d.unique {
		return Doc[T]{}, errorf(ErrInvalidInput, "GetBy %q: %s is not Unique (use ListBy for a Lookup; an expiry index is read by Sweep)", value, d)
	}
	e, err := s.idx.set.Holder(ctx, d.def(), value)
	if err != nil {
		return Doc[T]{}, err
	}
	doc, err := s.holding(ctx, d, e, st)
	if err == nil && doc == nil {
		err = errorf(ErrNotFound, "no document holds %q in index %q", value, d.name)
	}
	if err != nil {
		return Doc[T]{}, err
	}
	return *doc, nil
}

// holding is the document e names if it holds e's value now (nil
// otherwise).
func (s *Store[T]) holding(ctx context.Context, d Index[T], e index.Entry, st *telemetry.Stats) (*Doc[T], error) {
	doc, err := s.get(ctx, e.Doc, st)
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	}
	holds, err := d.holds(doc.Key, doc.Value, e.Value)
	if err != nil || !holds {
		return nil, err
	}
	return &doc, nil
}

// holdingAll is holding of each of es: the documents read together
// (driver.Abilities.ReadMany: one query per 14 keys on tables), or one
// by one in parallel.
func (s *Store[T]) holdingAll(ctx context.Context, d Index[T], es []index.Entry) ([]*Doc[T], []error) {
	docs, errs := make([]*Doc[T], len(es)), make([]error, len(es))
	if many := s.abilities.ReadMany; many != nil && len(es) > 1 {
		keys := make([]string, len(es))
		for i, e := range es {
			keys[i] = e.Doc
		}
		items, err := many(ctx, keys)
		for i, e := range es {
			if errs[i] = err; err != nil || items[i].ETag == "" {
				continue
			}
			doc, err := s.decode(items[i])
			if isExpired(err) {
				continue
			}
			if errs[i] = err; err != nil {
				continue
			}
			if holds, err := d.holds(doc.Key, doc.Value, e.Value); err != nil || holds {
				docs[i], errs[i] = &doc, err
			}
		}
		return docs, errs
	}
	var wg sync.WaitGroup
	for i, e := range es {
		wg.Go(func() { docs[i], errs[i] = s.holding(ctx, d, e, new(telemetry.Stats)) })
	}
	wg.Wait()
	return docs, errs
}

// listByReads is how many documents ListBy reads at once.
const listByReads = 16

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
		ctx, sp := s.obs.Begin(ctx, telemetry.OpListBy, value)
		failed := errPanicked // until the loop ends normally (yield may panic)
		defer func() { sp.End(failed) }()
		failed = s.listBy(ctx, idx, value, &sp.Stats, yield)
	}
}

func (s *Store[T]) listBy(ctx context.Context, idx Index[T], value string, st *telemetry.Stats, yield func(Doc[T], error) bool) error {
	d, err := s.idx.find(idx)
	if err != nil {
		yield(Doc[T]{}, err)
		return err
	}
	if d.at != nil {
		err := errorf(ErrInvalidInput, "ListBy %q: %s is an expiry index, read by Sweep", value, d)
		yield(Doc[T]{}, err)
		return err
	}
	if d.unique {
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
	var chunk []index.Entry
	flush := func() (bool, error) {
		docs, errs := s.holdingAll(ctx, d, chunk)
		chunk = chunk[:0]
		for i := range docs {
			if errs[i] != nil {
				yield(Doc[T]{}, errs[i])
				return false, errs[i]
			}
			if docs[i] != nil && !yield(*docs[i], nil) {
				return false, nil
			}
		}
		return true, nil
	}
	for e, err := range s.idx.set.Holders(ctx, d.def(), value) {
		if err != nil {
			yield(Doc[T]{}, err)
			return err
		}
		if chunk = append(chunk, e); len(chunk) == listByReads {
			if more, err := flush(); !more {
				return err
			}
		}
	}
	_, err = flush()
	return err
}

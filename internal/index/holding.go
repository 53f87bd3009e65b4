package index

import (
	"context"
	"errors"
	"iter"
	"sync"

	"github.com/etagstore/etagstore/driver"
)

// This file reads the documents that entries name (GetBy, ListBy),
// generic in the Store's Doc: a document is yielded only if it holds the
// entry's value now, since an entry a writer that did not declare the
// index left behind is not trusted.

// Reader reads the documents of a Store's entries; D is its Doc.
type Reader[D any] struct {
	// Get reads and decodes key (ErrNotFound: missing, or expired).
	Get func(ctx context.Context, key string) (D, error)
	// Decode decodes a document ReadMany read.
	Decode func(it driver.Item) (D, error)
	// Skip reports a decoding's refusal of a document that has expired,
	// which a listing skips.
	Skip func(err error) bool
	// Holds reports whether doc holds value in the index read.
	Holds func(doc D, value string) (bool, error)
	// ReadMany reads several keys together (driver.Abilities.ReadMany);
	// nil: one by one, in parallel.
	ReadMany func(ctx context.Context, keys []string) ([]driver.Item, error)
}

// ListReads is how many documents List reads at once.
const ListReads = 16

// Holding is the document e names if it holds e's value now (nil
// otherwise).
func (r Reader[D]) Holding(ctx context.Context, e Entry) (*D, error) {
	doc, err := r.Get(ctx, e.Doc)
	switch {
	case errors.Is(err, driver.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	}
	holds, err := r.Holds(doc, e.Value)
	if err != nil || !holds {
		return nil, err
	}
	return &doc, nil
}

// HoldingAll is Holding of each of es: the documents read together
// (ReadMany: one query per 14 keys on tables), or one by one in
// parallel.
func (r Reader[D]) HoldingAll(ctx context.Context, es []Entry) ([]*D, []error) {
	docs, errs := make([]*D, len(es)), make([]error, len(es))
	if r.ReadMany != nil && len(es) > 1 {
		keys := make([]string, len(es))
		for i, e := range es {
			keys[i] = e.Doc
		}
		items, err := r.ReadMany(ctx, keys)
		for i, e := range es {
			if errs[i] = err; err != nil || items[i].ETag == "" {
				continue
			}
			doc, err := r.Decode(items[i])
			if r.Skip(err) {
				continue
			}
			if errs[i] = err; err != nil {
				continue
			}
			if holds, err := r.Holds(doc, e.Value); err != nil || holds {
				docs[i], errs[i] = &doc, err
			}
		}
		return docs, errs
	}
	var wg sync.WaitGroup
	for i, e := range es {
		wg.Go(func() { docs[i], errs[i] = r.Holding(ctx, e) })
	}
	wg.Wait()
	return docs, errs
}

// List yields the documents of entries that hold their values now,
// reading them ListReads at a time (HoldingAll). A failure is yielded
// once, as the error, and returned; so is a listing's.
func (r Reader[D]) List(ctx context.Context, entries iter.Seq2[Entry, error], yield func(D, error) bool) error {
	var zero D
	var chunk []Entry
	flush := func() (bool, error) {
		docs, errs := r.HoldingAll(ctx, chunk)
		chunk = chunk[:0]
		for i := range docs {
			if errs[i] != nil {
				yield(zero, errs[i])
				return false, errs[i]
			}
			if docs[i] != nil && !yield(*docs[i], nil) {
				return false, nil
			}
		}
		return true, nil
	}
	for e, err := range entries {
		if err != nil {
			yield(zero, err)
			return err
		}
		if chunk = append(chunk, e); len(chunk) == ListReads {
			if more, err := flush(); !more {
				return err
			}
		}
	}
	_, err := flush()
	return err
}

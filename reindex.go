package etagstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/etagstore/etagstore/internal/telemetry"
)

// Reindex builds idx's entries for every document of s, and repairs
// them: an entry a document needs is made, one left by a writer that did
// not declare the index (an older deploy, another program), whose
// document does not hold its value, is deleted. Run it once after
// declaring an index over documents written without it, once every
// writer declares it: a writer that does not, writing while Reindex
// runs, may leave an entry stale (GetBy and ListBy still check an
// entry against its document).
//
// It reads the documents a page of 999 at a time (one query on tables),
// so its memory is bounded (three pages at most), and commits their
// entries in batches of one partition, two at a time, while it lists
// the next page. Once a page's batches have ended it lists the page
// again (keys and ETags alone, bounded by the page's first and last keys
// on tables) while the next page's batches go, and checks the entries
// of a document that changed meanwhile, so it is safe to run while the
// app writes (docs/indexes.md names what a write made during the pass
// may meet). A partition that held no entry of
// idx when Reindex met it has nothing to repair; the entries of one that
// did are listed at the end, and those whose document does not hold
// their value deleted. It is idempotent: a second run, or a run after
// one that failed halfway, makes what is missing and leaves the rest.
//
// A value of a Unique index that two documents hold is reported, with
// both keys, in a *ReindexError matching ErrExists; the entry stays with
// the document that held it first, and no document is changed: which
// one gives the value up is the app's to decide. A batch whose answer is
// lost, or that the service refuses unapplied (throttled), is sent again
// (its entries read first), up to 4 times, and then ends the pass with
// an error matching ErrUnavailable: run Reindex again. An index not
// declared on s matches ErrInvalidInput; a backend without entries
// (blobs) errors.ErrUnsupported.
func (s *Store[T]) Reindex(ctx context.Context, idx Index[T]) error {
	ctx, sp := s.core.Obs.Begin(ctx, telemetry.OpReindex, idx.d.Name)
	err := s.reindex(ctx, idx)
	sp.End(err)
	return err
}

func (s *Store[T]) reindex(ctx context.Context, idx Index[T]) error {
	d, err := s.idx.Find(idx.d.Name)
	if err != nil {
		return err
	}
	dups, err := s.idx.Set.Reindex(ctx, d.Def())
	if err != nil || len(dups) == 0 {
		return err
	}
	e := &ReindexError{Index: d.Name}
	for _, dup := range dups {
		e.Duplicates = append(e.Duplicates, Duplicate(dup))
	}
	return e
}

// Duplicate is a value of a Unique index that two documents hold: Key,
// which holds its entry, and Other.
type Duplicate struct{ Value, Key, Other string }

// ReindexError reports the values of a Unique index that several
// documents hold, found by Reindex. It matches ErrExists.
type ReindexError struct {
	Index      string
	Duplicates []Duplicate
}

func (e *ReindexError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v: index %q: %d values held by two documents:", ErrExists, e.Index, len(e.Duplicates))
	for i, d := range e.Duplicates {
		if i == 3 {
			fmt.Fprintf(&b, " and %d more", len(e.Duplicates)-i)
			break
		}
		fmt.Fprintf(&b, " %q by %q and %q;", d.Value, d.Key, d.Other)
	}
	return strings.TrimSuffix(b.String(), ";")
}

func (e *ReindexError) Unwrap() error { return ErrExists }

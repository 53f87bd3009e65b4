package etagstore

import (
	"context"
	"time"

	"github.com/etagstore/etagstore/internal/index"
	"github.com/etagstore/etagstore/internal/telemetry"
)

// This file deletes expired documents (Expiry): one pass (Sweep), or a
// pass every period in the background, one process at a time under an
// optional lock (SweepEvery).

// Sweep deletes the documents that have expired, by the Store's clock
// less Options.ExpirySkew, and returns how many it deleted. It never
// reads every document: it lists only the expiry entries due (on tables
// one query of the table filtered by RowKey, which the service pages),
// reads the documents they name (a partition's together, up to 14 a
// query) and deletes each in one request with every entry it holds (8
// requests at once, while the next partition's documents are read),
// conditioned on the version read and on its expiry entry, so that a
// document written since (refreshed) stays, and so does its new entry.
// An entry whose document is gone or no longer expires then is removed.
// Several sweepers at once are safe: a document is deleted once. Over a
// backend that keeps no entries (blobs), Sweep lists every document's
// version with the instant each write kept beside it (a listing page
// per 5,000 blobs, with their metadata), reads those due, and deletes
// each expired one with If-Match.
//
// A Store without an Expiry index matches ErrInvalidInput. A failed
// request ends the pass with its error: no more start, those running
// finish (what they deleted stays deleted, and counts); the next pass
// takes up the rest.
func (s *Store[T]) Sweep(ctx context.Context) (int, error) {
	ctx, sp := s.core.Obs.Begin(ctx, telemetry.OpSweep, "")
	n, err := s.sweep(ctx)
	sp.End(err)
	return n, err
}

func (s *Store[T]) sweep(ctx context.Context) (int, error) {
	d, ok := s.idx.Expiry()
	switch {
	case s.idx != nil && s.idx.Err != nil:
		return 0, s.idx.Err
	case !ok:
		return 0, errorf(ErrInvalidInput, "Sweep: the Store has no Expiry index (pass etagstore.Expiry to New)")
	}
	start := s.core.Clock.Now()
	var out index.Swept
	err := s.idx.Set.Sweep(ctx, d.Def(), index.Due{Cutoff: start.Add(-s.core.Life.Skew), Now: start, At: s.core.Life.At}, &out)
	s.core.Obs.Swept(ctx, telemetry.SweepPass{Swept: out.Swept, Refreshed: out.Refreshed, Cleaned: out.Cleaned,
		Listed: out.Listed, Lag: out.Lag, Took: s.core.Clock.Now().Sub(start), Err: err})
	return out.Swept, err
}

// SweepEvery runs Sweep every period until ctx is done, then returns nil.
// A pass that fails is logged (Options.Logger) and the next one runs on
// time. With lock, a pass runs only while this process holds the lock
// named "etagstore-sweep-" and the Expiry index's name: the first to take
// it sweeps, every period, until it loses it or ctx is done; the others
// try again every period. Without one, every process sweeps, which is
// safe and only repeats work. A period under a millisecond, or a Store
// without an Expiry index, matches ErrInvalidInput at once.
func (s *Store[T]) SweepEvery(ctx context.Context, period time.Duration, lock Locker) error {
	d, ok := s.idx.Expiry()
	switch {
	case period < time.Millisecond:
		return errorf(ErrInvalidInput, "SweepEvery: period %v is under a millisecond", period)
	case s.idx != nil && s.idx.Err != nil:
		return s.idx.Err
	case !ok:
		return errorf(ErrInvalidInput, "SweepEvery: the Store has no Expiry index (pass etagstore.Expiry to New)")
	}
	s.every(ctx, period, lock, "etagstore-sweep-"+d.Name, func(ctx context.Context) bool {
		_, _ = s.Sweep(ctx)
		return false
	})
	return nil
}

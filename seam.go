package etagstore

import (
	"context"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/access"
	"github.com/etagstore/etagstore/internal/actions"
)

// This file is the Store's side of the one seam to the backend packages
// (package internal/access): the writes they offer beyond the Store's
// own — tablestore's Merge, UpsertMerge and Batch — go into the same
// engine as every Store write (the same retries, fences, resolver and
// telemetry; internal/actions, through the Store's adapter), and they borrow the
// Store's paging, decoding and telemetry
// (tablestore.Query and QueryPage, blobstore.GetIf).

// seam is the backend packages' way into a Store (Store embeds it).
type seam[T any] = access.Seam[T, Doc[T], Page[T]]

// extras implements seam for s.
type extras[T any] struct{ s *Store[T] }

func (x extras[T]) PageWith(ctx context.Context, scope string, limit int, token string, list access.List) (Page[T], error) {
	return x.s.page(ctx, scope, limit, token, list)
}

func (x extras[T]) DecodeItem(it driver.Item) (Doc[T], error) { return x.s.decode(it) }

func (x extras[T]) Expires() bool { return x.s.life != nil }

func (x extras[T]) Observe(ctx context.Context, op access.Op, subject string) (context.Context, func(error)) {
	if op != access.Query && op != access.QueryPage && op != access.GetIf {
		return ctx, func(error) {} // not a backend package's operation: observed by nothing
	}
	ctx, sp := x.s.obs.Begin(ctx, op, subject)
	if !sp.Recording() {
		return ctx, func(error) {}
	}
	return ctx, sp.End
}

// DeliverWrite delivers w, one span.
func (x extras[T]) DeliverWrite(ctx context.Context, w access.Write[T]) ([]ETag, error) {
	op, key := actions.Named(w)
	ctx, sp := x.s.obs.Begin(ctx, op, key)
	defer sp.EndOnPanic() // Encode runs the user's codec
	etags, err := actions.Deliver(ctx, adapter[T]{x.s}, op, w)
	sp.End(err)
	return etags, err
}

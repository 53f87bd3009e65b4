package etagstore

import (
	"context"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/access"
	"github.com/etagstore/etagstore/internal/actions"
	"github.com/etagstore/etagstore/internal/codec"
	"github.com/etagstore/etagstore/internal/engine"
	"github.com/etagstore/etagstore/internal/telemetry"
)

// This file is the Store's side of the one seam to the backend packages
// (package internal/access): the writes they offer beyond the Store's
// own — tablestore's Merge, UpsertMerge and Batch — go into the same
// engine as every Store write (the same retries, fences, resolver and
// telemetry; internal/actions, through actionStore), and they borrow the
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

func (x extras[T]) Expires() bool { return x.s.core.Life != nil }

func (x extras[T]) Observe(ctx context.Context, op access.Op, subject string) (context.Context, func(error)) {
	if op != access.Query && op != access.QueryPage && op != access.GetIf {
		return ctx, func(error) {} // not a backend package's operation: observed by nothing
	}
	ctx, sp := x.s.core.Obs.Begin(ctx, op, subject)
	if !sp.Recording() {
		return ctx, func(error) {}
	}
	return ctx, sp.End
}

// DeliverWrite delivers w, one span.
func (x extras[T]) DeliverWrite(ctx context.Context, w access.Write[T]) ([]ETag, error) {
	op, key := actions.Named(w)
	ctx, sp := x.s.core.Obs.Begin(ctx, op, key)
	defer sp.EndOnPanic() // Encode runs the user's codec
	etags, err := actions.Deliver(ctx, actionStore[T]{x.s}, op, w)
	sp.End(err)
	return etags, err
}

// actionStore is a Store as a delivery of actions knows it (the typed
// adapter behind actions.Store).
type actionStore[T any] struct{ s *Store[T] }

func (x actionStore[T]) CheckKey(key string) error    { return x.s.core.CheckKey(key) }
func (x actionStore[T]) KeepsEntries() bool           { return x.s.idx.KeepsEntries() }
func (x actionStore[T]) Abilities() *driver.Abilities { return &x.s.core.Abilities }
func (x actionStore[T]) Codec() codec.Of[T]           { return x.s.enc }

func (x actionStore[T]) Deliver(ctx context.Context, op telemetry.Op, mode engine.Mode, keys []string, p engine.Plan, start []version) (engine.Result, error) {
	return x.s.core.Deliver(ctx, x.s.core.Delivery(ctx, op, mode, keys, p, engine.Options{Start: start}))
}

func (x actionStore[T]) Known(ctx context.Context, key string, etag ETag, extra any) (version, bool) {
	if e, ok := extra.(Extra); ok && e.x.At(etag) { // the version the Doc's read holds, as Replace takes it (replaceOn)
		return x.s.core.Life.Judged(version{Item: driver.Item{Key: key, Data: []byte(e.x.Stored()), ETag: etag}, Exists: true}), true
	}
	if etag == ETagAny {
		etag = "" // any version the cache holds
	}
	if v := x.s.core.Cached(ctx, key, etag); v != nil {
		return v[0], true
	}
	return version{}, false
}

func (x actionStore[T]) ReadAll(ctx context.Context, keys []string) ([]version, error) {
	return x.s.core.ReadAll(ctx, keys)
}

func (x actionStore[T]) Expires() bool { return x.s.core.Life != nil }

func (x actionStore[T]) Blind(ctx context.Context, op telemetry.Op, w keyWrite) (driver.Item, error) {
	return x.s.core.Blind(ctx, op, w)
}

func (x actionStore[T]) Conditioned(ctx context.Context, op telemetry.Op, key string, held ETag, mine T, write func(*engine.Delivery, version) (keyWrite, error)) (driver.Item, error) {
	return x.s.conditioned(ctx, op, key, held, mine, write)
}

func (x actionStore[T]) Refused(ctx context.Context, key string, held ETag, mine T) error {
	return x.s.refused(ctx, key, held, mine)
}

func (x actionStore[T]) ConflictWith(it driver.Item, held ETag, mine T, attempts int) error {
	return x.s.conflictWith(it, held, mine, attempts)
}

func (x actionStore[T]) ReadOf(extra any) (read bool, etag ETag, ok bool) {
	e, ok := extra.(Extra)
	return e.x.Base != "", e.x.ETag, ok
}

func (x actionStore[T]) Onto(key string, etag ETag, extra any, mine []byte) (codec.Written, error) {
	e, _ := extra.(Extra)
	return x.s.onto(key, etag, e, mine)
}

func (x actionStore[T]) ChangeOnto(b version, extra any, mine []byte) (codec.Written, error) {
	e, _ := extra.(Extra)
	return x.s.changeOnto(b, e, mine)
}

var _ actions.Store[int] = actionStore[int]{}

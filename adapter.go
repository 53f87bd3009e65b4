package etagstore

import (
	"context"
	"errors"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/actions"
	"github.com/etagstore/etagstore/internal/codec"
	"github.com/etagstore/etagstore/internal/engine"
	"github.com/etagstore/etagstore/internal/reentry"
	"github.com/etagstore/etagstore/internal/telemetry"
	"github.com/etagstore/etagstore/internal/txn"
	"github.com/etagstore/etagstore/internal/updategroup"
)

// adapter is a Store as the machinery below the root knows it: the one
// typed adapter behind the interfaces through which those packages reach
// a Store, and nothing else of it — the transaction machinery's
// txn.Store (its backend, engine and cache, and the one step that
// decodes T), group commit's updategroup.Work (T's mutation, encoding
// and conflicts), and the delivery of a backend's extra writes,
// actions.Store. Two are one Store when their values are equal.
type adapter[T any] struct{ s *Store[T] }

var (
	_ txn.Store                    = adapter[int]{}
	_ updategroup.Work[int, Extra] = adapter[int]{}
	_ actions.Store[int]           = adapter[int]{}
)

// As a txn.Store.

func (x adapter[T]) Env() *engine.Env              { return x.s.env }
func (x adapter[T]) Abilities() *driver.Abilities  { return &x.s.abilities }
func (x adapter[T]) Backend() driver.Backend       { return x.s.b }
func (x adapter[T]) BackendName() string           { return backendName(x.s.b) }
func (x adapter[T]) Reentry() *reentry.Reentry     { return &x.s.reentry }
func (x adapter[T]) Recorder() *telemetry.Recorder { return x.s.obs }
func (x adapter[T]) Grouped() bool                 { return x.s.grouped }
func (x adapter[T]) CheckKey(key string) error     { return x.s.checkKey(key) }
func (x adapter[T]) Holds(key string) bool         { return x.s.holds(key) }
func (x adapter[T]) CacheWritten(res engine.Result, canonical bool) {
	x.s.cache.Written(res, canonical)
}

func (x adapter[T]) Read(ctx context.Context, key string) (version, error) {
	return hooks{x.s.obs, &x.s.core}.Read(ctx, key)
}

func (x adapter[T]) Cached(ctx context.Context, key string) []version {
	return x.s.cached(ctx, key, "")
}

func (x adapter[T]) Noted(key string, it driver.Item, err error) version {
	x.s.cache.Note(key, it, err)
	return x.s.readVersion(key, it, err)
}

func (x adapter[T]) Apply(b version, data []byte) (doc, changes []byte, canonical bool, err error) {
	w, err := x.s.enc.Apply(b, nil, data)
	return w.Data, w.Changes, w.Canonical, err
}

// As an updategroup.Work.

func (x adapter[T]) StartFrom(b version) (*T, []byte, error) { return x.s.enc.StartFrom(b) }

func (x adapter[T]) Mutate(key string, mutate func(*T) error, v *T) error {
	return x.s.mutate(key, mutate, v)
}

func (x adapter[T]) Encode(key string, v T) ([]byte, error) { return x.s.enc.Encode(key, v) }

func (x adapter[T]) Modify(ctx context.Context, key string, create bool, start []version, mine *T,
	change func(version) ([]byte, []byte, bool, error), f engine.Flight) (engine.Result, Extra, error) {
	return x.s.modify(ctx, telemetry.OpUpdate, key, create, start, mine, change, f)
}

func (x adapter[T]) Committed(ctx context.Context, n int) { x.s.obs.Committed(ctx, n) }

func (x adapter[T]) Chain(it driver.Item, e Extra) version {
	return x.s.stored(it, false, e.x.Doc == "")
}

func (x adapter[T]) Mine(err error, v T) (error, bool) {
	var ce *ConflictError[T]
	if !errors.As(err, &ce) {
		return nil, false
	}
	mine := *ce
	mine.Mine = v
	return &mine, true
}

// As an actions.Store.

func (x adapter[T]) Codec() codec.Of[T] { return x.s.enc }

func (x adapter[T]) Deliver(ctx context.Context, op telemetry.Op, mode engine.Mode, keys []string, p engine.Plan) (engine.Result, error) {
	return x.s.deliver(ctx, x.s.delivery(ctx, op, mode, keys, p, nil, nil))
}

func (x adapter[T]) Blind(ctx context.Context, op telemetry.Op, w keyWrite) (driver.Item, error) {
	return x.s.blind(ctx, op, w)
}

func (x adapter[T]) Conditioned(ctx context.Context, op telemetry.Op, key string, held ETag, mine T, write func(*engine.Delivery, version) (keyWrite, error)) (driver.Item, error) {
	return x.s.conditioned(ctx, op, key, held, mine, write)
}

func (x adapter[T]) Refused(ctx context.Context, key string, held ETag, mine T) error {
	return x.s.refused(ctx, key, held, mine)
}

func (x adapter[T]) ConflictWith(it driver.Item, held ETag, mine T, attempts int) error {
	return x.s.conflictWith(it, held, mine, attempts)
}

func (x adapter[T]) ReadOf(extra any) (read bool, etag ETag, ok bool) {
	e, ok := extra.(Extra)
	return e.x.Base != "", e.x.ETag, ok
}

func (x adapter[T]) Onto(key string, etag ETag, extra any, mine []byte) (codec.Written, error) {
	e, _ := extra.(Extra)
	return x.s.onto(key, etag, e, mine)
}

func (x adapter[T]) ChangeOnto(b version, extra any, mine []byte) (codec.Written, error) {
	e, _ := extra.(Extra)
	return x.s.changeOnto(b, e, mine)
}

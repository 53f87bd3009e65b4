package etagstore

import (
	"context"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/core"
	"github.com/etagstore/etagstore/internal/engine"
	"github.com/etagstore/etagstore/internal/reentry"
	"github.com/etagstore/etagstore/internal/telemetry"
	"github.com/etagstore/etagstore/internal/txn"
)

// txStore is a Store as the transaction machinery (internal/txn) knows
// it: its backend, engine and cache, and the one step that decodes T.
// Two are one Store when their values are equal.
type txStore[T any] struct{ s *Store[T] }

func (x txStore[T]) Env() *engine.Env              { return x.s.core.Env }
func (x txStore[T]) Abilities() *driver.Abilities  { return &x.s.core.Abilities }
func (x txStore[T]) Backend() driver.Backend       { return x.s.core.Backend }
func (x txStore[T]) BackendName() string           { return core.BackendName(x.s.core.Backend) }
func (x txStore[T]) Reentry() *reentry.Reentry     { return &x.s.core.Reentry }
func (x txStore[T]) Recorder() *telemetry.Recorder { return x.s.core.Obs }
func (x txStore[T]) Grouped() bool                 { return x.s.core.Grouped }
func (x txStore[T]) CheckKey(key string) error     { return x.s.core.CheckKey(key) }
func (x txStore[T]) Holds(key string) bool         { return x.s.core.Holds(key) }
func (x txStore[T]) CacheWritten(res engine.Result, canonical bool) {
	x.s.core.Cache.Written(res, canonical)
}

func (x txStore[T]) Read(ctx context.Context, key string) (version, error) {
	return x.s.core.Read(ctx, key)
}

func (x txStore[T]) Cached(ctx context.Context, key string) []version {
	return x.s.core.Cached(ctx, key, "")
}

func (x txStore[T]) Noted(key string, it driver.Item, err error) version {
	return x.s.core.Noted(key, it, err)
}

func (x txStore[T]) Apply(b version, data []byte) (doc, changes []byte, canonical bool, err error) {
	w, err := x.s.enc.Apply(b, nil, data)
	return w.Data, w.Changes, w.Canonical, err
}

var _ txn.Store = txStore[int]{}

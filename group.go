package etagstore

import (
	"context"
	"errors"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/engine"
	"github.com/etagstore/etagstore/internal/telemetry"
	"github.com/etagstore/etagstore/internal/updategroup"
)

// Group commit for Updates (see package internal/updategroup): concurrent
// Updates of one key in one Store share one read and one conditional
// write, and each caller still gets the state right after its own
// mutation, its own errors and its own deadline. This file is the Store's
// side: the way in, and the typed work the group does through the Store.

// updateGrouped runs an Update through its key's group: as its first
// caller, on its own (telling the group when mutate runs); otherwise
// queued, its mutate applied in a batch's slot on this goroutine.
func (s *Store[T]) updateGrouped(ctx context.Context, key string, create bool, mutate func(*T) error, st *telemetry.Stats) (Doc[T], error) {
	first, r := s.groups.Arrive(ctx, groupWork[T]{s}, key, create, mutate)
	if first != nil {
		defer first.Done()
		return s.updateUngrouped(ctx, key, create, mutate, first, st)
	}
	res := r.Served(ctx)
	switch {
	case res.Ungrouped && res.Self != nil:
		return Doc[T]{}, res.Self // its mutate wrote the key: running it again would write again
	case res.Ungrouped:
		return s.updateUngrouped(ctx, key, create, mutate, nil, st)
	}
	st.Attempts, st.Batch = res.Attempts, res.Batch
	if res.Err != nil {
		return Doc[T]{}, res.Err
	}
	d := s.dated(Doc[T]{Key: key, Value: res.Value, ETag: res.ETag, Extra: res.Extra})
	if res.Superseded {
		d.Extra = Extra{res.Extra.x.Superseded(res.ETag, res.Data)} // its own state, not the version written
	}
	return d, nil
}

// groupWork is a Store's typed work in its Updates' group commit
// (updategroup.Work).
type groupWork[T any] struct{ s *Store[T] }

func (w groupWork[T]) StartFrom(b version) (*T, []byte, error) { return w.s.enc.StartFrom(b) }

// Mutate runs mutate on v through the Store's Reentry (see opUpdate).
func (w groupWork[T]) Mutate(key string, mutate func(*T) error, v *T) error {
	return w.s.core.Reentry.Run(opUpdate, key, func() error { return mutate(v) })
}

func (w groupWork[T]) Encode(key string, v T) ([]byte, error) { return w.s.enc.Encode(key, v) }

func (w groupWork[T]) Cached(ctx context.Context, key string) []version {
	return w.s.core.Cached(ctx, key, "")
}

func (w groupWork[T]) Modify(ctx context.Context, key string, create bool, start []version, mine *T,
	change func(version) ([]byte, []byte, bool, error), f engine.Flight) (engine.Result, Extra, error) {
	return w.s.modify(ctx, telemetry.OpUpdate, key, create, start, mine, change, f)
}

func (w groupWork[T]) Committed(ctx context.Context, n int) { w.s.core.Obs.Committed(ctx, n) }

func (w groupWork[T]) Chain(it driver.Item, x Extra) version {
	return w.s.core.Stored(it, false, x.x.Doc == "")
}

func (w groupWork[T]) Mine(err error, v T) (error, bool) {
	var ce *ConflictError[T]
	if !errors.As(err, &ce) {
		return nil, false
	}
	mine := *ce
	mine.Mine = v
	return &mine, true
}

var _ updategroup.Work[int, Extra] = groupWork[int]{}

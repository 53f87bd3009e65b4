package etagstore

import (
	"context"
	"time"

	"github.com/etagstore/etagstore/internal/core"
)

// This file is the lock a pass in the background takes, so that one
// process runs it at a time: the loop SweepEvery and an Outbox's Relay
// share is internal/core's (every.go).

// Locker is a lock a background loop (Store.SweepEvery, Outbox.Relay)
// takes so that one process runs it at a time while the others stand by:
// blobstore's Locker is one (a lease, with a fencing token).
type Locker interface {
	// TryHold takes the lock named name if it is free, or fails at once
	// with an error matching ErrLocked.
	TryHold(ctx context.Context, name string) (Held, error)
}

// Held is a lock a Locker took.
type Held interface {
	// Context is done when the lock is lost.
	Context() context.Context
	// Unlock releases it.
	Unlock(ctx context.Context) error
}

// every runs pass every period until ctx is done, in one process at a
// time with lock (core.Core.Every): the lock named name.
func (s *Store[T]) every(ctx context.Context, period time.Duration, lock Locker, name string, pass func(context.Context) (again bool)) {
	var hold core.Hold
	if lock != nil {
		hold = func(ctx context.Context) (context.Context, func(context.Context) error, error) {
			h, err := lock.TryHold(ctx, name)
			if err != nil {
				return nil, nil, err
			}
			return h.Context(), h.Unlock, nil
		}
	}
	s.core.Every(ctx, period, hold, name, pass)
}

package etagstore

import (
	"context"
	"errors"
	"time"
)

// This file runs a pass in the background, every period, in one process
// at a time when a lock is given: the shape SweepEvery and an Outbox's
// Relay share.

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

// every runs pass every period until ctx is done; with lock, only while
// it holds the lock named name (trying again every period while another
// process holds it). A pass that reports it did some work is followed by
// the next at once: a backlog is worked off without a period's wait
// between its parts. A failure to take or keep the lock is logged.
func (c *core) every(ctx context.Context, period time.Duration, lock Locker, name string, pass func(context.Context) (again bool)) {
	for ctx.Err() == nil {
		if lock == nil {
			if pass(ctx) {
				continue
			}
		} else if err := c.holding(ctx, lock, name, period, pass); err != nil && !errors.Is(err, ErrLocked) && ctx.Err() == nil {
			c.obs.Logger().WarnContext(ctx, "etagstore: background lock", "lock", name, "error", c.obs.Describe(err))
		}
		if c.clock.Sleep(ctx, period) != nil {
			return
		}
	}
}

// holding takes lock and, while it holds it, runs pass every period (at
// once after a pass that did some work); it releases it when ctx is done
// or the lock is lost.
func (c *core) holding(ctx context.Context, lock Locker, name string, period time.Duration, pass func(context.Context) (again bool)) error {
	h, err := lock.TryHold(ctx, name)
	if err != nil {
		return err
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = h.Unlock(uctx)
	}()
	held := h.Context()
	for {
		pctx, cancel := context.WithCancel(ctx)
		stop := context.AfterFunc(held, cancel)
		again := pass(pctx)
		stop()
		cancel()
		if held.Err() != nil || !again && c.clock.Sleep(ctx, period) != nil || held.Err() != nil || ctx.Err() != nil {
			return nil // lost (stand by, and try again), or done
		}
	}
}

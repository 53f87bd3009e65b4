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
// process holds it). A failure to take or keep the lock is logged.
func (c *core) every(ctx context.Context, period time.Duration, lock Locker, name string, pass func(context.Context)) {
	for ctx.Err() == nil {
		if lock == nil {
			pass(ctx)
		} else if err := c.holding(ctx, lock, name, period, pass); err != nil && !errors.Is(err, ErrLocked) && ctx.Err() == nil {
			c.obs.Logger().WarnContext(ctx, "etagstore: background lock", "lock", name, "error", c.obs.Describe(err))
		}
		if c.clock.Sleep(ctx, period) != nil {
			return
		}
	}
}

// holding takes lock and, while it holds it, runs pass every period; it
// releases it when ctx is done or the lock is lost.
func (c *core) holding(ctx context.Context, lock Locker, name string, period time.Duration, pass func(context.Context)) error {
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
		pass(pctx)
		stop()
		cancel()
		if held.Err() != nil || c.clock.Sleep(ctx, period) != nil || held.Err() != nil {
			return nil // lost (stand by, and try again), or done
		}
	}
}

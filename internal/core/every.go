package core

import (
	"context"
	"errors"
	"time"

	"github.com/etagstore/etagstore/driver"
)

// This file runs a pass in the background, every period, in one process
// at a time when a lock is given: the shape the root's SweepEvery and an
// Outbox's Relay share.

// Hold takes a lock (the root's Locker.TryHold of a name) if it is free:
// held is done when the lock is lost, unlock releases it; an error
// matching ErrLocked when another process holds it.
type Hold func(ctx context.Context) (held context.Context, unlock func(context.Context) error, err error)

// Every runs pass every period until ctx is done; with hold, only while
// it holds the lock named name (trying again every period while another
// process holds it). A pass that reports it did some work is followed by
// the next at once: a backlog is worked off without a period's wait
// between its parts. A failure to take or keep the lock is logged.
func (c *Core) Every(ctx context.Context, period time.Duration, hold Hold, name string, pass func(context.Context) (again bool)) {
	for ctx.Err() == nil {
		if hold == nil {
			if pass(ctx) {
				continue
			}
		} else if err := c.holding(ctx, hold, period, pass); err != nil && !errors.Is(err, driver.ErrLocked) && ctx.Err() == nil {
			c.Obs.Logger().WarnContext(ctx, "etagstore: background lock", "lock", name, "error", c.Obs.Describe(err))
		}
		if c.Clock.Sleep(ctx, period) != nil {
			return
		}
	}
}

// holding takes the lock and, while it holds it, runs pass every period
// (at once after a pass that did some work); it releases it when ctx is
// done or the lock is lost.
func (c *Core) holding(ctx context.Context, hold Hold, period time.Duration, pass func(context.Context) (again bool)) error {
	held, unlock, err := hold(ctx)
	if err != nil {
		return err
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = unlock(uctx)
	}()
	for {
		pctx, cancel := context.WithCancel(ctx)
		stop := context.AfterFunc(held, cancel)
		again := pass(pctx)
		stop()
		cancel()
		if held.Err() != nil || !again && c.Clock.Sleep(ctx, period) != nil || held.Err() != nil || ctx.Err() != nil {
			return nil // lost (stand by, and try again), or done
		}
	}
}

package engine

import (
	"context"
	"errors"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/outcome"
	"github.com/etagstore/etagstore/internal/request"
	"github.com/etagstore/etagstore/internal/retry"
)

// This file is an attempt up to its send: its base (known or read),
// admitted (fences; the Contender's wait for the key), the plan's
// request built over it, and its dispatch; or, with nothing to write, its
// confirmation. What follows the send is send.go's.

// attempt is one step of the retry loop.
func (d *Delivery) attempt(ctx context.Context, n int) (retry.Next, error) {
	d.res.Attempts = n
	c := d.then
	d.then = carry{}
	if c.raced {
		d.env.Hooks.Conflict(ctx)
	}
	if c.resend != nil && (d.unsettled != nil || d.held(c.resend)) {
		return d.send(ctx, c.resend, true)
	}
	base, err := d.base(ctx, c.base)
	if err != nil {
		return retry.Stop, err
	}
	if c.check != nil && d.foundLanded(c.check, base) {
		return retry.Stop, nil
	}
	if base, err = d.admitted(ctx, base, c.base == nil); errors.Is(err, ErrDisplaced) {
		d.then = carry{raced: true} // an older write of the Store waits for the key
		return retry.AfterLoss, driver.Errorf(driver.ErrConflict, "%s %q: %v", d.op, d.key, err)
	} else if err != nil {
		return retry.Stop, err
	}
	req, err := d.plan.Build(d, base)
	if d.outcome = nil; err != nil {
		if end, ok := request.CheckedEnd(err); ok && req.ChecksOnly() {
			d.outcome, err = end, nil // the end of the write once its checks hold
		}
	}
	if errors.Is(err, ErrStale) && d.mode == SelfReading {
		return d.rerun(err)
	}
	if err != nil {
		return retry.Stop, err
	}
	if len(req) == 0 {
		return d.confirm(ctx, base)
	}
	return d.dispatch(ctx, req, base)
}

// dispatch sends req, built over base, unless ctx is done or a member of
// the batch behind it has left (then it is built again). The write's
// Contender may pause it first, and mark it (Contender.Dispatch).
func (d *Delivery) dispatch(ctx context.Context, req Request, base []Version) (retry.Next, error) {
	if err := ctx.Err(); err != nil {
		return retry.Stop, err // nothing sent; Run reports an unsettled earlier request
	}
	if c := d.contender(); c != nil {
		var err error
		if req, err = c.Dispatch(ctx, d.key, req, !request.Verified(base)); err != nil {
			return retry.Stop, err // nothing sent, as above
		}
	}
	if !d.held(req) {
		d.then.base = base // a member left the batch: apply again without it
		return retry.Redo, nil
	}
	return d.send(ctx, req, request.Verified(base))
}

// held reports whether req may be sent: a write with no group behind it
// has no flight, and a request of checks alone holds no member's changes,
// so the flight is not asked (see Flight).
func (d *Delivery) held(req Request) bool {
	return d.flight == nil || req.ChecksOnly() || d.flight.Hold()
}

// release tells the flight, if any, that the request did not land.
func (d *Delivery) release() {
	if d.flight != nil {
		d.flight.Release()
	}
}

// base returns the versions an attempt starts from: none unless Based,
// the known ones, or a read.
func (d *Delivery) base(ctx context.Context, known []Version) ([]Version, error) {
	switch {
	case d.mode != Based:
		return nil, nil
	case known != nil:
		return known, nil
	}
	return d.read(ctx, d.keys)
}

// read reads keys.
func (d *Delivery) read(ctx context.Context, keys []string) ([]Version, error) {
	vs := make([]Version, len(keys))
	for i, key := range keys {
		v, err := d.env.Hooks.Read(ctx, key)
		if err != nil {
			return nil, err
		}
		vs[i] = v
	}
	return vs, nil
}

// foundLanded reports whether req, refused with 412, is found in base
// after all: the refusal answered a retry, below the Store, of req itself
// after its answer was lost. (A backend that sees such a retry marks the
// refusal driver.ErrAmbiguous and the engine settles it; this is the
// defence for one that cannot see it.)
func (d *Delivery) foundLanded(req Request, base []Version) bool {
	if len(base) != len(req) || !request.Verified(base) {
		return false
	}
	if request.Resolve(req, base) == outcome.Committed {
		d.res.Out, d.res.Sent = request.FoundIn(req, base), req
		return true
	}
	return false
}

// admitted is the base an attempt builds on: base, read (or not), once
// admitted (a fenced write's); or, after a lost race, the version the
// write's Contender hands it (Contender.Await), admitted too.
func (d *Delivery) admitted(ctx context.Context, base []Version, read bool) ([]Version, error) {
	if d.fenced {
		if err := d.admit(base); err != nil {
			return base, err
		}
	}
	c := d.contender()
	if c == nil || !d.lost {
		return base, nil
	}
	base, err := c.Await(ctx, d, base, read)
	switch {
	case err != nil:
		return nil, err
	case !d.fenced:
		return base, nil
	}
	return base, d.admit(base) // a version handed over is admitted too
}

// admit refuses a fenced write over a version that a newer fencing token
// holds.
func (d *Delivery) admit(base []Version) error {
	for i, b := range base {
		if err := request.CheckFence(b.Key, b.Meta, d.fence); err != nil {
			return d.nameAction(i, err)
		}
	}
	return nil
}

// nameAction wraps err in a *driver.ActionError when the write has several
// keys.
func (d *Delivery) nameAction(i int, err error) error {
	if len(d.keys) == 1 {
		return err
	}
	return &driver.ActionError{Index: i, Err: err}
}

// confirm ends an attempt that has nothing to write. Versions not read
// during this call are confirmed by a read first; if they moved on, the
// change is built again over the new ones.
func (d *Delivery) confirm(ctx context.Context, base []Version) (retry.Next, error) {
	if !request.Verified(base) {
		cur, err := d.read(ctx, d.keys)
		if err != nil {
			return retry.Stop, err
		}
		for i := range cur {
			if cur[i].Exists != base[i].Exists || cur[i].ETag != base[i].ETag {
				d.then.base = cur // moved on: build over the current versions
				return retry.Redo, nil
			}
		}
	}
	d.res.Out = make([]driver.Item, len(base))
	for i, b := range base {
		d.res.Out[i] = b.Item
	}
	d.res.Sent = nil
	return retry.Stop, nil
}

// rerun ends an attempt of a SelfReading write whose reads changed (err
// matches ErrStale): the plan runs again after a pause, as after a lost
// race.
func (d *Delivery) rerun(err error) (retry.Next, error) {
	d.then = carry{raced: true}
	d.answered(Answer{Raced: true})
	if !errors.Is(err, driver.ErrConflict) {
		err = driver.Errorf(driver.ErrConflict, "%s %q: %v", d.op, d.key, err)
	}
	return retry.AfterLoss, err
}

package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/outcome"
	"github.com/etagstore/etagstore/internal/request"
	"github.com/etagstore/etagstore/internal/retry"
)

// This file is an attempt's send and what follows it: a definite refusal,
// a lost answer settled by reading, or the answer to checks alone.

// send sends req once and classifies the answer.
func (d *Delivery) send(ctx context.Context, req Request, verified bool) (retry.Next, error) {
	if err := ctx.Err(); err != nil {
		return retry.Stop, err // nothing sent; Run reports an unsettled earlier request
	}
	d.res.Held = req[0].Write.Cond.ETag
	began := d.env.Clock.Now()
	implied, err := d.implied.Actions(ctx, req, d.env.Commit != nil, d.op, d.key)
	if err != nil {
		return retry.Stop, err // refused by its Implier: nothing was sent
	}
	out, err := d.transmit(ctx, req, implied)
	switch {
	case req.ChecksOnly():
		return d.checkAnswer(ctx, req, err)
	case err == nil:
		if c := d.contender(); c != nil {
			a := Answer{Landed: true, Timed: true, Took: d.env.Clock.Now().Sub(began), Copy: !verified}
			if len(out) == 1 {
				a.ETag = out[0].ETag
			}
			c.Answered(d.key, a)
		}
		d.implied.Landed(ctx, req, implied)
		d.unsettled = nil
		d.res.Out, d.res.Sent, d.res.FromCopy = out, req, !verified
		return retry.Stop, nil
	case request.Ambiguous(err):
	default:
		// A definite refusal of what the request implies (an index
		// entry) applied nothing, even after an earlier request's lost
		// answer: its Implier learns from it, whereas settling by the
		// documents' versions would send it again as it is, forever.
		if named, again, err := d.implied.Refused(ctx, req, implied, err, d.op, d.key); named {
			if !again {
				return retry.Stop, err
			}
			d.then = carry{resend: req}
			return retry.AtOnce, err
		}
	}
	if d.unsettled != nil || request.Ambiguous(err) {
		if d.unsettled == nil {
			d.unsettled = err
		}
		return d.settle(ctx, req)
	}
	return d.refusal(ctx, req, verified, err, d.env.Clock.Now().Sub(began))
}

// transmit sends req: one Write or Delete, or a Commit of several or of
// req with the actions it implies, and returns the versions written.
func (d *Delivery) transmit(ctx context.Context, req Request, implied []driver.Action) ([]driver.Item, error) {
	if len(req) > 1 || req.ChecksOnly() || len(implied) > 0 {
		return d.commit(ctx, req, implied)
	}
	w := req[0]
	var etag driver.ETag
	var err error
	switch {
	case w.Delete && w.Write.Mode == driver.ModeTombstone:
		_, err = d.env.Backend.Write(ctx, w.Key, w.Write)
	case w.Delete:
		err = d.env.Backend.Delete(ctx, w.Key, w.Write.Cond.ETag)
	default:
		etag, err = d.env.Backend.Write(ctx, w.Key, w.Write)
	}
	if err != nil {
		return nil, err
	}
	return []driver.Item{request.Written(w, etag)}, nil
}

// commit sends a multi-key request, with implied, as one atomic Commit.
func (d *Delivery) commit(ctx context.Context, req Request, implied []driver.Action) ([]driver.Item, error) {
	if d.env.Commit == nil { // never with implied actions: imply.Part.Actions refuses them
		return nil, fmt.Errorf("%w: %s: the backend cannot write several documents atomically", errors.ErrUnsupported, d.op)
	}
	etags, err := d.env.Commit(ctx, append(req.Actions(), implied...))
	if err != nil {
		return nil, err
	}
	out := make([]driver.Item, len(req))
	for i, w := range req {
		var etag driver.ETag
		if i < len(etags) {
			etag = etags[i]
		}
		out[i] = request.Written(w, etag)
	}
	return out, nil
}

// refusal acts on a definite refusal of req. A throttled request is sent
// again as it is after a pause. A Blind write reports every other refusal.
// A write built on versions found stale is built again: at once when
// they were only a copy, after a pause when it lost a race (none when its
// Contender says its wait was it: Contender.Answered). took is how long
// the send took.
func (d *Delivery) refusal(ctx context.Context, req Request, verified bool, err error, took time.Duration) (retry.Next, error) {
	d.release()
	conflict := errors.Is(err, driver.ErrConflict)
	switch {
	case errors.Is(err, driver.ErrNotApplied):
		d.answered(Answer{})
		d.then = carry{resend: req}
		return retry.AfterPause, err
	case d.mode == Blind:
		return retry.Stop, err
	case errors.Is(err, driver.ErrExists) && request.Refused(req, err).Unread:
		return retry.Stop, err // the key exists: its writer decides (Tx.Create)
	case !verified && (conflict || errors.Is(err, driver.ErrNotFound)):
		for _, w := range req {
			d.env.Hooks.StaleCopy(w.Key, w.Write.Cond.ETag)
		}
		if conflict {
			d.env.Hooks.Conflict(ctx)
		}
		d.answered(Answer{Raced: conflict})
		d.then = carry{check: req}
		return retry.AtOnce, err
	case conflict || errors.Is(err, driver.ErrExists) || errors.Is(err, driver.ErrNotFound) && request.Refused(req, err).Write.Cond.Kind != driver.CondCreate:
		d.then = carry{check: req, raced: true}
		if d.answered(Answer{Raced: true, Timed: true, Took: took}) {
			return retry.AfterWait, err // its wait for the key is its backoff
		}
		return retry.AfterLoss, err
	}
	return retry.Stop, err
}

// checkAnswer acts on err, the answer to req, a request of checks only.
// It wrote nothing, whatever became of it, so no answer is ambiguous and
// none needs settling: the checks held (the write ends with what its plan
// said, Checked), one failed (for a SelfReading write a lost race: the
// plan runs again; otherwise reported), or the request was throttled or
// its answer lost, and it is sent again as it is after a pause, until the
// policy ends (ErrUnavailable) or ctx does (ctx.Err()).
func (d *Delivery) checkAnswer(ctx context.Context, req Request, err error) (retry.Next, error) {
	if err == nil {
		d.res.Out, d.res.Sent = nil, nil
		return retry.Stop, d.outcome
	}
	d.release()
	switch {
	case errors.Is(err, driver.ErrConflict) || errors.Is(err, driver.ErrExists) || errors.Is(err, driver.ErrNotFound):
		if d.mode == SelfReading {
			return d.rerun(ErrStale)
		}
	case errors.Is(err, driver.ErrNotApplied) || request.Ambiguous(err):
		if cerr := ctx.Err(); cerr != nil {
			return retry.Stop, cerr
		}
		if !errors.Is(err, driver.ErrUnavailable) {
			err = driver.Errorf(driver.ErrUnavailable, "%s %q: the answer to a check of the versions read was lost (nothing was written): %v", d.op, d.key, err)
		}
		d.then = carry{resend: req}
		return retry.AfterPause, err
	}
	return retry.Stop, err
}

// settle reads after req's answer was lost and acts on the verdict:
// committed ends the write, not landed sends it again, not applied builds
// it again over the versions read; anything else is unknown.
func (d *Delivery) settle(ctx context.Context, req Request) (retry.Next, error) {
	base, v, err := d.readAfterLoss(ctx, req)
	if err != nil {
		return retry.Stop, err
	}
	switch {
	case v == outcome.Committed:
		d.unsettled = nil
		d.res.Out, d.res.Sent = request.FoundIn(req, base), req
		d.answered(Answer{Landed: true})
		return retry.Stop, nil
	case v == outcome.NotLanded:
		d.answered(Answer{})
		d.then = carry{resend: req}
		return retry.AtOnce, d.unknown(d.unsettled)
	case v == outcome.NotApplied && d.mode != Blind:
		d.unsettled = nil
		d.release()
		d.then = carry{base: base, raced: true}
		d.answered(Answer{Raced: true})
		return retry.AfterLoss, fmt.Errorf("%w: %q moved on", driver.ErrConflict, d.key)
	}
	return retry.Stop, d.unknown(d.unsettled)
}

// readAfterLoss reads the keys of req after its answer was lost and
// resolves it; a read that fails otherwise than "not found" leaves the
// outcome unknown.
func (d *Delivery) readAfterLoss(ctx context.Context, req Request) ([]Version, outcome.Verdict, error) {
	base := make([]Version, len(req))
	for i, w := range req {
		v, err := d.env.Hooks.Read(ctx, w.Key)
		if err != nil {
			return nil, outcome.Unknown, d.unknown(request.JoinLine(d.unsettled, err))
		}
		base[i] = v
	}
	v := request.Resolve(req, base)
	d.env.Hooks.Lost(ctx, d.op, d.key, v)
	return base, v, nil
}

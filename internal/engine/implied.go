package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/request"
)

// Implier is the layer that adds to a request what its writes imply
// beside them, in the same atomic request (internal/index: a Store's
// index entries). A Store's deliveries share one (Env.Implier; nil:
// none). The delivery calls it at two points: as it transmits a request
// (Imply: the actions that go with it), and when the backend refuses one
// of those actions (Refused).
type Implier interface {
	// Imply returns the actions that must commit with req, in one atomic
	// request, or an error refusing req before anything is sent, and the
	// delivery's memo, updated: what it learnt of the state the actions
	// depend on (reading it, or from earlier refusals: see Refused); nil
	// at first.
	Imply(ctx context.Context, req Request, memo any) ([]driver.Action, any, error)
	// Refused is told that the backend refused implied action i (of the
	// actions Imply returned for req) with err, nothing applied. It
	// returns the delivery's memo, updated, and either nil (req is sent
	// again at once, with the actions Imply then returns) or the error
	// the write ends with.
	Refused(ctx context.Context, req Request, implied []driver.Action, i int, err error, memo any) (any, error)
}

// Pending is what an Implier may also tell a batch before it sends: the
// writes of req, by key, that take what another holds (a unique index's
// value: held by an earlier write of req, or stored), with the error the
// Implier would refuse each with. It sends no write.
type Pending[E error] interface {
	Pending(ctx context.Context, req Request) map[string]E
}

// transmitWith is transmit with the actions req implies (Env.Implier):
// one Commit of req's actions and theirs, or transmit alone when they
// imply none.
func (d *Delivery) transmitWith(ctx context.Context, req Request) ([]driver.Item, []driver.Action, error) {
	if d.env.Implier == nil || req.ChecksOnly() {
		out, err := d.transmit(ctx, req)
		return out, nil, err
	}
	implied, memo, err := d.env.Implier.Imply(ctx, req, d.memo)
	d.memo = memo
	if errors.Is(err, errors.ErrUnsupported) {
		err = fmt.Errorf("%s %q: %w", d.op, d.name(), err) // which path refused
	}
	if err != nil {
		return nil, nil, errRefusedBefore{err}
	}
	if len(implied) == 0 {
		out, err := d.transmit(ctx, req)
		return out, nil, err
	}
	if d.env.Commit == nil {
		return nil, nil, errRefusedBefore{driver.Errorf(errors.ErrUnsupported, "%s %q: the backend cannot commit what the write implies with it", d.op, d.name())}
	}
	etags, err := d.env.Commit(ctx, append(req.Actions(), implied...))
	if err != nil {
		return nil, implied, err
	}
	out := make([]driver.Item, len(req))
	for i, w := range req {
		out[i] = request.Written(w, etags[i])
	}
	return out, implied, nil
}

// errRefusedBefore is an Implier's refusal of a request: nothing was sent.
type errRefusedBefore struct{ error }

func (e errRefusedBefore) Unwrap() error { return e.error }

// impliedRefusal acts on err, a refusal of req sent with implied: when it
// names one of the implied actions, the Implier decides (again at once,
// or the write's end) and handled is true.
func (d *Delivery) impliedRefusal(ctx context.Context, req Request, implied []driver.Action, err error) (next next, out error, handled bool) {
	var ae *driver.ActionError
	if len(implied) == 0 || !errors.As(err, &ae) || ae.Index < len(req) || ae.Index >= len(req)+len(implied) {
		return stop, err, false
	}
	memo, err := d.env.Implier.Refused(ctx, req, implied, ae.Index-len(req), ae.Err, d.memo)
	d.memo = memo
	if err != nil {
		return stop, err, true
	}
	d.then = carry{resend: req}
	return now, driver.Errorf(driver.ErrConflict, "%s %q: what the write implies was built again", d.op, d.name()), true
}

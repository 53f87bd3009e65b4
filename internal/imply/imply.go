// Package imply is the seam through which a write carries what it
// implies: the entities (a Store's index entries, internal/index) that
// commit with its documents in the same atomic request. The delivery
// engine (internal/engine) holds one Part per delivery and asks it at two
// points: as it transmits a request (Actions: what goes with it), and
// when the backend refuses one of those actions (Refused).
package imply

import (
	"context"
	"errors"
	"fmt"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/request"
)

// Implier is the layer that adds to a request what its writes imply
// beside them, in the same atomic request (internal/index: a Store's
// index entries). A Store's deliveries share one (engine.Env.Implier;
// nil: none).
type Implier interface {
	// Imply returns the actions that must commit with req, in one atomic
	// request, or an error refusing req before anything is sent, and the
	// delivery's memo, updated: what it learnt of the state the actions
	// depend on (reading it, or from earlier refusals: see Refused); nil
	// at first.
	Imply(ctx context.Context, req request.Request, memo any) ([]driver.Action, any, error)
	// Refused is told that the backend refused implied action i (of the
	// actions Imply returned for req) with err, nothing applied. It
	// returns the delivery's memo, updated, and either nil (req is sent
	// again at once, with the actions Imply then returns) or the error
	// the write ends with.
	Refused(ctx context.Context, req request.Request, implied []driver.Action, i int, err error, memo any) (any, error)
}

// Pending is what an Implier may also tell a batch before it sends: the
// writes of req, by key, that take what another holds (a unique index's
// value: held by an earlier write of req, or stored), with the error the
// Implier would refuse each with. It sends no write. wary, it reads what
// it must to tell; otherwise it reads nothing and tells what it predicts.
// memo is the delivery's, as Imply takes it, and it returns it updated:
// what it read to tell is not read again when the request is sent.
type Pending[E error] interface {
	Pending(ctx context.Context, req request.Request, memo any, wary bool) (map[string]E, any)
}

// PendingOf is p's Implier's Pending (nil when it tells none), sharing
// p's memo.
func PendingOf[E error](ctx context.Context, p *Part, req request.Request, wary bool) map[string]E {
	pi, ok := p.Implier.(Pending[E])
	if !ok {
		return nil
	}
	out, memo := pi.Pending(ctx, req, p.memo, wary)
	p.memo = memo
	return out
}

// Lander is what an Implier may also be told: that req landed, with
// implied, the actions Imply returned for it, and the delivery's memo
// (what it learnt on the way). It may read, and write what the landing
// calls for, with ctx, the write's own.
type Lander interface {
	Landed(ctx context.Context, req request.Request, implied []driver.Action, memo any)
}

// Landed tells p's Implier, if it listens (Lander), that req landed with
// implied; nothing when req implied nothing and nothing was learnt.
func (p *Part) Landed(ctx context.Context, req request.Request, implied []driver.Action) {
	if l, ok := p.Implier.(Lander); ok && (len(implied) > 0 || p.memo != nil) {
		l.Landed(ctx, req, implied, p.memo)
	}
}

// Part is one delivery's part in its Store's Implier: the Implier and
// the memo it keeps across the delivery's attempts. A Part with no
// Implier implies nothing. It is used by the delivery's goroutine.
type Part struct {
	Implier Implier
	memo    any
}

// Actions returns the actions that must commit with req (none for a
// request of checks alone), or the error refusing req before anything is
// sent. commit says the backend can commit several actions atomically;
// op and key name the write in errors.
func (p *Part) Actions(ctx context.Context, req request.Request, commit bool, op, key string) ([]driver.Action, error) {
	if p.Implier == nil || req.ChecksOnly() {
		return nil, nil
	}
	implied, memo, err := p.Implier.Imply(ctx, req, p.memo)
	p.memo = memo
	switch {
	case errors.Is(err, errors.ErrUnsupported):
		return nil, fmt.Errorf("%s %q: %w", op, key, err) // which path refused
	case err != nil:
		return nil, err
	case len(implied) > 0 && !commit:
		return nil, driver.Errorf(errors.ErrUnsupported, "%s %q: the backend cannot commit what the write implies with it", op, key)
	}
	return implied, nil
}

// Refused acts on err, a definite refusal of req sent with implied.
// named says err names one of the implied actions; then the Implier
// decides: again says req is sent again at once, with the actions Actions
// then returns (out says why), else the write ends with out. When named
// is false, out is err.
func (p *Part) Refused(ctx context.Context, req request.Request, implied []driver.Action, err error, op, key string) (named, again bool, out error) {
	var ae *driver.ActionError
	if len(implied) == 0 || !errors.As(err, &ae) || ae.Index < len(req) || ae.Index >= len(req)+len(implied) {
		return false, false, err
	}
	memo, err := p.Implier.Refused(ctx, req, implied, ae.Index-len(req), ae.Err, p.memo)
	p.memo = memo
	if err != nil {
		return true, false, err
	}
	return true, true, driver.Errorf(driver.ErrConflict, "%s %q: what the write implies was built again", op, key)
}

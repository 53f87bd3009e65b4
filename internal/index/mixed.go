package index

import (
	"context"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/engine"
)

// Mixed is the engine.Implier of requests whose writes may be of several
// Stores (a transaction's): of names the Implier of the Store that wrote
// a key (nil: a Store that keeps no indexes). Each write's entries are
// its own Store's, by its own indexes and values, planned together (a
// value one Store's document frees and another's takes is one write), and
// a write of a Store whose indexes were refused (Refusing) refuses the
// request, whichever Store the transaction used first.
func Mixed(of func(key string) engine.Implier) engine.Implier { return mixed{of} }

type mixed struct {
	of func(key string) engine.Implier
}

// planner is the planner of req: led by the Set of its first write that
// has one (false: none has).
func (m mixed) planner(req engine.Request) (planner, bool) {
	of := func(key string) (*Set, error) {
		switch im := m.of(key).(type) {
		case *Set:
			return im, nil
		case Refusing:
			return nil, im.Err
		}
		return nil, nil
	}
	for _, w := range req {
		if s, _ := of(w.Key); s != nil {
			return planner{lead: s, of: of}, true
		}
	}
	return planner{of: of}, false
}

func (m mixed) Imply(ctx context.Context, req engine.Request, memo any) ([]driver.Action, any, error) {
	p, ok := m.planner(req)
	if !ok {
		for _, w := range req {
			if _, err := p.of(w.Key); err != nil && !w.Check {
				return nil, memo, err
			}
		}
		return nil, memo, nil
	}
	return p.imply(ctx, req, memo)
}

func (m mixed) Refused(ctx context.Context, req engine.Request, implied []driver.Action, i int, err error, memo any) (any, error) {
	p, ok := m.planner(req)
	if !ok {
		return memo, err
	}
	return p.refused(ctx, req, implied, i, err, memo)
}

func (m mixed) Pending(ctx context.Context, req engine.Request, memo any, wary bool) (map[string]*UniqueError, any) {
	p, ok := m.planner(req)
	if !ok {
		return nil, memo
	}
	return p.pending(ctx, req, memo, wary)
}

func (m mixed) Landed(ctx context.Context, req engine.Request, implied []driver.Action, memo any) {
	if p, ok := m.planner(req); ok {
		p.landed(ctx, req, implied, memo)
	}
}

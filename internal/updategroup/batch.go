package updategroup

import (
	"context"
	"errors"
	"time"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/engine"
	"github.com/etagstore/etagstore/internal/groupcommit"
	"github.com/etagstore/etagstore/internal/index"
)

// A key's runner and its batches (see group.go for the group, its lock
// and its callers).

// run commits g's queue in batches until it is empty. Each batch starts
// from the version the previous one wrote, without reading.
func (g *Group[T, X]) run() {
	var last []engine.Version
	var l groupcommit.Lingering
	mu := &g.gs.mu
	for {
		g.Linger(&l)
		mu.Lock()
		members := g.Take()
		if len(members) == 0 {
			g.EndGroup()
			mu.Unlock()
			return
		}
		b := newBatch(g, members)
		for _, r := range members {
			r.Status, r.batch = groupcommit.Taken, b
		}
		mu.Unlock()
		start := time.Now()
		last = b.commit(g.k.create, last)
		l.Want, l.Took = len(members), time.Since(start)
	}
}

// batch is one batch of a key's group.
type batch[T, X any] struct {
	g                  *Group[T, X]
	key                string
	members            []*Member[T, X]
	applied            []*Member[T, X] // the members whose mutations the last apply holds
	groupcommit.Flight                 // the write holding applied (guarded by Groups.mu)
	timer              *time.Timer
}

// newBatch is the batch of members, in g.
func newBatch[T, X any](g *Group[T, X], members []*Member[T, X]) *batch[T, X] {
	b := &batch[T, X]{g: g, key: g.k.key, members: members}
	b.Flight = groupcommit.NewFlight(&g.gs.mu, func(yield func(*groupcommit.Caller) bool) {
		for _, r := range b.applied {
			if !yield(&r.Caller) {
				return
			}
		}
	})
	return b
}

// commit runs the batch's read-modify-write from last (or the version
// cache's copy, or a read) and hands out the results. It returns the
// version it wrote, for chaining.
func (b *batch[T, X]) commit(create bool, last []engine.Version) []engine.Version {
	ctxs := make([]context.Context, len(b.members))
	for i, r := range b.members {
		ctxs[i] = r.Ctx
	}
	ctx, cancel := groupcommit.Context(ctxs)
	defer cancel()
	b.timer = time.NewTimer(time.Hour)
	defer b.timer.Stop()
	w := b.g.w
	var mine T // a batch's conflict is given each member's own value in finish
	if last == nil {
		last = w.Cached(ctx, b.key) // as an Update on its own starts
	}
	res, extra, err := w.Modify(ctx, b.key, create, last, &mine, b.change, b)
	if err == nil && len(res.Sent) > 0 {
		w.Committed(ctx, len(b.applied)) // once per batch, not per caller
	}
	b.finish(res, extra, err)
	if err != nil || res.Out[0].Data == nil || driver.IsSuperseded(res.Out[0].ETag) {
		return nil // no version to chain from
	}
	return []engine.Version{w.Chain(res.Out[0], extra)}
}

// change gives each member still in the batch a slot, in arrival order (the
// batch's change of its read-modify-write).
func (b *batch[T, X]) change(base engine.Version) ([]byte, []byte, bool, error) {
	t := slot{canonical: base.Canonical}
	if base.Exists {
		t.data = base.Data
	}
	changed := false
	var baseline []byte // the base's encoding, from the first slot that applied (the first on base)
	b.applied = b.applied[:0]
	for _, r := range b.members {
		a, ok := b.slot(r, t)
		if !ok {
			continue
		}
		if len(b.applied) == 0 {
			baseline = a.base
		}
		r.value, r.data, r.changed = a.value, a.data, a.changed
		changed = changed || a.changed
		b.applied = append(b.applied, r)
		t = slot{data: a.data, canonical: true}
	}
	if len(b.applied) == 0 {
		return nil, nil, false, errNoneApplied
	}
	return t.data, baseline, changed, nil
}

// errNoneApplied ends a batch none of whose members is left.
var errNoneApplied = errors.New("etagstore: no mutation in the batch applied")

// slot gives r a slot on t and waits for its answer, at most slotTimeout.
// It reports whether r's mutation applied; a member that failed or was
// too slow is handed its result on the spot.
func (b *batch[T, X]) slot(r *Member[T, X], t slot) (answer[T], bool) {
	mu := &b.g.gs.mu
	mu.Lock()
	if !r.Waiting() {
		mu.Unlock()
		return answer[T]{}, false
	}
	r.Give(t)
	mu.Unlock()
	a, timedOut := r.Wait(b.timer, slotTimeout, func() (time.Duration, bool) { return 0, false })
	mu.Lock()
	defer mu.Unlock()
	switch {
	case r.Status == groupcommit.Left || a.left || r.Ctx.Err() != nil:
		// Its caller left, or its context ended during its slot (inside
		// its mutate, say): out of the batch before anything holding its
		// change is sent, whichever its caller's goroutine meets first.
		r.Status = groupcommit.Left
		return answer[T]{}, false
	case timedOut:
		b.hand(r, Result[T, X]{Ungrouped: true})
		return answer[T]{}, false
	case a.err != nil:
		b.hand(r, Result[T, X]{Err: a.err})
		return answer[T]{}, false
	}
	r.Status = groupcommit.Applied
	return a, true
}

// finish hands every member still waiting its result: its own state, or
// the batch's error. A member's state has the version's ETag if nothing
// after it changed the document, else a Superseded ETag naming the write
// and the member.
func (b *batch[T, X]) finish(res engine.Result, extra X, err error) {
	mu := &b.g.gs.mu
	mu.Lock()
	defer mu.Unlock()
	b.InFlight = false
	tail := 0 // members from tail on hold the state written
	for i, r := range b.applied {
		if r.changed {
			tail = i
		}
	}
	for i, r := range b.applied {
		if r.Status != groupcommit.Applied {
			continue
		}
		mine, conflict := error(nil), false
		if err != nil {
			mine, conflict = b.g.w.Mine(err, r.value)
		}
		switch {
		case err == nil:
			d := Result[T, X]{Value: r.value, ETag: res.Out[0].ETag, Extra: extra, Attempts: res.Attempts, Batch: len(b.applied)}
			if i < tail {
				d.ETag = engine.Superseded(res.Sent[0].Meta, i)
				d.Superseded, d.Data = true, r.data // its own state, not the version written
			}
			b.hand(r, d)
		case conflict:
			b.hand(r, Result[T, X]{Err: mine, Attempts: res.Attempts, Batch: len(b.applied)})
		case len(b.applied) > 1 && (errors.Is(err, driver.ErrTooLarge) || errors.Is(err, driver.ErrInvalidInput) || errors.As(err, new(*index.UniqueError))):
			// One member's change may be at fault (a unique value held
			// elsewhere, say): each runs on its own.
			b.hand(r, Result[T, X]{Ungrouped: true})
		default:
			b.hand(r, Result[T, X]{Err: err})
		}
	}
	for _, r := range b.members {
		if r.Status == groupcommit.Taken { // the batch ended before its slot
			b.hand(r, Result[T, X]{Err: err, Ungrouped: err == nil})
		}
	}
}

// hand sets r's result and wakes its caller. Groups.mu is held.
func (b *batch[T, X]) hand(r *Member[T, X], res Result[T, X]) {
	r.res = res
	r.Hand()
}

package etagstore

import (
	"context"
	"errors"
	"time"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/engine"
	"github.com/etagstore/etagstore/internal/groupcommit"
	"github.com/etagstore/etagstore/internal/telemetry"
)

// A key's runner and its batches (group commit; see group.go for the
// group, its lock and its callers).

// run commits k's queue in batches until it is empty. Each batch starts
// from the version the previous one wrote, without reading.
func (s *Store[T]) run(k groupKey, g *group[T]) {
	var last []version
	var l groupcommit.Lingering
	for {
		g.Linger(&l)
		s.gmu.Lock()
		batch := g.Take()
		if len(batch) == 0 {
			delete(s.groups, k)
			s.gmu.Unlock()
			return
		}
		b := newBatchRun(s, k.key, batch)
		for _, r := range batch {
			r.Status, r.batch = groupcommit.Taken, b
		}
		s.gmu.Unlock()
		start := time.Now()
		last = b.commit(k.create, last)
		l.Want, l.Took = len(batch), time.Since(start)
	}
}

// batchRun is one batch of a key's group.
type batchRun[T any] struct {
	s                  *Store[T]
	key                string
	members            []*member[T]
	applied            []*member[T] // the members whose mutations the last apply holds
	groupcommit.Flight              // the write holding applied (guarded by Store.gmu)
	timer              *time.Timer
}

// newBatchRun is the batch of members, of key.
func newBatchRun[T any](s *Store[T], key string, members []*member[T]) *batchRun[T] {
	b := &batchRun[T]{s: s, key: key, members: members}
	b.Flight = groupcommit.NewFlight(&s.gmu, func(yield func(*groupcommit.Caller) bool) {
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
func (b *batchRun[T]) commit(create bool, last []version) []version {
	ctxs := make([]context.Context, len(b.members))
	for i, r := range b.members {
		ctxs[i] = r.Ctx
	}
	ctx, cancel := groupcommit.Context(ctxs)
	defer cancel()
	b.timer = time.NewTimer(time.Hour)
	defer b.timer.Stop()
	var mine T // a batch's *ConflictError is given each member's own value in finish
	if last == nil {
		last = b.s.cached(ctx, b.key, "") // as an Update on its own starts
	}
	res, extra, err := b.s.modify(ctx, telemetry.OpUpdate, b.key, create, last, &mine, b, b)
	if err == nil && len(res.Sent) > 0 {
		b.s.obs.Committed(ctx, len(b.applied)) // once per batch, not per caller
	}
	b.finish(res, extra, err)
	if err != nil || res.Out[0].Data == nil || driver.IsSuperseded(res.Out[0].ETag) {
		return nil // no version to chain from
	}
	return []version{b.s.stored(res.Out[0], false, extra.doc == "")}
}

// change gives each member still in the batch a slot, in arrival order (the
// batch is the changer of its read-modify-write).
func (b *batchRun[T]) change(base version) ([]byte, []byte, bool, error) {
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
		r.value, r.data, r.changed = a.value.(T), a.data, a.changed
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
func (b *batchRun[T]) slot(r *member[T], t slot) (answer, bool) {
	s := b.s
	s.gmu.Lock()
	if !r.Waiting() {
		s.gmu.Unlock()
		return answer{}, false
	}
	r.Give(t)
	s.gmu.Unlock()
	a, timedOut := r.Wait(b.timer, slotTimeout, func() (time.Duration, bool) { return 0, false })
	s.gmu.Lock()
	defer s.gmu.Unlock()
	switch {
	case r.Status == groupcommit.Left || a.left:
		r.Status = groupcommit.Left
		return answer{}, false
	case timedOut:
		b.hand(r, result[T]{ungrouped: true})
		return answer{}, false
	case a.err != nil:
		b.hand(r, result[T]{err: a.err})
		return answer{}, false
	}
	r.Status = groupcommit.Applied
	return a, true
}

// finish hands every member still waiting its result: its own state, or
// the batch's error. A member's state has the version's ETag if nothing
// after it changed the document, else a Superseded ETag naming the write
// and the member.
func (b *batchRun[T]) finish(res engine.Result, extra Extra, err error) {
	s := b.s
	s.gmu.Lock()
	defer s.gmu.Unlock()
	b.InFlight = false
	tail := 0 // members from tail on hold the state written
	for i, r := range b.applied {
		if r.changed {
			tail = i
		}
	}
	var ce *ConflictError[T]
	for i, r := range b.applied {
		if r.Status != groupcommit.Applied {
			continue
		}
		switch {
		case err == nil:
			d := Doc[T]{Key: b.key, Value: r.value, ETag: res.Out[0].ETag, Extra: extra}
			if i < tail {
				d.ETag = engine.Superseded(res.Sent[0].Meta, i)
				d.Extra = extra.superseded(d.ETag, r.data) // its own state, not the version written
			}
			b.hand(r, result[T]{doc: d, attempts: res.Attempts, batch: len(b.applied)})
		case errors.As(err, &ce):
			mine := *ce
			mine.Mine = r.value
			b.hand(r, result[T]{err: &mine, attempts: res.Attempts, batch: len(b.applied)})
		case len(b.applied) > 1 && (errors.Is(err, ErrTooLarge) || errors.Is(err, ErrInvalidInput) || errors.As(err, new(*UniqueError))):
			// One member's change may be at fault (a unique value held
			// elsewhere, say): each runs on its own.
			b.hand(r, result[T]{ungrouped: true})
		default:
			b.hand(r, result[T]{err: err})
		}
	}
	for _, r := range b.members {
		if r.Status == groupcommit.Taken { // the batch ended before its slot
			b.hand(r, result[T]{err: err, ungrouped: err == nil})
		}
	}
}

// hand sets r's result and wakes its caller. Store.gmu is held.
func (b *batchRun[T]) hand(r *member[T], res result[T]) {
	r.res = res
	r.Hand()
}

package etagstore

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/engine"
	"github.com/etagstore/etagstore/internal/telemetry"
)

// A key's runner and its batches (group commit; see group.go for the
// group, its lock and its callers).

// run commits k's queue in batches until it is empty. Each batch starts
// from the version the previous one wrote, without reading.
func (s *Store[T]) run(k groupKey, g *group[T]) {
	var last []version
	var l lingering
	for {
		s.beforeBatch(g, &l)
		s.gmu.Lock()
		batch := g.queue
		g.queue = nil
		if len(batch) == 0 {
			s.endGroup(k, g)
			s.gmu.Unlock()
			return
		}
		b := &batchRun[T]{s: s, key: k.key, members: batch}
		for _, r := range batch {
			r.status, r.batch = taken, b
		}
		s.gmu.Unlock()
		start := time.Now()
		last = b.commit(k.create, last)
		l.want, l.took = len(batch), time.Since(start)
	}
}

// lingering is a runner's state between batches: the last batch's size
// and duration, and how many batches to start at once because lingers
// lately found nobody coming back.
type lingering struct {
	want   int
	took   time.Duration
	misses int // vain lingers in a row (at most 4)
	skip   int
}

// beforeBatch lingers before g's batch (see lingering.before).
func (s *Store[T]) beforeBatch(g *group[T], l *lingering) {
	l.before(&s.gmu, func() int { return len(g.queue) }, &g.want, g.wake)
}

// before lingers before a batch (see linger), unless lingers have lately
// been in vain: callers a batch answers that go on to other keys (a
// skewed workload) do not come back, and a linger then only delays the
// batch. After a vain linger, the next 1, 3, 7, then 15 batches start
// without one. mu guards the queue (queued), *want and wake's sends.
func (l *lingering) before(mu sync.Locker, queued func() int, want *int, wake chan struct{}) {
	if l.skip > 0 {
		l.skip--
		return
	}
	if linger(mu, queued, want, wake, l.want, l.took) {
		l.misses = 0
		return
	}
	l.misses = min(l.misses+1, 4)
	l.skip = 1<<l.misses - 1
}

// linger waits, before a batch starts, until as many callers are queued as
// the last batch had (n: the callers it just answered, coming back), or
// for a fraction of the last batch's duration, whichever is first:
// otherwise the callers one batch releases would always miss the next
// one, and batches would level off at half the writers. Only a runner
// lingers, so an uncontended write never waits. An arrival that fills the
// queue to *want sends on wake. It reports false when it waited its whole
// bound and nobody came.
func linger(mu sync.Locker, queued func() int, want *int, wake chan struct{}, n int, took time.Duration) (fruitful bool) {
	bound := min(took/4, maxLinger)
	if n == 0 || bound <= 0 {
		return true
	}
	mu.Lock()
	before := queued()
	if before >= n {
		mu.Unlock()
		return true
	}
	*want = n
	mu.Unlock()
	t := time.NewTimer(bound)
	select {
	case <-wake:
	case <-t.C:
	}
	t.Stop()
	mu.Lock()
	*want = 0
	select {
	case <-wake: // drain a wake-up that raced with the timer
	default:
	}
	fruitful = queued() > before
	mu.Unlock()
	return fruitful
}

// maxLinger bounds how long a runner lingers before a batch.
const maxLinger = 2 * time.Millisecond

// batchRun is one batch of a key's group.
type batchRun[T any] struct {
	s        *Store[T]
	key      string
	members  []*member[T]
	applied  []*member[T] // the members whose mutations the last apply holds
	inFlight bool         // a write holding applied is sent or being resolved (guarded by Store.gmu)
	timer    *time.Timer
}

// commit runs the batch's read-modify-write from last (or the version
// cache's copy, or a read) and hands out the results. It returns the
// version it wrote, for chaining.
func (b *batchRun[T]) commit(create bool, last []version) []version {
	ctxs := make([]context.Context, len(b.members))
	for i, r := range b.members {
		ctxs[i] = r.ctx
	}
	ctx, cancel := batchContext(ctxs)
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
	if r.status != taken && r.status != applied {
		s.gmu.Unlock()
		return answer{}, false
	}
	r.status = inSlot
	r.slots <- t // buffered and empty: sent under the lock, so leave sees it
	s.gmu.Unlock()
	b.timer.Reset(slotTimeout)
	var a answer
	timedOut := false
	select {
	case a = <-r.answer:
	case <-b.timer.C:
		timedOut = true
	}
	b.timer.Stop()
	s.gmu.Lock()
	defer s.gmu.Unlock()
	switch {
	case r.status == left || a.left:
		r.status = left
		return answer{}, false
	case timedOut:
		b.hand(r, result[T]{ungrouped: true})
		return answer{}, false
	case a.err != nil:
		b.hand(r, result[T]{err: a.err})
		return answer{}, false
	}
	r.status = applied
	return a, true
}

// hold marks the batch's write in flight, unless a member whose mutation
// it holds has left: then the batch must be applied again (see flight).
func (b *batchRun[T]) Hold() bool {
	b.s.gmu.Lock()
	defer b.s.gmu.Unlock()
	for _, r := range b.applied {
		if r.status == left {
			return false
		}
	}
	b.inFlight = true
	return true
}

// release marks the batch's write as not landed: no member's mutation is in
// flight (see flight).
func (b *batchRun[T]) Release() {
	b.s.gmu.Lock()
	b.inFlight = false
	b.s.gmu.Unlock()
}

// finish hands every member still waiting its result: its own state, or
// the batch's error. A member's state has the version's ETag if nothing
// after it changed the document, else a Superseded ETag naming the write
// and the member.
func (b *batchRun[T]) finish(res engine.Result, extra Extra, err error) {
	s := b.s
	s.gmu.Lock()
	defer s.gmu.Unlock()
	b.inFlight = false
	tail := 0 // members from tail on hold the state written
	for i, r := range b.applied {
		if r.changed {
			tail = i
		}
	}
	var ce *ConflictError[T]
	for i, r := range b.applied {
		if r.status != applied {
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
		case len(b.applied) > 1 && (errors.Is(err, ErrTooLarge) || errors.Is(err, ErrInvalidInput)):
			// One member's change may be at fault: each runs on its own.
			b.hand(r, result[T]{ungrouped: true})
		default:
			b.hand(r, result[T]{err: err})
		}
	}
	for _, r := range b.members {
		if r.status == taken { // the batch ended before its slot
			b.hand(r, result[T]{err: err, ungrouped: err == nil})
		}
	}
}

// hand sets r's result and wakes its caller. Store.gmu is held.
func (b *batchRun[T]) hand(r *member[T], res result[T]) {
	r.res, r.status = res, answered
	close(r.done)
}

// batchContext returns a context for a batch: done when every member's
// context is done (one caller giving up does not stop the others' write),
// carrying the values of the first.
func batchContext(ctxs []context.Context) (context.Context, context.CancelFunc) {
	if len(ctxs) == 1 {
		return ctxs[0], func() {}
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctxs[0]))
	var mu sync.Mutex
	live := len(ctxs)
	stops := make([]func() bool, len(ctxs))
	for i, c := range ctxs {
		stops[i] = context.AfterFunc(c, func() {
			mu.Lock()
			defer mu.Unlock()
			if live--; live == 0 {
				cancel()
			}
		})
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
}

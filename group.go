package etagstore

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"time"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/engine"
)

// Group commit: concurrent Updates of one key in one Store share one read
// and one conditional write, and each caller still gets the state right
// after its own mutation, its own errors and its own deadline.
//
// A key with no Update in progress is idle. The first caller to arrive runs
// its Update on its own goroutine, as without grouping (solo). Callers
// that arrive meanwhile queue; when the solo caller is done, a runner
// goroutine takes the queue as a batch, reads the document once (or starts
// from the version the previous batch wrote: chaining), and gives each
// member a turn: the member's own goroutine decodes the state the one
// before it left, runs its mutate and encodes the result. The runner then
// writes the last state with If-Match, and hands every member its own
// state. The runner serves batches until the queue is empty.
//
// No caller waits long for another's code: a member whose turn has not
// ended within turnTimeout (a slow mutate, or one that calls Update on the
// same key) is left out of the batch and runs its Update on its own once
// its mutate returns; callers queued behind a solo caller whose mutate has
// not returned within turnTimeout are served by a runner, and the solo
// caller then writes on its own. Every waiting caller also watches its own
// context.

// turnTimeout bounds how long a batch waits for one member's mutate.
const turnTimeout = 10 * time.Millisecond

type groupKey struct {
	key    string
	create bool
}

type groupMode uint8

const (
	soloIO       groupMode = iota // a caller runs its own Update; arrivals queue for after it
	soloMutating                  // ... and is inside its mutate: an arrival starts a runner
	running                       // a runner commits the queue in batches
)

type group[T any] struct {
	queue []*member[T]
	mode  groupMode
	first bool          // the key is its solo caller's: no runner took it over, the group has not ended
	want  int           // a lingering runner waits for this many queued callers
	wake  chan struct{} // wakes it (buffered)

	entries, bounded uint64 // the solo caller's mutate calls; the last one a bound was armed for
}

// memberStatus is where a request stands; guarded by Store.gmu.
type memberStatus uint8

const (
	queued   memberStatus = iota // in the group's queue
	taken                        // in a batch, waiting for its turn
	onTurn                       // given a turn; its answer is awaited
	applied                      // its mutation is in the batch's state
	left                         // its caller returned (context done)
	answered                     // its result is set and done closed
)

type member[T any] struct {
	ctx    context.Context
	mutate func(*T) error
	turns  chan turn     // runner → caller: apply your mutation to this state
	answer chan answer   // caller → runner (one per turn)
	done   chan struct{} // closed when res is set

	status memberStatus
	batch  *batchRun[T]
	res    result[T]

	// The member's last turn, kept by the runner.
	value   T
	data    []byte
	changed bool
}

// turn is the state a member's mutation applies to.
type turn struct {
	data      []byte // nil: the document does not exist
	canonical bool   // data is exactly what the codec produces
}

type answer struct {
	data    []byte
	value   any // T
	changed bool
	err     error // the member's own failure (mutate, encode, panic)
	left    bool  // the caller left (context done) before running its turn
}

// result is what a member's caller returns.
type result[T any] struct {
	doc   Doc[T]
	err   error
	alone bool // run the Update alone instead (left out of the batch)

	attempts, batch int // the batch's attempts and size, for observing
}

// solo is the first caller of an idle key, running its Update on its own
// goroutine. It tells the group when its mutate runs, so that an arrival
// during it need not wait for it (see updateGrouped). The group owns it
// while g.first holds: a runner that takes the key over, or the end of the
// group, clears it.
type solo[T any] struct {
	s *Store[T]
	k groupKey
	g *group[T]
}

func (o solo[T]) enter() {
	o.s.gmu.Lock()
	if o.g.first {
		o.g.mode = soloMutating
		o.g.entries++
		if len(o.g.queue) > 0 {
			o.s.bound(o.k, o.g)
		}
	}
	o.s.gmu.Unlock()
}

// bound makes the callers queued behind a solo caller's mutate wait for it
// at most turnTimeout: then a runner serves them, and the solo caller, if
// its mutate ever returns, writes on its own. Store.gmu is held.
func (s *Store[T]) bound(k groupKey, g *group[T]) {
	if g.bounded == g.entries {
		return // armed for this mutate already
	}
	g.bounded = g.entries
	entry := g.entries
	time.AfterFunc(turnTimeout, func() {
		s.gmu.Lock()
		defer s.gmu.Unlock()
		if g.first && g.entries == entry && g.mode == soloMutating && len(g.queue) > 0 {
			s.startRunner(k, g)
		}
	})
}

func (o solo[T]) leave() {
	o.s.gmu.Lock()
	if o.g.first {
		o.g.mode = soloIO
	}
	o.s.gmu.Unlock()
}

// done hands the queue that formed meanwhile to a runner, or ends the
// group.
func (o solo[T]) done() {
	s, g := o.s, o.g
	s.gmu.Lock()
	defer s.gmu.Unlock()
	if !g.first {
		return // a runner has the key
	}
	if len(g.queue) > 0 {
		s.startRunner(o.k, g)
		return
	}
	s.endGroup(o.k, g)
}

// startRunner hands g to a new runner goroutine. Store.gmu is held.
func (s *Store[T]) startRunner(k groupKey, g *group[T]) {
	g.mode, g.first = running, false
	go s.run(k, g)
}

// endGroup removes g, whose queue is empty. Store.gmu is held.
func (s *Store[T]) endGroup(k groupKey, g *group[T]) {
	delete(s.groups, k)
	g.first = false
}

// updateGrouped runs an Update through its key's group.
func (s *Store[T]) updateGrouped(ctx context.Context, key string, create bool, mutate func(*T) error, st *opStats) (Doc[T], error) {
	k := groupKey{key, create}
	s.gmu.Lock()
	g := s.groups[k]
	if g == nil {
		g = &group[T]{mode: soloIO, first: true, wake: make(chan struct{}, 1)}
		s.groups[k] = g
		s.gmu.Unlock()
		o := solo[T]{s: s, k: k, g: g}
		defer o.done()
		return s.updateAlone(ctx, key, create, mutate, o, st)
	}
	r := &member[T]{ctx: ctx, mutate: mutate, turns: make(chan turn, 1), answer: make(chan answer, 1), done: make(chan struct{})}
	g.queue = append(g.queue, r)
	switch {
	case g.mode == soloMutating:
		s.bound(k, g) // wait for the solo caller's code, but not for long
	case g.want > 0 && len(g.queue) >= g.want:
		g.want = 0
		g.wake <- struct{}{} // the lingering runner: its batch is full
	}
	s.gmu.Unlock()
	res := s.await(ctx, k, g, r)
	if res.alone {
		return s.updateAlone(ctx, key, create, mutate, solo[T]{}, st)
	}
	st.attempts, st.batch = res.attempts, res.batch
	return res.doc, res.err
}

// await waits for r's turns and result, or for r's context to end.
func (s *Store[T]) await(ctx context.Context, k groupKey, g *group[T], r *member[T]) result[T] {
	for {
		select {
		case t := <-r.turns:
			s.takeTurn(r, t)
		case <-r.done:
			return r.res
		case <-ctx.Done():
			return s.leave(ctx, k, g, r)
		}
	}
}

// leave returns r's caller on its context's end: ctx.Err() when nothing
// holding its mutation was sent, unknown when a write holding it is in
// flight.
func (s *Store[T]) leave(ctx context.Context, k groupKey, g *group[T], r *member[T]) result[T] {
	s.gmu.Lock()
	defer s.gmu.Unlock()
	gone := result[T]{err: ctx.Err()}
	switch r.status {
	case answered:
		return r.res
	case queued:
		for i, q := range g.queue {
			if q == r {
				g.queue = append(g.queue[:i], g.queue[i+1:]...)
				break
			}
		}
	case onTurn:
		select {
		case <-r.turns: // not taken up: the runner waits for an answer
			r.answer <- answer{left: true}
		default: // answered already
		}
	case applied:
		if r.batch.inFlight {
			gone.err = outcomeUnknown("Update", k.key, ctx.Err())
		}
	}
	r.status = left
	return gone
}

// takeTurn applies r's mutation to t on the caller's goroutine and answers
// the runner. A panic answers errPanicked and goes on up the caller's stack.
func (s *Store[T]) takeTurn(r *member[T], t turn) {
	a := answer{err: errPanicked}
	defer func() { r.answer <- a }()
	v, baseline, err := s.startFrom(version{Item: driver.Item{Key: r.batch.key, Data: t.data}, Exists: t.data != nil, Canonical: t.canonical})
	if err == nil {
		err = r.mutate(v)
	}
	var data []byte
	if err == nil {
		data, err = s.encode(r.batch.key, *v)
	}
	a = answer{data: data, value: *v, changed: t.data == nil || !bytes.Equal(data, baseline), err: err}
}

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

// beforeBatch lingers before a batch (see linger), unless lingers have
// lately been in vain: callers a batch answers that go on to other keys
// (a skewed workload) do not come back, and a linger then only delays the
// batch. After a vain linger, the next 1, 3, 7, then 15 batches start
// without one.
func (s *Store[T]) beforeBatch(g *group[T], l *lingering) {
	if l.skip > 0 {
		l.skip--
		return
	}
	if s.linger(g, l.want, l.took) {
		l.misses = 0
		return
	}
	l.misses = min(l.misses+1, 4)
	l.skip = 1<<l.misses - 1
}

// linger waits, before a batch starts, until as many callers are queued as
// the last batch had (the callers it just answered, coming back), or for a
// fraction of the last batch's duration, whichever is first: otherwise the
// callers one batch releases would always miss the next one, and batches
// would level off at half the writers. Only a runner lingers, so an
// uncontended Update never waits. It reports false when it waited its whole
// bound and nobody came.
func (s *Store[T]) linger(g *group[T], want int, took time.Duration) (fruitful bool) {
	bound := min(took/4, maxLinger)
	if want == 0 || bound <= 0 {
		return true
	}
	s.gmu.Lock()
	queued := len(g.queue)
	if queued >= want {
		s.gmu.Unlock()
		return true
	}
	g.want = want
	s.gmu.Unlock()
	t := time.NewTimer(bound)
	select {
	case <-g.wake:
	case <-t.C:
	}
	t.Stop()
	s.gmu.Lock()
	g.want = 0
	select {
	case <-g.wake: // drain a wake-up that raced with the timer
	default:
	}
	fruitful = len(g.queue) > queued
	s.gmu.Unlock()
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
	ctx, cancel := batchContext(b.members)
	defer cancel()
	b.timer = time.NewTimer(time.Hour)
	defer b.timer.Stop()
	var mine T // a batch's *ConflictError is given each member's own value in finish
	if last == nil {
		last = b.s.cached(ctx, b.key, "") // as an Update on its own starts
	}
	res, extra, err := b.s.modify(ctx, "Update", b.key, create, last, &mine, b, b)
	b.finish(res, extra, err)
	if err != nil || res.Out[0].Data == nil || driver.IsSuperseded(res.Out[0].ETag) {
		return nil // no version to chain from
	}
	return []version{b.s.stored(res.Out[0], false)}
}

// change gives each member still in the batch a turn, in arrival order (the
// batch is the changer of its read-modify-write).
func (b *batchRun[T]) change(base version) ([]byte, bool, error) {
	t := turn{canonical: base.Canonical}
	if base.Exists {
		t.data = base.Data
	}
	changed := false
	b.applied = b.applied[:0]
	for _, r := range b.members {
		a, ok := b.turn(r, t)
		if !ok {
			continue
		}
		r.value, r.data, r.changed = a.value.(T), a.data, a.changed
		changed = changed || a.changed
		b.applied = append(b.applied, r)
		t = turn{data: a.data, canonical: true}
	}
	if len(b.applied) == 0 {
		return nil, false, errNoneApplied
	}
	return t.data, changed, nil
}

// errNoneApplied ends a batch none of whose members is left.
var errNoneApplied = errors.New("etagstore: no mutation in the batch applied")

// turn gives r a turn on t and waits for its answer, at most turnTimeout.
// It reports whether r's mutation applied; a member that failed or was
// too slow is handed its result on the spot.
func (b *batchRun[T]) turn(r *member[T], t turn) (answer, bool) {
	s := b.s
	s.gmu.Lock()
	if r.status != taken && r.status != applied {
		s.gmu.Unlock()
		return answer{}, false
	}
	r.status = onTurn
	r.turns <- t // buffered and empty: sent under the lock, so leave sees it
	s.gmu.Unlock()
	b.timer.Reset(turnTimeout)
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
		b.hand(r, result[T]{alone: true})
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
			}
			b.hand(r, result[T]{doc: d, attempts: res.Attempts, batch: len(b.applied)})
		case errors.As(err, &ce):
			mine := *ce
			mine.Mine = r.value
			b.hand(r, result[T]{err: &mine, attempts: res.Attempts, batch: len(b.applied)})
		case len(b.applied) > 1 && (errors.Is(err, ErrTooLarge) || errors.Is(err, ErrInvalidInput)):
			// One member's change may be at fault: each runs on its own.
			b.hand(r, result[T]{alone: true})
		default:
			b.hand(r, result[T]{err: err})
		}
	}
	for _, r := range b.members {
		if r.status == taken { // the batch ended before its turn
			b.hand(r, result[T]{err: err, alone: err == nil})
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
func batchContext[T any](batch []*member[T]) (context.Context, context.CancelFunc) {
	if len(batch) == 1 {
		return batch[0].ctx, func() {}
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(batch[0].ctx))
	var mu sync.Mutex
	live := len(batch)
	stops := make([]func() bool, len(batch))
	for i, r := range batch {
		stops[i] = context.AfterFunc(r.ctx, func() {
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

// Package groupcommit is the skeleton every group commit of etagstore
// shares: concurrent Updates of one key, and concurrent transactions of
// one commit scope, each commit in batches through it.
//
// A group is idle until a caller arrives: the first caller runs its write
// on its own goroutine, ungrouped, and callers that arrive meanwhile queue
// (Queue). When the first caller is done, or when its user code has run
// SlotTimeout while others wait (Bound), a runner goroutine of the kind's
// takes the queue as a batch, lingers first for the callers the last
// batch answered (Lingering), and serves batches until the queue is empty;
// then it parks the group for those callers (Park), or the group ends.
// Each member of a batch waits on its own goroutine for its slot (the
// kind's work: applying the member), and for its result (Caller); its
// context's end makes it leave. A batch follows its request through the
// engine as a Flight: a member that left before the request was sent makes
// the batch apply its members again without it.
//
// What each kind supplies is its own work: the runner's batch (applying a
// member in its slot, the request, handing out results), and what its
// slots and answers carry. Every field here is guarded by the group's
// lock, which the kind holds only for bookkeeping.
package groupcommit

import (
	"context"
	"errors"
	"sync"
	"time"
)

// ErrPanicked is what an operation whose user code (mutate, merge, fn,
// a codec, a yield) panicked records, a member's answer among them; the
// panic goes on up its caller's stack.
var ErrPanicked = errors.New("etagstore: mutate panicked")

// SlotTimeout bounds how long a batch waits for one member's user code,
// and a queue for its first caller's.
const SlotTimeout = 10 * time.Millisecond

// MaxLinger bounds how long a runner lingers before a batch.
const MaxLinger = 2 * time.Millisecond

// MinPark is the shortest linger a queue parks for (Park): below it the
// batch's commit was too quick for the callers' return to pay for a
// batch (memory), and a caller back writes alone, with no hand-off.
const MinPark = 100 * time.Microsecond

// Status is where a member stands; guarded by its group's lock.
type Status uint8

const (
	Queued   Status = iota // in the group's queue
	Taken                  // in a batch, waiting for its slot
	InSlot                 // given a slot; its answer is awaited
	Applied                // its change is in the batch's request
	Left                   // its caller returned (context done)
	Answered               // its result is set and Done closed
)

// Caller is what every member of a group holds: where it stands, and the
// channel closed once its result is set.
type Caller struct {
	Status Status
	Done   chan struct{}
}

// NewCaller returns a queued Caller.
func NewCaller() Caller { return Caller{Done: make(chan struct{})} }

// Hand marks c answered and wakes its caller; the kind has set its result.
// The group's lock is held.
func (c *Caller) Hand() {
	c.Status = Answered
	close(c.Done)
}

// Waiting reports whether c is still in its batch: taken, or applied.
func (c *Caller) Waiting() bool { return c.Status == Taken || c.Status == Applied }

type mode uint8

const (
	firstWriting  mode = iota // a first caller writes on its own; arrivals queue for after it
	firstMutating             // ... and is inside its user code: an arrival bounds it
	running                   // a runner commits the queue in batches
	parked                    // no runner: the callers a batch answered are awaited (Park)
)

// Queue is a group's callers and its state: a first caller writing on its
// own, or a runner. Every method is called with the group's lock held,
// except Bound's timer, which takes it. A kind embeds it by value, and
// sets it up with Init.
type Queue[M comparable] struct {
	Members []M
	mu      sync.Locker
	runner  Runner // starts the kind's runner (lock held)
	mode    mode
	first   bool          // a first caller writes on its own; no runner took over
	want    int           // a lingering runner, or a parked queue, waits for this many queued members
	wake    chan struct{} // wakes it (buffered; made at its first linger)
	parks   uint64        // times the queue parked; the last one's timer acts

	entries, bounded uint64 // the first caller's runs of user code; the last one a bound was armed for
}

// Runner starts a group's runner goroutine, and ends a group (the kind
// forgets it: its next caller is a first caller), with the group's lock
// held.
type Runner interface {
	StartRunner()
	EndGroup()
}

// Init sets up the queue of a group whose first caller has just arrived
// (inside its user code already: mutating), guarded by mu; r starts the
// kind's runner.
func (q *Queue[M]) Init(mu sync.Locker, mutating bool, r Runner) {
	*q = Queue[M]{mu: mu, runner: r, first: true}
	if mutating {
		q.mode, q.entries = firstMutating, 1
	}
}

// Arrive queues m: behind a first caller inside its user code, for at most
// SlotTimeout (Bound); a lingering runner whose batch it fills is woken.
func (q *Queue[M]) Arrive(m M) {
	q.Members = append(q.Members, m)
	switch {
	case q.mode == firstMutating:
		q.bound()
	case q.mode == parked && len(q.Members) >= q.want:
		q.want, q.mode = 0, running
		q.runner.StartRunner()
	case q.want > 0 && len(q.Members) >= q.want:
		q.want = 0
		q.wake <- struct{}{}
	}
}

// Park ends the runner of a queue it found empty (the lock held), and
// reports whether the group stays (else the kind ends it now). After a
// batch of several callers (l.Want), the group waits for them to come
// back as a lingering runner would, but with no goroutine: the arrival
// that brings the queue to l.Want starts a runner; at the bound, a runner
// takes whoever came, or the group ends (Runner.EndGroup) if nobody did.
// Otherwise a batch that answered every caller in flight would end the
// group, the first caller back would write alone with the rest queued
// behind it, and batches would alternate between one member and all the
// others. After a batch of one, a linger shorter than MinPark, or while
// lingers are skipped as vain, the group ends at once.
func (q *Queue[M]) Park(l *Lingering) bool {
	bound := min(l.Took/4, MaxLinger)
	if l.Want <= 1 || bound < MinPark || l.skip > 0 {
		return false
	}
	q.mode, q.want = parked, l.Want
	q.parks++
	park := q.parks
	time.AfterFunc(bound, func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		if q.mode != parked || q.parks != park {
			return
		}
		q.want = 0
		if len(q.Members) == 0 {
			q.runner.EndGroup()
			return
		}
		q.mode = running
		q.runner.StartRunner()
	})
	return true
}

// Remove takes m, whose caller left, out of the queue.
func (q *Queue[M]) Remove(m M) {
	for i, x := range q.Members {
		if x == m {
			q.Members = append(q.Members[:i], q.Members[i+1:]...)
			return
		}
	}
}

// First reports whether the group is its first caller's still.
func (q *Queue[M]) First() bool { return q.first }

// Entering and Leaving say that the first caller's user code runs, or has
// returned.
func (q *Queue[M]) Entering() {
	if !q.first {
		return
	}
	q.mode = firstMutating
	q.entries++
	if len(q.Members) > 0 {
		q.bound()
	}
}

func (q *Queue[M]) Leaving() {
	if q.first {
		q.mode = firstWriting
	}
}

// FirstDone says the first caller is done: a runner takes the queue that
// formed meanwhile (true), or the group ends (false: the kind forgets
// it). A group a runner took over already is left to it (true).
func (q *Queue[M]) FirstDone() bool {
	if !q.first {
		return true
	}
	q.first = false
	if len(q.Members) > 0 {
		q.mode = running
		q.runner.StartRunner()
		return true
	}
	return false
}

// bound makes the callers queued behind a first caller's user code wait
// for it at most SlotTimeout: then a runner serves them, and the first
// caller, if its code ever returns, writes on its own.
func (q *Queue[M]) bound() {
	if q.bounded == q.entries {
		return // armed for this run already
	}
	q.bounded = q.entries
	entry := q.entries
	time.AfterFunc(SlotTimeout, func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		if q.first && q.entries == entry && q.mode == firstMutating && len(q.Members) > 0 {
			q.first, q.mode = false, running
			q.runner.StartRunner()
		}
	})
}

// Take returns the queue as the next batch, emptied.
func (q *Queue[M]) Take() []M {
	batch := q.Members
	q.Members = nil
	return batch
}

// Linger is l.Before for q's runner; mu is q's lock, not held.
func (q *Queue[M]) Linger(l *Lingering) {
	q.mu.Lock()
	if q.wake == nil {
		q.wake = make(chan struct{}, 1)
	}
	wake := q.wake
	q.mu.Unlock()
	l.before(q.mu, func() int { return len(q.Members) }, &q.want, wake)
}

// Lingering is a runner's state between batches: how many members it
// waits for and how long the last batch took, and how many batches to
// start at once because lingers lately found nobody coming back.
type Lingering struct {
	Want   int
	Took   time.Duration
	misses int // vain lingers in a row (at most 4)
	skip   int
}

// before lingers before a batch (see linger), unless lingers have lately
// been in vain: callers a batch answers that go on to other keys (a
// skewed workload) do not come back, and a linger then only delays the
// batch. After a vain linger, the next 1, 3, 7, then 15 batches start
// without one.
func (l *Lingering) before(mu sync.Locker, queued func() int, want *int, wake chan struct{}) {
	if l.skip > 0 {
		l.skip--
		return
	}
	if linger(mu, queued, want, wake, l.Want, l.Took) {
		l.misses = 0
		return
	}
	l.misses = min(l.misses+1, 4)
	l.skip = 1<<l.misses - 1
}

// linger waits, before a batch starts, until n members are queued (the
// callers the last batch answered, coming back), or for a fraction of the
// last batch's duration, whichever is first: otherwise the callers one
// batch releases would always miss the next one, and batches would level
// off at half the writers. Only a runner lingers, so an uncontended write
// never waits. It reports false when it waited its whole bound and nobody
// came.
func linger(mu sync.Locker, queued func() int, want *int, wake chan struct{}, n int, took time.Duration) (fruitful bool) {
	bound := min(took/4, MaxLinger)
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

// Flight is how a batch follows the request holding its members' changes
// (engine.Flight): Hold before each send, Release when it did not land.
type Flight struct {
	mu       sync.Locker
	applied  func(yield func(*Caller) bool) // the members the request holds
	InFlight bool                           // a request holding them is sent or being resolved
}

// NewFlight returns the Flight of a batch whose applied members applied
// lists, guarded by mu.
func NewFlight(mu sync.Locker, applied func(yield func(*Caller) bool)) Flight {
	return Flight{mu: mu, applied: applied}
}

// Hold marks the request in flight, unless a member whose change it holds
// has left: then the batch applies its members again without it.
func (f *Flight) Hold() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for c := range f.applied {
		if c.Status == Left {
			return false
		}
	}
	f.InFlight = true
	return true
}

// Release marks the request as not landed.
func (f *Flight) Release() {
	f.mu.Lock()
	f.InFlight = false
	f.mu.Unlock()
}

// Context returns a context for a batch: done when every member's context
// is done (one caller giving up does not stop the others' write),
// carrying the values of the first.
func Context(ctxs []context.Context) (context.Context, context.CancelFunc) {
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

// Member is a caller's place in a group: its Caller, its context, and the
// slots a runner gives it (S: what a slot carries to the member's
// goroutine) and its answers to them (A). A slot's channel and its
// answer's are buffered for one: a slot is given under the group's lock,
// so that Leave sees it.
type Member[S, A any] struct {
	Caller
	Ctx    context.Context
	slots  chan S
	answer chan A
}

// NewMember returns a queued Member for a caller under ctx.
func NewMember[S, A any](ctx context.Context) Member[S, A] {
	return Member[S, A]{Caller: NewCaller(), Ctx: ctx, slots: make(chan S, 1), answer: make(chan A, 1)}
}

// Slots is where the member's slots arrive.
func (m *Member[S, A]) Slots() <-chan S { return m.slots }

// Await runs take, on the caller's goroutine, for every slot the runner
// gives the member, until its result is set (false) or its context ends
// (true: the caller leaves).
func (m *Member[S, A]) Await(take func(S)) (ctxDone bool) {
	for {
		select {
		case s := <-m.slots:
			take(s)
		case <-m.Done:
			return false
		case <-m.Ctx.Done():
			return true
		}
	}
}

// Leave marks the member left on its context's end (the group's lock
// held): a queued member is taken out (remove), a slot not taken up yet
// is answered left (the runner waits for it). It reports whether the
// member's result was set first (answered), and whether a request holding
// its change is in flight (f: its batch's; nil: none).
func (m *Member[S, A]) Leave(remove func(), left A, f *Flight) (answered, inFlight bool) {
	switch m.Status {
	case Answered:
		return true, false
	case Queued:
		remove()
	case InSlot:
		select {
		case <-m.slots:
			m.answer <- left
		default: // answered already
		}
	case Applied:
		inFlight = f != nil && f.InFlight
	}
	m.Status = Left
	return false, inFlight
}

// Give hands the member its slot s (the group's lock held).
func (m *Member[S, A]) Give(s S) {
	m.Status = InSlot
	m.slots <- s
}

// Answer answers the member's slot, from its caller's goroutine.
func (m *Member[S, A]) Answer(a A) { m.answer <- a }

// Wait waits for the answer to the member's slot, with t (stopped on
// return): first for bound, then, each time it ends, for as long as
// again says (false: give up, timedOut).
func (m *Member[S, A]) Wait(t *time.Timer, bound time.Duration, again func() (time.Duration, bool)) (a A, timedOut bool) {
	defer t.Stop()
	for {
		t.Reset(bound)
		select {
		case a = <-m.answer:
			return a, false
		case <-t.C:
		}
		var ok bool
		if bound, ok = again(); !ok {
			return a, true
		}
	}
}

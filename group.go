package etagstore

import (
	"bytes"
	"context"
	"errors"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/groupcommit"
	"github.com/etagstore/etagstore/internal/reentry"
	"github.com/etagstore/etagstore/internal/telemetry"
)

// Group commit, in two files: this one (a key's group, its callers'
// arrival, slots and leaving) and batch.go (the runner and its batches).
// Concurrent Updates of one key in one Store share one read and one
// conditional write, and each caller still gets the state right after its
// own mutation, its own errors and its own deadline.
//
// Locks: Store.gmu guards the groups map and every group, member and
// batchRun field marked so. It is held only for bookkeeping: never while
// user code (mutate, a codec), the backend, the engine or the version
// cache runs, and no other lock is taken under it (the shared reads',
// the cache's and the heat's locks are never held together with it).
//
// A key with no Update in progress is idle. The first caller to arrive runs
// its Update on its own goroutine, ungrouped. Callers that arrive
// meanwhile queue; when the first caller is done, a runner
// goroutine takes the queue as a batch, reads the document once (or starts
// from the version the previous batch wrote: chaining), and gives each
// member a slot: the member's own goroutine decodes the state the one
// before it left, runs its mutate and encodes the result. The runner then
// writes the last state with If-Match, and hands every member its own
// state. The runner serves batches until the queue is empty.
//
// No caller waits long for another's code: a member whose slot has not
// ended within slotTimeout (a slow mutate) is left out of the batch and
// runs its Update on its own once its mutate returns; callers queued
// behind a first caller whose mutate has not returned within slotTimeout
// are served by a runner, and the first caller then writes on its own.
// Every waiting caller also watches its own context. An Update nested in
// a mutate of its key does not queue: it runs on its own, on the
// mutate's goroutine, and the mutate's Update fails (update.go, mutate);
// a member whose mutate wrote its key so is answered that failure even if
// the batch left it out meanwhile, never run again.

// slotTimeout bounds how long a batch waits for one member's user code.
const slotTimeout = groupcommit.SlotTimeout

type groupKey struct {
	key    string
	create bool
}

type group[T any] struct {
	groupcommit.Queue[*member[T]]
	s *Store[T]
	k groupKey
}

// StartRunner hands g to a new runner goroutine (groupcommit.Runner);
// Store.gmu is held.
func (g *group[T]) StartRunner() { go g.s.run(g.k, g) }

type member[T any] struct {
	// Its slots (the state its mutation applies to) and answers, and where
	// it stands (guarded by Store.gmu).
	groupcommit.Member[slot, answer]
	mutate func(*T) error
	batch  *batchRun[T]
	res    result[T]
	self   error // its mutate wrote the key itself (reentry.SelfWriteError); the caller's goroutine's own

	// The member's last slot, kept by the runner.
	value   T
	data    []byte
	changed bool
}

// slot is the state a member's mutation applies to.
type slot struct {
	data      []byte // nil: the document does not exist
	canonical bool   // data is exactly what the codec produces
}

type answer struct {
	data    []byte
	base    []byte // the encoding of the value the slot started from
	value   any    // T
	changed bool
	err     error // the member's own failure (mutate, encode, panic)
	left    bool  // the caller left (context done) before running its slot
}

// result is what a member's caller returns.
type result[T any] struct {
	doc       Doc[T]
	err       error
	ungrouped bool // run the Update ungrouped instead (left out of the batch)

	attempts, batch int // the batch's attempts and size, for observing
}

// firstCaller is the first caller of an idle key, running its Update on its own
// goroutine. It tells the group when its mutate runs, so that an arrival
// during it need not wait for it (see updateGrouped). The group owns it
// while g.first holds: a runner that takes the key over, or the end of the
// group, clears it.
type firstCaller[T any] struct {
	s *Store[T]
	k groupKey
	g *group[T]
}

func (o firstCaller[T]) enter() {
	o.s.gmu.Lock()
	o.g.Entering()
	o.s.gmu.Unlock()
}

func (o firstCaller[T]) leave() {
	o.s.gmu.Lock()
	o.g.Leaving()
	o.s.gmu.Unlock()
}

// done hands the queue that formed meanwhile to a runner, or ends the
// group.
func (o firstCaller[T]) done() {
	s, g := o.s, o.g
	s.gmu.Lock()
	defer s.gmu.Unlock()
	if !g.FirstDone() {
		delete(s.groups, o.k)
	}
}

// updateGrouped runs an Update through its key's group.
func (s *Store[T]) updateGrouped(ctx context.Context, key string, create bool, mutate func(*T) error, st *telemetry.Stats) (Doc[T], error) {
	k := groupKey{key, create}
	s.gmu.Lock()
	g := s.groups[k]
	if g == nil {
		g = &group[T]{s: s, k: k}
		g.Init(&s.gmu, false, g)
		s.groups[k] = g
		s.gmu.Unlock()
		o := firstCaller[T]{s: s, k: k, g: g}
		defer o.done()
		return s.updateUngrouped(ctx, key, create, mutate, o, st)
	}
	r := &member[T]{Member: groupcommit.NewMember[slot, answer](ctx), mutate: mutate}
	g.Arrive(r) // behind a first caller's mutate, for at most slotTimeout
	s.gmu.Unlock()
	var res result[T]
	if r.Await(func(t slot) { s.takeSlot(r, t) }) {
		res = s.leave(ctx, k, g, r)
	} else {
		res = r.res
	}
	if res.ungrouped && r.self != nil {
		return Doc[T]{}, r.self // its mutate wrote the key: running it again would write again
	}
	if res.ungrouped {
		return s.updateUngrouped(ctx, key, create, mutate, firstCaller[T]{}, st)
	}
	st.Attempts, st.Batch = res.attempts, res.batch
	return res.doc, res.err
}

// leave returns r's caller on its context's end: ctx.Err() when nothing
// holding its mutation was sent, unknown when a write holding it is in
// flight.
func (s *Store[T]) leave(ctx context.Context, k groupKey, g *group[T], r *member[T]) result[T] {
	s.gmu.Lock()
	defer s.gmu.Unlock()
	gone := result[T]{err: ctx.Err()}
	var f *groupcommit.Flight
	if r.batch != nil {
		f = &r.batch.Flight
	}
	answered, inFlight := r.Leave(func() { g.Remove(r) }, answer{left: true}, f)
	switch {
	case answered:
		return r.res
	case inFlight:
		gone.err = outcomeUnknown(telemetry.OpUpdate, k.key, ctx.Err())
	}
	return gone
}

// takeSlot applies r's mutation to t on the caller's goroutine and answers
// the runner. A panic answers errPanicked and goes on up the caller's stack.
func (s *Store[T]) takeSlot(r *member[T], t slot) {
	a := answer{err: errPanicked}
	defer func() { r.Answer(a) }()
	v, baseline, err := s.startFrom(version{Item: driver.Item{Key: r.batch.key, Data: t.data}, Exists: t.data != nil, Canonical: t.canonical})
	if err == nil {
		err = s.mutate(r.batch.key, r.mutate, v)
		var sw *reentry.SelfWriteError
		if errors.As(err, &sw) {
			r.self = err // final, even if the batch has left r out meanwhile
		}
	}
	var data []byte
	if err == nil {
		data, err = s.encode(r.batch.key, *v)
	}
	a = answer{data: data, base: baseline, value: *v, changed: t.data == nil || !bytes.Equal(data, baseline), err: err}
}

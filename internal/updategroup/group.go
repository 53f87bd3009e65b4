// Package updategroup is group commit for Updates: concurrent Updates of
// one key in one Store share one read and one conditional write, and each
// caller still gets the state right after its own mutation, its own errors
// and its own deadline. It knows T only as a type parameter: the Store's
// typed work (decoding, mutate, encoding, the read-modify-write itself) is
// the Work it is handed. This file is a key's group, its callers' arrival,
// slots and leaving; batch.go is the runner and its batches.
//
// Locks: Groups.mu guards the groups map and every group, member and
// batch field marked so. It is held only for bookkeeping: never while
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
// mutate's goroutine, and the mutate's Update fails (the root's
// update.go, mutate); a member whose mutate wrote its key so is answered
// that failure even if the batch left it out meanwhile, never run again.
package updategroup

import (
	"bytes"
	"context"
	"errors"
	"sync"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/engine"
	"github.com/etagstore/etagstore/internal/groupcommit"
	"github.com/etagstore/etagstore/internal/reentry"
	"github.com/etagstore/etagstore/internal/telemetry"
)

// slotTimeout bounds how long a batch waits for one member's user code.
const slotTimeout = groupcommit.SlotTimeout

// Work is a Store's typed part in its Updates' group commit (X is the
// Extra of the document a write made, opaque here).
type Work[T, X any] interface {
	// StartFrom decodes b into a fresh value for a mutation, with the
	// encoding an unchanged value has.
	StartFrom(b engine.Version) (v *T, baseline []byte, err error)
	// Mutate runs an Update's mutate of key on v.
	Mutate(key string, mutate func(*T) error, v *T) error
	Encode(key string, v T) ([]byte, error)
	// Cached is the version cache's copy of key, nil when it holds none.
	Cached(ctx context.Context, key string) []engine.Version
	// Modify delivers a read-modify-write of key from start (nil: read),
	// change computing each attempt's new encoding; *mine is the value
	// for a conflict's text.
	Modify(ctx context.Context, key string, create bool, start []engine.Version, mine *T,
		change func(engine.Version) (data, baseline []byte, changed bool, err error), f engine.Flight) (engine.Result, X, error)
	// Committed counts a commit of n callers' changes.
	Committed(ctx context.Context, n int)
	// Chain is the version it, written with extra x, a next batch starts
	// from.
	Chain(it driver.Item, x X) engine.Version
	// Mine is err, a batch's conflict, as the member whose value was v
	// gets it; ok is false when err is no conflict.
	Mine(err error, v T) (mine error, ok bool)
}

// Groups are a Store's groups of Updates, by key.
type Groups[T, X any] struct {
	mu     sync.Mutex
	groups map[groupKey]*Group[T, X]
}

type groupKey struct {
	key    string
	create bool
}

// Group is one key's group. Its first caller, running its Update on its
// own, tells it when its mutate runs (Enter, Leave), so that an arrival
// during it need not wait for it, and when it is done (Done). The group
// owns the first caller while its queue says so: a runner that takes the
// key over, or the end of the group, clears it.
type Group[T, X any] struct {
	groupcommit.Queue[*Member[T, X]]
	gs *Groups[T, X]
	k  groupKey
	w  Work[T, X]
}

// StartRunner hands g to a new runner goroutine (groupcommit.Runner);
// Groups.mu is held.
func (g *Group[T, X]) StartRunner() { go g.run() }

// Member is a caller queued in a group.
type Member[T, X any] struct {
	// Its slots (the state its mutation applies to) and answers, and where
	// it stands (guarded by Groups.mu).
	groupcommit.Member[slot, answer[T]]
	g      *Group[T, X] // the group it arrived in
	mutate func(*T) error
	batch  *batch[T, X]
	res    Result[T, X]
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

type answer[T any] struct {
	data    []byte
	base    []byte // the encoding of the value the slot started from
	value   T
	changed bool
	err     error // the member's own failure (mutate, encode, panic)
	left    bool  // the caller left (context done) before running its slot
}

// Result is what a member's caller returns: the state right after its
// mutation, as the batch's write made it (ETag, Extra), or (Superseded: a
// later member changed it again) its own state, Data, never stored as a
// version of its own, whose ETag names the write and the member.
type Result[T, X any] struct {
	Value      T
	ETag       driver.ETag
	Extra      X
	Superseded bool
	Data       []byte
	Err        error
	// Ungrouped: run the Update on its own instead (left out of the
	// batch), unless Self: its mutate wrote the key itself, and running
	// it again would write again.
	Ungrouped bool
	Self      error

	Attempts, Batch int // the batch's attempts and size, for observing
}

// Enter and Leave tell g that its first caller's mutate runs, or has
// returned; nil-safe.
func (g *Group[T, X]) Enter() {
	if g != nil {
		g.gs.mu.Lock()
		g.Entering()
		g.gs.mu.Unlock()
	}
}

func (g *Group[T, X]) Leave() {
	if g != nil {
		g.gs.mu.Lock()
		g.Leaving()
		g.gs.mu.Unlock()
	}
}

// Done hands the queue that formed meanwhile to a runner, or ends the
// group.
func (g *Group[T, X]) Done() {
	gs := g.gs
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if !g.FirstDone() {
		g.EndGroup()
	}
}

// EndGroup forgets g, whose key has no Update in flight
// (groupcommit.Runner); the lock is held.
func (g *Group[T, X]) EndGroup() { delete(g.gs.groups, g.k) }

// Arrive makes an Update of key (create: it creates a missing key) a
// caller of its group: the first caller of an idle key gets the group
// (first: it runs its Update on its own, and tells it), any other is
// queued (m: it awaits its result).
func (gs *Groups[T, X]) Arrive(ctx context.Context, w Work[T, X], key string, create bool, mutate func(*T) error) (first *Group[T, X], m *Member[T, X]) {
	k := groupKey{key, create}
	gs.mu.Lock()
	g := gs.groups[k]
	if g == nil {
		if gs.groups == nil {
			gs.groups = map[groupKey]*Group[T, X]{}
		}
		g = &Group[T, X]{gs: gs, k: k, w: w}
		g.Init(&gs.mu, false, g)
		gs.groups[k] = g
		gs.mu.Unlock()
		return g, nil
	}
	r := &Member[T, X]{Member: groupcommit.NewMember[slot, answer[T]](ctx), g: g, mutate: mutate}
	g.Arrive(r) // behind a first caller's mutate, for at most slotTimeout
	gs.mu.Unlock()
	return nil, r
}

// Served waits for r's slots (running them on the caller's goroutine) and
// its result, or for ctx's end.
func (r *Member[T, X]) Served(ctx context.Context) Result[T, X] {
	var res Result[T, X]
	if r.Await(func(t slot) { takeSlot(r.g.w, r, t) }) {
		res = r.leave(ctx)
	} else {
		res = r.res
	}
	res.Self = r.self
	return res
}

// leave returns r's caller on its context's end: ctx.Err() when nothing
// holding its mutation was sent, unknown when a write holding it is in
// flight.
func (r *Member[T, X]) leave(ctx context.Context) Result[T, X] {
	gs := r.g.gs
	gs.mu.Lock()
	defer gs.mu.Unlock()
	gone := Result[T, X]{Err: ctx.Err()}
	var f *groupcommit.Flight
	if r.batch != nil {
		f = &r.batch.Flight
	}
	answered, inFlight := r.Leave(func() { r.g.Remove(r) }, answer[T]{left: true}, f)
	switch {
	case answered:
		return r.res
	case inFlight:
		gone.Err = &driver.OutcomeUnknownError{Op: telemetry.OpUpdate.String(), Key: r.g.k.key, Cause: ctx.Err()}
	}
	return gone
}

// takeSlot applies r's mutation to t on the caller's goroutine and answers
// the runner. A panic answers groupcommit.ErrPanicked and goes on up the
// caller's stack.
func takeSlot[T, X any](w Work[T, X], r *Member[T, X], t slot) {
	a := answer[T]{err: groupcommit.ErrPanicked}
	defer func() { r.Answer(a) }()
	key := r.batch.key
	v, baseline, err := w.StartFrom(engine.Version{Item: driver.Item{Key: key, Data: t.data}, Exists: t.data != nil, Canonical: t.canonical})
	if err == nil {
		err = w.Mutate(key, r.mutate, v)
		var sw *reentry.SelfWriteError
		if errors.As(err, &sw) {
			r.self = err // final, even if the batch has left r out meanwhile
		}
	}
	var data []byte
	if err == nil {
		data, err = w.Encode(key, *v)
	}
	a = answer[T]{data: data, base: baseline, value: *v, changed: t.data == nil || !bytes.Equal(data, baseline), err: err}
}

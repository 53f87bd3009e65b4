package txn

import (
	"errors"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/engine"
	"github.com/etagstore/etagstore/internal/fence"
	"github.com/etagstore/etagstore/internal/groupcommit"
	"github.com/etagstore/etagstore/internal/index"
	"github.com/etagstore/etagstore/internal/telemetry"
)

// Group commit for transactions: concurrent transactions whose Stores
// commit together (one backend, or one driver.Abilities.CommitScope: a
// table and partition) share one commit, whichever Stores they use. The
// group is the commit scope's, not a Store's, since a transaction's keys
// are known only once its fn has run.
//
// Locks: mu guards every group, member and batch field marked so. It is
// held only for bookkeeping: never while user code (fn, a codec), the
// backend or the engine runs, and no other lock is taken under it.
//
// A group with no transaction in flight is idle. The first transaction to
// arrive (at its fn's first use of a Store: call.go) commits on its
// own, on its caller's goroutine; transactions that arrive meanwhile
// queue, and when it is done a runner goroutine takes the queue as a
// batch and serves batches until the queue is empty, lingering before
// each while a caller is queued until every transaction in flight is.
// Queued callers behind a first caller whose fn has not returned within
// groupcommit.SlotTimeout are served by a runner at once. Each attempt of
// a batch gives its members a slot,
// in arrival order: the member's own goroutine runs its fn on a copy (a
// fork) of the batch's transaction so far, so that it sees the writes of
// the members before it, and the runner adopts the fork when fn returns
// nil. The keys the members create unread (Tx.Create) are then looked up
// together, in one request where the backend can (ReadMany); a member
// whose key exists is answered ErrExists (once its reads are found
// current) and the slots run again without it. The runner then commits
// every adopted member's writes and checks in one atomic request, through
// the engine like any transaction: a lost race runs the slots again on
// fresh reads (read ahead in parallel), after the lead's backoff. Each
// member gets the documents it put: a document a later member wrote again
// carries a Superseded ETag, as in an Update batch.
//
// A member leaves the batch and runs its transaction on its own when its
// fn returns an error matching ErrConflict or panics or fails on reads no
// longer current; when its slot lasts groupcommit.SlotTimeout beyond its
// reads while another caller waits for it (a slow fn, or one that calls Transact in
// the same group); and when the batch lost its last race over a key it did
// not touch. A member whose fn failed on a write of an earlier member (not
// stored yet), uses a key an earlier member uses through another Store,
// or whose batch was refused because another member's created key exists,
// waits for the next batch, as does one whose keys do not fit the batch's
// (the first misfit; the members after it are checked one by one). The
// first member of a batch whose keys cannot be committed at all fails as
// it would on its own. A member's runs in batch attempts count toward its
// own lead's MaxAttempts, except a run whose writes did not fit the
// request. An error or panic on a
// view of its own reads, all current, is its caller's, as on its own: a
// member whose fn returned an error, or wrote nothing, leaves the batch at
// once and its caller checks its reads on its own goroutine (a panic is
// checked in its slot, and goes on up its caller's stack); it never joins
// the commit. A member whose caller leaves (ctx) after
// its writes were adopted and before the commit is sent makes the batch
// run its slots again without it; after, its caller gets an unknown
// outcome if it wrote anything.

// mu guards the transaction groups.
var mu sync.Mutex

// groups are the groups with a transaction in flight, by commit scope
// (guarded by mu).
var groups = map[any]*txGroup{}

// txGroup is a commit scope's queue of transactions; guarded by mu.
type txGroup struct {
	key any
	groupcommit.Queue[*member]
	prediction // which created keys its batches look up (lookup.go); the runner's
}

// StartRunner hands g to a new runner goroutine (groupcommit.Runner); mu
// is held.
func (g *txGroup) StartRunner() { go g.run() }

// member is one transaction in a batch.
type member struct {
	call *Call
	// Its slots (run fn on this fork) and answers, and where it stands
	// (guarded by mu).
	groupcommit.Member[*State, answer]
	batch *batch
	res   result
	// Its slot's time in reads, which the slot's bound does not count
	// (guarded by mu).
	reading   bool
	readSince time.Time
	inReads   time.Duration

	view *State // the fork its last slot ran on (guarded by mu)
	// The Store and key of fn's first use of a Store (read ahead by the
	// batch with the others' when its cache does not hold it).
	firstCore Store
	firstKey  string
	// check is how the caller's goroutine found the reads of a run that
	// failed or wrote nothing, made after it left the batch (its own).
	check checkOwn
	// runs is how many batch attempts ran its fn (guarded by mu): they
	// count toward its lead's MaxAttempts. lastAttempt is the last of
	// them, in its batch (0: none yet).
	runs, lastAttempt int
}

// answer is a member's answer to a slot.
type answer struct {
	done      bool  // fn wrote nothing, on reads all current: answered now, nothing to commit
	ungrouped bool  // run the transaction on its own instead
	later     bool  // wait for the next batch (made on an earlier member's writes)
	checking  bool  // fn failed, or wrote nothing: out of the batch; its caller checks its reads (member.check)
	err       error // fn's own failure, on current reads of its own; with ungrouped, the failure if no attempt is left
	left      bool  // the caller left (context done) before running its slot
}

// checkOwn is what a member's caller found checking the reads of a run
// that failed (err) or wrote nothing (nil): stale, ErrStale when one
// changed, or the check's own failure.
type checkOwn struct{ err, stale error }

// result is what a member's caller returns.
type result struct {
	err       error
	ungrouped bool    // run the transaction on its own instead (left out of the batch)
	exists    string  // a key it created unread exists: ErrExists, once its reads are found current
	likely    string  // a key it created unread most likely exists: its caller reads it (exists), or runs on its own
	probes    *probes // with likely: the read it shares with the batch's other such members (probe.go), nil: its own
	// predicted: with ungrouped, its write takes a unique value most
	// likely held; its caller learns through confirms (probe.go) whether
	// a document holds it (its error) or not (on its own).
	predicted *index.UniqueError
	confirms  *confirms
	checking  bool // out of the batch: the caller's check of its own reads decides (member.check)
	ran       int  // with ungrouped: the attempts its runs in batches count for (err: the failure if that is all)
	batch     int  // the documents committed
	tries     int  // the batch's attempts
}

// groupOf is the group lead's transactions share, nil when they commit
// on their own: group commit off, a fenced ctx, a transaction nested in
// user code of a write (its writes must land on its goroutine), or a
// backend whose scope cannot be named.
func groupOf(c *Call) any {
	lead := c.lead
	if !lead.Grouped() || fence.Ungrouped(c.ctx) || c.nested || c.store == nil && lead.Reentry().InsideAny() {
		return nil
	}
	if s := lead.Abilities().CommitScope; s != "" {
		return s
	}
	b := unwrapped(lead.Backend())
	if !reflect.ValueOf(b).Comparable() {
		return nil
	}
	return b
}

// arrive makes c a transaction of key's group: its first caller (nil
// member), when no transaction of the group is in flight, or a queued
// member, whose fn's first use of a Store, first, was of firstKey (its
// batch reads it with the others': lookup.go readFirstKeys).
func arrive(key any, c *Call, first Store, firstKey string) (*txGroup, *member) {
	mu.Lock()
	defer mu.Unlock()
	g := groups[key]
	if g == nil {
		g = &txGroup{key: key, prediction: recall(key)}
		g.Init(&mu, true, g)
		groups[key] = g
		return g, nil
	}
	r := &member{call: c, Member: groupcommit.NewMember[*State, answer](c.ctx), firstCore: first, firstKey: firstKey}
	g.Arrive(r)
	return g, r
}

// EndGroup is end (groupcommit.Runner); mu is held.
func (g *txGroup) EndGroup() { g.end() }

// end ends g, which has no transaction in flight, keeping its
// prediction for the scope's next group (mu held).
func (g *txGroup) end() {
	delete(groups, g.key)
	remember(g.key, g.prediction)
}

// entering and leaving tell the group that its first caller's fn runs,
// or has returned; firstDone that the first caller is done.
func (g *txGroup) entering() {
	if g == nil {
		return
	}
	mu.Lock()
	g.Entering()
	mu.Unlock()
}

func (g *txGroup) leaving() {
	if g == nil {
		return
	}
	mu.Lock()
	g.Leaving()
	mu.Unlock()
}

// firstDone hands the queue that formed meanwhile to a runner, or ends
// the group.
func (g *txGroup) firstDone() {
	if g == nil {
		return
	}
	mu.Lock()
	defer mu.Unlock()
	if !g.FirstDone() {
		g.end()
	}
}

// run commits the queue in batches until it is empty.
// Before each batch after the first, when a caller is queued, it lingers
// (see linger) until every transaction in flight is queued (the callers
// the last batch answered, and those that queued meanwhile), bounded by a
// fraction of that batch's last attempt: its sends, not its backoff. With
// nobody queued it parks the group for those callers (groupcommit's
// Park), or ends it.
func (g *txGroup) run() {
	var l groupcommit.Lingering
	for {
		mu.Lock()
		waiting := len(g.Members) > 0
		mu.Unlock()
		if waiting {
			g.Linger(&l)
		}
		mu.Lock()
		batch := g.Take()
		if len(batch) == 0 {
			if !g.Park(&l) { // the group ends: the next caller commits ungrouped
				g.end()
			}
			mu.Unlock()
			return
		}
		b := newBatch(g, batch)
		for _, r := range batch {
			r.Status, r.batch = groupcommit.Taken, b
		}
		mu.Unlock()
		b.commit()
		mu.Lock()
		l.Want, l.Took = b.comeBack, b.lastAttempt // all in flight: the callers it answered, and those queued meanwhile
		mu.Unlock()
	}
}

// awaitFirst waits, inside the first run of r's fn (f), for r's first
// slot, and goes on on it; or for its result before one, or for its
// context's end.
func (r *member) awaitFirst(f *firstRun) {
	select {
	case st := <-r.Slots():
		f.mode, f.m = inBatch, r
		st.first = nil
		f.h.st = st
		return
	case <-r.Done:
	case <-r.Ctx.Done():
		r.leave()
	}
	res := r.res
	if res.err == nil && res.ungrouped {
		f.mode, f.m, f.g = ungrouped, nil, nil // on its own, from its first use on
		return
	}
	f.mode, f.err = gone, res.err
	if f.err == nil {
		f.err = r.Ctx.Err()
	}
	f.h.st.err = f.err
}

// finish answers r's first slot with fr, the first run of its fn, and
// waits for its further slots and its result.
func (r *member) finish(fr fnRun) (*Handle, error) {
	r.answerSlot(r.view, fr)
	return r.await()
}

// await waits for r's slots and result, or for r's context to end, and
// returns the call's end.
func (r *member) await() (*Handle, error) {
	res := r.awaitResult()
	c := r.call
	created := res.likely
	if created == "" {
		created = res.exists
	}
	if created != "" && r.view.own.pendingBefore(created) {
		// Its fn touched an earlier member's write, not stored, before it
		// created the key: the key's existence says nothing of a run on
		// what is stored. Again, on its own. (Touched after the Create,
		// it did not choose the key: ErrExists stands, once its reads are
		// found current.)
		res = result{ungrouped: true, ran: res.ran, err: staleOf(r.view)}
	}
	if res.predicted != nil && !r.view.own.pendingBefore(res.predicted.By) {
		// (Its fn touched an earlier member's write, not stored, before
		// it wrote the document taking the value: the value may come of
		// a state never stored. On its own, as it was sent.)
		if held := r.held(res.predicted, res.confirms); held != nil {
			res = result{err: held, ran: res.ran} // a stored document holds the value
		}
	}
	if stale := r.view.heldOnStale(c.lead.Env(), res.err); errors.Is(stale, engine.ErrStale) {
		res = result{ungrouped: true, ran: res.ran, err: staleOf(r.view)} // a value held, taken on reads no longer current: again, on its own
	} else if stale != nil {
		return nil, stale
	}
	if res.likely != "" {
		exists, err := r.probe(res.likely, res.probes)
		switch {
		case err != nil:
			return nil, err
		case exists:
			res.exists = res.likely
		default:
			res = result{ungrouped: true, ran: res.ran} // the cache was wrong: on its own
		}
	}
	if res.exists != "" { // a key it created exists: so it fails, if the reads its Create followed were current
		stale := r.view.revalidate(c.lead.Env(), r.view.readBefore(res.exists))
		switch {
		case errors.Is(stale, engine.ErrStale):
			res = result{ungrouped: true, ran: res.ran, err: staleOf(r.view)} // again, on its own, if an attempt is left
		case stale != nil:
			return nil, stale
		default:
			return nil, driver.Errorf(driver.ErrExists, "Transact: %q exists", res.exists)
		}
	}
	if res.checking { // its fn failed or wrote nothing, on its own reads: current, or not
		switch ch := r.check; {
		case errors.Is(ch.stale, engine.ErrStale):
			res = result{ungrouped: true, ran: res.ran, err: staleOf(r.view)} // a torn view: again, on its own
		case ch.stale != nil:
			return nil, ch.stale // the check failed
		default:
			c.span.Stats.Attempts = res.tries
			return &Handle{st: r.view}, ch.err
		}
	}
	if res.ungrouped && res.err != nil && c.lead.Env().Policy.MaxAttempts > 0 && res.ran >= c.lead.Env().Policy.MaxAttempts {
		c.span.Stats.Attempts = res.ran
		return nil, res.err // no attempt left: what another would have ended with
	}
	if res.ungrouped {
		t := &Handle{st: c.newState(c.lead, res.ran+1, false)}
		return c.ungrouped(t, nil, nil, res.ran)
	}
	c.span.Stats.Attempts, c.span.Stats.Batch = res.tries, res.batch
	return &Handle{st: r.view}, res.err
}

// awaitResult waits for r's slots (running them) and its result.
func (r *member) awaitResult() result {
	if r.Await(r.takeSlot) {
		return r.leave()
	}
	return r.res
}

// leave returns r's caller on its context's end: ctx.Err() when no
// commit holding its writes was sent, unknown when one is in flight.
func (r *member) leave() result {
	mu.Lock()
	defer mu.Unlock()
	gone := result{err: r.Ctx.Err()}
	var f *groupcommit.Flight
	if r.batch != nil {
		f = &r.batch.Flight
	}
	answered, inFlight := r.Leave(func() {
		if g := r.group(); g != nil {
			g.Remove(r)
		}
	}, answer{left: true}, f)
	if answered {
		return r.res
	}
	if key, wrote := r.view.firstWritten(); wrote && inFlight {
		gone.err = &driver.OutcomeUnknownError{Op: telemetry.OpTransact.String(), Key: key, Cause: r.Ctx.Err()}
	}
	r.res = gone
	return gone
}

// group is the group r queues in (mu held).
func (r *member) group() *txGroup {
	for _, g := range groups {
		if slices.Contains(g.Members, r) {
			return g
		}
	}
	return nil
}

// takeSlot runs r's fn on st, a fork of its batch's transaction, on the
// caller's goroutine, and answers the runner.
func (r *member) takeSlot(st *State) {
	answered := false
	defer func() {
		if !answered { // fn ended its goroutine (runtime.Goexit): its caller is gone
			r.Answer(answer{left: true})
		}
	}()
	fr := runFn(r.call.fn, &Handle{st: st}, r.call.lead)
	answered = true
	r.answerSlot(st, fr)
}

// answerSlot answers the runner for a slot on st that ended as fr. An
// error or a panic of fn is the caller's only when fn touched no key an
// earlier member wrote and its reads are all current (as a run on its own
// decides); the panic then goes on up the caller's stack. Otherwise the
// member runs on its own, or in the next batch.
func (r *member) answerSlot(st *State, fr fnRun) {
	st.done = true // fn has returned: a Tx it kept refuses writes
	if fr.self != nil && !fr.panicked {
		r.Answer(answer{err: fr.self})
		return
	}
	err := fr.err
	if st.err != nil {
		err = st.err
	}
	var a answer
	switch {
	case err == nil && !fr.panicked && len(st.own.written) > 0:
	case errors.Is(err, driver.ErrConflict):
		a = answer{ungrouped: true, err: err} // a conflict fn saw: again, on its own
	case errors.Is(err, errOtherStore) && r.mayDefer():
		a = answer{later: true} // a key an earlier member uses through another Store: the next batch
	case errors.Is(err, errOtherStore):
		a = answer{ungrouped: true, err: staleOf(st)}
	case st.own.other && !fr.panicked && r.mayDefer():
		a = answer{later: true} // made on writes not stored yet: again, in the next batch
	case st.own.other:
		a = answer{ungrouped: true, err: staleOf(st)} // made on writes not stored yet: again, on its own
	case !fr.panicked: // an error, or nothing written: out of the batch at once, then checked as on its own, by its own reads
		r.Answer(answer{checking: true})
		r.check = checkOwn{err: err, stale: st.revalidate(r.call.lead.Env(), st.own.seen)}
		return
	default: // a panic: checked as on its own, in the slot, and then it goes on up
		st.own.reading(true) // the check's reads do not count toward the slot's bound
		stale := st.revalidate(r.call.lead.Env(), st.own.seen)
		st.own.reading(false)
		switch {
		case errors.Is(stale, engine.ErrStale):
			a = answer{ungrouped: true, err: staleOf(st)} // a torn view: again, on its own
		case fr.panicked:
			a.err = groupcommit.ErrPanicked
		case stale != nil:
			a.err = stale
		case err == nil:
			a.done = true
		default:
			a.err = err
		}
	}
	r.Answer(a)
	if fr.panicked && !a.ungrouped {
		panic(fr.p)
	}
}

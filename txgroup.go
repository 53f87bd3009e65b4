package etagstore

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/engine"
	"github.com/etagstore/etagstore/internal/meta"
	"github.com/etagstore/etagstore/internal/telemetry"
)

// Group commit for transactions: concurrent transactions whose Stores
// commit together (one backend, or one driver.Abilities.CommitScope: a
// table and partition) share one commit, whichever Stores they use. The
// group is the commit scope's, not a Store's, since a transaction's keys
// are known only once its fn has run.
//
// Locks: txmu guards every group, member and batch field marked so. It is
// held only for bookkeeping: never while user code (fn, a codec), the
// backend or the engine runs, and no other lock is taken under it.
//
// A group with no transaction in flight is idle. The first transaction to
// arrive (at its fn's first use of a Store: transact.go) commits on its
// own, on its caller's goroutine; transactions that arrive meanwhile
// queue, and when it is done a runner goroutine takes the queue as a
// batch and serves batches until the queue is empty. Queued callers behind
// a first caller whose fn has not returned within slotTimeout are served
// by a runner at once. Each attempt of a batch gives its members a slot,
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
// longer current; when its slot lasts slotTimeout beyond its reads while
// another caller waits for it (a slow fn, or one that calls Transact in
// the same group); and when the batch lost its last race over a key it did
// not touch. A member whose fn failed on a write of an earlier member (not
// stored yet), whose keys cannot be committed with the batch's, or whose
// batch was refused because another member's created key exists, waits
// for the next batch. The first member of a batch whose keys cannot be
// committed at all fails as it would on its own. An error or panic on a
// view of its own reads, all current, is its caller's at once, as on its
// own; a fn that wrote nothing is checked the same way and answered at
// once, never joining the commit. A member whose caller leaves (ctx) after
// its writes were adopted and before the commit is sent makes the batch
// run its slots again without it; after, its caller gets an unknown
// outcome if it wrote anything.

// txmu guards the transaction groups.
var txmu sync.Mutex

// txGroups are the groups with a transaction in flight, by commit scope
// (guarded by txmu).
var txGroups = map[any]*txGroup{}

// txGroup is a commit scope's queue of transactions; guarded by txmu.
type txGroup struct {
	key   any
	queue []*txMember
	mode  groupMode
	first bool // a first caller commits on its own; no runner took over

	entries, bounded uint64 // the first caller's runs of fn; the last one a bound was armed for
}

// txMember is one transaction in a batch.
type txMember struct {
	call   *txCall
	ctx    context.Context
	slots  chan *txnState // runner → caller: run fn on this fork
	answer chan txAnswer  // caller → runner (one per slot)
	done   chan struct{}  // closed when res is set

	status memberStatus // guarded by txmu
	batch  *txBatch
	res    txResult
	// Its slot's time in reads, which the slot's bound does not count
	// (guarded by txmu).
	reading   bool
	readSince time.Time
	inReads   time.Duration

	view     *txnState // the fork its last slot ran on (guarded by txmu)
	deferred bool      // it waited for a later batch once already
}

// txAnswer is a member's answer to a slot.
type txAnswer struct {
	done      bool  // fn wrote nothing, on reads all current: answered now, nothing to commit
	ungrouped bool  // run the transaction on its own instead
	later     bool  // wait for the next batch (made on an earlier member's writes)
	err       error // fn's own failure, on current reads of its own; with ungrouped, the failure if no attempt is left
	left      bool  // the caller left (context done) before running its slot
}

// txResult is what a member's caller returns.
type txResult struct {
	err       error
	ungrouped bool   // run the transaction on its own instead (left out of the batch)
	exists    string // a key it created unread exists: ErrExists, once its reads are found current
	ran       int    // with ungrouped: the attempts its runs in the batch count for (err: the failure if that is all)
	batch     int    // the documents committed
	tries     int    // the batch's attempts
}

// groupOf is the group lead's transactions share, nil when they commit
// on their own: group commit off, a fenced ctx, a transaction nested in
// user code of a write (its writes must land on its goroutine), or a
// backend whose scope cannot be named.
func groupOf(c *txCall) any {
	lead := c.lead
	if !lead.grouped || isUngrouped(c.ctx) || c.nested || c.store == nil && lead.env.Reentry.InsideAny() {
		return nil
	}
	if s := lead.abilities.CommitScope; s != "" {
		return s
	}
	if !reflect.ValueOf(lead.b).Comparable() {
		return nil
	}
	return lead.b
}

// arrive makes c a transaction of key's group: its first caller (nil
// member), when no transaction of the group is in flight, or a queued
// member.
func arrive(key any, c *txCall) (*txGroup, *txMember) {
	txmu.Lock()
	defer txmu.Unlock()
	g := txGroups[key]
	if g == nil {
		g = &txGroup{key: key, mode: firstMutating, first: true}
		g.entries++
		txGroups[key] = g
		return g, nil
	}
	r := &txMember{call: c, ctx: c.ctx, slots: make(chan *txnState, 1), answer: make(chan txAnswer, 1), done: make(chan struct{})}
	g.queue = append(g.queue, r)
	if g.mode == firstMutating {
		g.bound() // wait for the first caller's fn, but not for long
	}
	return g, r
}

// entering and leaving tell the group that its first caller's fn runs,
// or has returned; firstDone that the first caller is done.
func (g *txGroup) entering() {
	if g == nil {
		return
	}
	txmu.Lock()
	defer txmu.Unlock()
	if g.first {
		g.mode = firstMutating
		g.entries++
		if len(g.queue) > 0 {
			g.bound()
		}
	}
}

func (g *txGroup) leaving() {
	if g == nil {
		return
	}
	txmu.Lock()
	if g.first {
		g.mode = firstWriting
	}
	txmu.Unlock()
}

// firstDone hands the queue that formed meanwhile to a runner, or ends
// the group.
func (g *txGroup) firstDone() {
	if g == nil {
		return
	}
	txmu.Lock()
	defer txmu.Unlock()
	if !g.first {
		return // a runner has the group
	}
	g.first = false
	if len(g.queue) > 0 {
		g.mode = running
		go g.run()
		return
	}
	delete(txGroups, g.key)
}

// bound makes the callers queued behind a first caller's fn wait for it
// at most slotTimeout: then a runner serves them. txmu is held.
func (g *txGroup) bound() {
	if g.bounded == g.entries {
		return
	}
	g.bounded = g.entries
	entry := g.entries
	time.AfterFunc(slotTimeout, func() {
		txmu.Lock()
		defer txmu.Unlock()
		if g.first && g.entries == entry && g.mode == firstMutating && len(g.queue) > 0 {
			g.first, g.mode = false, running
			go g.run()
		}
	})
}

// run commits the queue in batches until it is empty.
func (g *txGroup) run() {
	for {
		txmu.Lock()
		batch := g.queue
		g.queue = nil
		if len(batch) == 0 {
			delete(txGroups, g.key)
			txmu.Unlock()
			return
		}
		b := &txBatch{g: g, members: batch}
		for _, r := range batch {
			r.status, r.batch = taken, b
		}
		txmu.Unlock()
		b.commit()
	}
}

// awaitFirst waits, inside the first run of r's fn (f), for r's first
// slot, and goes on on it; or for its result before one, or for its
// context's end.
func (r *txMember) awaitFirst(f *firstRun) {
	select {
	case st := <-r.slots:
		f.mode, f.m = inBatch, r
		st.first = nil
		f.t.st = st
		return
	case <-r.done:
	case <-r.ctx.Done():
		r.leave()
	}
	res := r.res
	if res.err == nil && res.ungrouped {
		f.mode, f.m, f.g = alone, nil, nil // on its own, from its first use on
		return
	}
	f.mode, f.err = gone, res.err
	if f.err == nil {
		f.err = r.ctx.Err()
	}
	f.t.st.err = f.err
}

// finish answers r's first slot with fr, the first run of its fn, and
// waits for its further slots and its result.
func (r *txMember) finish(fr fnRun) (*Txn, error) {
	r.answerSlot(r.view, fr)
	return r.await()
}

// await waits for r's slots and result, or for r's context to end, and
// returns the call's end.
func (r *txMember) await() (*Txn, error) {
	res := r.awaitResult()
	c := r.call
	if res.exists != "" { // a key it created exists: so it fails, if the reads its Create followed were current
		stale := r.view.revalidate(c.lead.env, r.view.readBefore(res.exists))
		switch {
		case errors.Is(stale, engine.ErrStale):
			res = txResult{ungrouped: true, ran: res.tries}
		case stale != nil:
			return nil, stale
		default:
			return nil, errorf(ErrExists, "Transact: %q exists", res.exists)
		}
	}
	if res.ungrouped && res.err != nil && c.lead.retry.MaxAttempts > 0 && res.ran >= c.lead.retry.MaxAttempts {
		c.span.Stats.Attempts = res.ran
		return nil, res.err // no attempt left: what another would have ended with
	}
	if res.ungrouped {
		t := &Txn{st: c.newState(c.lead, res.ran+1, false)}
		return c.alone(t, nil, nil, res.ran)
	}
	c.span.Stats.Attempts, c.span.Stats.Batch = res.tries, res.batch
	return &Txn{st: r.view}, res.err
}

// awaitResult waits for r's slots (running them) and its result.
func (r *txMember) awaitResult() txResult {
	for {
		select {
		case st := <-r.slots:
			r.takeSlot(st)
		case <-r.done:
			return r.res
		case <-r.ctx.Done():
			return r.leave()
		}
	}
}

// leave returns r's caller on its context's end: ctx.Err() when no
// commit holding its writes was sent, unknown when one is in flight.
func (r *txMember) leave() txResult {
	txmu.Lock()
	defer txmu.Unlock()
	gone := txResult{err: r.ctx.Err()}
	switch r.status {
	case answered:
		return r.res
	case queued:
		if g := r.group(); g != nil {
			g.queue = slices.DeleteFunc(g.queue, func(q *txMember) bool { return q == r })
		}
	case inSlot:
		select {
		case <-r.slots: // not taken up: the runner waits for an answer
			r.answer <- txAnswer{left: true}
		default: // answered already
		}
	case applied:
		if key, wrote := r.view.firstWritten(); wrote && r.batch.inFlight {
			gone.err = outcomeUnknown(telemetry.OpTransact, key, r.ctx.Err())
		}
	}
	r.status = left
	r.res = gone
	return gone
}

// group is the group r queues in (txmu held).
func (r *txMember) group() *txGroup {
	for _, g := range txGroups {
		if slices.Contains(g.queue, r) {
			return g
		}
	}
	return nil
}

// takeSlot runs r's fn on st, a fork of its batch's transaction, on the
// caller's goroutine, and answers the runner.
func (r *txMember) takeSlot(st *txnState) {
	answered := false
	defer func() {
		if !answered { // fn ended its goroutine (runtime.Goexit): its caller is gone
			r.answer <- txAnswer{left: true}
		}
	}()
	fr := runFn(r.call.fn, &Txn{st: st}, r.call.lead)
	answered = true
	r.answerSlot(st, fr)
}

// answerSlot answers the runner for a slot on st that ended as fr. An
// error or a panic of fn is the caller's only when fn touched no key an
// earlier member wrote and its reads are all current (as a run on its own
// decides); the panic then goes on up the caller's stack. Otherwise the
// member runs on its own, or in the next batch.
func (r *txMember) answerSlot(st *txnState, fr fnRun) {
	if fr.self != nil && !fr.panicked {
		r.answer <- txAnswer{err: fr.self}
		return
	}
	err := fr.err
	if st.err != nil {
		err = st.err
	}
	var a txAnswer
	switch {
	case err == nil && !fr.panicked && len(st.own.written) > 0:
	case errors.Is(err, ErrConflict):
		a = txAnswer{ungrouped: true, err: err} // a conflict fn saw: again, on its own
	case st.own.other && !fr.panicked && (r.call.lead.retry.MaxAttempts == 0 || st.attempt < r.call.lead.retry.MaxAttempts):
		a = txAnswer{later: true} // made on writes not stored yet: again, in the next batch
	case st.own.other:
		a = txAnswer{ungrouped: true, err: staleOf(st)} // made on writes not stored yet: again, on its own
	default: // an error, a panic, or nothing written: checked as on its own, by its own reads
		st.own.reading(true) // the check's reads do not count toward the slot's bound
		stale := st.revalidate(r.call.lead.env, st.own.seen)
		st.own.reading(false)
		switch {
		case errors.Is(stale, engine.ErrStale):
			a = txAnswer{ungrouped: true, err: staleOf(st)} // a torn view: again, on its own
		case fr.panicked:
			a.err = errPanicked
		case stale != nil:
			a.err = stale
		case err == nil:
			a.done = true
		default:
			a.err = err
		}
	}
	r.answer <- a
	if fr.panicked && !a.ungrouped {
		panic(fr.p)
	}
}

// staleOf is the failure of a transaction whose last run acted on a view
// that was not current, as the engine words it.
func staleOf(st *txnState) error {
	key := ""
	if keys := st.ownKeys(); len(keys) > 0 {
		key = keys[0]
	}
	return errorf(ErrConflict, "%s %q: %v", telemetry.OpTransact, key, engine.ErrStale)
}

// txBatch is one batch of a group's transactions.
type txBatch struct {
	g        *txGroup
	members  []*txMember
	applied  []*txMember     // the members whose writes the last attempt holds
	later    []*txMember     // members that go in a later batch
	keys     []string        // the keys the last attempt touched, read ahead by the next
	exists   map[string]bool // unread creates' keys looked up, and whether they exist
	inFlight bool            // a commit holding applied is sent or being resolved (guarded by txmu)
	timer    *time.Timer
}

// commit runs the batch's attempts, led by its first member's lead, and
// hands out the results.
func (b *txBatch) commit() {
	ctxs := make([]context.Context, len(b.members))
	for i, r := range b.members {
		ctxs[i] = r.ctx
	}
	ctx, cancel := batchContext(ctxs)
	defer cancel()
	b.timer = time.NewTimer(time.Hour)
	defer b.timer.Stop()
	lead := b.members[0].call.lead
	var st *txnState
	p := engine.PlanFunc(func(d *engine.Delivery, _ []version) (request, error) {
		st = &txnState{ctx: ctx, lead: lead, owner: map[string]*core{}, attempt: d.Attempts(), copies: d.Attempts() == 1}
		b.slots(st)
		d.SetKeys(st.keys())
		return st.request(d, true)
	})
	res, err := engine.New(lead.env, telemetry.OpTransact.String(), engine.SelfReading, nil, p,
		engine.Options{Flight: b}).Run(ctx)
	st.noteOthers(res, err)
	if err == nil {
		st.recordCommit(res)
		if len(res.Sent) > 0 {
			lead.obs.Committed(ctx, len(res.Out))
		}
	}
	b.finish(st, res, err)
}

// slots gives each member still in the batch a slot on a fork of the
// transaction so far, in arrival order, and adopts the fork when fn
// succeeds and its keys commit with the others'. When a key a member
// created unread is found to exist, the member is answered and the slots
// run again without it.
func (b *txBatch) slots(st *txnState) {
	if !st.copies {
		st.ahead = b.readAhead(st.ctx, st.lead)
	}
	for {
		b.applied, b.later = b.applied[:0], b.later[:0]
		for _, r := range b.members {
			f, ok := b.slot(r, st.fork(r.ctx, b.onRead(r)), st.attempt)
			if !ok {
				continue
			}
			if err := b.fits(st, f); err != nil {
				b.leaveFor(r, err, len(b.applied) == 0)
				continue
			}
			st.adopt(f)
			b.applied = append(b.applied, r)
		}
		if !b.refuseTaken(st) {
			break
		}
		st.views, st.order, st.owner = nil, nil, map[string]*core{}
	}
	b.keys = st.keys()
}

// refuseTaken looks up, in one request where the backend can, the keys
// the adopted members create unread, and answers each member whose key
// exists (ErrExists, once its reads are found current). It reports
// whether it answered one: the slots run again without it.
func (b *txBatch) refuseTaken(st *txnState) bool {
	read := st.lead.abilities.ReadMany
	if read == nil {
		return false
	}
	var keys []string
	for _, tc := range st.order {
		if _, unread := tc.view.unreadCreate(tc.key); unread && !b.knows(tc.key) {
			keys = append(keys, tc.key)
		}
	}
	if len(keys) > 0 {
		items, err := read(st.ctx, keys)
		if err != nil {
			return false // the commit will tell
		}
		if b.exists == nil {
			b.exists = map[string]bool{}
		}
		for i, it := range items {
			b.exists[keys[i]] = it.ETag != ""
		}
	}
	refused := false
	txmu.Lock()
	defer txmu.Unlock()
	for _, r := range b.applied {
		if r.status != applied {
			continue
		}
		for _, key := range r.view.own.keys {
			if _, unread := r.view.views[r.view.owner[key]].unreadCreate(key); unread && r.view.own.written[key] && !r.view.own.inherited[key] && b.exists[key] {
				b.hand(r, txResult{exists: key, tries: st.attempt})
				refused = true
				break
			}
		}
	}
	return refused
}

// knows reports whether the batch looked key up already.
func (b *txBatch) knows(key string) bool {
	_, ok := b.exists[key]
	return ok
}

// slot gives r a slot on f in the batch's attempt and waits for its
// answer: at most slotTimeout beyond the reads its fn makes, once another
// caller waits for it (waitedFor). It reports whether f may be adopted; a
// member that failed, was too slow, or must run on its own is handed its
// result on the spot. Once answered, f is ended: a Tx its fn kept refuses
// writes.
func (b *txBatch) slot(r *txMember, f *txnState, attempt int) (*txnState, bool) {
	txmu.Lock()
	if r.status != taken && r.status != applied {
		txmu.Unlock()
		return nil, false
	}
	r.status = inSlot
	r.view = f
	r.slots <- f // buffered and empty: sent under the lock, so leave sees it
	began := time.Now()
	r.reading, r.inReads = false, 0
	txmu.Unlock()
	a, timedOut := b.await(r, began)
	txmu.Lock()
	defer txmu.Unlock()
	if !timedOut {
		f.done = true // fn has returned
	}
	switch {
	case r.status == left || a.left:
		r.status = left
		return nil, false
	case timedOut:
		b.hand(r, txResult{ungrouped: true})
		return nil, false
	case a.later:
		r.status, r.deferred = taken, true
		b.later = append(b.later, r)
		return nil, false
	case a.ungrouped:
		b.hand(r, txResult{ungrouped: true, ran: attempt, err: a.err})
		return nil, false
	case a.err != nil || a.done:
		b.hand(r, txResult{err: a.err, tries: attempt})
		return nil, false
	}
	r.status = applied
	return f, true
}

// await waits for r's answer to the slot it began at began, or until the
// slot has lasted slotTimeout beyond its reads while another caller waits
// for it (timedOut).
func (b *txBatch) await(r *txMember, began time.Time) (a txAnswer, timedOut bool) {
	defer b.timer.Stop()
	for bound := slotTimeout; ; {
		b.timer.Reset(bound)
		select {
		case a = <-r.answer:
			return a, false
		case <-b.timer.C:
		}
		txmu.Lock()
		bound = slotTimeout - r.outsideReads(began)
		timedOut = bound <= 0 && b.waitedFor(r)
		txmu.Unlock()
		if timedOut {
			return txAnswer{}, true
		}
		bound = max(bound, slotTimeout/4) // nobody waits yet: look again
	}
}

// readAllowance is how much of a slot's time in reads its bound leaves
// out: reads a fn makes at the service's latency do not make it leave the
// batch, and a read that hangs does not hold the batch longer than this.
const readAllowance = 250 * time.Millisecond

// outsideReads is how long r's slot, begun at began, has run outside its
// fn's reads (up to readAllowance of them). txmu is held.
func (r *txMember) outsideReads(began time.Time) time.Duration {
	now := time.Now()
	in := r.inReads
	if r.reading {
		in += now.Sub(r.readSince)
	}
	return now.Sub(began) - min(in, readAllowance)
}

// waitedFor reports whether another caller waits for r's slot to end: a
// member after it in the batch, or a caller queued for the next batch
// (one that r's fn called, say). txmu is held.
func (b *txBatch) waitedFor(r *txMember) bool {
	if len(b.g.queue) > 0 {
		return true
	}
	after := false
	for _, m := range b.members {
		if after && (m.status == taken || m.status == applied) {
			return true
		}
		after = after || m == r
	}
	return false
}

// onRead is the hook by which r's fn's reads are kept out of its slot's
// bound.
func (b *txBatch) onRead(r *txMember) func(bool) {
	return func(start bool) {
		txmu.Lock()
		defer txmu.Unlock()
		now := time.Now()
		switch {
		case start:
			r.reading, r.readSince = true, now
		case r.reading:
			r.reading = false
			r.inReads += now.Sub(r.readSince)
		}
	}
}

// fits checks, sending nothing, that f's keys (the batch's so far and
// the member's) can be committed in one request.
func (b *txBatch) fits(st, f *txnState) error {
	chk := st.lead.abilities.CheckCommit
	if chk == nil || len(f.order) == len(st.order) {
		return nil
	}
	actions := make([]driver.Action, len(f.order))
	for i, tc := range f.order {
		actions[i] = driver.Action{Key: tc.key}
	}
	return chk(actions)
}

// leaveFor takes r, whose keys do not fit the batch, out of it: ungrouped
// (first), it fails with err, as it would on its own; otherwise it waits
// for a later batch.
func (b *txBatch) leaveFor(r *txMember, err error, first bool) {
	txmu.Lock()
	defer txmu.Unlock()
	switch {
	case r.status == left:
	case first:
		b.hand(r, txResult{err: err})
	default:
		r.status = taken
		b.later = append(b.later, r)
	}
}

// readAhead reads, in parallel, the keys the batch's last attempt
// touched: the next attempt's fns find them read. A read that fails is
// left to the fn that reads the key.
func (b *txBatch) readAhead(ctx context.Context, lead *core) map[string]version {
	if len(b.keys) == 0 {
		return nil
	}
	owners := map[string]*core{}
	if b.applied != nil {
		for _, r := range b.applied {
			for k, c := range r.view.owner {
				owners[k] = c
			}
		}
	}
	vs := make([]version, len(b.keys))
	ok := make([]bool, len(b.keys))
	var wg sync.WaitGroup
	for i, key := range b.keys {
		c := owners[key]
		if c == nil {
			c = lead
		}
		wg.Go(func() {
			v, err := (hooks{c}).Read(ctx, key)
			vs[i], ok[i] = v, err == nil
		})
	}
	wg.Wait()
	ahead := make(map[string]version, len(b.keys))
	for i, key := range b.keys {
		if ok[i] {
			ahead[key] = vs[i]
		}
	}
	return ahead
}

// Hold marks the batch's commit in flight, unless a member whose writes
// it holds has left: then the slots run again without it (see
// engine.Flight).
func (b *txBatch) Hold() bool {
	txmu.Lock()
	defer txmu.Unlock()
	for _, r := range b.applied {
		if r.status == left {
			return false
		}
	}
	b.inFlight = true
	return true
}

// Release marks the batch's commit as not landed.
func (b *txBatch) Release() {
	txmu.Lock()
	b.inFlight = false
	txmu.Unlock()
}

// finish hands every member still waiting its result, and queues the
// members left for a later batch at the front of the queue.
func (b *txBatch) finish(st *txnState, res engine.Result, err error) {
	txmu.Lock()
	defer txmu.Unlock()
	b.inFlight = false
	refused := refusedKey(st, err)
	existing := st.unreadRefused(err)
	for i, r := range b.applied {
		if r.status != applied {
			continue
		}
		switch {
		case err == nil:
			b.settle(st, res, i)
			b.hand(r, txResult{batch: len(res.Out), tries: res.Attempts})
		case existing != "" && r.view.own.written[existing] && !r.view.own.inherited[existing]:
			b.hand(r, txResult{exists: existing, tries: res.Attempts})
		case existing != "":
			r.status = taken
			b.later = append(b.later, r) // another's created key exists: the next batch, without it
		case len(b.applied) > 1 && (errors.Is(err, ErrTooLarge) || errors.Is(err, ErrInvalidInput)):
			b.hand(r, txResult{ungrouped: true}) // one member's writes may be at fault
		case refused != "" && !r.view.own.seen[refused]:
			b.hand(r, txResult{ungrouped: true}) // another's race: on its own it may not lose it
		default:
			b.hand(r, txResult{err: named(r.view, err), tries: res.Attempts})
		}
	}
	var later []*txMember
	for _, r := range b.later {
		if r.status == taken {
			r.status = queued
			later = append(later, r)
		}
	}
	b.g.queue = append(later, b.g.queue...)
	for _, r := range b.members {
		if r.status == taken { // the batch ended before its slot
			b.hand(r, txResult{err: err, ungrouped: err == nil})
		}
	}
}

// refusedKey is the key whose action a lost race of the batch's commit
// names ("" when err is no such refusal, or names none).
func refusedKey(st *txnState, err error) string {
	var ae *driver.ActionError
	if !errors.Is(err, ErrConflict) || !errors.As(err, &ae) || ae.Index < 0 || ae.Index >= len(st.order) {
		return ""
	}
	return st.order[ae.Index].key
}

// settle records in the i-th applied member's view what the commit made
// of the keys it wrote: a document a later member of the batch wrote
// again (or deleted, so that the batch wrote nothing of it) has a
// Superseded ETag naming the commit and the member. The member's Tx
// reports them from then on (Tx.ETag), and its docs are built from them.
func (b *txBatch) settle(st *txnState, res engine.Result, i int) {
	f := b.applied[i].view
	sent := make(map[string]int, len(st.order))
	for j, tc := range st.order {
		sent[tc.key] = j
	}
	f.made = map[string]driver.Item{}
	for _, key := range f.own.keys {
		if !f.own.written[key] {
			continue
		}
		it := driver.Item{Key: key}
		var m meta.Meta
		if j, in := sent[key]; in && j < len(res.Out) {
			it = res.Out[j]
			if j < len(res.Sent) {
				m = res.Sent[j].Meta
			}
		}
		if it.ETag == "" || b.rewritten(i, key) {
			it.ETag = engine.Superseded(m, i)
		}
		f.made[key] = it
		f.views[f.owner[key]].settled(key, it)
	}
}

// rewritten reports whether a member after the i-th in the batch wrote key.
func (b *txBatch) rewritten(i int, key string) bool {
	for _, l := range b.applied[i+1:] {
		if l.view.own.written[key] {
			return true
		}
	}
	return false
}

// named is err, the batch's failure, as a member's (f its view): an
// unknown outcome names its first key, not the batch's.
func named(f *txnState, err error) error {
	var unknown *OutcomeUnknownError
	if !errors.As(err, &unknown) || len(f.own.keys) == 0 {
		return err
	}
	mine := *unknown
	mine.Key = f.own.keys[0]
	return &mine
}

// hand sets r's result and wakes its caller. txmu is held.
func (b *txBatch) hand(r *txMember, res txResult) {
	r.res, r.status = res, answered
	close(r.done)
}

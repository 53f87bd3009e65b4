package etagstore

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/engine"
	"github.com/etagstore/etagstore/internal/meta"
	"github.com/etagstore/etagstore/internal/telemetry"
)

// Group commit for transactions: concurrent Store.Transact calls of one
// Store share one commit. Update's group commit (group.go, batch.go) is
// per key; this one is per Store, since a transaction's keys are known
// only once its fn has run.
//
// Locks: Store.gmu guards the Store's txGroup and every txMember and
// txBatch field marked so, as it does for Update's groups, and is held
// only for bookkeeping: never while user code (fn, a codec), the backend
// or the engine runs, and no other lock is taken under it.
//
// A Store with no transaction in progress is idle. A caller queues, and
// the first to find the Store idle starts a runner goroutine, which takes
// the queue as a batch and serves batches until the queue is empty. Each
// attempt of a batch gives its members a slot, in arrival order: the
// member's own goroutine runs its fn on a copy (a fork) of the batch's
// transaction so far, so that it sees the writes of the members before
// it, and the runner adopts the fork when fn returns nil. The runner then
// commits every adopted member's writes and checks in one atomic request,
// through the engine like any transaction: a lost race runs the slots
// again on fresh reads (read ahead in parallel), after the Store's
// backoff. Each member gets the documents it put: a document a later
// member wrote again carries a Superseded ETag, as in an Update batch.
//
// A member leaves the batch and runs its transaction on its own
// (transactUngrouped) when its fn returns an error or panics after seeing a
// write of an earlier member (not stored yet), or on reads no longer
// current (its error would then be made on a view that was never
// current); when its fn returns an error matching ErrConflict; and when
// its slot lasts slotTimeout beyond its reads while another caller waits
// for it (a slow fn, or one that calls Transact on the same Store). A
// member whose keys cannot be committed with the batch's waits for the
// next batch; the first member of a batch, whose keys cannot be committed
// at all, fails as it would on its own. An error or panic on a view of
// its own reads, all current, is its caller's at once, as on its own; a
// fn that wrote nothing is checked the same way and answered at once,
// never joining the commit (tables would give the documents it read new
// ETags, and could not check a key it found missing). A member whose
// batch lost its last race over a key it did not touch runs on its own. A
// member whose caller leaves (ctx) after its writes were adopted and
// before the commit is sent makes the batch run its slots again without
// it; after, its caller gets an unknown outcome if it wrote anything.

// txGroup is a Store's queue of transactions; guarded by Store.gmu.
type txGroup[T any] struct {
	queue   []*txMember[T]
	running bool // a runner serves the queue
}

// txMember is one Store.Transact call in a batch.
type txMember[T any] struct {
	ctx    context.Context
	fn     func(tx *Tx[T]) error
	slots  chan *Tx[T]   // runner → caller: run fn on this fork
	answer chan txAnswer // caller → runner (one per slot)
	done   chan struct{} // closed when res is set

	status memberStatus // guarded by Store.gmu, as Update's members'
	batch  *txBatch[T]
	res    txResult[T]
	// Its slot's time in reads, which the slot's bound does not count
	// (guarded by Store.gmu).
	reading   bool          // inside a read of its fn
	readSince time.Time     // when the read it is inside began
	inReads   time.Duration // the slot's reads that ended

	view *Tx[T] // the fork its last slot ran on (guarded by Store.gmu)
}

// txAnswer is a member's answer to a slot.
type txAnswer struct {
	done      bool  // fn wrote nothing, on reads all current: answered now, nothing to commit
	ungrouped bool  // run the transaction on its own instead
	err       error // fn's own failure, on current reads of its own; with ungrouped, the failure if no attempt is left
	left      bool  // the caller left (context done) before running its slot
}

// txResult is what a member's caller returns.
type txResult[T any] struct {
	docs      []Doc[T]
	err       error
	ungrouped bool // run the transaction on its own instead (left out of the batch)
	ran       int  // with ungrouped: the attempts its runs in the batch count for (err: the failure if that is all)
	batch     int  // the documents committed
	tries     int  // the batch's attempts
}

// ownTouches is what one member's fn did itself in a fork: the keys it
// touched, in order, and those it wrote. Nil outside a batch: every
// method is then a no-op.
type ownTouches struct {
	keys    []string
	seen    map[string]bool
	written map[string]bool
	// inherited: the keys earlier members wrote, as the fork began; other:
	// fn touched one, whose version is not stored yet, so an error or
	// panic of fn may have been made on it.
	inherited map[string]bool
	other     bool
	onRead    func(start bool)
}

func (o *ownTouches) touch(key string) {
	if o != nil && !o.seen[key] {
		o.seen[key] = true
		o.keys = append(o.keys, key)
	}
}

// saw records that fn touched key.
func (o *ownTouches) saw(key string) {
	if o.pending(key) {
		o.other = true
	}
}

// pending reports whether an earlier member wrote key.
func (o *ownTouches) pending(key string) bool { return o != nil && o.inherited[key] }

func (o *ownTouches) wrote(key string) {
	if o != nil {
		o.written[key] = true
	}
}

func (o *ownTouches) reading(start bool) {
	if o != nil {
		o.onRead(start)
	}
}

// transactGrouped runs a Store.Transact through the Store's queue.
func (s *Store[T]) transactGrouped(ctx context.Context, fn func(tx *Tx[T]) error, st *telemetry.Stats) ([]Doc[T], error) {
	r := &txMember[T]{ctx: ctx, fn: fn, slots: make(chan *Tx[T], 1), answer: make(chan txAnswer, 1), done: make(chan struct{})}
	s.gmu.Lock()
	g := &s.txg
	g.queue = append(g.queue, r)
	if !g.running {
		g.running = true
		go s.txRun(g)
	}
	s.gmu.Unlock()
	res := s.txAwait(ctx, r)
	if res.ungrouped && res.err != nil && s.retry.MaxAttempts > 0 && res.ran >= s.retry.MaxAttempts {
		st.Attempts = res.ran
		return nil, res.err // no attempt left: what another would have ended with
	}
	if res.ungrouped {
		return s.transactUngrouped(ctx, fn, res.ran, st)
	}
	st.Attempts, st.Batch = res.tries, res.batch
	return res.docs, res.err
}

// txAwait waits for r's slots and result, or for r's context to end.
func (s *Store[T]) txAwait(ctx context.Context, r *txMember[T]) txResult[T] {
	for {
		select {
		case f := <-r.slots:
			s.takeTxSlot(r, f)
		case <-r.done:
			return r.res
		case <-ctx.Done():
			return s.txLeave(ctx, r)
		}
	}
}

// txLeave returns r's caller on its context's end: ctx.Err() when no
// commit holding its writes was sent, unknown when one is in flight.
func (s *Store[T]) txLeave(ctx context.Context, r *txMember[T]) txResult[T] {
	s.gmu.Lock()
	defer s.gmu.Unlock()
	gone := txResult[T]{err: ctx.Err()}
	switch r.status {
	case answered:
		return r.res
	case queued:
		s.txg.queue = slices.DeleteFunc(s.txg.queue, func(q *txMember[T]) bool { return q == r })
	case inSlot:
		select {
		case <-r.slots: // not taken up: the runner waits for an answer
			r.answer <- txAnswer{left: true}
		default: // answered already
		}
	case applied:
		if key, wrote := r.view.firstWritten(); wrote && r.batch.inFlight {
			gone.err = outcomeUnknown(telemetry.OpTransact, key, ctx.Err())
		}
	}
	r.status = left
	return gone
}

// takeTxSlot runs r's fn on f, a fork of its batch's transaction, on the
// caller's goroutine, and answers the runner. An error or a panic of fn
// is the caller's only when fn touched no key an earlier member wrote and
// its reads are all current (as Txn.run decides on its own); the panic
// then goes on up the caller's stack. Otherwise the member runs on its
// own.
func (s *Store[T]) takeTxSlot(r *txMember[T], f *Tx[T]) {
	answered := false
	defer func() {
		if !answered { // fn ended its goroutine (runtime.Goexit): its caller is gone
			r.answer <- txAnswer{left: true}
		}
	}()
	err, panicked, p, self := s.runOwnFn(r, f)
	answered = true
	if self != nil && !panicked {
		r.answer <- txAnswer{err: self}
		return
	}
	if f.txn.err != nil {
		err = f.txn.err
	}
	var a txAnswer
	switch {
	case err == nil && !panicked && len(f.own.written) > 0:
	case errors.Is(err, ErrConflict):
		a = txAnswer{ungrouped: true, err: err} // a conflict fn saw: again, on its own
	case f.own.other:
		a = txAnswer{ungrouped: true, err: f.stale()} // made on writes not stored yet: again, on its own
	default: // an error, a panic, or nothing written: checked as on its own, by its own reads
		f.own.reading(true) // the check's reads do not count toward the slot's bound
		stale := f.txn.revalidateOnly(f.own.seen)
		f.own.reading(false)
		switch {
		case errors.Is(stale, engine.ErrStale):
			a = txAnswer{ungrouped: true, err: f.stale()} // a torn view: again, on its own
		case panicked:
			a.err = errPanicked
		case stale != nil:
			a.err = stale // the check failed: as Txn.run reports it
		case err == nil:
			a.done = true
		default:
			a.err = err
		}
	}
	r.answer <- a
	if panicked && !a.ungrouped {
		panic(p)
	}
}

// runOwnFn runs r's fn on f (runFn) inside the Store's Reentry for any
// key: a write fn makes outside tx of one of its keys, through this Store,
// beats every commit, so self is the *engine.SelfWriteError that fails fn
// at once.
func (s *Store[T]) runOwnFn(r *txMember[T], f *Tx[T]) (err error, panicked bool, p any, self error) {
	self = s.env.Reentry.RunAny(telemetry.OpTransact.String(), func() error {
		err, panicked, p = runFn(r.fn, f)
		return nil
	}, func() []string { return f.own.keys })
	return err, panicked, p, self
}

// stale is the failure of a transaction whose last run acted on a view
// that was not current, as the engine words it.
func (tx *Tx[T]) stale() error {
	key := ""
	if len(tx.own.keys) > 0 {
		key = tx.own.keys[0]
	}
	return errorf(ErrConflict, "%s %q: %v", telemetry.OpTransact, key, engine.ErrStale)
}

// firstWritten is the first key tx's fn wrote, if any.
func (tx *Tx[T]) firstWritten() (string, bool) {
	if tx == nil {
		return "", false
	}
	for _, key := range tx.own.keys {
		if tx.own.written[key] {
			return key, true
		}
	}
	return "", false
}

// runFn calls fn(tx), turning a panic into its value.
func runFn[T any](fn func(*Tx[T]) error, tx *Tx[T]) (err error, panicked bool, p any) {
	panicked = true
	defer func() {
		if panicked {
			p = recover()
		}
	}()
	err = fn(tx)
	panicked = false
	return err, false, nil
}

// txRun commits the queue in batches until it is empty.
func (s *Store[T]) txRun(g *txGroup[T]) {
	for {
		s.gmu.Lock()
		batch := g.queue
		g.queue = nil
		if len(batch) == 0 {
			g.running = false
			s.gmu.Unlock()
			return
		}
		b := &txBatch[T]{s: s, members: batch}
		for _, r := range batch {
			r.status, r.batch = taken, b
		}
		s.gmu.Unlock()
		b.commit()
	}
}

// txBatch is one batch of a Store's transactions.
type txBatch[T any] struct {
	s        *Store[T]
	members  []*txMember[T]
	applied  []*txMember[T] // the members whose writes the last attempt holds
	later    []*txMember[T] // members whose keys go in a later batch
	keys     []string       // the keys the last attempt touched, read ahead by the next
	inFlight bool           // a commit holding applied is sent or being resolved (guarded by Store.gmu)
	timer    *time.Timer
}

// commit runs the batch's attempts and hands out the results.
func (b *txBatch[T]) commit() {
	ctxs := make([]context.Context, len(b.members))
	for i, r := range b.members {
		ctxs[i] = r.ctx
	}
	ctx, cancel := batchContext(ctxs)
	defer cancel()
	b.timer = time.NewTimer(time.Hour)
	defer b.timer.Stop()
	t := &Txn{base: ctx, ctx: ctx, lead: &b.s.core}
	res, err := t.deliver(ctx, b.slots, b)
	b.finish(t, res, err)
}

// slots is the batch's fn: each member still in the batch runs its fn on
// a fork of the transaction so far, in arrival order, and the fork is
// adopted when fn succeeds and its keys commit with the others'.
func (b *txBatch[T]) slots(t *Txn) error {
	tx := b.s.In(t)
	if !t.copies {
		tx.ahead = b.readAhead(t.ctx)
	}
	b.applied, b.later = b.applied[:0], b.later[:0]
	for _, r := range b.members {
		f, ok := b.slot(r, tx.fork(r.ctx, b.onRead(r)), t.attempt)
		if !ok {
			continue
		}
		if err := b.fits(t, f); err != nil {
			b.leaveFor(r, err, len(b.applied) == 0)
			continue
		}
		tx.adopt(f)
		b.applied = append(b.applied, r)
	}
	b.keys = b.keys[:0]
	for _, tc := range t.order {
		b.keys = append(b.keys, tc.key)
	}
	return nil
}

// slot gives r a slot on f in the batch's attempt and waits for its
// answer: at most slotTimeout beyond the reads its fn makes, once another
// caller waits for it (waitedFor). It reports whether f may be adopted; a
// member that failed, was too slow, or must run on its own is handed its
// result on the spot. Once answered, f is ended: a Tx its fn kept refuses
// writes.
func (b *txBatch[T]) slot(r *txMember[T], f *Tx[T], attempt int) (*Tx[T], bool) {
	s := b.s
	s.gmu.Lock()
	if r.status != taken && r.status != applied {
		s.gmu.Unlock()
		return nil, false
	}
	r.status = inSlot
	r.slots <- f // buffered and empty: sent under the lock, so txLeave sees it
	began := time.Now()
	r.reading, r.inReads = false, 0
	s.gmu.Unlock()
	a, timedOut := b.await(r, began)
	s.gmu.Lock()
	defer s.gmu.Unlock()
	if !timedOut {
		f.txn.done = true // fn has returned
	}
	switch {
	case r.status == left || a.left:
		r.status = left
		return nil, false
	case timedOut:
		b.hand(r, txResult[T]{ungrouped: true})
		return nil, false
	case a.ungrouped:
		b.hand(r, txResult[T]{ungrouped: true, ran: attempt, err: a.err})
		return nil, false
	case a.err != nil || a.done:
		b.hand(r, txResult[T]{err: a.err, tries: attempt})
		return nil, false
	}
	r.status, r.view = applied, f
	return f, true
}

// await waits for r's answer to the slot it began at began, or until the
// slot has lasted slotTimeout beyond its reads while another caller waits
// for it (timedOut).
func (b *txBatch[T]) await(r *txMember[T], began time.Time) (a txAnswer, timedOut bool) {
	defer b.timer.Stop()
	for bound := slotTimeout; ; {
		b.timer.Reset(bound)
		select {
		case a = <-r.answer:
			return a, false
		case <-b.timer.C:
		}
		b.s.gmu.Lock()
		bound = slotTimeout - r.outsideReads(began)
		timedOut = bound <= 0 && b.waitedFor(r)
		b.s.gmu.Unlock()
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
// fn's reads (up to readAllowance of them). Store.gmu is held.
func (r *txMember[T]) outsideReads(began time.Time) time.Duration {
	now := time.Now()
	in := r.inReads
	if r.reading {
		in += now.Sub(r.readSince)
	}
	return now.Sub(began) - min(in, readAllowance)
}

// waitedFor reports whether another caller waits for r's slot to end: a
// member after it in the batch, or a caller queued for the next batch
// (one that r's fn called, say). Store.gmu is held.
func (b *txBatch[T]) waitedFor(r *txMember[T]) bool {
	if len(b.s.txg.queue) > 0 {
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
func (b *txBatch[T]) onRead(r *txMember[T]) func(bool) {
	return func(start bool) {
		b.s.gmu.Lock()
		defer b.s.gmu.Unlock()
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
func (b *txBatch[T]) fits(t *Txn, f *Tx[T]) error {
	chk := b.s.abilities.CheckCommit
	if chk == nil || len(f.txn.order) == len(t.order) {
		return nil
	}
	actions := make([]driver.Action, len(f.txn.order))
	for i, tc := range f.txn.order {
		actions[i] = driver.Action{Key: tc.key}
	}
	return chk(actions)
}

// leaveFor takes r, whose keys do not fit the batch, out of it: ungrouped
// (first), it fails with err, as it would on its own; otherwise it waits
// for a later batch.
func (b *txBatch[T]) leaveFor(r *txMember[T], err error, first bool) {
	s := b.s
	s.gmu.Lock()
	defer s.gmu.Unlock()
	switch {
	case r.status == left:
	case first:
		b.hand(r, txResult[T]{err: err})
	default:
		r.status = taken
		b.later = append(b.later, r)
	}
}

// readAhead reads, in parallel, the keys the batch's last attempt
// touched: the next attempt's fns find them read. A read that fails is
// left to the fn that reads the key.
func (b *txBatch[T]) readAhead(ctx context.Context) map[string]version {
	if len(b.keys) == 0 {
		return nil
	}
	vs := make([]version, len(b.keys))
	ok := make([]bool, len(b.keys))
	var wg sync.WaitGroup
	for i, key := range b.keys {
		wg.Go(func() {
			v, err := (hooks{&b.s.core}).Read(ctx, key)
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
func (b *txBatch[T]) Hold() bool {
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

// Release marks the batch's commit as not landed.
func (b *txBatch[T]) Release() {
	b.s.gmu.Lock()
	b.inFlight = false
	b.s.gmu.Unlock()
}

// finish hands every member still waiting its result, and queues the
// members left for a later batch at the front of the queue.
func (b *txBatch[T]) finish(t *Txn, res engine.Result, err error) {
	s := b.s
	s.gmu.Lock()
	defer s.gmu.Unlock()
	b.inFlight = false
	refused := refusedKey(t, err)
	for i, r := range b.applied {
		if r.status != applied {
			continue
		}
		switch {
		case err == nil:
			b.hand(r, txResult[T]{docs: b.docs(t, res, i), batch: len(res.Out), tries: res.Attempts})
		case len(b.applied) > 1 && (errors.Is(err, ErrTooLarge) || errors.Is(err, ErrInvalidInput)):
			b.hand(r, txResult[T]{ungrouped: true}) // one member's writes may be at fault
		case refused != "" && !r.view.own.seen[refused]:
			b.hand(r, txResult[T]{ungrouped: true}) // another's race: on its own it may not lose it
		default:
			b.hand(r, txResult[T]{err: r.named(err), tries: res.Attempts})
		}
	}
	var later []*txMember[T]
	for _, r := range b.later {
		if r.status == taken {
			r.status = queued
			later = append(later, r)
		}
	}
	s.txg.queue = append(later, s.txg.queue...)
	for _, r := range b.members {
		if r.status == taken { // the batch ended before its slot
			b.hand(r, txResult[T]{err: err, ungrouped: err == nil})
		}
	}
}

// refusedKey is the key whose action a lost race of the batch's commit
// names ("" when err is no such refusal, or names none).
func refusedKey(t *Txn, err error) string {
	var ae *driver.ActionError
	if !errors.Is(err, ErrConflict) || !errors.As(err, &ae) || ae.Index < 0 || ae.Index >= len(t.order) {
		return ""
	}
	return t.order[ae.Index].key
}

// docs is the documents the i-th applied member put, in the order its fn
// first touched their keys, with the versions the commit made: a
// document a later member of the batch wrote again (or deleted, so that
// the batch wrote nothing of it) has a Superseded ETag naming the commit
// and the member. The member's Tx reports them from then on (Tx.ETag).
func (b *txBatch[T]) docs(t *Txn, res engine.Result, i int) []Doc[T] {
	r := b.applied[i]
	f := r.view
	sent := make(map[string]int, len(t.order))
	for j, tc := range t.order {
		sent[tc.key] = j
	}
	var docs []Doc[T]
	for _, key := range f.own.keys {
		w, ok := f.writes[key]
		if !ok || w.inherited || !f.own.written[key] {
			continue
		}
		if w.del {
			f.reads[key] = version{Item: driver.Item{Key: key}, Verified: true, MetaKnown: true, Missing: errorf(ErrNotFound, "%q was deleted by the transaction", key)}
			continue
		}
		it := driver.Item{Key: key}
		var m meta.Meta
		if j, in := sent[key]; in && j < len(res.Out) {
			it, m = res.Out[j], res.Sent[j].Meta
		}
		if it.ETag == "" || b.rewritten(i, key) {
			it.ETag = engine.Superseded(m, i)
		}
		f.reads[key] = version{Item: driver.Item{Key: key, ETag: it.ETag}, Exists: true, Verified: true}
		docs = append(docs, Doc[T]{Key: key, Value: w.value, ETag: it.ETag, Extra: b.s.extraOf(it, w.data)})
	}
	return docs
}

// rewritten reports whether a member after the i-th in the batch wrote key.
func (b *txBatch[T]) rewritten(i int, key string) bool {
	for _, l := range b.applied[i+1:] {
		if l.view.own.written[key] {
			return true
		}
	}
	return false
}

// named is err, the batch's failure, as r's: an unknown outcome names r's
// first key, not the batch's.
func (r *txMember[T]) named(err error) error {
	var unknown *OutcomeUnknownError
	if !errors.As(err, &unknown) || len(r.view.own.keys) == 0 {
		return err
	}
	mine := *unknown
	mine.Key = r.view.own.keys[0]
	return &mine
}

// hand sets r's result and wakes its caller. Store.gmu is held.
func (b *txBatch[T]) hand(r *txMember[T], res txResult[T]) {
	r.res, r.status = res, answered
	close(r.done)
}

// fork is a copy of tx, a batch's transaction so far, for a member's fn
// under ctx: the writes it holds are marked inherited, and the member's
// own touches are recorded apart (onRead hears of its reads).
func (tx *Tx[T]) fork(ctx context.Context, onRead func(bool)) *Tx[T] {
	t := tx.txn
	ft := &Txn{base: t.base, ctx: ctx, lead: t.lead, copies: t.copies, attempt: t.attempt, owner: maps.Clone(t.owner), order: make([]touch, len(t.order), len(t.order)+4)}
	f := &Tx[T]{s: tx.s, txn: ft, reads: maps.Clone(tx.reads), writes: make(map[string]txWrite[T], len(tx.writes)), ahead: tx.ahead,
		own: &ownTouches{seen: map[string]bool{}, written: map[string]bool{}, inherited: make(map[string]bool, len(tx.writes)), onRead: onRead}}
	if f.reads == nil {
		f.reads = map[string]version{}
	}
	for k, w := range tx.writes {
		w.inherited = true
		f.writes[k] = w
		f.own.inherited[k] = true
	}
	for i, tc := range t.order {
		ft.order[i] = touch{f, tc.key}
	}
	ft.views = map[*core]txView{&tx.s.core: f}
	return f
}

// adopt makes f, a fork of tx whose fn succeeded, the batch's
// transaction so far.
func (tx *Tx[T]) adopt(f *Tx[T]) {
	tx.reads, tx.writes = f.reads, f.writes
	t := tx.txn
	t.owner = f.txn.owner
	t.order = t.order[:0]
	for _, tc := range f.txn.order {
		t.order = append(t.order, touch{tx, tc.key})
	}
}

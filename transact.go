package etagstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/etagstore/etagstore/internal/engine"
	"github.com/etagstore/etagstore/internal/reentry"
	"github.com/etagstore/etagstore/internal/telemetry"
)

// Transact runs fn, which reads documents through tx and buffers writes
// in it, and commits every write fn made in one atomic, conditional
// request (tables: one entity group transaction, in one partition, at
// most 100 entities; memstore: any keys). It returns the documents fn put,
// in the order fn first touched their keys, with their new ETags.
//
// Transactions are serializable, with one exception on tables. Every
// document fn read is checked at commit, whether fn wrote it or not, so
// no two transactions can both commit on reads the other invalidated (no
// write skew): a document fn read and did not write is sent as a check of
// its ETag (on tables, a Merge Entity without properties, which gives it
// a new ETag). A Put or Delete of a key fn did not read is conditioned on
// the version tx reads for it first. A transaction that writes nothing is
// checked at one instant on a backend with pure checks (memstore), by a
// commit of checks that writes nothing (a lost or throttled answer to it
// is checked again, within the RetryPolicy), and otherwise by reading its
// documents again. The exception: on tables a
// key fn found missing and did not write cannot be checked without
// creating it, and is not checked, so two transactions that read the same
// missing keys and each create a different one can both commit (write
// skew over absent keys; make them write one document in common).
//
// When a document changed before the commit, fn runs again on fresh reads,
// after the Store's backoff, within its RetryPolicy; fn must therefore be
// free of side effects outside tx. An fn that writes, through this Store
// but outside tx, a key the transaction touches would beat every commit:
// the transaction fails at once with ErrInvalidInput (that write landed,
// once). An error Transact returns from fn was
// made on reads that were all current together: when fn returns an error
// or panics, its reads are checked first, and if one changed fn runs
// again instead. An error of fn that matches ErrConflict runs it again
// too; a refusal another run cannot change (a caller's stale version)
// must be an error of fn's own that does not match ErrConflict. So check
// first and read hot documents last: a refusal returned before fn reads a
// document many writers change is not run again each time it moves.
//
// Concurrent transactions whose Stores commit together share one commit
// (group commit, as concurrent Updates of one key do; see Transact for
// transactions over several Stores): while one transaction or batch is in
// flight, the callers that arrive queue, and each fn of the next batch
// runs in turn,
// on its caller's goroutine, on the documents as the transactions before
// it in the batch left them (tx.ETag of a document one of them wrote is
// a Superseded ETag: its version is not stored yet). The batch's writes
// and checks go in one request, within the backend's limits (tables: one
// partition, 100 entities; a transaction that does not fit waits for the
// next batch; its run in the batch it did not fit does not count toward
// MaxAttempts). Each caller gets the documents it put; one that a later
// transaction of the batch wrote again carries a Superseded ETag (see
// ETag.Superseded). A fn that returns an error or panics after seeing
// another transaction's writes waits for the next batch; one that returns
// an error matching ErrConflict, or takes longer than 10 ms beyond its
// reads while another caller waits for it (one that calls Transact on
// this Store, say), runs again on its own, so that it affects only its
// caller; its runs in the batch count toward the policy's MaxAttempts,
// except a slow one's. A fn that returns an error of its own or wrote
// nothing leaves the batch at once, is checked by its own reads, as on
// its own, on its caller's goroutine, and does not join the commit; a
// transaction whose batch lost its last race over keys it did not touch
// runs again on its own, its runs in the batch uncounted.
// When a caller of the batch leaves (ctx) before the commit is sent, the
// others' fns run again, uncounted; one that leaves while the commit is in
// flight gets an *OutcomeUnknownError if it wrote anything.
// A lone transaction commits on its own, on its caller's goroutine.
// Options.DisableGroupCommit, or a fenced ctx (WithFence), makes each
// transaction commit on its own. Failures:
//
//   - fn's error aborts with nothing written and is returned as is; a
//     panic in fn goes on up the caller's stack, with nothing written.
//   - a key fn created with Tx.Create exists: an error matching
//     ErrExists, once fn's reads are found current (otherwise fn runs
//     again), with nothing written.
//   - every attempt lost its race, while the policy's time lasted: an
//     error matching ErrConflict (never ErrExists or ErrNotFound of the
//     last refusal).
//   - every attempt was throttled: ErrUnavailable; so is a transaction
//     that wrote nothing (or whose fn failed) whose checks of its reads
//     went unanswered, throttled or their answers lost, until the policy
//     ended. Nothing was written: never an unknown outcome.
//   - a backend that cannot commit several documents atomically (blobs):
//     errors.ErrUnsupported, before anything is read.
//   - keys in more than one partition, or more documents than the backend
//     commits at once: ErrInvalidInput, before anything is sent.
//   - a document holding a newer fencing token than ctx's (WithFence):
//     ErrFenced. Written documents record the token.
//   - a done ctx before the commit is sent returns ctx.Err(); a commit
//     whose answer was lost is resolved by reading its documents (never
//     applied twice), and is an *OutcomeUnknownError only where no read
//     can tell.
func (s *Store[T]) Transact(ctx context.Context, fn func(tx *Tx[T]) error) ([]Doc[T], error) {
	ctx, sp := s.obs.Begin(ctx, telemetry.OpTransact, "")
	defer sp.EndOnPanic()
	if s.abilities.Commit == nil {
		err := errorf(errors.ErrUnsupported, "Transact: %s cannot commit several documents atomically", backendName(s.b))
		sp.End(err)
		return nil, err
	}
	c := &txCall{ctx: ctx, fn: func(t *Txn) error { return fn(s.In(t)) }, store: &s.core, span: &sp}
	t, err := c.transact()
	var docs []Doc[T]
	if err == nil {
		docs = s.In(t).docs()
	}
	sp.End(err)
	return docs, err
}

// Transact runs fn, which reads and writes documents of any types through
// the typed views of tx (s.In(tx) for each Store s), and commits every
// write fn made, over all of them, in one atomic, conditional request.
// Store.Transact is its one-Store case, on the same path, with the same
// rules (see there): serializable (on tables, keys found missing and not
// written excepted), fn run again on a conflict and on its own
// ErrConflict, an error of fn returned only when its reads were current
// together, and group commit: concurrent transactions whose Stores commit
// together share one commit, whichever Stores each uses.
//
// The Stores must commit together: Stores over one backend, or over
// backends that declare the same driver.Abilities.CommitScope (tables:
// tablestore Backends over one *aztables.Client, with the same
// Options.Partition). The first Store fn uses leads: its RetryPolicy,
// Clock, version cache and telemetry carry the transaction (its span is
// etagstore.Transact), and its Options.DisableGroupCommit decides whether
// it may share a commit. In a batch, the lead of the first transaction
// that arrived leads the batch's commit (its policy bounds the batch; each
// transaction that leaves the batch runs again under its own lead's). A
// Store that cannot join the lead (another table or partition) fails at
// its first use in fn with ErrInvalidInput, and a backend that cannot
// commit atomically (blobs) with errors.ErrUnsupported; either way
// Transact fails with that error and nothing is written. One key is
// written through one Store. One exception to Store.Transact's rules: fn's
// first run knows no Store until its first use of one, so a write fn makes
// outside tx, through a Store, of a key the transaction touches lands in
// that run too, and fails the transaction (ErrInvalidInput) in the next,
// inside its lead's Reentry: it lands twice, not once.
func Transact(ctx context.Context, fn func(tx *Txn) error) error {
	c := &txCall{ctx: ctx, fn: fn}
	defer func() {
		if c.span != nil {
			c.span.EndOnPanic()
		}
	}()
	_, err := c.transact()
	if c.span != nil {
		c.span.End(err)
	}
	return err
}

// errRelead ends the delivery of a package-level Transact whose run of fn
// used first a Store that cannot commit with the delivery's lead: the
// transaction goes on, delivered by that Store.
var errRelead = errors.New("etagstore: a run of the transaction is led by another Store")

// txCall is one call of Transact or Store.Transact.
//
// Its first run of fn starts before anything is known of the transaction:
// fn's first use of a Store names its lead, and with it the group of
// transactions that commit together (txgroup.go). There the run decides,
// on the caller's goroutine and inside fn: with no other transaction of
// the group in flight, it goes on ungrouped (the delivery that follows takes
// it as its first attempt's run: no hand-off, no goroutine); otherwise it
// queues and waits, still inside fn, for its slot in the next batch, and
// goes on on the batch's copy (Txn.use), or ungrouped if the batch leaves it
// out.
type txCall struct {
	ctx   context.Context // the caller's, under the span once begun
	fn    func(*Txn) error
	store *core           // Store.Transact's Store; nil: the first used
	span  *telemetry.Span // begun by the lead (Store.Transact: at once)
	lead  *core           // the Store that leads: known at the first use of one
	// nested: Store.Transact called inside user code of a write of its
	// Store (a mutate, another fn): it commits on its own.
	nested bool
}

// callMode is what the first run of fn became at its first use of a Store.
type callMode uint8

const (
	unjoined  callMode = iota // no Store used (yet)
	ungrouped                 // it commits on its own
	inBatch                   // it runs in a batch's slot (txMember)
	gone                      // it ended before running in one (its caller left, or the batch failed it)
)

// transact runs the call and returns the Txn whose state the commit
// recorded.
func (c *txCall) transact() (*Txn, error) {
	_, fenced := FenceFrom(c.ctx)
	c.nested = c.store != nil && c.store.reentry.InsideAny()
	t := &Txn{st: c.newState(c.store, 1, !fenced)}
	first := &firstRun{c: c, t: t}
	t.st.first = first.use
	defer func() { first.g.firstDone() }() // also when fn ends its goroutine (runtime.Goexit) before its commit
	defer func() {
		if first.mode == inBatch && !first.answered { // fn ended its goroutine in its slot: the runner waits for an answer
			first.m.Answer(txAnswer{left: true})
		}
	}()
	r := runFn(c.fn, t, c.store)
	t.st.first = nil
	switch {
	case first.mode == unjoined && c.store != nil: // fn used no Store yet: its own leads
		c.lead = c.store
	case first.mode == unjoined: // fn used no Store: nothing to commit
		t.st.done = true
		if r.panicked {
			panic(r.p)
		}
		return t, r.err
	case first.mode == inBatch: // the batch ends its fork
		first.answered = true
		return first.m.finish(r)
	case first.mode == gone:
		t.st.done = true
		return t, first.err
	}
	return c.ungrouped(t, &r, first.g, 0)
}

// newState is the state of a run of fn for attempt, led by lead (nil:
// the first Store used).
func (c *txCall) newState(lead *core, attempt int, copies bool) *txnState {
	return &txnState{ctx: c.ctx, lead: lead, owner: map[string]*core{}, attempt: attempt, copies: copies}
}

// firstRun is the first run of fn, up to its first use of a Store.
type firstRun struct {
	c    *txCall
	t    *Txn
	mode callMode
	g    *txGroup  // ungrouped as the group's first caller: its group
	m    *txMember // in a batch
	err  error     // gone: why
	// answered: the run, in its slot, has answered the runner (or is
	// about to); otherwise a goroutine's end answers for it.
	answered bool
}

// use is the first use of a Store, c, of key (reads: to read it): the
// span begins (package-level Transact), the lead is known, and the run
// goes on ungrouped or in a batch.
func (f *firstRun) use(c *core, key string, reads bool) {
	call := f.c
	if call.span == nil {
		ctx, sp := c.obs.Begin(call.ctx, telemetry.OpTransact, "")
		call.ctx, call.span = ctx, &sp
		f.t.st.ctx = ctx
	}
	call.lead = call.store
	if call.lead == nil {
		call.lead = c
	}
	f.mode = ungrouped
	if c.abilities.Commit == nil {
		return // it fails to join
	}
	group := groupOf(call)
	if group == nil {
		return
	}
	if !reads {
		key = "" // a Create's key: looked up with the batch's other created keys
	}
	if f.g, f.m = arrive(group, call, c, key); f.m == nil {
		return // the group's first caller
	}
	f.m.awaitFirst(f)
}

// ungrouped delivers the call's transaction on its own, through the engine,
// each attempt a run of fn; first is the outcome of a run made before the
// delivery (the call's first), taken as the first attempt's; made is how
// many runs a batch made (they count as attempts); g is the group whose
// first caller it is (nil: none), told when fn runs and when it is done.
func (c *txCall) ungrouped(t *Txn, first *fnRun, g *txGroup, made int) (*Txn, error) {
	defer g.firstDone()
	u := &ungroupedRun{c: c, t: t, g: g, first: first}
	if first != nil {
		g.leaving() // the first run of fn has returned
		if first.panicked && first.self == nil {
			if !errors.Is(t.st.revalidate(c.lead.env, nil), engine.ErrStale) {
				panic(first.p) // on reads current together: the caller's
			}
			u.first = nil // a panic on a torn view: fn runs again
		}
	}
	fence, fenced := FenceFrom(c.ctx)
	u.fenced, u.began = fenced, c.lead.clock.Now()
	for {
		res, err := engine.New(c.lead.env, telemetry.OpTransact.String(), engine.SelfReading, nil, engine.PlanFunc(u.build),
			engine.Options{Fence: fence, Fenced: fenced, Made: made}).Run(c.ctx)
		st := t.st
		st.noteOthers(res, err)
		again, err := u.again(res, err)
		if again {
			made = res.Attempts
			continue
		}
		st.done = true // committed or failed: the views read and write no more
		c.span.Stats.Attempts = res.Attempts
		if err != nil {
			return t, err
		}
		st.recordCommit(res)
		if len(res.Sent) > 0 {
			c.lead.obs.Committed(c.ctx, len(res.Out))
		}
		c.span.Stats.Batch = len(res.Out)
		return t, nil
	}
}

// ungroupedRun is a transaction's delivery on its own: what its attempts
// share.
type ungroupedRun struct {
	c      *txCall
	t      *Txn
	g      *txGroup
	first  *fnRun // the first run's outcome, taken by the first attempt
	fenced bool
	began  time.Time
	relead *core // a Store that cannot commit with the lead, used first by a later run
}

// build is an attempt's plan: a run of fn (or the first run's outcome),
// and the request it makes.
func (u *ungroupedRun) build(d *engine.Delivery, _ []version) (request, error) {
	c, t := u.c, u.t
	var r fnRun
	if u.first != nil {
		r, u.first = *u.first, nil
	} else {
		t.st = c.newState(c.store, d.Attempts(), d.Attempts() == 1 && !u.fenced)
		if c.store == nil { // package-level: the run's first Store leads it
			st, lead := t.st, c.lead
			st.first = func(s *core, _ string, _ bool) {
				if !commitTogether(lead, s) {
					u.relead, st.err = s, errRelead
				}
			}
		}
		u.g.entering()
		r = runFn(c.fn, t, c.lead)
		u.g.leaving()
	}
	st := t.st
	err := st.outcome(r, c.lead.env)
	d.SetKeys(st.keys()) // also for an error's text
	var self *reentry.SelfWriteError
	switch {
	case errors.As(err, &self):
		return nil, err // fn wrote a key of its own outside tx: no run can win
	case err == nil:
		return st.request(d, false)
	case st.err != nil || errors.Is(err, engine.ErrStale):
		return nil, err
	}
	return st.failed(err)
}

// again decides, after a delivery that ended with err, whether fn runs
// again in another (within the policy and ctx): led by another Store
// (errRelead), or after a Create refused on reads that changed. Otherwise
// it returns the call's error: err, or ErrExists of a Create refused on
// reads found current.
func (u *ungroupedRun) again(res engine.Result, err error) (bool, error) {
	c, st := u.c, u.t.st
	if errors.Is(err, errRelead) { // a run led by a Store of another scope: delivered by it
		if err := u.spent(res, "the runs of fn led by Stores that cannot commit together"); err != nil {
			return false, err
		}
		c.lead, u.relead = u.relead, nil
		return true, nil
	}
	key := st.unreadRefused(err)
	if key == "" {
		return false, err
	}
	stale := st.revalidate(c.lead.env, st.readBefore(key))
	if errors.Is(stale, engine.ErrStale) { // made on reads no longer current: fn runs again
		if stale = u.spent(res, fmt.Sprintf("%q exists and the reads before its Create changed", key)); stale == nil {
			return true, nil
		}
	}
	if stale != nil {
		return false, stale
	}
	return false, errorf(ErrExists, "Transact: %q exists", key)
}

// spent is the end of a transaction that must run fn again in another
// delivery (why) when the lead's policy (its attempts and time) or ctx is
// spent; nil while it is not.
func (u *ungroupedRun) spent(res engine.Result, why string) error {
	c := u.c
	if cerr := c.ctx.Err(); cerr != nil {
		return cerr
	}
	p := c.lead.retry
	if p.MaxAttempts > 0 && res.Attempts >= p.MaxAttempts || p.MaxElapsedTime > 0 && c.lead.clock.Now().Sub(u.began) > p.MaxElapsedTime {
		return errorf(ErrConflict, "Transact: out of attempts, %s", why)
	}
	return nil
}

// noteOthers tells the Stores of the transaction other than its lead
// (whose engine environment the delivery told) what its commit wrote: a
// write from inside a mutate of one of their keys (internal/reentry).
func (st *txnState) noteOthers(res engine.Result, err error) {
	var told []*core
	for _, tc := range st.order {
		c := tc.view.core()
		if c == st.lead || containsCore(told, c) {
			continue
		}
		told = append(told, c)
		c.reentry.NoteWritten(telemetry.OpTransact.String(), st.keys(), res, err)
	}
}

func containsCore(cs []*core, c *core) bool {
	for _, x := range cs {
		if x == c {
			return true
		}
	}
	return false
}

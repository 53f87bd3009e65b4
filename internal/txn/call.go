package txn

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/engine"
	"github.com/etagstore/etagstore/internal/fence"
	"github.com/etagstore/etagstore/internal/reentry"
	"github.com/etagstore/etagstore/internal/telemetry"
)

// One call of Transact or Store.Transact (the root's transact.go): its
// first run, and its delivery on its own.

// errRelead ends the delivery of a package-level Transact whose run of fn
// used first a Store that cannot commit with the delivery's lead: the
// transaction goes on, delivered by that Store.
var errRelead = errors.New("etagstore: a run of the transaction is led by another Store")

// Call is one call of Transact or Store.Transact.
//
// Its first run of fn starts before anything is known of the transaction:
// fn's first use of a Store names its lead, and with it the group of
// transactions that commit together (group.go). There the run decides,
// on the caller's goroutine and inside fn: with no other transaction of
// the group in flight, it goes on ungrouped (the delivery that follows takes
// it as its first attempt's run: no hand-off, no goroutine); otherwise it
// queues and waits, still inside fn, for its slot in the next batch, and
// goes on on the batch's copy (Handle.use), or ungrouped if the batch leaves it
// out.
type Call struct {
	ctx   context.Context // the caller's, under the span once begun
	fn    func(*Handle) error
	store Store           // Store.Transact's Store; nil: the first used
	span  *telemetry.Span // begun by the lead (Store.Transact: at once)
	lead  Store           // the Store that leads: known at the first use of one
	// nested: Store.Transact called inside user code of a write of its
	// Store (a mutate, another fn): it commits on its own.
	nested bool
}

// NewCall is a call of fn under ctx: Store.Transact's of store, whose
// span sp is begun, or (store and sp nil) the package-level Transact's,
// whose span the first Store fn uses begins.
func NewCall(ctx context.Context, fn func(*Handle) error, store Store, sp *telemetry.Span) *Call {
	return &Call{ctx: ctx, fn: fn, store: store, span: sp}
}

// Span is the call's span, nil until begun.
func (c *Call) Span() *telemetry.Span { return c.span }

// callMode is what the first run of fn became at its first use of a Store.
type callMode uint8

const (
	unjoined  callMode = iota // no Store used (yet)
	ungrouped                 // it commits on its own
	inBatch                   // it runs in a batch's slot (member)
	gone                      // it ended before running in one (its caller left, or the batch failed it)
)

// Run runs the call and returns the Handle whose state the commit
// recorded.
func (c *Call) Run() (*Handle, error) {
	_, fenced := fence.From(c.ctx)
	c.nested = c.store != nil && c.store.Reentry().InsideAny()
	h := &Handle{st: c.newState(c.store, 1, !fenced)}
	first := &firstRun{c: c, h: h}
	h.st.first = first.use
	defer func() { first.g.firstDone() }() // also when fn ends its goroutine (runtime.Goexit) before its commit
	defer func() {
		if first.mode == inBatch && !first.answered { // fn ended its goroutine in its slot: the runner waits for an answer
			first.m.Answer(answer{left: true})
		}
	}()
	r := runFn(c.fn, h, c.store)
	h.st.first = nil
	switch {
	case first.mode == unjoined && c.store != nil: // fn used no Store yet: its own leads
		c.lead = c.store
	case first.mode == unjoined: // fn used no Store: nothing to commit
		h.st.done = true
		if r.panicked {
			panic(r.p)
		}
		return h, r.err
	case first.mode == inBatch: // the batch ends its fork
		first.answered = true
		return first.m.finish(r)
	case first.mode == gone:
		h.st.done = true
		return h, first.err
	}
	return c.ungrouped(h, &r, first.g, 0)
}

// newState is the state of a run of fn for attempt, led by lead (nil:
// the first Store used).
func (c *Call) newState(lead Store, attempt int, copies bool) *State {
	return &State{ctx: c.ctx, lead: lead, owner: map[string]Store{}, attempt: attempt, copies: copies}
}

// firstRun is the first run of fn, up to its first use of a Store.
type firstRun struct {
	c    *Call
	h    *Handle
	mode callMode
	g    *txGroup // ungrouped as the group's first caller: its group
	m    *member  // in a batch
	err  error    // gone: why
	// answered: the run, in its slot, has answered the runner (or is
	// about to); otherwise a goroutine's end answers for it.
	answered bool
}

// use is the first use of a Store, s, of key (reads: to read it): the
// span begins (package-level Transact), the lead is known, and the run
// goes on ungrouped or in a batch.
func (f *firstRun) use(s Store, key string, reads bool) {
	call := f.c
	if call.span == nil {
		ctx, sp := s.Recorder().Begin(call.ctx, telemetry.OpTransact, "")
		call.ctx, call.span = ctx, &sp
		f.h.st.ctx = ctx
	}
	call.lead = call.store
	if call.lead == nil {
		call.lead = s
	}
	f.mode = ungrouped
	if s.Abilities().Commit == nil {
		return // it fails to join
	}
	group := groupOf(call)
	if group == nil {
		return
	}
	if !reads {
		key = "" // a Create's key: looked up with the batch's other created keys
	}
	if f.g, f.m = arrive(group, call, s, key); f.m == nil {
		return // the group's first caller
	}
	f.m.awaitFirst(f)
}

// ungrouped delivers the call's transaction on its own, through the engine,
// each attempt a run of fn; first is the outcome of a run made before the
// delivery (the call's first), taken as the first attempt's; made is how
// many runs a batch made (they count as attempts); g is the group whose
// first caller it is (nil: none), told when fn runs and when it is done.
func (c *Call) ungrouped(h *Handle, first *fnRun, g *txGroup, made int) (*Handle, error) {
	defer g.firstDone()
	u := &ungroupedRun{c: c, h: h, g: g, first: first}
	if first != nil {
		g.leaving() // the first run of fn has returned
		if first.panicked && first.self == nil {
			if !errors.Is(h.st.revalidate(c.lead.Env(), nil), engine.ErrStale) {
				panic(first.p) // on reads current together: the caller's
			}
			u.first = nil // a panic on a torn view: fn runs again
		}
	}
	fenceToken, fenced := fence.From(c.ctx)
	u.fenced, u.began = fenced, c.lead.Env().Clock.Now()
	for {
		res, err := engine.New(c.lead.Env(), telemetry.OpTransact.String(), engine.SelfReading, nil, engine.PlanFunc(u.build),
			engine.Options{Fence: fenceToken, Fenced: fenced, Made: made, Implier: implied(func() *State { return h.st })}).Run(c.ctx)
		st := h.st
		st.noteOthers(res, err)
		again, err := u.again(res, err)
		if again {
			made = res.Attempts
			continue
		}
		st.done = true // committed or failed: the views read and write no more
		c.span.Stats.Attempts = res.Attempts
		if err != nil {
			return h, err
		}
		st.recordCommit(res)
		if len(res.Sent) > 0 {
			c.lead.Recorder().Committed(c.ctx, len(res.Out))
		}
		c.span.Stats.Batch = len(res.Out)
		return h, nil
	}
}

// ungroupedRun is a transaction's delivery on its own: what its attempts
// share.
type ungroupedRun struct {
	c      *Call
	h      *Handle
	g      *txGroup
	first  *fnRun // the first run's outcome, taken by the first attempt
	fenced bool
	began  time.Time
	relead Store // a Store that cannot commit with the lead, used first by a later run
}

// build is an attempt's plan: a run of fn (or the first run's outcome),
// and the request it makes.
func (u *ungroupedRun) build(d *engine.Delivery, _ []Version) (engine.Request, error) {
	c, h := u.c, u.h
	var r fnRun
	if u.first != nil {
		r, u.first = *u.first, nil
	} else {
		h.st = c.newState(c.store, d.Attempts(), d.Attempts() == 1 && !u.fenced)
		if c.store == nil { // package-level: the run's first Store leads it
			st, lead := h.st, c.lead
			st.first = func(s Store, _ string, _ bool) {
				if !commitTogether(lead, s) {
					u.relead, st.err = s, errRelead
				}
			}
		}
		u.g.entering()
		r = runFn(c.fn, h, c.lead)
		u.g.leaving()
	}
	st := h.st
	err := st.outcome(r, c.lead.Env())
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
	c, st := u.c, u.h.st
	if errors.Is(err, errRelead) { // a run led by a Store of another scope: delivered by it
		if err := u.spent(res, "the runs of fn led by Stores that cannot commit together"); err != nil {
			return false, err
		}
		c.lead, u.relead = u.relead, nil
		return true, nil
	}
	if stale := st.heldOnStale(c.lead.Env(), err); errors.Is(stale, engine.ErrStale) { // a value held, taken on reads no longer current: fn runs again
		if stale = u.spent(res, "a unique value it took is held and the reads before its write changed"); stale == nil {
			return true, nil
		}
		return false, stale
	} else if stale != nil {
		return false, stale
	}
	key := st.unreadRefused(err)
	if key == "" {
		return false, err
	}
	stale := st.revalidate(c.lead.Env(), st.readBefore(key))
	if errors.Is(stale, engine.ErrStale) { // made on reads no longer current: fn runs again
		if stale = u.spent(res, fmt.Sprintf("%q exists and the reads before its Create changed", key)); stale == nil {
			return true, nil
		}
	}
	if stale != nil {
		return false, stale
	}
	return false, driver.Errorf(driver.ErrExists, "Transact: %q exists", key)
}

// spent is the end of a transaction that must run fn again in another
// delivery (why) when the lead's policy (its attempts and time) or ctx is
// spent; nil while it is not.
func (u *ungroupedRun) spent(res engine.Result, why string) error {
	c := u.c
	if cerr := c.ctx.Err(); cerr != nil {
		return cerr
	}
	env := c.lead.Env()
	p := env.Policy
	if p.MaxAttempts > 0 && res.Attempts >= p.MaxAttempts || p.MaxElapsedTime > 0 && env.Clock.Now().Sub(u.began) > p.MaxElapsedTime {
		return driver.Errorf(driver.ErrConflict, "Transact: out of attempts, %s", why)
	}
	return nil
}

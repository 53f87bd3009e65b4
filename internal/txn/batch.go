package txn

import (
	"context"
	"errors"
	"slices"
	"sort"
	"time"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/engine"
	"github.com/etagstore/etagstore/internal/groupcommit"
	"github.com/etagstore/etagstore/internal/index"
	"github.com/etagstore/etagstore/internal/meta"
	"github.com/etagstore/etagstore/internal/telemetry"
)

// A group's batch of transactions (see group.go for the group, its lock
// and its members): its attempts, each member's slot, the lookup of the
// keys members create, and the results.

// batch is one batch of a group's transactions.
type batch struct {
	g                  *txGroup
	members            []*member
	applied            []*member       // the members whose writes the last attempt holds
	later              []*member       // members that go in a later batch
	deferred           []*member       // members taking a unique value an earlier member takes: the next batch
	keys               []string        // the keys the last attempt touched, read ahead by the next
	exists             map[string]bool // unread creates' keys looked up, and whether they exist
	predicted, wary    bool            // the group's prediction asked; look up every key created unread
	groupcommit.Flight                 // the commit holding applied (guarded by mu)
	timer              *time.Timer
	// lastAttempt is how long the last attempt took, from its slots to
	// its answer: what a runner lingers by (txGroup.run).
	lastAttempt time.Duration
	began       time.Time
	// handed counts the members answered. comeBack is the callers in
	// flight when the batch ended (finish): those it answered then, and
	// those queued (among them, members it answered before its end, back
	// already): the next batch waits for them (txGroup.run).
	handed, comeBack int
}

// newBatch is the batch of members, in g.
func newBatch(g *txGroup, members []*member) *batch {
	b := &batch{g: g, members: members}
	b.Flight = groupcommit.NewFlight(&mu, func(yield func(*groupcommit.Caller) bool) {
		for _, r := range b.applied {
			if !yield(&r.Caller) {
				return
			}
		}
	})
	return b
}

// commit runs the batch's attempts, led by its first member's lead, and
// hands out the results.
func (b *batch) commit() {
	ctxs := make([]context.Context, len(b.members))
	for i, r := range b.members {
		ctxs[i] = r.Ctx
	}
	ctx, cancel := groupcommit.Context(ctxs)
	defer cancel()
	b.timer = time.NewTimer(time.Hour)
	defer b.timer.Stop()
	lead := b.members[0].call.lead
	st := &State{ctx: ctx, lead: lead, owner: map[string]Store{}} // kept when no attempt runs (every caller left)
	p := engine.PlanFunc(func(d *engine.Delivery, _ []Version) (engine.Request, error) {
		b.began = time.Now()
		for {
			st = &State{ctx: ctx, lead: lead, owner: map[string]Store{}, attempt: d.Attempts(), copies: d.Attempts() == 1}
			b.slots(st)
			d.SetKeys(st.keys())
			req, err := st.request(d, true)
			if err != nil || !b.deferTakers(ctx, d, req) {
				return req, err
			}
		}
	})
	res, err := engine.New(lead.Env(), telemetry.OpTransact.String(), engine.SelfReading, nil, p,
		engine.Options{Flight: b, Implier: implied(func() *State { return st })}).Run(ctx)
	if !b.began.IsZero() {
		b.lastAttempt = time.Since(b.began)
	}
	st.noteOthers(res, err)
	if err == nil {
		st.recordCommit(res)
		if len(res.Sent) > 0 {
			lead.Recorder().Committed(ctx, len(res.Out))
		}
	}
	b.finish(st, res, err)
}

// slots gives each member still in the batch a slot on a fork of the
// transaction so far, in arrival order, and adopts the fork when fn
// succeeds. The batch's keys are checked once (CheckCommit). When they do
// not fit one request, the members before the first that does not fit
// stay, that one waits for the next batch (or, if its keys cannot be
// committed at all, fails as on its own), and the slots of the members
// after it run again, each checked as it is adopted. When a key a member
// created unread is found to exist, the member is answered and the slots
// run again without it.
func (b *batch) slots(st *State) {
	if !st.copies {
		st.ahead = b.readAhead(st.ctx, st.lead)
	} else {
		st.ahead = b.readFirstKeys(st)
	}
	for {
		b.applied, b.later = b.applied[:0], b.later[:0]
		forks := b.runSlots(st, b.members, false)
		if err := b.fits(st); err != nil {
			// The last member whose keys fit with those before it: a prefix
			// that fits is all fits, so a binary search finds it.
			k := sort.Search(len(forks), func(i int) bool { return b.fits(forks[i]) != nil }) - 1
			misfit, rest := b.applied[k+1], slices.Clone(b.applied[k+2:])
			b.applied = b.applied[:k+1]
			if k >= 0 {
				st.adopt(forks[k])
			} else {
				st.views, st.order, st.owner = nil, nil, map[string]Store{}
			}
			b.misfit(misfit, err, k < 0)
			b.runSlots(st, rest, true)
		}
		if !b.refuseTaken(st) {
			b.keys = st.keys()
			return
		}
		st.views, st.order, st.owner = nil, nil, map[string]Store{}
	}
}

// deferTakers finds, sending no write, the members whose writes in req
// take a unique value held elsewhere (the Implier's engine.Pending, as
// the group predicts: lookup.go): one whose value a stored document
// holds is answered its error; one whose value is most likely held (read
// nothing of) leaves the batch, and its caller, beside the batch, learns
// whether a document holds it (the values of every such member read
// together: probe.go), failing with its error or running on its own,
// unless it has no attempt left (then the batch reads the values); one whose value an
// earlier member takes is left for the next batch, where the value is
// known held or free, and the run does not count toward its MaxAttempts. It reports whether it took one out: the slots run again
// without it. What it reads of the entries is the delivery's (its
// Implier's memo): not read again when the batch sends.
func (b *batch) deferTakers(ctx context.Context, d *engine.Delivery, req engine.Request) bool {
	takers := engine.PendingOf[*index.UniqueError](ctx, d, req, b.isWary())
	if len(takers) == 0 {
		return false
	}
	mu.Lock()
	defer mu.Unlock()
	out := false
	var predicted []*member
	var es []*index.UniqueError
	for i, r := range b.applied {
		e := b.takes(i, takers)
		switch {
		case r.Status != groupcommit.Applied || e == nil:
			continue
		case index.Likely(e) && r.spentRuns():
			b.wary = true // it cannot run on its own: the batch reads the values it takes, and then decides
		case index.Likely(e):
			predicted, es = append(predicted, r), append(es, e) // most likely held: it learns beside the batch (below)
		case !e.Pending():
			b.hand(r, result{err: e, ran: r.runs})
		default:
			if r.lastAttempt != 0 {
				r.runs--
			}
			r.Status, r.lastAttempt = groupcommit.Taken, 0
			b.deferred = append(b.deferred, r)
		}
		out = true
	}
	if len(es) > 0 {
		shared := newConfirms(es) // their values read together, by the first of their callers to ask (probe.go)
		for i, r := range predicted {
			b.hand(r, result{ungrouped: true, predicted: es[i], confirms: shared, ran: r.runs})
		}
	}
	return out
}

// runSlots gives each of members still in the batch a slot on a fork of
// st, adopts the forks whose fn succeeded (each: whose keys fit with the
// batch's, checked one by one; the others go to the next batch), and
// returns the batch's transaction after each adoption.
func (b *batch) runSlots(st *State, members []*member, each bool) []*State {
	var forks []*State
	for _, r := range members {
		f, ok := b.slot(r, st.fork(r.Ctx, b.onRead(r)), st.attempt)
		if !ok {
			continue
		}
		if each {
			if err := b.fits(f); err != nil {
				b.misfit(r, err, len(b.applied) == 0)
				continue
			}
		}
		st.adopt(f)
		b.applied = append(b.applied, r)
		forks = append(forks, f)
	}
	return forks
}

// slot gives r a slot on f in the batch's attempt and waits for its
// answer: at most groupcommit.SlotTimeout beyond the reads its fn makes, once another
// caller waits for it (waitedFor). It reports whether f may be adopted; a
// member that failed, was too slow, or must run on its own is handed its
// result on the spot. Once answered, f is ended: a Tx its fn kept refuses
// writes.
func (b *batch) slot(r *member, f *State, attempt int) (*State, bool) {
	mu.Lock()
	if !r.Waiting() || slices.Contains(b.deferred, r) {
		mu.Unlock()
		return nil, false
	}
	if attempt != r.lastAttempt { // a new attempt: a run of its fn that counts
		if max := r.call.lead.Env().Policy.MaxAttempts; max > 0 && r.runs >= max {
			b.hand(r, result{err: outOfRuns(r), ran: r.runs})
			mu.Unlock()
			return nil, false
		}
		r.runs, r.lastAttempt = r.runs+1, attempt
	}
	r.view = f
	r.Give(f)
	began := time.Now()
	r.reading, r.inReads = false, 0
	mu.Unlock()
	a, timedOut := b.await(r, began)
	mu.Lock()
	defer mu.Unlock()
	if !timedOut {
		f.done = true // fn has returned
	}
	switch {
	case r.Status == groupcommit.Left || a.left || r.Ctx.Err() != nil:
		// Its caller left, or its context ended during its slot (inside
		// its fn, say): out of the batch before anything holding its
		// writes is sent, whichever its caller's goroutine meets first.
		r.Status = groupcommit.Left
		return nil, false
	case timedOut:
		b.hand(r, result{ungrouped: true})
		return nil, false
	case a.later:
		// Its next batch's attempts count anew (finish); a run again in
		// this attempt (the slots run again) does not count twice.
		r.Status = groupcommit.Taken
		b.later = append(b.later, r)
		return nil, false
	case a.ungrouped:
		b.hand(r, result{ungrouped: true, ran: r.runs, err: a.err})
		return nil, false
	case a.checking:
		b.hand(r, result{checking: true, tries: attempt, ran: r.runs})
		return nil, false
	case a.err != nil || a.done:
		b.hand(r, result{err: a.err, tries: attempt})
		return nil, false
	}
	r.Status = groupcommit.Applied
	return f, true
}

// await waits for r's answer to the slot it began at began, or until the
// slot has lasted groupcommit.SlotTimeout beyond its reads while another caller waits
// for it (timedOut).
func (b *batch) await(r *member, began time.Time) (a answer, timedOut bool) {
	return r.Wait(b.timer, groupcommit.SlotTimeout, func() (time.Duration, bool) {
		mu.Lock()
		defer mu.Unlock()
		bound := groupcommit.SlotTimeout - r.outsideReads(began)
		if bound <= 0 && b.waitedFor(r) {
			return 0, false
		}
		return max(bound, groupcommit.SlotTimeout/4), true // nobody waits yet: look again
	})
}

// readAllowance is how much of a slot's time in reads its bound leaves
// out: reads a fn makes at the service's latency do not make it leave the
// batch, and a read that hangs does not hold the batch longer than this.
const readAllowance = 250 * time.Millisecond

// outsideReads is how long r's slot, begun at began, has run outside its
// fn's reads (up to readAllowance of them). mu is held.
func (r *member) outsideReads(began time.Time) time.Duration {
	now := time.Now()
	in := r.inReads
	if r.reading {
		in += now.Sub(r.readSince)
	}
	return now.Sub(began) - min(in, readAllowance)
}

// waitedFor reports whether another caller waits for r's slot to end: a
// member after it in the batch, or a caller queued for the next batch
// (one that r's fn called, say). mu is held.
func (b *batch) waitedFor(r *member) bool {
	if len(b.g.Members) > 0 {
		return true
	}
	after := false
	for _, m := range b.members {
		if after && m.Waiting() {
			return true
		}
		after = after || m == r
	}
	return false
}

// onRead is the hook by which r's fn's reads are kept out of its slot's
// bound.
func (b *batch) onRead(r *member) func(bool) {
	return func(start bool) {
		mu.Lock()
		defer mu.Unlock()
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

// misfit takes r, whose keys do not fit the batch, out of it: first (its
// keys alone do not fit), it fails with err, as it would on its own;
// otherwise it waits for the next batch, and its run in this one, whose
// writes no request carried, does not count toward its MaxAttempts.
func (b *batch) misfit(r *member, err error, first bool) {
	mu.Lock()
	defer mu.Unlock()
	switch {
	case r.Status == groupcommit.Left:
	case first:
		b.hand(r, result{err: err})
	default:
		if r.lastAttempt != 0 {
			r.runs--
		}
		r.Status, r.lastAttempt = groupcommit.Taken, 0
		b.later = append(b.later, r)
	}
}

// fits checks, sending nothing, that st's keys (the batch's, or the
// batch's so far and a member's) can be committed in one request: once per
// request in a batch that fits, a member at a time in one that does not.
func (b *batch) fits(st *State) error {
	chk := st.lead.Abilities().CheckCommit
	if chk == nil || len(st.order) == 0 {
		return nil
	}
	actions := make([]driver.Action, len(st.order))
	for i, tc := range st.order {
		actions[i] = driver.Action{Key: tc.key}
	}
	return chk(actions)
}

// finish hands every member still waiting its result, and queues the
// members left for a later batch at the front of the queue.
func (b *batch) finish(st *State, res engine.Result, err error) {
	mu.Lock()
	defer mu.Unlock()
	before := b.handed
	defer func() { b.comeBack = b.handed - before + len(b.g.Members) }() // mu held: the callers answered here queue after
	b.InFlight = false
	refused := refusedKey(st, err)
	existing := st.unreadRefused(err)
	takers := index.Takers(err)
	b.g.surprised(existing != "" && !b.knows(existing) || len(takers) > 0 && !b.wary)
	for i, r := range b.applied {
		if r.Status != groupcommit.Applied {
			continue
		}
		switch {
		case err == nil:
			b.settle(st, res, i)
			b.hand(r, result{batch: len(res.Out), tries: res.Attempts})
		case existing != "" && r.view.own.written[existing] && !r.view.own.inherited[existing]:
			b.hand(r, result{exists: existing, tries: res.Attempts, ran: r.runs})
		case existing != "":
			r.Status, r.lastAttempt = groupcommit.Taken, 0
			b.later = append(b.later, r) // another's created key exists: the next batch, without it
		case b.takes(i, takers) != nil && !b.takes(i, takers).Pending():
			b.hand(r, result{err: b.takes(i, takers), tries: res.Attempts}) // a stored document holds the value
		case b.takes(i, takers) != nil:
			// Its write takes a unique value an earlier member's write
			// takes: on its own, after this batch, it learns whether the
			// value is still held.
			b.hand(r, result{ungrouped: true})
		case takers != nil:
			r.Status, r.lastAttempt = groupcommit.Taken, 0
			b.later = append(b.later, r) // the next batch, without the member at fault
		case len(b.applied) > 1 && (errors.Is(err, driver.ErrTooLarge) || errors.Is(err, driver.ErrInvalidInput)):
			b.hand(r, result{ungrouped: true}) // one member's writes may be at fault
		case refused != "" && !r.view.own.seen[refused]:
			b.hand(r, result{ungrouped: true}) // another's race: on its own it may not lose it
		default:
			b.hand(r, result{err: named(r.view, err), tries: res.Attempts})
		}
	}
	var later []*member
	for _, r := range append(b.later, b.deferred...) {
		if r.Status == groupcommit.Taken {
			r.Status, r.lastAttempt = groupcommit.Queued, 0
			later = append(later, r)
		}
	}
	b.g.Members = append(later, b.g.Members...)
	for _, r := range b.members {
		if r.Status == groupcommit.Taken { // the batch ended before its slot
			b.hand(r, result{err: err, ungrouped: err == nil})
		}
	}
}

// takes is the UniqueError of takers, if any, whose write is the i-th
// applied member's: its write takes a unique value held elsewhere. The
// request's write of a document is the last member's that wrote it (over
// an earlier member's, inherited): that member is the taker, not the
// earlier ones (a delete takes no value).
func (b *batch) takes(i int, takers map[string]*index.UniqueError) *index.UniqueError {
	f := b.applied[i].view
	for key, e := range takers {
		if f.own.written[key] && !b.rewritten(i, key) {
			return e
		}
	}
	return nil
}

// refusedKey is the key whose action a lost race of the batch's commit
// names ("" when err is no such refusal, or names none).
func refusedKey(st *State, err error) string {
	var ae *driver.ActionError
	if !errors.Is(err, driver.ErrConflict) || !errors.As(err, &ae) || ae.Index < 0 || ae.Index >= len(st.order) {
		return ""
	}
	return st.order[ae.Index].key
}

// settle records in the i-th applied member's view what the commit made
// of the keys it wrote: a document a later member of the batch wrote
// again (or deleted, so that the batch wrote nothing of it) has a
// Superseded ETag naming the commit and the member. The member's Tx
// reports them from then on (Tx.ETag), and its docs are built from them.
func (b *batch) settle(st *State, res engine.Result, i int) {
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
func (b *batch) rewritten(i int, key string) bool {
	for _, l := range b.applied[i+1:] {
		if l.view.own.written[key] {
			return true
		}
	}
	return false
}

// named is err, the batch's failure, as a member's (f its view): an
// unknown outcome names its first key, not the batch's.
func named(f *State, err error) error {
	var unknown *driver.OutcomeUnknownError
	if !errors.As(err, &unknown) || len(f.own.keys) == 0 {
		return err
	}
	mine := *unknown
	mine.Key = f.own.keys[0]
	return &mine
}

// outOfRuns is the failure of r, whose lead's MaxAttempts its runs in
// batches that lost their races have used up (mu held).
func outOfRuns(r *member) error {
	key := ""
	if r.view != nil {
		if keys := r.view.ownKeys(); len(keys) > 0 {
			key = keys[0]
		}
	}
	return driver.Errorf(driver.ErrConflict, "%s %q lost every race (%d runs)", telemetry.OpTransact, key, r.runs)
}

// hand sets r's result and wakes its caller. mu is held.
func (b *batch) hand(r *member, res result) {
	r.res = res
	b.handed++
	r.Hand()
}

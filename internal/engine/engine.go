// Package engine is the one delivery engine: it carries one write — one
// key's, or one transaction's — from its base to its outcome. Every write
// of etagstore reaches a backend through Delivery.Run: single writes,
// Update and Save, group-commit batches, table merges and batches,
// transactions. One attempt is
//
//	base → admit → build → send → (refusal | settle)
//
// base: the versions the write starts from (none for a blind write, else
// known or read); admit: no newer fencing token holds them; build: the
// plan's request over them (none: nothing to write, confirm); send: one
// request; refusal: a definite answer (a lost race is built again from a
// new base, a throttled request sent again as it is, anything else
// reported); settle: a lost answer, resolved by reading (package
// request's Resolve). A request of checks alone (a transaction that
// wrote nothing) writes nothing, so a lost answer to it is sent again as
// a throttled one is (send.go). What an attempt leaves to the next is one value, a carry.
// The retry loop (internal/retry) decides when the next attempt runs;
// contention heat (internal/heat) where its backoff starts. A Store's
// Contention (contention.go; internal/turns, the hot-key hand-over) is
// called at three points of an attempt: before it builds, before it
// sends, after the answer.
//
// The engine is untyped: it sees keys, bytes, ETags, bookkeeping and
// conditions, never the document type. It never reaches into its caller:
// the caller hands it a Plan, an Env (the backend and the hooks through
// which reads are made and events reported) and a Mode, and acts on the
// Result it returns.
package engine

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/heat"
	"github.com/etagstore/etagstore/internal/imply"
	"github.com/etagstore/etagstore/internal/outcome"
	"github.com/etagstore/etagstore/internal/request"
	"github.com/etagstore/etagstore/internal/retry"
)

// Mode is how a write starts each attempt; fixed at construction.
type Mode uint8

const (
	// Blind: every attempt sends the plan's request over no base (Create,
	// Replace, Upsert, Delete, unfenced merges and batches). A refusal is
	// reported as it is.
	Blind Mode = iota
	// Based: each attempt starts from the current versions of the keys,
	// known (a cached copy, the version a batch wrote) or read; a refusal
	// for stale versions builds the request again over new ones (Update,
	// Save, fenced writes, table merges).
	Based
	// SelfReading: the plan reads for itself (a transaction): a refusal
	// for stale versions, or ErrStale from the plan, runs it again.
	SelfReading
)

// Version, KeyWrite and Request are package request's: what an attempt
// sends, and the versions it is built over.
type (
	Version  = request.Version
	KeyWrite = request.KeyWrite
	Request  = request.Request
)

// The key writes that need no delivery (package request).
var (
	Fresh      = request.Fresh
	Merged     = request.Merged
	DeleteOf   = request.DeleteOf
	Check      = request.Check
	Superseded = request.Superseded
	CheckFence = request.CheckFence
)

// Plan builds the request of an attempt from base, the current versions
// of the write's keys (nil for Blind and SelfReading writes). An empty
// request means nothing needs writing. d is the delivery asking: its Over
// builds a write over a version with the write's fencing token.
type Plan interface {
	Build(d *Delivery, base []Version) (Request, error)
}

// PlanFunc is a Plan written as a function.
type PlanFunc func(d *Delivery, base []Version) (Request, error)

// Build calls f.
func (f PlanFunc) Build(d *Delivery, base []Version) (Request, error) { return f(d, base) }

// Flight is how group commit follows the write that holds its members'
// mutations. Hold is asked before each send of a request built from the
// changes just applied (or sent again after a throttled try), not of a
// request of checks alone, which holds none; false means
// a member whose change it holds has left, and the changes are applied
// again without it. Release says the request did not land.
type Flight interface {
	Hold() bool
	Release()
}

// Hooks are what the engine asks of the Store whose writes it carries:
// reads, made as the Store makes them, and events it reports.
type Hooks interface {
	// Read reads key: its version, or one with Exists false and Missing
	// set when it is not found; any other failure is returned.
	Read(ctx context.Context, key string) (Version, error)
	// StaleCopy reports that a write built on a version of key with ETag
	// etag, not read during this call (a copy), was refused: it was stale.
	StaleCopy(key string, etag driver.ETag)
	// Conflict reports a lost race that a retry absorbs.
	Conflict(ctx context.Context)
	// Lost reports a lost answer, resolved by reading with verdict v.
	Lost(ctx context.Context, op, key string, v outcome.Verdict)
	// Retrying and Attempted hear the retry loop (internal/retry).
	retry.Hooks
}

// Policy and Clock are package retry's: what bounds a write's attempts,
// and the loop's time source.
type (
	Policy = retry.Policy
	Clock  = retry.Clock
)

// Env is what a Store's writes are delivered with: one per Store, shared
// by its deliveries, read-only once built.
type Env struct {
	Backend driver.Backend
	// Commit writes several actions atomically (driver.Abilities.Commit);
	// nil when the backend cannot.
	Commit  func(ctx context.Context, actions []driver.Action) ([]driver.ETag, error)
	Policy  Policy
	Clock   Clock
	KeepIDs int        // write ids a document keeps (meta.Meta.Then)
	Heat    *heat.Heat // the Store's contention warmth (internal/heat)
	Hooks   Hooks
	// Contention orders the Store's writes of a contended key with other
	// Stores' (contention.go); nil: none.
	Contention Contention
	// Reentry notices a write made from inside the user code of another
	// write of its key (internal/reentry); nil: none.
	Reentry Noter
	// Implier adds what a write implies to its request (internal/imply;
	// internal/index); nil: none.
	Implier Implier
}

// Implier and Pending are package imply's: what a write implies, committed
// with it.
type (
	Implier          = imply.Implier
	Pending[E error] = imply.Pending[E]
)

// Noter hears what every delivery wrote, as it ends (internal/reentry's
// Reentry: a write from inside user code of its own key).
type Noter interface {
	NoteWritten(op string, keys []string, res Result, err error)
}

// Result is what a delivery did, for its caller to act on.
type Result struct {
	// Out is, per key of the request that landed, the version written: a
	// superseded ETag and no Data when it was found committed with later
	// writes after it; the version it started from when nothing needed
	// writing; no Data after a merge or delete.
	Out []driver.Item
	// Sent is the request that landed (nil when nothing was written).
	Sent     Request
	Attempts int
	// Raced: the write ended having lost its last race.
	Raced bool
	// Held is the ETag the last request was conditioned on.
	Held driver.ETag
	// FromCopy: the request that landed was built on a version not read
	// during the call (a cached copy), and went through at once.
	FromCopy bool
}

// What a SelfReading plan returns beside its request (package request).
var (
	ErrStale = request.ErrStale
	Rerun    = request.Rerun
	Checked  = request.Checked
)

// Delivery carries one write to the backend until its fate is known. It is
// used by one goroutine.
type Delivery struct {
	env    *Env
	op     string
	keys   []string // keys[0] names the write in errors
	mode   Mode
	fence  int64
	fenced bool
	plan   Plan
	flight Flight

	made      int // attempts made before this delivery (Options.Made)
	then      carry
	unsettled error // what lost the answer of a request not settled yet
	outcome   error // what a request of checks only ends with once they hold (Checked)
	res       Result

	rmw     bool       // a read-modify-write (TakeTurns)
	part    Contender  // its part in the Store's Contention; nil: none
	implied imply.Part // its part in the Store's Implier (internal/imply)
}

// carry is what an attempt leaves to the next; at most one of resend,
// base and check is set.
type carry struct {
	resend Request   // send again as it is (not landed, or refused unapplied)
	base   []Version // start from these, known without a read
	check  Request   // refused with 412: the next read confirms it did not land
	raced  bool      // the attempt lost a race
}

// Options are a delivery's optional parts.
type Options struct {
	// Start is the base of the first attempt of a Based write (a cached
	// copy, the version a batch wrote); nil: read.
	Start []Version
	// Fence is the fencing token the write carries, when Fenced.
	Fence  int64
	Fenced bool
	// Flight follows a group-commit batch; nil: none.
	Flight Flight
	// Made is how many attempts of the write were made before this
	// delivery (a run in a batch of transactions): they count toward the
	// policy's MaxAttempts, and the first attempt is Made+1.
	Made int
}

// New returns the delivery of a write of keys named op (the operation, in
// errors and telemetry), in mode, built by plan. A SelfReading plan names
// its keys as it reads them (SetKeys).
func New(env *Env, op string, mode Mode, keys []string, plan Plan, o Options) *Delivery {
	d := &Delivery{env: env, op: op, keys: keys, mode: mode, plan: plan, flight: o.Flight, fence: o.Fence, fenced: o.Fenced, made: o.Made}
	d.implied.Implier = env.Implier
	if d.flight == nil {
		d.flight = ungrouped{}
	}
	if !o.Fenced { // a fenced write checks its token against a version read now
		d.then.base = o.Start
	}
	return d
}

// ungrouped is the flight of a write with no group behind it.
type ungrouped struct{}

func (ungrouped) Hold() bool { return true }
func (ungrouped) Release()   {}

// TakeTurns marks d as a read-modify-write, built again over whatever
// version is current: after a lost race on a key whose writers take
// turns, it may wait for its turn (Contention). A write pinned to a
// version it holds does not: its lost race is final.
func (d *Delivery) TakeTurns() { d.rmw = true }

// SetKeys names the keys of a SelfReading write, as its plan reads them.
func (d *Delivery) SetKeys(keys []string) { d.keys = keys }

// Fence is the fencing token the write carries (0: none).
func (d *Delivery) Fence() int64 { return d.fence }

// Attempts is the number of the attempt being built.
func (d *Delivery) Attempts() int { return d.res.Attempts }

// Run delivers the write under the retry policy. A write whose answer was
// lost and never settled ends as an *driver.OutcomeUnknownError; every
// other failure is returned as the attempt that ended the loop reported
// it. The Result is filled on failure too (attempts, race, held ETag).
func (d *Delivery) Run(ctx context.Context) (Result, error) {
	res, err := d.run(ctx)
	if d.env.Reentry != nil {
		d.env.Reentry.NoteWritten(d.op, d.keys, res, err) // a write from inside user code of its key (internal/reentry)
	}
	return res, err
}

func (d *Delivery) run(ctx context.Context) (Result, error) {
	if d.fenced && d.fence <= 0 { // refused before anything is read or sent
		return d.res, driver.Errorf(driver.ErrInvalidInput, "%s %q: fencing token %d: tokens are positive", d.op, d.name(), d.fence)
	}
	warm := 0
	if d.mode != Blind && len(d.keys) > 0 {
		warm = d.env.Heat.Warmth(d.name())
	}
	var backoff func(limit, took, waited time.Duration) time.Duration
	if d.env.Contention != nil && d.mode != Blind {
		d.part = d.env.Contention.Enter(d.env, d.mode, d.rmw)
		backoff = d.backoff
	}
	attempts := 0  // until the loop ends: a plan that panics leaves none
	defer func() { // also when user code inside the plan panics
		if d.part != nil {
			d.part.Leave(d.name(), attempts)
		}
	}()
	loop := retry.Loop{Policy: d.env.Policy, Clock: d.env.Clock, Hooks: d.env.Hooks, Op: d.op, Made: d.made, Warm: warm, Shrink: backoff}
	attempts, err := loop.Run(ctx, d.attempt)
	if d.mode != Blind && len(d.keys) > 0 {
		d.env.Heat.Learn(d.name(), attempts, d.env.Clock)
	}
	d.res.Attempts = attempts
	d.res.Raced = d.then.raced
	switch {
	case err == nil:
		return d.res, nil
	case d.unsettled != nil && !errors.Is(err, driver.ErrOutcomeUnknown):
		return d.res, d.unknown(request.JoinLine(d.unsettled, err))
	case d.then.raced && !errors.Is(err, driver.ErrConflict) && (errors.Is(err, driver.ErrExists) || errors.Is(err, driver.ErrNotFound)):
		// Out of time after a lost race whose last refusal was a create
		// beaten to it, or a document deleted under it: the write lost
		// its races, which is a conflict, whatever the last one was.
		last := strings.TrimPrefix(driver.SentinelOf(err).Error(), "etagstore: ")
		return d.res, driver.Errorf(driver.ErrConflict, "%s %q lost every race, the last refused as %s", d.op, d.name(), last)
	}
	return d.res, err
}

// rerun ends an attempt of a SelfReading write whose reads changed (err
// matches ErrStale): the plan runs again after a pause, as after a lost
// race.
func (d *Delivery) rerun(err error) (retry.Next, error) {
	d.then = carry{raced: true}
	d.answered(Answer{Raced: true})
	if !errors.Is(err, driver.ErrConflict) {
		err = driver.Errorf(driver.ErrConflict, "%s %q: %v", d.op, d.name(), err)
	}
	return retry.AfterLoss, err
}

// backoff is the cap of the pause after a lost race, as the write's
// Contender says (Contender.Backoff).
func (d *Delivery) backoff(limit, took, waited time.Duration) time.Duration {
	if c := d.contender(); c != nil {
		return c.Backoff(d.name(), limit, took, waited)
	}
	return limit
}

// name is the key that names the write in errors and logs.
func (d *Delivery) name() string {
	if len(d.keys) == 0 {
		return ""
	}
	return d.keys[0]
}

func (d *Delivery) unknown(cause error) error {
	return &driver.OutcomeUnknownError{Op: d.op, Key: d.name(), Cause: cause}
}

// attempt is one step of the retry loop.
func (d *Delivery) attempt(ctx context.Context, n int) (retry.Next, error) {
	d.res.Attempts = n
	c := d.then
	d.then = carry{}
	if c.raced {
		d.env.Hooks.Conflict(ctx)
	}
	if c.resend != nil && (d.unsettled != nil || d.held(c.resend)) {
		return d.send(ctx, c.resend, true)
	}
	base, err := d.base(ctx, c.base)
	if err != nil {
		return retry.Stop, err
	}
	if c.check != nil && d.foundLanded(c.check, base) {
		return retry.Stop, nil
	}
	if base, err = d.admitted(ctx, base, c.base == nil); errors.Is(err, ErrDisplaced) {
		d.then = carry{raced: true} // an older write of the Store waits for the key
		return retry.AfterLoss, driver.Errorf(driver.ErrConflict, "%s %q: %v", d.op, d.name(), err)
	} else if err != nil {
		return retry.Stop, err
	}
	req, err := d.plan.Build(d, base)
	if d.outcome = nil; err != nil {
		if end, ok := request.CheckedEnd(err); ok && req.ChecksOnly() {
			d.outcome, err = end, nil // the end of the write once its checks hold
		}
	}
	if errors.Is(err, ErrStale) && d.mode == SelfReading {
		return d.rerun(err)
	}
	if err != nil {
		return retry.Stop, err
	}
	if len(req) == 0 {
		return d.confirm(ctx, base)
	}
	return d.dispatch(ctx, req, base)
}

// dispatch sends req, built over base, unless ctx is done or a member of
// the batch behind it has left (then it is built again). The write's
// Contender may pause it first, and mark it (Contender.Dispatch).
func (d *Delivery) dispatch(ctx context.Context, req Request, base []Version) (retry.Next, error) {
	if err := ctx.Err(); err != nil {
		return retry.Stop, err // nothing sent; Run reports an unsettled earlier request
	}
	if c := d.contender(); c != nil {
		var err error
		if req, err = c.Dispatch(ctx, d.name(), req, !request.Verified(base)); err != nil {
			return retry.Stop, err // nothing sent, as above
		}
	}
	if !d.held(req) {
		d.then.base = base // a member left the batch: apply again without it
		return retry.Redo, nil
	}
	return d.send(ctx, req, request.Verified(base))
}

// held reports whether req may be sent: a request of checks alone holds
// no member's changes, so the flight is not asked (see Flight).
func (d *Delivery) held(req Request) bool {
	return req.ChecksOnly() || d.flight.Hold()
}

// base returns the versions an attempt starts from: none unless Based,
// the known ones, or a read.
func (d *Delivery) base(ctx context.Context, known []Version) ([]Version, error) {
	switch {
	case d.mode != Based:
		return nil, nil
	case known != nil:
		return known, nil
	}
	return d.read(ctx, d.keys)
}

// read reads keys.
func (d *Delivery) read(ctx context.Context, keys []string) ([]Version, error) {
	vs := make([]Version, len(keys))
	for i, key := range keys {
		v, err := d.env.Hooks.Read(ctx, key)
		if err != nil {
			return nil, err
		}
		vs[i] = v
	}
	return vs, nil
}

// foundLanded reports whether req, refused with 412, is found in base
// after all: the refusal answered a retry, below the Store, of req itself
// after its answer was lost. (A backend that sees such a retry marks the
// refusal driver.ErrAmbiguous and the engine settles it; this is the
// defence for one that cannot see it.)
func (d *Delivery) foundLanded(req Request, base []Version) bool {
	if len(base) != len(req) || !request.Verified(base) {
		return false
	}
	if request.Resolve(req, base) == outcome.Committed {
		d.res.Out, d.res.Sent = request.FoundIn(req, base), req
		return true
	}
	return false
}

// admitted is the base an attempt builds on: base, read (or not), once
// admitted; or the version the write's Contender hands it
// (Contender.Await), admitted too.
func (d *Delivery) admitted(ctx context.Context, base []Version, read bool) ([]Version, error) {
	c := d.contender()
	if err := d.admit(base); err != nil || c == nil {
		return base, err
	}
	base, err := c.Await(ctx, d, base, read)
	if err != nil {
		return nil, err
	}
	return base, d.admit(base) // a version handed over is admitted too
}

// admit refuses a write over a version that a newer fencing token holds.
func (d *Delivery) admit(base []Version) error {
	if !d.fenced {
		return nil
	}
	for i, b := range base {
		if err := request.CheckFence(b.Key, b.Meta, d.fence); err != nil {
			return d.nameAction(i, err)
		}
	}
	return nil
}

// nameAction wraps err in a *driver.ActionError when the write has several
// keys.
func (d *Delivery) nameAction(i int, err error) error {
	if len(d.keys) == 1 {
		return err
	}
	return &driver.ActionError{Index: i, Err: err}
}

// confirm ends an attempt that has nothing to write. Versions not read
// during this call are confirmed by a read first; if they moved on, the
// change is built again over the new ones.
func (d *Delivery) confirm(ctx context.Context, base []Version) (retry.Next, error) {
	if !request.Verified(base) {
		cur, err := d.read(ctx, d.keys)
		if err != nil {
			return retry.Stop, err
		}
		for i := range cur {
			if cur[i].Exists != base[i].Exists || cur[i].ETag != base[i].ETag {
				d.then.base = cur // moved on: build over the current versions
				return retry.Redo, nil
			}
		}
	}
	d.res.Out = make([]driver.Item, len(base))
	for i, b := range base {
		d.res.Out[i] = b.Item
	}
	d.res.Sent = nil
	return retry.Stop, nil
}

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
// a throttled one is (send.go). An attempt up to its send is
// attempt.go's; what it leaves to the next is one value, a carry.
// The retry loop (internal/retry) decides when the next attempt runs;
// contention heat (internal/heat) where its backoff starts. A Store's
// Contention (contention.go; internal/turns, the hot-key hand-over) is
// called at three points of an attempt: before it builds, before it
// sends, after the answer. Its Implier (internal/imply: index entries)
// adds to each request what it implies, committed with it.
//
// The engine is untyped: it sees keys, bytes, ETags, bookkeeping and
// conditions, never the document type. It never reaches into its caller:
// the caller hands it a Plan, an Env (the backend and the hooks through
// which reads are made and events reported) and a Mode, and acts on the
// Result it returns.
package engine

import (
	"context"
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
	keys   []string
	key    string // keys[0], which names the write in errors and logs ("": no keys yet)
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

	rmw     bool       // a read-modify-write (Options.TakeTurns)
	part    Contender  // its part in the Store's Contention; nil: none
	lost    bool       // its Contender heard of a lost race (answered): Await is asked
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
	// TakeTurns marks a read-modify-write, built again over whatever
	// version is current: after a lost race on a key whose writers take
	// turns, it may wait for its turn (Contention). A write pinned to a
	// version it holds does not: its lost race is final.
	TakeTurns bool
	// Made is how many attempts of the write were made before this
	// delivery (a run in a batch of transactions): they count toward the
	// policy's MaxAttempts, and the first attempt is Made+1.
	Made int
	// Implier is the delivery's, instead of its Env's: a transaction's,
	// whose writes may be of several Stores (index.Mixed).
	Implier Implier
}

// New returns the delivery of a write of keys named op (the operation, in
// errors and telemetry), in mode, built by plan. A SelfReading plan names
// its keys as it reads them (SetKeys).
func New(env *Env, op string, mode Mode, keys []string, plan Plan, o Options) *Delivery {
	d := &Delivery{env: env, op: op, keys: keys, mode: mode, plan: plan, flight: o.Flight, fence: o.Fence, fenced: o.Fenced, made: o.Made, rmw: o.TakeTurns}
	if len(keys) > 0 {
		d.key = keys[0]
	}
	d.implied.Implier = env.Implier
	if o.Implier != nil {
		d.implied.Implier = o.Implier
	}
	if !o.Fenced { // a fenced write checks its token against a version read now
		d.then.base = o.Start
	}
	return d
}

// SetKeys names the keys of a SelfReading write, as its plan reads them.
func (d *Delivery) SetKeys(keys []string) {
	d.keys, d.key = keys, ""
	if len(keys) > 0 {
		d.key = keys[0]
	}
}

// PendingOf is what d's Implier tells, sending no write, of req's writes
// that take what another holds (Pending; nil when it tells none; wary: read,
// not predicted), with what it reads kept in d's memo for the send.
func PendingOf[E error](ctx context.Context, d *Delivery, req Request, wary bool) map[string]E {
	return imply.PendingOf[E](ctx, &d.implied, req, wary)
}

// Fence is the fencing token the write carries (0: none).
func (d *Delivery) Fence() int64 { return d.fence }

// Attempts is the number of the attempt being built.
func (d *Delivery) Attempts() int { return d.res.Attempts }

// Run delivers the write under the retry policy. A write whose answer was
// lost and never settled ends as an *driver.OutcomeUnknownError, one out
// of time after losing its races as ErrConflict (request.End); every
// other failure is returned as the attempt that ended the loop reported
// it. The Result is filled on failure too (attempts, race, held ETag).
//
// As it ends, the Env's Reentry hears what it wrote (a write from inside
// user code of its key: internal/reentry).
func (d *Delivery) Run(ctx context.Context) (Result, error) {
	if d.fenced && d.fence <= 0 { // refused before anything is read or sent (nothing for the Reentry to hear)
		return d.res, driver.Errorf(driver.ErrInvalidInput, "%s %q: fencing token %d: tokens are positive", d.op, d.key, d.fence)
	}
	warm := 0
	if d.mode != Blind && len(d.keys) > 0 {
		warm = d.env.Heat.Warmth(d.key)
	}
	var backoff func(limit, took, waited time.Duration) time.Duration
	if d.env.Contention != nil && d.mode != Blind {
		d.part = d.env.Contention.Enter(d.env, d.mode, d.rmw)
		backoff = d.backoff
	}
	attempts := 0  // until the loop ends: a plan that panics leaves none
	defer func() { // also when user code inside the plan panics
		if d.part != nil {
			d.part.Leave(d.key, attempts)
		}
	}()
	loop := retry.Loop{Policy: d.env.Policy, Clock: d.env.Clock, Hooks: d.env.Hooks, Op: d.op, Made: d.made, Warm: warm, Shrink: backoff}
	attempts, err := loop.Run(ctx, d.attempt)
	if d.mode != Blind && len(d.keys) > 0 {
		d.env.Heat.Learn(d.key, attempts, d.env.Clock)
	}
	d.res.Attempts = attempts
	d.res.Raced = d.then.raced
	err = request.End(d.op, d.key, err, d.unsettled, d.then.raced)
	if d.env.Reentry != nil {
		d.env.Reentry.NoteWritten(d.op, d.keys, d.res, err)
	}
	return d.res, err
}

func (d *Delivery) unknown(cause error) error {
	return &driver.OutcomeUnknownError{Op: d.op, Key: d.key, Cause: cause}
}

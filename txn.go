package etagstore

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"time"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/engine"
	"github.com/etagstore/etagstore/internal/outcome"
	"github.com/etagstore/etagstore/internal/telemetry"
)

// This file is the transaction shared by Stores of several document types
// (Txn, Transact, Store.In); transact.go is its typed view (Tx[T]) and
// Store.Transact, a transaction of one Store.

// Txn is one transaction over one or more Stores whose backends commit
// together (see Transact). Each Store reads and writes in it through its
// typed view, s.In(tx). It is valid during fn and, like fn, not safe for
// concurrent use; after a commit, s.In(tx).ETag(key) reports the new ETag
// of each document written.
type Txn struct {
	base  context.Context // the caller's
	ctx   context.Context // fn's reads': the caller's, under the span once begun
	lead  *core           // the Store whose backend commits: the first used
	span  *telemetry.Span // of a package-level Transact, begun at first use
	env   *engine.Env     // of a package-level Transact, filled in at first use
	views map[*core]txView
	order []touch // every key touched, in order, by its view
	owner map[string]*core
	err   error // sticky for the attempt: a Store that cannot join
	done  bool  // committed: nothing more may be read or written
	// copies: the attempt may start from the versions the Stores' caches
	// hold, as an Update does; the commit checks each by its ETag. Only
	// the first attempt of an unfenced transaction (a fence is checked
	// against versions read): after a refusal, or a run of fn on a torn
	// view, every key is read.
	copies  bool
	made    int // runs of fn made before (in a batch of transactions): they count as attempts
	attempt int // the engine's attempt that runs fn
}

// touch is a key a view touched.
type touch struct {
	view txView
	key  string
}

// txView is a Store's typed view of a Txn (a *Tx[T]), as the Txn uses it.
type txView interface {
	core() *core
	// action is key's part of the commit: its write, or a check of the
	// version read; written says it is a write.
	action(d *engine.Delivery, key string) (w engine.KeyWrite, written bool)
	read(key string) version
	wasRead(key string) bool // false for a key only upserted
	// committed records the version it made of key.
	committed(key string, it driver.Item)
}

// Transact runs fn, which reads and writes documents of any types through
// the typed views of tx (s.In(tx) for each Store s), and commits every
// write fn made, over all of them, in one atomic, conditional request. It
// is Store.Transact for several Stores, with the same rules (see there):
// serializable (on tables, keys found missing and not written excepted),
// fn run again on a conflict and on its own ErrConflict, an error of fn
// returned only when its reads were current together.
//
// The Stores must commit together: Stores over one backend, or over
// backends that declare the same driver.Abilities.CommitScope (tables: two
// tablestore Backends over one *aztables.Client, with the same
// Options.Partition). The first Store fn uses leads: it commits, and (on
// the first attempt) its telemetry records the transaction
// (etagstore.Transact). A Store that cannot join it
// (another table or partition) fails at its first use in fn with
// ErrInvalidInput, and a backend that cannot commit atomically (blobs)
// with errors.ErrUnsupported; either way Transact fails with that error
// and nothing is written. One key is written through one Store. The
// retry policy and clock are the defaults (RetryPolicy's), bounded by
// ctx; Store.Transact uses its Store's.
func Transact(ctx context.Context, fn func(tx *Txn) error) error {
	t := &Txn{base: ctx, ctx: ctx}
	t.env = &engine.Env{Policy: engine.Policy(defaultRetryPolicy), Clock: systemClock{}, Heat: &engine.Heat{}, Hooks: quietHooks{}}
	defer func() {
		if t.span != nil {
			t.span.EndOnPanic()
		}
	}()
	res, err := t.deliver(txnCtx{ctx, t}, fn, nil)
	if t.span != nil {
		t.span.Stats.Attempts = res.Attempts
		t.span.Stats.Batch = len(res.Out)
		t.span.End(err)
	}
	return err
}

// In returns s's typed view of tx: its Get, Put, Delete and ETag read and
// write s's documents in tx. The first use checks that s can commit with
// the Stores tx already holds.
func (s *Store[T]) In(tx *Txn) *Tx[T] {
	if v, ok := tx.views[&s.core]; ok {
		return v.(*Tx[T])
	}
	v := &Tx[T]{s: s, txn: tx, reads: map[string]version{}, writes: map[string]txWrite[T]{}}
	if tx.views == nil {
		tx.views = map[*core]txView{}
	}
	tx.views[&s.core] = v
	return v
}

// deliver runs the transaction's attempts through the engine, each a run
// of fn, and records what the commit made in the views. flight follows a
// batch of transactions (txgroup.go); nil: none.
func (t *Txn) deliver(ctx context.Context, fn func(tx *Txn) error, flight engine.Flight) (engine.Result, error) {
	_, fenced := FenceFrom(ctx)
	p := engine.PlanFunc(func(d *engine.Delivery, _ []version) (request, error) {
		t.reset()
		t.attempt = d.Attempts()
		t.copies = t.attempt == 1 && !fenced // not after a batch's runs (made): they left it on a stale or torn view
		err := t.runOwn(fn)
		d.SetKeys(t.keys()) // also for an error's text
		var self *engine.SelfWriteError
		switch {
		case errors.As(err, &self):
			return nil, err // fn wrote a key of its own outside tx: no run can win
		case err == nil:
			return t.request(d)
		case t.err != nil || errors.Is(err, engine.ErrStale):
			return nil, err
		}
		return t.failed(err)
	})
	fence, _ := FenceFrom(ctx)
	res, err := engine.New(t.engineEnv(), telemetry.OpTransact.String(), engine.SelfReading, nil, p,
		engine.Options{Fence: fence, Fenced: fenced, Flight: flight, Made: t.made}).Run(ctx)
	t.noteOthers(res, err)
	t.done = true // committed or failed: the views read and write no more
	if err != nil {
		return res, err
	}
	for i, tc := range t.order {
		if i < len(res.Out) {
			tc.view.committed(tc.key, res.Out[i])
		}
	}
	if len(res.Sent) > 0 && t.lead != nil {
		t.lead.obs.Committed(ctx, len(res.Out))
	}
	return res, nil
}

// noteOthers tells the Stores of the transaction other than its lead
// (whose engine environment the delivery told) what its commit wrote: a
// write from inside a mutate of one of their keys (engine.Reentry).
func (t *Txn) noteOthers(res engine.Result, err error) {
	var told []*core
	for _, tc := range t.order {
		c := tc.view.core()
		if c == t.lead || slices.Contains(told, c) {
			continue
		}
		told = append(told, c)
		c.env.Reentry.NoteWritten(telemetry.OpTransact.String(), t.keys(), res, err)
	}
}

// engineEnv is what the transaction is delivered with: a package-level
// Transact's own, otherwise its Store's.
func (t *Txn) engineEnv() *engine.Env {
	if t.env != nil {
		return t.env
	}
	return t.lead.env
}

// keys are the keys touched, in order.
func (t *Txn) keys() []string {
	keys := make([]string, len(t.order))
	for i, tc := range t.order {
		keys[i] = tc.key
	}
	return keys
}

func (t *Txn) reset() {
	t.views, t.order, t.owner, t.err = nil, nil, map[string]*core{}, nil
	if t.env != nil {
		t.lead = nil // a package-level Transact's: the first Store this attempt uses
	}
}

// join admits c's first touch of key: c must commit with the lead (the
// first Store used, which it becomes if there is none), and key must be
// no other Store's in this transaction. A refusal fails the attempt,
// whatever fn does with it.
func (t *Txn) join(c *core, key string) error {
	switch {
	case t.err != nil:
		return t.err
	case t.done:
		return errorf(ErrInvalidInput, "Transact: the transaction has ended")
	case c.abilities.Commit == nil:
		t.err = errorf(errors.ErrUnsupported, "Transact: %s cannot commit several documents atomically", backendName(c.b))
	case t.lead == nil:
		t.begin(c)
	case !commitTogether(t.lead, c):
		t.err = errorf(ErrInvalidInput, "Transact: %s cannot commit together with the %s the transaction began with (another table, partition or backend)", backendName(c.b), backendName(t.lead.b))
	}
	if o, ok := t.owner[key]; t.err == nil && ok && o != c {
		t.err = errorf(ErrInvalidInput, "Transact: %q is used by two Stores in one transaction", key)
	}
	if t.err != nil {
		return t.err
	}
	t.owner[key] = c
	return nil
}

// begin makes c, the first Store an attempt of a package-level Transact
// uses, its lead: c's backend commits. The first attempt's lead's
// telemetry records the whole transaction.
func (t *Txn) begin(c *core) {
	t.lead = c
	if t.span == nil {
		ctx, sp := c.obs.Begin(t.base, telemetry.OpTransact, "")
		t.ctx, t.span = ctx, &sp
	}
	t.env.Backend, t.env.Commit, t.env.KeepIDs, t.env.Heat, t.env.Hooks, t.env.Reentry, t.env.Contention = c.b, c.abilities.Commit, c.keepIDs, &c.heat, hooks{c}, c.env.Reentry, c.env.Contention
}

// commitTogether reports whether the backends of a and b commit together:
// one backend, or the same declared CommitScope.
func commitTogether(a, b *core) bool {
	if a == b || a.abilities.CommitScope != "" && a.abilities.CommitScope == b.abilities.CommitScope {
		return true
	}
	x, y := reflect.ValueOf(a.b), reflect.ValueOf(b.b) // one backend: equal values (a wrapper's too)
	return x.Type() == y.Type() && x.Comparable() && y.Comparable() && x.Equal(y)
}

// run runs fn on t. A Store that could not join fails the attempt,
// whatever fn returned (t.err). An error matching ErrConflict runs fn
// again, within the policy (engine.Rerun). Any other error of fn is
// returned as is: it counts only when the reads fn saw were current
// together (failed). A panic of fn goes on up only when they were:
// they are checked first, and if one changed fn acted on a torn view and
// runs again (engine.ErrStale).
func (t *Txn) run(fn func(tx *Txn) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			if errors.Is(t.revalidate(), engine.ErrStale) {
				err = engine.ErrStale // a panic on a torn view: run again
				return
			}
			panic(p)
		}
	}()
	err = fn(t)
	switch {
	case t.err != nil:
		return t.err
	case errors.Is(err, ErrConflict):
		return engine.Rerun(err)
	}
	return err
}

// runOwn is run of fn inside the Reentry of the transaction's Store, when
// it has one from the start (Store.Transact): a write fn makes outside tx,
// through that Store, of a key the transaction touches would beat every
// commit, so it fails the transaction at once (a *engine.SelfWriteError,
// ErrInvalidInput), the write landed once.
func (t *Txn) runOwn(fn func(tx *Txn) error) error {
	if t.lead == nil {
		return t.run(fn)
	}
	return t.lead.env.Reentry.RunAny(telemetry.OpTransact.String(), func() error { return t.run(fn) }, t.keys)
}

// failed is the attempt's end when fn returned err, an error of its own:
// err, once the reads fn made are found current together (engine.ErrStale
// when one changed: fn runs again). On a backend with PureChecks the
// engine sends their checks first, as it sends a commit
// (engine.Checked).
func (t *Txn) failed(err error) (request, error) {
	checks, stale := t.verify(nil)
	switch {
	case stale != nil:
		return nil, stale
	case len(checks) > 0:
		return checks, engine.Checked(err)
	}
	return nil, err
}

// request is the commit: every key touched, in order — its write, or a
// check of the version read. A transaction that writes nothing has
// nothing to write: its reads are checked instead (verify), by a request
// of checks alone, which the engine sends, or by reading them again.
func (t *Txn) request(d *engine.Delivery) (request, error) {
	_, fenced := FenceFrom(t.ctx)
	req := make(request, 0, len(t.order))
	writes := 0
	for _, tc := range t.order {
		if fenced && tc.view.wasRead(tc.key) {
			if err := engine.CheckFence(tc.key, tc.view.read(tc.key).Meta, d.Fence()); err != nil {
				return nil, err
			}
		}
		w, written := tc.view.action(d, tc.key)
		if written {
			writes++
		}
		req = append(req, w)
	}
	if writes == 0 {
		return t.verify(nil)
	}
	if chk := t.lead.abilities.CheckCommit; chk != nil {
		if err := chk(req.Actions()); err != nil {
			return nil, err
		}
	}
	return req, nil
}

// verify checks that every version read of the keys in only (nil: all)
// is still current. On a backend with PureChecks it returns the request
// that checks them, which writes nothing: sent, it holds only if all are
// current at that instant, absences included. Otherwise it reads every
// key again now (engine.ErrStale when one changed): a document whose ETag
// did not change was current throughout, but a key missing at both reads
// may have existed between them.
func (t *Txn) verify(only map[string]bool) (request, error) {
	var read []touch
	for _, tc := range t.order {
		if tc.view.wasRead(tc.key) && (only == nil || only[tc.key]) {
			read = append(read, tc)
		}
	}
	if len(read) == 0 {
		return nil, nil
	}
	if t.lead.abilities.PureChecks {
		checks := make(request, len(read))
		for i, tc := range read {
			checks[i] = engine.Check(tc.view.read(tc.key))
		}
		return checks, nil
	}
	for _, tc := range read {
		it, err := tc.view.core().b.Read(t.ctx, tc.key)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return nil, err
		}
		if b := tc.view.read(tc.key); b.Exists != (err == nil) || b.ETag != it.ETag {
			return nil, engine.ErrStale
		}
	}
	return nil, nil
}

// revalidate checks now that every read is still current (engine.ErrStale
// when one is not): outside the transaction's own delivery (a panic of
// fn, a batch member's fn that wrote nothing).
func (t *Txn) revalidate() error { return t.revalidateOnly(nil) }

// revalidateOnly is revalidate of the keys in only (nil: all). The checks
// of a backend with PureChecks go through the engine as a write of their
// own: sent again after a lost or throttled answer (they write nothing),
// within the policy, whose attempts count on from the transaction's.
func (t *Txn) revalidateOnly(only map[string]bool) error {
	checks, err := t.verify(only)
	if err != nil || len(checks) == 0 {
		return err
	}
	keys := make([]string, len(checks))
	for i, c := range checks {
		keys[i] = c.Key
	}
	send := engine.PlanFunc(func(*engine.Delivery, []version) (request, error) { return checks, nil })
	_, err = engine.New(t.engineEnv(), telemetry.OpTransact.String(), engine.Blind, keys, send,
		engine.Options{Made: max(t.attempt-1, 0)}).Run(t.ctx)
	if errors.Is(err, ErrConflict) || errors.Is(err, ErrExists) || errors.Is(err, ErrNotFound) {
		return engine.ErrStale
	}
	return err
}

// txnCtx is the context a package-level Transact runs the engine under:
// the caller's, whose values (the span, the request counter) are those of
// fn's reads once the first Store used has begun the span.
type txnCtx struct {
	context.Context
	t *Txn
}

func (c txnCtx) Value(key any) any { return c.t.ctx.Value(key) }

// quietHooks are the engine hooks of a package-level Transact before its
// first Store is used: nothing to report yet.
type quietHooks struct{}

func (quietHooks) Read(context.Context, string) (version, error) {
	return version{}, errors.New("etagstore: Transact read before any Store was used")
}
func (quietHooks) StaleCopy(string, ETag)                                      {}
func (quietHooks) Conflict(context.Context)                                    {}
func (quietHooks) Lost(context.Context, string, string, outcome.Verdict)       {}
func (quietHooks) Retrying(context.Context, string, int, time.Duration, error) {}
func (quietHooks) Attempted(context.Context, int, error, time.Duration)        {}

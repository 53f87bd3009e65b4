package etagstore

import (
	"context"
	"errors"
	"reflect"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/engine"
	"github.com/etagstore/etagstore/internal/telemetry"
)

// Txn is a transaction over Stores that commit together (see Transact).
// Each Store reads and writes in it through its typed view, s.In(tx). It
// is valid during fn and, like fn, not safe for concurrent use; after a
// commit, s.In(tx).ETag(key) reports the new ETag of each document
// written.
type Txn struct {
	st *txnState // one run of fn's: what it read and wrote
}

// txnState is what one run of a transaction's fn read and wrote, over
// every Store it used: one attempt's, or one batch member's (a fork of
// the batch's so far, txgroup.go).
type txnState struct {
	ctx   context.Context // fn's reads'
	lead  *core           // the Store whose backend commits: the first used
	views map[*core]txView
	order []touch // every key touched, in order, by its view
	owner map[string]*core
	made  map[string]driver.Item // after the commit: the version each write made
	err   error                  // sticky for the run: a Store that cannot join
	done  bool                   // committed, or the run is over: nothing more may be read or written
	// copies: the run may start from the versions the Stores' caches
	// hold, as an Update does; the commit checks each by its ETag. Only
	// the first attempt of an unfenced transaction (a fence is checked
	// against versions read): after a refusal, or a run of fn on a torn
	// view, every key is read.
	copies  bool
	attempt int                // the engine's attempt the run belongs to
	own     *ownTouches        // a batch member's own touches (nil outside a batch)
	ahead   map[string]version // versions a batch read ahead
	// first is called at the first use of a Store by a run whose lead is
	// not known yet (the first run of fn: transact.go); it may give the
	// Txn another state (a batch's fork). Nil once called.
	first func(c *core, key string, reads bool)
}

// touch is a key a view touched.
type touch struct {
	view txView
	key  string
}

// txView is a Store's part of a transaction (a *storeTx[T]), as the
// untyped transaction uses it.
type txView interface {
	core() *core
	// action is key's part of the commit: its write, or a check of the
	// version read; written says it is a write.
	action(d *engine.Delivery, key string) (w engine.KeyWrite, written bool)
	read(key string) version
	wasRead(key string) bool // false for a key only upserted or created unread
	unreadCreate(key string) (before int, ok bool)
	wrote(key string) bool
	// committed records the version the commit made of key; settled the
	// one a batch member is told of (txgroup.go).
	committed(key string, it driver.Item)
	settled(key string, it driver.Item)
	fork() txView // a copy for a batch member's fn
}

// use runs the first-use hook of t's run, if any, for c and key (reads:
// the use reads key): afterwards t's state may be another (the hook has
// made t a batch member's fork).
func (t *Txn) use(c *core, key string, reads bool) {
	if f := t.st.first; f != nil {
		t.st.first = nil
		f(c, key, reads)
	}
}

// keys are the keys touched, in order.
func (st *txnState) keys() []string {
	keys := make([]string, len(st.order))
	for i, tc := range st.order {
		keys[i] = tc.key
	}
	return keys
}

// ownKeys are the keys the run touched itself: a batch member's own,
// otherwise all.
func (st *txnState) ownKeys() []string {
	if st.own != nil {
		return st.own.keys
	}
	return st.keys()
}

// open refuses a write after the run.
func (st *txnState) open() error {
	if st.done {
		return errorf(ErrInvalidInput, "Transact: the transaction has ended")
	}
	return nil
}

// readNow reads key through h; in a batch, its slot's timer does not
// count the read.
func (st *txnState) readNow(h hooks, key string) (version, error) {
	st.own.reading(true)
	defer st.own.reading(false)
	return h.Read(st.ctx, key)
}

// join admits c's first touch of key: c must commit with the lead (the
// first Store used, which it becomes if there is none), and key must be
// no other Store's in this transaction. A refusal fails the run, whatever
// fn does with it.
func (st *txnState) join(c *core, key string) error {
	switch {
	case st.err != nil:
		return st.err
	case st.done:
		return errorf(ErrInvalidInput, "Transact: the transaction has ended")
	case c.abilities.Commit == nil:
		st.err = errorf(errors.ErrUnsupported, "Transact: %s cannot commit several documents atomically", backendName(c.b))
	case st.lead == nil:
		st.lead = c
	case !commitTogether(st.lead, c):
		st.err = errorf(ErrInvalidInput, "Transact: %s cannot commit together with the %s the transaction began with (another table, partition or backend)", backendName(c.b), backendName(st.lead.b))
	}
	if o, ok := st.owner[key]; st.err == nil && ok && o != c {
		st.err = errorf(ErrInvalidInput, "Transact: %q is used by two Stores in one transaction", key)
		if st.own != nil && !st.own.seen[key] {
			st.err = errOtherStore // an earlier member's, in a batch: this one goes in the next
		}
	}
	if st.err != nil {
		return st.err
	}
	st.owner[key] = c
	return nil
}

// errOtherStore fails a batch member's run that uses a key an earlier
// member of the batch uses through another Store: the member goes in the
// next batch (txgroup.go), as it would commit on its own.
var errOtherStore = errors.New("etagstore: a key of the batch is another Store's")

// commitTogether reports whether the backends of a and b commit together:
// one backend, or the same declared CommitScope.
func commitTogether(a, b *core) bool {
	if a == b || a.abilities.CommitScope != "" && a.abilities.CommitScope == b.abilities.CommitScope {
		return true
	}
	x, y := reflect.ValueOf(a.b), reflect.ValueOf(b.b) // one backend: equal values (a wrapper's too)
	return x.Type() == y.Type() && x.Comparable() && y.Comparable() && x.Equal(y)
}

// fnRun is how one run of fn ended.
type fnRun struct {
	err      error
	panicked bool
	p        any   // the panic's value
	self     error // fn wrote one of the transaction's keys outside it (*reentry.SelfWriteError)
}

// runFn runs fn on t, inside the Reentry of in (a write fn makes outside
// tx, through that Store, of a key the transaction touches would beat
// every commit: it fails the transaction at once), unless in is nil: the
// Store leading the transaction, when known as the run starts.
func runFn(fn func(*Txn) error, t *Txn, in *core) (r fnRun) {
	call := func() error {
		r.panicked = true
		defer func() {
			if r.panicked {
				r.p = recover()
			}
		}()
		r.err = fn(t)
		r.panicked = false
		return nil
	}
	if in != nil {
		r.self = in.reentry.RunAny(telemetry.OpTransact.String(), call, func() []string { return t.st.ownKeys() })
	} else {
		call()
	}
	return r
}

// outcome is what a run of fn that ended as r makes of the attempt, as
// the engine is told. A Store that could not join fails the attempt,
// whatever fn returned (err). An error matching ErrConflict runs fn again,
// within the policy (engine.Rerun). Any other error of fn is returned as
// is: it counts only when the reads fn saw were current together
// (failed). A panic of fn goes on up only when they were: they are
// checked first, and if one changed fn acted on a torn view and runs again
// (engine.ErrStale).
func (st *txnState) outcome(r fnRun, env *engine.Env) error {
	switch {
	case r.self != nil:
		return r.self
	case r.panicked:
		if errors.Is(st.revalidate(env, nil), engine.ErrStale) {
			return engine.ErrStale // a panic on a torn view: run again
		}
		panic(r.p)
	case st.err != nil:
		return st.err
	case errors.Is(r.err, ErrConflict):
		return engine.Rerun(r.err)
	}
	return r.err
}

// failed is the attempt's end when fn returned err, an error of its own:
// err, once the reads fn made are found current together (engine.ErrStale
// when one changed: fn runs again). On a backend with PureChecks the
// engine sends their checks first, as it sends a commit
// (engine.Checked).
func (st *txnState) failed(err error) (request, error) {
	checks, stale := st.verify(nil)
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
// CheckCommit is the batch's, once per request (txgroup.go), or here.
func (st *txnState) request(d *engine.Delivery, checked bool) (request, error) {
	_, fenced := FenceFrom(st.ctx)
	req := make(request, 0, len(st.order))
	writes := 0
	for _, tc := range st.order {
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
		return st.verify(nil)
	}
	if chk := st.lead.abilities.CheckCommit; chk != nil && !checked {
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
func (st *txnState) verify(only map[string]bool) (request, error) {
	var read []touch
	for _, tc := range st.order {
		if tc.view.wasRead(tc.key) && (only == nil || only[tc.key]) {
			read = append(read, tc)
		}
	}
	if len(read) == 0 {
		return nil, nil
	}
	if st.lead.abilities.PureChecks {
		checks := make(request, len(read))
		for i, tc := range read {
			checks[i] = engine.Check(tc.view.read(tc.key))
		}
		return checks, nil
	}
	for _, tc := range read {
		it, err := tc.view.core().b.Read(st.ctx, tc.key)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return nil, err
		}
		if b := tc.view.read(tc.key); b.Exists != (err == nil) || b.ETag != it.ETag {
			return nil, engine.ErrStale
		}
	}
	return nil, nil
}

// revalidate checks now that every read of the keys in only (nil: all)
// is still current (engine.ErrStale when one is not): outside the
// transaction's own delivery (a panic of fn, a batch member's fn that
// wrote nothing, a Create refused). The checks of a backend with
// PureChecks go through the engine as a write of their own: sent again
// after a lost or throttled answer (they write nothing), within the
// policy, whose attempts count on from the transaction's.
func (st *txnState) revalidate(env *engine.Env, only map[string]bool) error {
	if st.lead == nil {
		return nil // nothing read
	}
	checks, err := st.verify(only)
	if err != nil || len(checks) == 0 {
		return err
	}
	keys := make([]string, len(checks))
	for i, c := range checks {
		keys[i] = c.Key
	}
	send := engine.PlanFunc(func(*engine.Delivery, []version) (request, error) { return checks, nil })
	_, err = engine.New(env, telemetry.OpTransact.String(), engine.Blind, keys, send,
		engine.Options{Made: max(st.attempt-1, 0)}).Run(st.ctx)
	if errors.Is(err, ErrConflict) || errors.Is(err, ErrExists) || errors.Is(err, ErrNotFound) {
		return engine.ErrStale
	}
	return err
}

// unreadRefused is the key of an unread Create (Tx.Create) whose commit
// err refused because the key exists ("" when err is no such refusal).
func (st *txnState) unreadRefused(err error) string {
	var ae *driver.ActionError
	if !errors.Is(err, ErrExists) {
		return ""
	}
	i := 0
	if errors.As(err, &ae) {
		i = ae.Index
	}
	if i < 0 || i >= len(st.order) {
		return ""
	}
	if _, ok := st.order[i].view.unreadCreate(st.order[i].key); !ok {
		return ""
	}
	return st.order[i].key
}

// readBefore is the keys fn had touched when it created key unread (in a
// batch, of its own): the reads its Create may depend on. A refusal of the
// Create (ErrExists) is fn's answer once they are found current; what fn
// read after it could not have changed it.
func (st *txnState) readBefore(key string) map[string]bool {
	only := map[string]bool{}
	c, ok := st.owner[key]
	if !ok {
		return only
	}
	n, _ := st.views[c].unreadCreate(key)
	keys := st.ownKeys()
	for _, k := range keys[:min(n, len(keys))] {
		only[k] = true
	}
	return only
}

// recordCommit records in the views what the commit res made of each key.
func (st *txnState) recordCommit(res engine.Result) {
	st.made = make(map[string]driver.Item, len(res.Out))
	for i, tc := range st.order {
		if i < len(res.Out) {
			tc.view.committed(tc.key, res.Out[i])
			st.made[tc.key] = res.Out[i]
		}
	}
}

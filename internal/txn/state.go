package txn

import (
	"context"
	"errors"
	"reflect"

	"github.com/etagstore/etagstore/driver"
)

// Handle is the root's Txn: it holds the state of fn's current run, which
// may change under it (a batch's fork, a new attempt).
type Handle struct {
	st *State
}

// State is what one run of a transaction's fn read and wrote, over
// every Store it used: one attempt's, or one batch member's (a fork of
// the batch's so far, group.go).
type State struct {
	ctx   context.Context // fn's reads'
	lead  Store           // the Store whose backend commits: the first used
	views map[Store]*View
	order []touch // every key touched, in order, by its view
	owner map[string]Store
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
	ahead   map[string]Version // versions a batch read ahead
	// first is called at the first use of a Store by a run whose lead is
	// not known yet (the first run of fn: call.go); it may give the
	// Handle another state (a batch's fork). Nil once called.
	first func(s Store, key string, reads bool)
}

// touch is a key a view touched.
type touch struct {
	view *View
	key  string
}

// use runs the first-use hook of h's run, if any, for s and key (reads:
// the use reads key): afterwards h's state may be another (the hook has
// made h a batch member's fork).
func (h *Handle) use(s Store, key string, reads bool) {
	if f := h.st.first; f != nil {
		h.st.first = nil
		f(s, key, reads)
	}
}

// keys are the keys touched, in order.
func (st *State) keys() []string {
	keys := make([]string, len(st.order))
	for i, tc := range st.order {
		keys[i] = tc.key
	}
	return keys
}

// ownKeys are the keys the run touched itself: a batch member's own,
// otherwise all.
func (st *State) ownKeys() []string {
	if st.own != nil {
		return st.own.keys
	}
	return st.keys()
}

// open refuses a write after the run.
func (st *State) open() error {
	if st.done {
		return driver.Errorf(driver.ErrInvalidInput, "Transact: the transaction has ended")
	}
	return nil
}

// readNow reads key through s; in a batch, its slot's timer does not
// count the read.
func (st *State) readNow(s Store, key string) (Version, error) {
	st.own.reading(true)
	defer st.own.reading(false)
	return s.Read(st.ctx, key)
}

// join admits s's first touch of key: s must commit with the lead (the
// first Store used, which it becomes if there is none), and key must be
// no other Store's in this transaction. A refusal fails the run, whatever
// fn does with it.
func (st *State) join(s Store, key string) error {
	switch {
	case st.err != nil:
		return st.err
	case st.done:
		return driver.Errorf(driver.ErrInvalidInput, "Transact: the transaction has ended")
	case s.Abilities().Commit == nil:
		st.err = driver.Errorf(errors.ErrUnsupported, "Transact: %s cannot commit several documents atomically", s.BackendName())
	case st.lead == nil:
		st.lead = s
	case !commitTogether(st.lead, s):
		st.err = driver.Errorf(driver.ErrInvalidInput, "Transact: %s cannot commit together with the %s the transaction began with (another table, partition or backend)", s.BackendName(), st.lead.BackendName())
	}
	if o, ok := st.owner[key]; st.err == nil && ok && o != s {
		st.err = driver.Errorf(driver.ErrInvalidInput, "Transact: %q is used by two Stores in one transaction", key)
		if st.own != nil && !st.own.seen[key] {
			st.err = errOtherStore // an earlier member's, in a batch: this one goes in the next
		}
	}
	if st.err != nil {
		return st.err
	}
	st.owner[key] = s
	return nil
}

// errOtherStore fails a batch member's run that uses a key an earlier
// member of the batch uses through another Store: the member goes in the
// next batch (group.go), as it would commit on its own.
var errOtherStore = errors.New("etagstore: a key of the batch is another Store's")

// commitTogether reports whether the backends of a and b commit together:
// one backend, or the same declared CommitScope.
func commitTogether(a, b Store) bool {
	if a == b || a.Abilities().CommitScope != "" && a.Abilities().CommitScope == b.Abilities().CommitScope {
		return true
	}
	x, y := reflect.ValueOf(unwrapped(a.Backend())), reflect.ValueOf(unwrapped(b.Backend())) // one backend: equal values (a wrapper's too)
	return x.Type() == y.Type() && x.Comparable() && y.Comparable() && x.Equal(y)
}

// unwrapped is the backend b wraps, if it says so (Unwrap: an outbox's
// Backend, internal/outbox), else b.
func unwrapped(b driver.Backend) driver.Backend {
	for {
		w, ok := b.(interface{ Unwrap() driver.Backend })
		if !ok {
			return b
		}
		b = w.Unwrap()
	}
}

// Touched are the keys the run has touched, in order (a batch member's:
// its own).
func (h *Handle) Touched() []string { return h.st.ownKeys() }

package etagstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/memstore"
)

// sentinels are the Store's sentinel errors: a failure matches exactly one.
var sentinels = []error{etagstore.ErrNotFound, etagstore.ErrStorageNotFound, etagstore.ErrExists, etagstore.ErrConflict,
	etagstore.ErrETagRequired, etagstore.ErrInvalidKey, etagstore.ErrTooLarge, etagstore.ErrInvalidInput,
	etagstore.ErrFenced, etagstore.ErrLocked, etagstore.ErrLockLost, etagstore.ErrOutcomeUnknown, etagstore.ErrUnavailable}

// wantOnly fails t unless err matches want and no other sentinel, in a
// text that says "etagstore:" once.
func wantOnly(t *testing.T, what string, err, want error) {
	t.Helper()
	var matched []error
	for _, s := range sentinels {
		if errors.Is(err, s) {
			matched = append(matched, s)
		}
	}
	if len(matched) != 1 || matched[0] != want {
		t.Errorf("%s = %v, matching %v; want %v alone", what, err, matched, want)
	}
	if err != nil && strings.Count(err.Error(), "etagstore:") != 1 {
		t.Errorf("%s: %q repeats its prefix", what, err)
	}
}

// move is a transaction moving 1 from a to b of two counters whose sum
// is 10.
func move(tx *etagstore.Tx[counter]) error {
	a, err := tx.Get("a")
	if err != nil {
		return err
	}
	b, err := tx.Get("b")
	if err != nil {
		return err
	}
	a.N, b.N = a.N-1, b.N+1
	return errors.Join(tx.Put("a", a), tx.Put("b", b))
}

var errInvariant = errors.New("a+b is not 10")

// audit reads a and b and returns errInvariant when they do not add up;
// between its two reads it runs between (nil: nothing).
func audit(between func()) func(tx *etagstore.Tx[counter]) error {
	return func(tx *etagstore.Tx[counter]) error {
		a, err := tx.Get("a")
		if err != nil {
			return err
		}
		if between != nil {
			between()
		}
		b, err := tx.Get("b")
		if err != nil {
			return err
		}
		if a.N+b.N != 10 {
			return errInvariant
		}
		return nil
	}
}

func newAB(t *testing.T) (*etagstore.Store[counter], *hookBackend, *fakeClock) {
	t.Helper()
	s, hb, clock := newTestStore(t, etagstore.RetryPolicy{})
	for _, k := range []string{"a", "b"} {
		if _, err := s.Create(t.Context(), k, counter{N: 5}); err != nil {
			t.Fatal(err)
		}
	}
	return s, hb, clock
}

// An error of fn made on a torn view (a move committed between its two
// reads) is not returned: the reads are checked again, one changed, and
// fn runs again on current reads. An error made on reads current together
// is returned as it is.
func TestTransactErrorsOnlyFromCurrentReads(t *testing.T) {
	ctx := t.Context()
	s, hb, _ := newAB(t)
	other := etagstore.New[counter](hb.Backend, nil)
	runs := 0
	_, err := s.Transact(ctx, audit(func() {
		if runs++; runs == 1 {
			if _, err := other.Transact(ctx, move); err != nil {
				t.Fatal(err)
			}
		}
	}))
	if err != nil || runs != 2 {
		t.Errorf("audit across a move = %v after %d runs; want nil after 2", err, runs)
	}
	if _, err := other.Update(ctx, "b", func(c *counter) error { c.N++; return nil }); err != nil {
		t.Fatal(err)
	}
	runs = 0
	if _, err := s.Transact(ctx, audit(func() { runs++ })); err != errInvariant || runs != 1 {
		t.Errorf("audit of a broken invariant = %v after %d runs; want errInvariant itself after 1", err, runs)
	}
}

// A panic of fn made on a torn view runs fn again; one made on current
// reads goes on up the caller's stack, with nothing written.
func TestTransactPanicsOnlyFromCurrentReads(t *testing.T) {
	ctx := t.Context()
	s, hb, _ := newAB(t)
	other := etagstore.New[counter](hb.Backend, nil)
	runs := 0
	panicky := func(tx *etagstore.Tx[counter]) error {
		err := audit(func() {
			if runs++; runs == 1 {
				if _, err := other.Transact(ctx, move); err != nil {
					t.Fatal(err)
				}
			}
		})(tx)
		if err != nil {
			panic(err)
		}
		return tx.Put("c", counter{N: runs})
	}
	if _, err := s.Transact(ctx, panicky); err != nil || runs != 2 {
		t.Errorf("a panic across a move: Transact = %v after %d runs; want nil after 2", err, runs)
	}
	if _, err := other.Update(ctx, "b", func(c *counter) error { c.N++; return nil }); err != nil {
		t.Fatal(err)
	}
	got := func() (p any) {
		defer func() { p = recover() }()
		_, _ = s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
			_ = tx.Put("d", counter{})
			return panicky(tx)
		})
		return nil
	}()
	if got != errInvariant {
		t.Errorf("a panic on current reads: recovered %v, want errInvariant", got)
	}
	if _, err := s.Get(ctx, "d"); !errors.Is(err, etagstore.ErrNotFound) {
		t.Errorf("after the panic, d: %v; want nothing written", err)
	}
}

// An error of fn that matches ErrConflict runs fn again (as client-go's
// RetryOnConflict does); out of attempts, it is what Transact returns.
func TestTransactConflictFromFnRunsAgain(t *testing.T) {
	ctx := t.Context()
	s, _, _ := newAB(t)
	runs := 0
	_, err := s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
		if runs++; runs < 3 {
			return fmt.Errorf("%w: the app saw a stale version", etagstore.ErrConflict)
		}
		return move(tx)
	})
	if err != nil || runs != 3 {
		t.Errorf("Transact = %v after %d runs, want nil after 3", err, runs)
	}
	limited, _, _ := newTestStore(t, etagstore.RetryPolicy{MaxAttempts: 4})
	runs = 0
	mine := fmt.Errorf("%w: the app saw a stale version", etagstore.ErrConflict)
	_, err = limited.Transact(ctx, func(*etagstore.Tx[counter]) error { runs++; return mine })
	if !errors.Is(err, mine) || runs != 4 {
		t.Errorf("Transact = %v after %d runs, want fn's own conflict after 4", err, runs)
	}
	wantOnly(t, "a conflict of fn", err, etagstore.ErrConflict)
}

// A transaction whose every attempt lost its race fails with ErrConflict,
// also when the last race lost was a create beaten to its key (ErrExists
// from the service).
func TestTransactLostEveryRaceIsConflict(t *testing.T) {
	ctx := t.Context()
	s, hb, _ := newTestStore(t, etagstore.RetryPolicy{MaxAttempts: 3})
	other := etagstore.New[counter](hb.Backend, nil)
	runs := 0
	_, err := s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
		runs++
		if _, err := tx.Get("j"); err != nil && !errors.Is(err, etagstore.ErrNotFound) {
			return err
		}
		if d, err := other.Get(ctx, "k"); err == nil {
			if err := other.Delete(ctx, "k", d.ETag); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := tx.Get("k"); !errors.Is(err, etagstore.ErrNotFound) {
			return err
		}
		if _, err := other.Create(ctx, "k", counter{N: 100}); err != nil { // beats this create
			t.Fatal(err)
		}
		if err := tx.Put("j", counter{N: runs}); err != nil { // the create is the commit's second action
			return err
		}
		return tx.Put("k", counter{N: 1})
	})
	if runs != 3 {
		t.Errorf("fn ran %d times, want 3", runs)
	}
	wantOnly(t, "Transact that lost every create race", err, etagstore.ErrConflict)
}

// A refused action is judged by itself: a transaction whose create comes
// first and whose update of a document deleted under it comes second runs
// fn again (the second action lost a race), not ErrNotFound.
func TestTransactRefusalJudgedByTheRefusedAction(t *testing.T) {
	ctx := t.Context()
	s, hb, _ := newTestStore(t, etagstore.RetryPolicy{})
	other := etagstore.New[counter](hb.Backend, nil)
	y, err := s.Create(ctx, "y", counter{N: 1})
	if err != nil {
		t.Fatal(err)
	}
	runs := 0
	_, err = s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
		runs++
		if _, err := tx.Get("x"); !errors.Is(err, etagstore.ErrNotFound) {
			return fmt.Errorf("x: %v", err)
		}
		if err := tx.Put("x", counter{N: 1}); err != nil {
			return err
		}
		c, err := tx.Get("y")
		if errors.Is(err, etagstore.ErrNotFound) {
			return nil // deleted meanwhile: only x then
		}
		if err != nil {
			return err
		}
		if runs == 1 {
			if err := other.Delete(ctx, "y", y.ETag); err != nil {
				t.Fatal(err)
			}
		}
		c.N++
		return tx.Put("y", c)
	})
	if err != nil || runs != 2 {
		t.Errorf("Transact = %v after %d runs, want nil after 2", err, runs)
	}
	if _, err := s.Get(ctx, "x"); err != nil {
		t.Errorf("x after the transaction: %v", err)
	}
}

// The default policy bounds a write by time, not by a count: an Update
// that loses 40 races in a row, each retried at once by the fake clock,
// still commits.
func TestWritesDoNotGiveUpWhileTimeRemains(t *testing.T) {
	s, hb, _ := newTestStore(t, etagstore.RetryPolicy{})
	if _, err := s.Create(t.Context(), "k", counter{}); err != nil {
		t.Fatal(err)
	}
	lost := 0
	hb.afterRead = func(_ context.Context, _ string, _ driver.Item, _ error) {
		if lost < 40 {
			lost++
			interfere(t, hb.Backend, "k")
		}
	}
	d, err := s.Update(t.Context(), "k", func(c *counter) error { c.N++; return nil })
	if err != nil || d.Value.N != 40*100+1 {
		t.Errorf("Update after 40 lost races = %+v, %v; want N 4001", d.Value, err)
	}
}

// A write the service refused unapplied (503 ServerBusy) on every attempt
// until its time ran out fails with ErrUnavailable, a Store sentinel,
// never the backend's driver.ErrNotApplied alone.
func TestThrottledEveryAttemptIsUnavailable(t *testing.T) {
	s, hb, clock := newTestStore(t, etagstore.RetryPolicy{})
	hb.writeHook = func(context.Context, string, driver.Write) (etagstore.ETag, error, bool) {
		return "", fmt.Errorf("%w: memstore: busy", driver.ErrNotApplied), true
	}
	start := clock.Now()
	_, err := s.Create(t.Context(), "k", counter{})
	wantOnly(t, "a Create throttled on every attempt", err, etagstore.ErrUnavailable)
	if waited := clock.Now().Sub(start); waited < 10e9 {
		t.Errorf("gave up after %v, want most of the default 15s", waited)
	}
	_, err = s.Update(t.Context(), "k", func(c *counter) error { return nil })
	wantOnly(t, "an Update of a missing key", err, etagstore.ErrNotFound)
}

// rename moves the document under from to to in one transaction.
func rename(from, to string) func(tx *etagstore.Tx[counter]) error {
	return func(tx *etagstore.Tx[counter]) error {
		c, err := tx.Get(from)
		if err != nil {
			return err
		}
		return errors.Join(tx.Delete(from), tx.Put(to, c))
	}
}

var errNeither = errors.New("neither a nor b exists")

// Exactly one of a and b exists at every instant; renames between them
// are transactions. A read-only transaction that read a missing, then b
// missing (a rename b→a and a rename back a→b ran between its reads),
// returns an error only on reads current together. Reading a and b again
// one after the other would be fooled by one more rename between those
// two reads (a missing, then b missing once more); memstore checks both
// absences at one instant (Abilities.PureChecks), so the transaction runs
// again and finds b.
func TestTransactAbsencesCheckedAtOneInstant(t *testing.T) {
	ctx := t.Context()
	s, hb, _ := newTestStore(t, etagstore.RetryPolicy{})
	other := etagstore.New[counter](hb.Backend, nil)
	if _, err := s.Create(ctx, "b", counter{N: 1}); err != nil {
		t.Fatal(err)
	}
	renameNow := func(from, to string) {
		if _, err := other.Transact(ctx, rename(from, to)); err != nil {
			t.Fatal(err)
		}
	}
	var checking, renamedDuringCheck bool
	hb.afterRead = func(_ context.Context, key string, _ driver.Item, err error) {
		if checking && key == "a" && errors.Is(err, etagstore.ErrNotFound) && !renamedDuringCheck {
			renamedDuringCheck = true // between the re-reads of a and of b
			renameNow("b", "a")
		}
	}
	runs := 0
	_, err := s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
		runs++
		checking = false // set while its reads are checked
		_, errA := tx.Get("a")
		if runs == 1 {
			renameNow("b", "a")
		}
		_, errB := tx.Get("b")
		if runs == 1 {
			renameNow("a", "b")
		}
		if errors.Is(errA, etagstore.ErrNotFound) && errors.Is(errB, etagstore.ErrNotFound) {
			checking = true
			return errNeither
		}
		return nil
	})
	if err != nil || runs != 2 {
		t.Errorf("a read-only transaction across renames = %v after %d runs; want nil after 2", err, runs)
	}
}

// noCommit is a backend that cannot commit atomically (as blobs).
type noCommit struct{ *memstore.Backend }

func (b noCommit) Abilities() driver.Abilities {
	a := b.Backend.Abilities()
	a.Commit = nil
	return a
}

// Stores that cannot commit together fail at their first use in fn, and
// Transact fails with that error with nothing written, even when fn
// ignores it: another backend (ErrInvalidInput), a backend that cannot
// commit (errors.ErrUnsupported), one key through two Stores
// (ErrInvalidInput).
func TestTransactRefusesStoresThatCannotCommitTogether(t *testing.T) {
	ctx := t.Context()
	one := memstore.New(nil)
	a := etagstore.New[counter](one, nil)
	b := etagstore.New[counter](memstore.New(nil), nil)
	a2 := etagstore.New[struct{ Name string }](one, nil)
	blobs := etagstore.New[counter](noCommit{memstore.New(nil)}, nil)
	for _, tc := range []struct {
		name  string
		other func(tx *etagstore.Txn) error
		want  error
	}{
		{"another backend", func(tx *etagstore.Txn) error { return b.In(tx).Put("y", counter{}) }, etagstore.ErrInvalidInput},
		{"no commit", func(tx *etagstore.Txn) error { return blobs.In(tx).Put("y", counter{}) }, errors.ErrUnsupported},
		{"one key, two Stores", func(tx *etagstore.Txn) error { return a2.In(tx).Put("x", struct{ Name string }{}) }, etagstore.ErrInvalidInput},
	} {
		var inFn error
		err := etagstore.Transact(ctx, func(tx *etagstore.Txn) error {
			if err := a.In(tx).Put("x", counter{N: 1}); err != nil {
				return err
			}
			inFn = tc.other(tx)
			return nil // ignores it
		})
		if !errors.Is(inFn, tc.want) || !errors.Is(err, tc.want) {
			t.Errorf("%s: in fn %v, Transact %v; want %v", tc.name, inFn, err, tc.want)
		}
		if _, err := a.Get(ctx, "x"); !errors.Is(err, etagstore.ErrNotFound) {
			t.Errorf("%s: x was written (%v)", tc.name, err)
		}
	}
	// Over one backend, two types commit together.
	if err := etagstore.Transact(ctx, func(tx *etagstore.Txn) error {
		return errors.Join(a.In(tx).Put("x", counter{N: 1}), a2.In(tx).Put("y", struct{ Name string }{"y"}))
	}); err != nil {
		t.Fatal(err)
	}
	if d, err := a2.Get(ctx, "y"); err != nil || d.Value.Name != "y" {
		t.Errorf("y = %+v, %v", d, err)
	}
}

// Review findings, each a rule:
//   - an Upsert whose key fn then reads (ETag) is conditioned on that
//     read: another writer's change before the commit runs fn again;
//   - a panic of fn is swallowed only when a read of fn went stale, never
//     because the check itself failed (a canceled ctx);
//   - each attempt of a package-level Transact is led by the first Store
//     it uses;
//   - a Txn that ended, committed or not, takes no more writes.
func TestTxnReviewFindings(t *testing.T) {
	ctx := t.Context()
	s, hb, _ := newTestStore(t, etagstore.RetryPolicy{})
	if _, err := s.Create(ctx, "k", counter{N: 1}); err != nil {
		t.Fatal(err)
	}
	runs := 0
	_, err := s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
		runs++
		if err := tx.Upsert("k", counter{N: 7}); err != nil {
			return err
		}
		if _, err := tx.ETag("k"); err != nil {
			return err
		}
		if runs == 1 {
			interfere(t, hb.Backend, "k")
		}
		return nil
	})
	if err != nil || runs != 2 {
		t.Errorf("Upsert then ETag across another write: %v after %d runs, want nil after 2", err, runs)
	}

	cctx, cancel := context.WithCancel(ctx)
	got := func() (p any) {
		defer func() { p = recover() }()
		_, _ = s.Transact(cctx, func(tx *etagstore.Tx[counter]) error {
			if _, err := tx.Get("k"); err != nil {
				return err
			}
			cancel()
			panic("mine")
		})
		return nil
	}()
	if got != "mine" {
		t.Errorf("a panic with a canceled ctx: recovered %v, want fn's own", got)
	}

	a := etagstore.New[counter](memstore.New(nil), nil)
	b := etagstore.New[counter](memstore.New(nil), nil)
	runs = 0
	err = etagstore.Transact(ctx, func(tx *etagstore.Txn) error {
		runs++
		if runs == 1 {
			_ = a.In(tx).Put("x", counter{})
			return fmt.Errorf("%w: try again", etagstore.ErrConflict)
		}
		return b.In(tx).Put("y", counter{N: 2})
	})
	if d, gerr := b.Get(ctx, "y"); err != nil || gerr != nil || d.Value.N != 2 {
		t.Errorf("a second attempt led by another Store: %v (y: %v)", err, gerr)
	}

	var kept *etagstore.Txn
	mine := errors.New("refused")
	if err := etagstore.Transact(ctx, func(tx *etagstore.Txn) error { kept = tx; return mine }); err != mine {
		t.Fatalf("Transact = %v", err)
	}
	if err := s.In(kept).Put("k", counter{}); !errors.Is(err, etagstore.ErrInvalidInput) {
		t.Errorf("Put into an ended Txn = %v, want ErrInvalidInput", err)
	}
}

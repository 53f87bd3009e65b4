package etagstore_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
)

// MaxAttempts of a transaction that runs in batches: its runs of fn, in
// the batch and across batches, are bounded by its own lead's policy.

// raceOnX is heldCommits whose first atomic commit that checks or writes
// "x" is preceded by a write of x through another Store (a lost race for
// whoever read x).
type raceOnX struct {
	*heldCommits
	other *etagstore.Store[counter]
	done  atomic.Bool
}

func (r *raceOnX) Abilities() driver.Abilities {
	a := r.heldCommits.Abilities()
	commit := a.Commit
	a.Commit = func(ctx context.Context, actions []driver.Action) ([]driver.ETag, error) {
		for _, ac := range actions {
			if ac.Key == "x" && r.done.CompareAndSwap(false, true) {
				if _, err := r.other.Upsert(context.WithoutCancel(ctx), "x", counter{99}); err != nil {
					return nil, err
				}
			}
		}
		return commit(ctx, actions)
	}
	return a
}

func TestTxBatchMemberPolicyBoundsItsRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		r := &raceOnX{heldCommits: h, other: etagstore.New[counter](h.Backend, nil)}
		a := etagstore.New[counter](r, nil)
		once := etagstore.New[counter](r, &etagstore.Options{Retry: &etagstore.RetryPolicy{MaxAttempts: 1}})
		var wg sync.WaitGroup
		holding(t, a, &wg)
		var ea, eb error
		wg.Go(func() {
			_, ea = a.Transact(t.Context(), func(tx *etagstore.Tx[counter]) error {
				if _, err := tx.Get("x"); err != nil && !errors.Is(err, etagstore.ErrNotFound) {
					return err
				}
				return increment("a")(tx)
			})
		})
		synctest.Wait()
		runs := 0
		wg.Go(func() {
			_, eb = once.Transact(t.Context(), func(tx *etagstore.Tx[counter]) error {
				runs++
				return increment("b")(tx)
			})
		})
		synctest.Wait()
		close(h.hold)
		wg.Wait()
		if ea != nil {
			t.Errorf("A: %v", ea)
		}
		if runs > 1 {
			t.Errorf("B (MaxAttempts 1) ran fn %d times (%v)", runs, eb)
		}
		if eb == nil {
			if d, _ := once.Get(t.Context(), "b"); d.Value.N != 1 {
				t.Errorf("b = %+v, want 1", d.Value)
			}
		}
	})
}

var errAfterRead = errors.New("refused after reading k")

func TestTxBatchDeferredTwiceRespectsMaxAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		s := etagstore.New[counter](h, &etagstore.Options{Retry: &etagstore.RetryPolicy{MaxAttempts: 2}})
		var wg sync.WaitGroup
		holding(t, s, &wg)
		var eA, e1, e2 error
		wg.Go(func() { _, eA = s.Transact(t.Context(), increment("k")) })
		synctest.Wait()
		// D1 refuses to act on a version not stored yet; on a stored one it
		// increments k.
		d1runs := 0
		wg.Go(func() {
			_, e1 = s.Transact(t.Context(), func(tx *etagstore.Tx[counter]) error {
				d1runs++
				e, err := tx.ETag("k")
				if err != nil {
					return err
				}
				if e.Superseded() {
					return errAfterRead
				}
				return increment("k")(tx)
			})
		})
		synctest.Wait()
		// D2 always refuses, after reading k.
		d2runs := 0
		wg.Go(func() {
			_, e2 = s.Transact(t.Context(), func(tx *etagstore.Tx[counter]) error {
				d2runs++
				if _, err := tx.Get("k"); err != nil {
					return err
				}
				return errAfterRead
			})
		})
		synctest.Wait()
		close(h.hold)
		wg.Wait()
		if eA != nil || e1 != nil {
			t.Errorf("A: %v, D1: %v", eA, e1)
		}
		if d2runs > 2 {
			t.Errorf("D2 (MaxAttempts 2) ran fn %d times; returned %v", d2runs, e2)
		}
		if e2 != errAfterRead && !errors.Is(e2, etagstore.ErrConflict) {
			t.Errorf("D2 = %v, want its own error or ErrConflict", e2)
		}
		if d, _ := s.Get(t.Context(), "k"); d.Value.N != 2 {
			t.Errorf("k = %+v, want 2", d.Value)
		}
	})
}

func TestTxBatchCreateRefusedOnStaleReadRespectsMaxAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		s := etagstore.New[counter](h, &etagstore.Options{Retry: &etagstore.RetryPolicy{MaxAttempts: 1}})
		other := etagstore.New[counter](h, &etagstore.Options{DisableGroupCommit: true})
		ctx := t.Context()
		if _, err := s.Create(ctx, "k", counter{1}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Create(ctx, "x", counter{1}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		holding(t, s, &wg)
		runs := 0
		var err error
		wg.Go(func() {
			_, err = s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
				runs++
				if _, err := tx.Get("x"); err != nil {
					return err
				}
				if runs == 1 { // x moves on after fn read it
					if _, err := other.Upsert(ctx, "x", counter{2}); err != nil {
						return err
					}
				}
				return tx.Create("k", counter{2})
			})
		})
		synctest.Wait()
		close(h.hold)
		wg.Wait()
		if runs > 1 {
			t.Errorf("fn (MaxAttempts 1) ran %d times; Transact = %v", runs, err)
		}
		if err == nil {
			t.Errorf("Transact succeeded over an existing k")
		}
	})
}

// The same on its own (group commit off): the commit reports the stale
// read first, and fn runs once.
func TestTxCreateRefusedOnStaleReadAloneRespectsMaxAttempts(t *testing.T) {
	s := etagstore.New[counter](newHeldCommitsOpen(), &etagstore.Options{DisableGroupCommit: true, Retry: &etagstore.RetryPolicy{MaxAttempts: 1}})
	other := etagstore.New[counter](s.Backend(), &etagstore.Options{DisableGroupCommit: true})
	ctx := t.Context()
	if _, err := s.Create(ctx, "k", counter{1}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, "x", counter{1}); err != nil {
		t.Fatal(err)
	}
	runs := 0
	_, err := s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
		runs++
		if _, err := tx.Get("x"); err != nil {
			return err
		}
		if runs == 1 {
			if _, err := other.Upsert(ctx, "x", counter{2}); err != nil {
				return err
			}
		}
		return tx.Create("k", counter{2})
	})
	if runs > 1 || err == nil {
		t.Errorf("fn (MaxAttempts 1) ran %d times; Transact = %v", runs, err)
	}
}

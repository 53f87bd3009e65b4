package etagstore_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
)

// Batches of transactions under RetryPolicy.MaxAttempts: fn runs no more
// often than on its own, and a member is not failed for its batch-mates.

// MaxAttempts 1: a transaction across partitions fails before anything
// is sent, after one run of fn.
func TestTxBatchMaxAttemptsMisfit(t *testing.T) {
	p := partitioned{newHeldCommits()}
	s := etagstore.New[counter](p, &etagstore.Options{Retry: &etagstore.RetryPolicy{MaxAttempts: 1}})
	runs := 0
	_, err := s.Transact(t.Context(), func(tx *etagstore.Tx[counter]) error {
		runs++
		return errors.Join(tx.Put("p1/a", counter{1}), tx.Put("p2/b", counter{1}))
	})
	if !errors.Is(err, etagstore.ErrInvalidInput) || runs != 1 {
		t.Errorf("Transact = %v after %d runs of fn; want ErrInvalidInput after 1 (MaxAttempts 1)", err, runs)
	}
}

// MaxAttempts 1: a member erring on an earlier member's write runs once.
func TestTxBatchMaxAttemptsInherited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		s := etagstore.New[counter](h, &etagstore.Options{Retry: &etagstore.RetryPolicy{MaxAttempts: 1}})
		ctx := t.Context()
		var wg sync.WaitGroup
		holding(t, s, &wg)
		wg.Go(func() {
			if _, err := s.Transact(ctx, increment("n")); err != nil {
				t.Errorf("A: %v", err)
			}
		})
		synctest.Wait()
		var runs atomic.Int64
		var bErr error
		wg.Go(func() {
			_, bErr = s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
				runs.Add(1)
				if _, err := tx.Get("n"); err == nil {
					return errSawUncommitted
				}
				return nil
			})
		})
		synctest.Wait()
		close(h.hold)
		wg.Wait()
		if runs.Load() > 1 {
			t.Errorf("B's fn ran %d times with MaxAttempts 1 (Transact = %v)", runs.Load(), bErr)
		}
	})
}

// MaxAttempts 2: a batch attempt lost, then the member leaves for its
// own run: fn runs twice in all.
func TestTxBatchMaxAttemptsBatchRetryThenAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		s := etagstore.New[counter](h, &etagstore.Options{Retry: &etagstore.RetryPolicy{MaxAttempts: 2}})
		ctx := t.Context()
		if _, err := s.Upsert(ctx, "x", counter{1}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		holding(t, s, &wg)
		wg.Go(func() {
			_, err := s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
				x, err := tx.Get("x")
				if err != nil {
					return err
				}
				return tx.Put("n", x)
			})
			if err != nil {
				t.Errorf("A: %v", err)
			}
		})
		synctest.Wait()
		var runs atomic.Int64
		var bErr error
		wg.Go(func() {
			_, bErr = s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
				if runs.Add(1) == 2 {
					return errors.New("only on the second run")
				}
				return tx.Put("b", counter{1})
			})
		})
		synctest.Wait()
		wg.Go(func() { // C: another process changes x once, during the batch's first attempt
			var once sync.Once
			_, err := s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
				var err error
				once.Do(func() {
					_, err = h.Backend.Write(ctx, "x", driver.Write{Data: []byte(`{"N":5}`), Cond: driver.Cond{Kind: driver.CondNone}})
				})
				return err
			})
			if err != nil {
				t.Errorf("C: %v", err)
			}
		})
		synctest.Wait()
		close(h.hold)
		wg.Wait()
		if runs.Load() > 2 {
			t.Errorf("B's fn ran %d times with MaxAttempts 2 (Transact = %v)", runs.Load(), bErr)
		}
	})
}

// MaxAttempts 1. A's transaction is one blind Upsert, which cannot lose a
// race on its own; behind it in the batch, B's read goes stale before the
// commit, and the batch's one attempt is refused: A, whose keys did not
// lose, runs again on its own and commits.
func TestTxBatchBlindMemberFailsForBatchMatesConflict(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		s := etagstore.New[counter](h, &etagstore.Options{Retry: &etagstore.RetryPolicy{MaxAttempts: 1}})
		other := etagstore.New[counter](h, &etagstore.Options{DisableGroupCommit: true})
		ctx := t.Context()
		if _, err := s.Create(ctx, "b", counter{}); err != nil {
			t.Fatal(err)
		}
		first := true
		e1, e2 := twoInOneBatch(t, h, s, upsert("a", 1), func(tx *etagstore.Tx[counter]) error {
			if err := increment("b")(tx); err != nil {
				return err
			}
			if first {
				first = false
				_, err := other.Update(ctx, "b", func(c *counter) error { c.N += 10; return nil })
				return err
			}
			return nil
		})
		t.Logf("A (blind upsert): %v; B: %v", e1, e2)
		if e1 != nil {
			t.Errorf("A's blind Upsert = %v; alone it cannot conflict", e1)
		}
	})
}

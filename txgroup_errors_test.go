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

// Batches of transactions: a member's error or panic made on another
// member's write that is never stored does not reach its caller.

// A member that read an earlier member's write, not stored yet, and then
// overwrote it, does not return an error made on that value.
func TestTxBatchErrorOnOverwrittenInheritedWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		s := etagstore.New[counter](h, nil)
		ctx := t.Context()
		if _, err := s.Upsert(ctx, "x", counter{1}); err != nil { // the Store caches x=1
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
				return tx.Put("n", x) // n takes x's value
			})
			if err != nil {
				t.Errorf("the first member: %v", err)
			}
		})
		synctest.Wait()
		var bErr error
		var bRuns atomic.Int64
		wg.Go(func() {
			_, bErr = s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
				bRuns.Add(1)
				n, err := tx.Get("n")
				if err != nil && !errors.Is(err, etagstore.ErrNotFound) {
					return err
				}
				seen := n.N
				if err := tx.Put("n", counter{100}); err != nil {
					return err
				}
				if seen == 1 {
					return errSawUncommitted
				}
				return nil
			})
		})
		synctest.Wait()
		wg.Go(func() { // C: another process changes x during C's turn, after B's
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
		if errors.Is(bErr, errSawUncommitted) {
			n, _ := s.Get(ctx, "n")
			t.Errorf("second member returned %v after %d run(s); n=1 was never stored (n is now %d)", bErr, bRuns.Load(), n.Value.N)
		}
	})
}

// The same with a Delete cancelling an earlier member's create.
func TestTxBatchErrorOnCancelledInheritedCreate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		s := etagstore.New[counter](h, nil)
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
				if x.N == 1 {
					return tx.Put("n", x) // creates n only on the stale x
				}
				return nil
			})
			if err != nil {
				t.Errorf("the first member: %v", err)
			}
		})
		synctest.Wait()
		var bErr error
		wg.Go(func() {
			_, bErr = s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
				if _, err := tx.Get("n"); err != nil {
					return nil // nothing to see
				}
				if err := tx.Delete("n"); err != nil {
					return err
				}
				return errSawUncommitted
			})
		})
		synctest.Wait()
		wg.Go(func() { // C: another process changes x during C's turn, after B's
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
		if errors.Is(bErr, errSawUncommitted) {
			_, err := s.Get(ctx, "n")
			t.Errorf("second member returned %v; n never existed (Get n: %v)", bErr, err)
		}
	})
}

// The same with a panic.
func TestTxBatchPanicOnOverwrittenInheritedWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		s := etagstore.New[counter](h, nil)
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
				t.Errorf("the first member: %v", err)
			}
		})
		synctest.Wait()
		var recovered any
		wg.Go(func() {
			defer func() { recovered = recover() }()
			_, _ = s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
				n, _ := tx.Get("n")
				if err := tx.Put("n", counter{100}); err != nil {
					return err
				}
				if n.N == 1 {
					panic("saw n=1")
				}
				return nil
			})
		})
		synctest.Wait()
		wg.Go(func() { // C: another process changes x during C's turn, after B's
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
		if recovered != nil {
			n, _ := s.Get(ctx, "n")
			t.Errorf("second member panicked %v on n=1, never stored (n is now %d)", recovered, n.Value.N)
		}
	})
}

// B does not return an error made on A's write, which never commits (A's
// caller leaves before the commit).
func TestTxBatchErrorOnWriteThatNeverCommits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		s := etagstore.New[counter](h, nil)
		ctx := t.Context()
		var wg sync.WaitGroup
		holding(t, s, &wg)
		actx, cancelA := context.WithCancel(ctx)
		aDone := make(chan error, 1)
		wg.Go(func() {
			_, err := s.Transact(actx, func(tx *etagstore.Tx[counter]) error { return tx.Put("n", counter{1}) })
			aDone <- err
		})
		synctest.Wait()
		var bErr error
		wg.Go(func() {
			_, bErr = s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
				n, _ := tx.Get("n") // A's write
				if err := tx.Put("n", counter{n.N + 100}); err != nil {
					return err
				}
				if n.N == 1 {
					return errSawUncommitted
				}
				return nil
			})
		})
		synctest.Wait()
		wg.Go(func() { // C: during its turn, A's caller gives up
			var once sync.Once
			_, _ = s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
				once.Do(func() {
					cancelA()
					if err := <-aDone; !errors.Is(err, context.Canceled) {
						t.Errorf("A = %v", err)
					}
				})
				return nil
			})
		})
		synctest.Wait()
		close(h.hold)
		wg.Wait()
		_, err := s.Get(ctx, "n")
		if errors.Is(bErr, errSawUncommitted) {
			t.Errorf("B = %v; A's write n=1 never committed (Get n: %v)", bErr, err)
		}
	})
}

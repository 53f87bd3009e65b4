package etagstore_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/memstore"
)

// The first run of fn: it starts before its lead is known, queues inside
// its first use of a Store and goes on on a batch's fork; what it does
// before that first use, what a Tx taken before it becomes, and how the
// caller leaves while blocked in it.

// stacksHold reports whether some goroutine's stack holds fn.
func stacksHold(fn string) bool {
	buf := make([]byte, 1<<20)
	return strings.Contains(string(buf[:runtime.Stack(buf, true)]), fn)
}

func TestTxGoexitAfterQueuedFirstUse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		s := etagstore.New[counter](h, nil)
		var wg sync.WaitGroup
		holding(t, s, &wg)
		gone := make(chan struct{})
		go func() {
			defer close(gone)
			s.Transact(t.Context(), func(tx *etagstore.Tx[counter]) error {
				tx.Get("a") // queued: goes on in the batch's slot
				runtime.Goexit()
				return nil
			})
		}()
		synctest.Wait()
		close(h.hold)
		<-gone
		wg.Wait()
		time.Sleep(time.Minute) // fake time: the runner has had every chance to end
		synctest.Wait()
		if stacksHold("(*txGroup).run") {
			t.Errorf("the group's runner still waits for the slot of a caller whose goroutine ended")
		}
		// A later caller unsticks it (and lets the bubble end).
		if _, err := s.Transact(t.Context(), increment("b")); err != nil {
			t.Error(err)
		}
	})
}

func TestTxKeptTxOfTimedOutSlotRefusesWrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		s := etagstore.New[counter](h, nil)
		var wg sync.WaitGroup
		holding(t, s, &wg)
		gate := make(chan struct{})
		var kept []*etagstore.Tx[counter]
		runs := 0
		var e1, e2 error
		wg.Go(func() {
			_, e1 = s.Transact(t.Context(), func(tx *etagstore.Tx[counter]) error {
				runs++
				kept = append(kept, tx)
				c, err := tx.Get("a")
				if err != nil && !errors.Is(err, etagstore.ErrNotFound) {
					return err
				}
				if runs == 1 {
					<-gate // slow, while the next member waits
				}
				c.N++
				return tx.Put("a", c)
			})
		})
		synctest.Wait()
		wg.Go(func() { _, e2 = s.Transact(t.Context(), increment("b")) })
		synctest.Wait()
		close(h.hold)
		synctest.Wait()
		time.Sleep(time.Second) // fake time: the slot's bound passes while B waits
		synctest.Wait()
		close(gate)
		wg.Wait()
		if e1 != nil || e2 != nil {
			t.Fatalf("Transact = %v, %v", e1, e2)
		}
		if d, _ := s.Get(t.Context(), "a"); d.Value.N != 1 {
			t.Errorf("a = %+v, want 1", d.Value)
		}
		for i, tx := range kept {
			err := tx.Put("late", counter{i})
			if !errors.Is(err, etagstore.ErrInvalidInput) {
				t.Errorf("Put through the Tx of run %d after Transact returned = %v, want ErrInvalidInput", i+1, err)
			}
		}
	})
}

// A Tx taken before fn's first use of a Store (s.In(tx) at fn's top, for
// two Stores) keeps working once the caller was queued at that first
// use and went on on the batch's fork; after the commit it reports the
// stored ETags and refuses writes.
func TestTxViewsTakenBeforeQueueing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		s := etagstore.New[counter](h, nil)
		p := etagstore.New[probeDoc](h, nil)
		var wg sync.WaitGroup
		holding(t, s, &wg)
		var kc *etagstore.Tx[counter]
		var kp *etagstore.Tx[probeDoc]
		var err error
		wg.Go(func() {
			err = etagstore.Transact(t.Context(), func(tx *etagstore.Txn) error {
				kc, kp = s.In(tx), p.In(tx)
				c, err := kc.Get("n") // queued here
				if err != nil && !errors.Is(err, etagstore.ErrNotFound) {
					return err
				}
				c.N++
				if err := kp.Create("p", probeDoc{Y: "made"}); err != nil {
					return err
				}
				return kc.Put("n", c)
			})
		})
		synctest.Wait()
		var e2 error
		wg.Go(func() { _, e2 = s.Transact(t.Context(), increment("other")) })
		synctest.Wait()
		close(h.hold)
		wg.Wait()
		if err != nil || e2 != nil {
			t.Fatalf("Transact = %v, %v", err, e2)
		}
		n, _ := s.Get(t.Context(), "n")
		pd, perr := p.Get(t.Context(), "p")
		if n.Value.N != 1 || perr != nil || pd.Value.Y != "made" {
			t.Fatalf("n = %+v, p = %+v (%v)", n.Value, pd.Value, perr)
		}
		if e, err := kc.ETag("n"); err != nil || e != n.ETag {
			t.Errorf("kept ETag(n) = %q, %v; stored %q", e, err, n.ETag)
		}
		if e, err := kp.ETag("p"); err != nil || e != pd.ETag {
			t.Errorf("kept ETag(p) = %q, %v; stored %q", e, err, pd.ETag)
		}
		if err := kp.Create("q", probeDoc{}); !errors.Is(err, etagstore.ErrInvalidInput) {
			t.Errorf("Create through a kept Tx = %v, want ErrInvalidInput", err)
		}
		if err := kc.Upsert("q", counter{}); !errors.Is(err, etagstore.ErrInvalidInput) {
			t.Errorf("Upsert through a kept Tx = %v, want ErrInvalidInput", err)
		}
	})
}

// The caller's ctx ends while its fn is blocked in its first use of a
// Store (queued): Transact returns ctx.Err(), the Tx refuses what fn does
// next, and nothing of it is written.
func TestTxCtxEndsWhileQueuedInFirstUse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		s := etagstore.New[counter](h, nil)
		var wg sync.WaitGroup
		holding(t, s, &wg)
		ctx, cancel := context.WithCancel(t.Context())
		var err, getErr, putErr error
		runs := 0
		wg.Go(func() {
			_, err = s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
				runs++
				_, getErr = tx.Get("a")
				putErr = tx.Put("a", counter{7})
				return nil // ignores both
			})
		})
		synctest.Wait()
		cancel()
		synctest.Wait()
		close(h.hold)
		wg.Wait()
		if !errors.Is(err, context.Canceled) || runs != 1 {
			t.Errorf("Transact = %v after %d runs, want context.Canceled after 1", err, runs)
		}
		if getErr == nil || putErr == nil {
			t.Errorf("after the caller left, Get = %v, Put = %v; want both refused", getErr, putErr)
		}
		if _, err := s.Get(t.Context(), "a"); !errors.Is(err, etagstore.ErrNotFound) {
			t.Errorf("a: %v, want nothing written", err)
		}
	})
}

// fn that ends before using any Store: its error, nil, or its panic, as
// is, for the package-level Transact and Store.Transact; nothing written
// and no group left behind.
func TestTxFnEndsBeforeAnyStore(t *testing.T) {
	s := etagstore.New[counter](memstore.New(nil), nil)
	mine := errors.New("mine")
	if err := etagstore.Transact(t.Context(), func(*etagstore.Txn) error { return mine }); err != mine {
		t.Errorf("package-level fn error = %v", err)
	}
	if err := etagstore.Transact(t.Context(), func(*etagstore.Txn) error { return nil }); err != nil {
		t.Errorf("package-level nil = %v", err)
	}
	if docs, err := s.Transact(t.Context(), func(*etagstore.Tx[counter]) error { return mine }); err != mine || docs != nil {
		t.Errorf("Store fn error = %v, %v", docs, err)
	}
	if docs, err := s.Transact(t.Context(), func(*etagstore.Tx[counter]) error { return nil }); err != nil || len(docs) != 0 {
		t.Errorf("Store nil = %v, %v", docs, err)
	}
	for _, pkg := range []bool{true, false} {
		func() {
			defer func() {
				if r := recover(); r != "boom" {
					t.Errorf("panic before any Store (package-level %v): recovered %v", pkg, r)
				}
			}()
			if pkg {
				etagstore.Transact(t.Context(), func(*etagstore.Txn) error { panic("boom") })
			} else {
				s.Transact(t.Context(), func(*etagstore.Tx[counter]) error { panic("boom") })
			}
		}()
	}
	// Goexit before any Store.
	done := make(chan struct{})
	go func() {
		defer close(done)
		etagstore.Transact(t.Context(), func(*etagstore.Txn) error { runtime.Goexit(); return nil })
	}()
	<-done
	if _, err := s.Transact(t.Context(), increment("k")); err != nil {
		t.Error(err)
	}
}

// A package-level Transact whose first run is led by a Store on one
// backend and, run again (fn's ErrConflict), by a Store on another:
// delivered by the second, nothing of the first written.
func TestTxReleadByAnotherBackend(t *testing.T) {
	a := etagstore.New[counter](memstore.New(nil), nil)
	b := etagstore.New[counter](memstore.New(nil), nil)
	runs := 0
	err := etagstore.Transact(t.Context(), func(tx *etagstore.Txn) error {
		runs++
		if runs%2 == 1 && runs < 5 {
			if err := a.In(tx).Put("x", counter{runs}); err != nil {
				return err
			}
			return fmt.Errorf("again: %w", etagstore.ErrConflict)
		}
		if runs < 5 {
			if err := b.In(tx).Put("y", counter{runs}); err != nil {
				return err
			}
			return fmt.Errorf("again: %w", etagstore.ErrConflict)
		}
		return b.In(tx).Put("y", counter{runs})
	})
	if err != nil || runs != 5 {
		t.Fatalf("Transact = %v after %d runs, want nil after 5", err, runs)
	}
	if _, err := a.Get(t.Context(), "x"); !errors.Is(err, etagstore.ErrNotFound) {
		t.Errorf("x: %v, want nothing written", err)
	}
	if d, err := b.Get(t.Context(), "y"); err != nil || d.Value.N != 5 {
		t.Errorf("y = %+v, %v; want 5", d.Value, err)
	}
}

var errRunaway = errors.New("fn ran 100 times")

func TestTxReleadPingPongBounded(t *testing.T) {
	// MaxAttempts holds across the leads.
	a2 := etagstore.New[counter](memstore.New(nil), &etagstore.Options{Retry: &etagstore.RetryPolicy{MaxAttempts: 3}})
	b2 := etagstore.New[counter](memstore.New(nil), &etagstore.Options{Retry: &etagstore.RetryPolicy{MaxAttempts: 3}})
	runs := 0
	err := etagstore.Transact(t.Context(), func(tx *etagstore.Txn) error {
		runs++
		if runs > 100 {
			return errRunaway
		}
		s := a2
		if runs%2 == 0 {
			s = b2
		}
		if err := s.In(tx).Put("x", counter{runs}); err != nil {
			return err
		}
		return fmt.Errorf("again: %w", etagstore.ErrConflict)
	})
	if !errors.Is(err, etagstore.ErrConflict) || runs > 3 {
		t.Errorf("ping-pong between leads with MaxAttempts 3 = %v after %d runs", err, runs)
	}
}

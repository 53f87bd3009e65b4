package etagstore_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
)

// Batches of transactions whose members leave (ctx ends, fn's goroutine
// exits) or stall: the others commit, and nothing is left behind.

// gatedReads is heldCommits whose reads of "gate" wait for gate.
type gatedReads struct {
	*heldCommits
	gate    chan struct{}
	reading chan struct{}
}

// Abilities hides ReadMany: the reads gated are fn's own, made in its
// slot (a batch reads members' first keys ahead only with ReadMany).
func (g gatedReads) Abilities() driver.Abilities {
	a := g.heldCommits.Abilities()
	a.ReadMany = nil
	return a
}

func (g gatedReads) Read(ctx context.Context, key string) (driver.Item, error) {
	if key == "gate" {
		select {
		case g.reading <- struct{}{}:
		default:
		}
		<-g.gate
	}
	return g.heldCommits.Read(ctx, key)
}

// A member adopted and then gone (ctx) before the commit is sent: nothing
// of it is written, and the batch runs the others' fns again (uncounted,
// as documented), each committing once.
func TestTxBatchLeaverRerunsOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := gatedReads{heldCommits: newHeldCommits(), gate: make(chan struct{}), reading: make(chan struct{}, 1)}
		s := etagstore.New[counter](g, &etagstore.Options{Retry: &etagstore.RetryPolicy{MaxAttempts: 1}})
		ctx := t.Context()
		var wg sync.WaitGroup
		holding(t, s, &wg)
		var aRuns atomic.Int64
		wg.Go(func() {
			if _, err := s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
				aRuns.Add(1)
				return increment("a")(tx)
			}); err != nil {
				t.Errorf("A: %v", err)
			}
		})
		synctest.Wait()
		bctx, cancel := context.WithCancel(ctx)
		bDone := make(chan error, 1)
		wg.Go(func() {
			_, err := s.Transact(bctx, increment("b"))
			bDone <- err
		})
		synctest.Wait()
		wg.Go(func() {
			if _, err := s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
				if _, err := tx.Get("gate"); err != nil && !errors.Is(err, etagstore.ErrNotFound) {
					return err
				}
				return increment("d")(tx)
			}); err != nil {
				t.Errorf("D: %v", err)
			}
		})
		synctest.Wait()
		close(g.hold)
		<-g.reading // D's turn: B's fork was adopted
		cancel()
		if err := <-bDone; !errors.Is(err, context.Canceled) {
			t.Errorf("B = %v, want context.Canceled", err)
		}
		close(g.gate)
		wg.Wait()
		if _, err := s.Get(ctx, "b"); !errors.Is(err, etagstore.ErrNotFound) {
			t.Errorf("b: %v; B left with ctx.Err(), want nothing written", err)
		}
		if a, err := s.Get(ctx, "a"); err != nil || a.Value.N != 1 || aRuns.Load() > 2 {
			t.Errorf("a = %+v, %v after %d runs of A's fn; want 1, after at most 2", a.Value, err, aRuns.Load())
		}
	})
}

// The first member of a batch (whose context's values the batch runs
// under) leaves after its turn: the others commit, and nothing of it.
func TestTxBatchFirstMemberLeaves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		s := etagstore.New[counter](h, nil)
		var wg sync.WaitGroup
		holding(t, s, &wg)
		ctx1, cancel1 := context.WithCancel(t.Context())
		var e1, e2 error
		wg.Go(func() { _, e1 = s.Transact(ctx1, increment("a")) })
		synctest.Wait()
		first := true
		wg.Go(func() {
			_, e2 = s.Transact(t.Context(), func(tx *etagstore.Tx[counter]) error {
				c, err := tx.Get("b") // the first use: from here fn runs in its slot
				if err != nil && !errors.Is(err, etagstore.ErrNotFound) {
					return err
				}
				if first {
					first = false
					cancel1()
					synctest.Wait()
				}
				c.N++
				return tx.Put("b", c)
			})
		})
		synctest.Wait()
		close(h.hold)
		wg.Wait()
		if !errors.Is(e1, context.Canceled) || e2 != nil {
			t.Errorf("Transacts: %v, %v; want Canceled, nil", e1, e2)
		}
		if _, err := s.Get(t.Context(), "a"); !errors.Is(err, etagstore.ErrNotFound) {
			t.Errorf("a: %v, want not found", err)
		}
		if d, err := s.Get(t.Context(), "b"); err != nil || d.Value.N != 1 {
			t.Errorf("b: %+v %v", d, err)
		}
	})
}

// A member whose fn keeps reading while it waits for a transaction queued
// behind it leaves the batch: its reads do not extend its turn forever.
func TestTxBatchReadingWaiterLeaves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		s := etagstore.New[counter](h, nil)
		ctx := t.Context()
		var wg sync.WaitGroup
		holding(t, s, &wg)
		cDone := make(chan struct{})
		polls := 0
		wg.Go(func() {
			_, err := s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
				for i := 0; ; i++ {
					select {
					case <-cDone:
						return increment("a")(tx)
					case <-time.After(time.Millisecond):
					}
					polls++
					if i == 5000 { // 5 s of fake time
						return errors.New("gave up waiting")
					}
					if _, err := tx.Get(fmt.Sprintf("poll-%d", i)); err != nil && !errors.Is(err, etagstore.ErrNotFound) {
						return err
					}
				}
			})
			if err != nil {
				t.Errorf("A: %v (after %d polls)", err, polls)
			}
		})
		synctest.Wait()
		wg.Go(func() {
			defer close(cDone)
			if _, err := s.Transact(ctx, increment("c")); err != nil {
				t.Errorf("C: %v", err)
			}
		})
		synctest.Wait()
		close(h.hold)
		wg.Wait()
	})
}

// A's fn is stuck in a read of "gate" (a backend read that does not
// return: throttled, a stalled connection). B, queued behind A in the
// same batch, touches nothing of A's: on its own it would commit at once.
func TestTxBatchStuckReadHoldsTheBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := gatedReads{heldCommits: newHeldCommits(), gate: make(chan struct{}), reading: make(chan struct{}, 1)}
		s := etagstore.New[counter](g, nil)
		var wg sync.WaitGroup
		holding(t, s, &wg)
		wg.Go(func() {
			_, err := s.Transact(t.Context(), func(tx *etagstore.Tx[counter]) error {
				if _, err := tx.Get("gate"); err != nil && !errors.Is(err, etagstore.ErrNotFound) {
					return err
				}
				return increment("a")(tx)
			})
			if err != nil {
				t.Errorf("A: %v", err)
			}
		})
		synctest.Wait()
		bDone := make(chan error, 1)
		wg.Go(func() {
			_, err := s.Transact(t.Context(), increment("b"))
			bDone <- err
		})
		synctest.Wait()
		close(g.hold)
		<-g.reading
		start := time.Now()
		select {
		case err := <-bDone:
			if err != nil {
				t.Error(err)
			}
		case <-time.After(time.Minute):
			t.Errorf("B still waiting after %v while A's fn is inside a read", time.Since(start))
		}
		close(g.gate)
		wg.Wait()
	})
}

// fn ends its goroutine (t.FailNow, runtime.Goexit inside fn): is the
// Store's runner left behind?
func TestTxBatchGoexitInFn(t *testing.T) {
	s := etagstore.New[counter](newHeldCommitsOpen(), nil)
	before := runtime.NumGoroutine()
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Transact(context.Background(), func(tx *etagstore.Tx[counter]) error {
			runtime.Goexit()
			return nil
		})
	}()
	<-done
	deadline := time.Now().Add(5 * time.Second) // observation only
	for time.Now().Before(deadline) && runtime.NumGoroutine() > before {
		runtime.Gosched()
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		st := string(buf[:runtime.Stack(buf, true)])
		if strings.Contains(st, "(*txGroup).run") {
			t.Errorf("runner goroutine still alive 5 s after the caller exited (%d > %d goroutines)", n, before)
		}
	}
	// A later caller is delayed by the stuck turn, then works.
	if _, err := s.Transact(context.Background(), increment("k")); err != nil {
		t.Error(err)
	}
}

// No goroutine is left once the Store is idle.
func TestTxBatchNoGoroutineLeft(t *testing.T) {
	s := etagstore.New[counter](newHeldCommitsOpen(), nil)
	before := runtime.NumGoroutine()
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			k := string(rune('a' + i%5))
			if _, err := s.Transact(t.Context(), increment(k)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && runtime.NumGoroutine() > before; { // observation only
		runtime.Gosched()
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		t.Errorf("%d goroutines, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
}

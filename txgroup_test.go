package etagstore_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/memstore"
)

// heldCommits is memstore whose writes and atomic commits are counted
// (commits), and a request that writes the key "hold" waits until hold is
// closed: the transaction that writes it holds the Store's queue of
// transactions, so that the callers that arrive meanwhile queue and go in
// one batch. (A transaction of one key is sent as a write.)
type heldCommits struct {
	*memstore.Backend
	hold    chan struct{}
	commits atomic.Int64
}

func (h *heldCommits) Write(ctx context.Context, key string, w driver.Write) (etagstore.ETag, error) {
	h.commits.Add(1)
	if key == "hold" {
		<-h.hold
	}
	return h.Backend.Write(ctx, key, w)
}

func newHeldCommits() *heldCommits {
	return &heldCommits{Backend: memstore.New(nil), hold: make(chan struct{})}
}

func (h *heldCommits) Abilities() driver.Abilities {
	a := h.Backend.Abilities()
	commit := a.Commit
	a.Commit = func(ctx context.Context, actions []driver.Action) ([]driver.ETag, error) {
		h.commits.Add(1)
		for _, ac := range actions {
			if ac.Key == "hold" && !ac.Check {
				<-h.hold
			}
		}
		return commit(ctx, actions)
	}
	return a
}

// holding starts a transaction that writes "hold", and waits until its
// commit waits for h.hold: from then on Transact callers queue.
func holding(t *testing.T, s *etagstore.Store[counter], wg *sync.WaitGroup) {
	t.Helper()
	wg.Go(func() {
		if _, err := s.Transact(t.Context(), func(tx *etagstore.Tx[counter]) error { return tx.Upsert("hold", counter{1}) }); err != nil {
			t.Errorf("the holding transaction: %v", err)
		}
	})
	synctest.Wait()
}

func increment(key string) func(tx *etagstore.Tx[counter]) error {
	return func(tx *etagstore.Tx[counter]) error {
		c, err := tx.Get(key)
		if err != nil && !errors.Is(err, etagstore.ErrNotFound) {
			return err
		}
		c.N++
		return tx.Put(key, c)
	}
}

// Transactions that queue behind one in flight share one commit; each
// caller gets its own state of the document, and only the last the
// version's ETag: the others' states were superseded in the same commit.
func TestTransactionsShareCommits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		s := etagstore.New[counter](h, nil)
		var wg sync.WaitGroup
		holding(t, s, &wg)
		const n = 8
		docs := make([]etagstore.Doc[counter], n)
		for i := range n {
			wg.Go(func() {
				got, err := s.Transact(t.Context(), increment("n"))
				if err != nil || len(got) != 1 {
					t.Errorf("Transact = %v, %v", got, err)
					return
				}
				docs[i] = got[0]
			})
		}
		synctest.Wait()
		close(h.hold)
		wg.Wait()
		if c := h.commits.Load(); c != 2 {
			t.Errorf("%d commits, want 2: the held one and one for the %d that queued", c, n)
		}
		cur, err := s.Get(t.Context(), "n")
		if err != nil || cur.Value.N != n {
			t.Fatalf("n = %+v, %v; want %d", cur, err, n)
		}
		var values []int
		current := 0
		for _, d := range docs {
			values = append(values, d.Value.N)
			switch {
			case d.ETag == cur.ETag:
				current++
				if d.Value.N != n {
					t.Errorf("the current ETag came with N=%d, want %d", d.Value.N, n)
				}
			case !d.ETag.Superseded():
				t.Errorf("N=%d came with ETag %q: neither the current one nor superseded", d.Value.N, d.ETag)
			}
		}
		slices.Sort(values)
		if want := []int{1, 2, 3, 4, 5, 6, 7, 8}; !slices.Equal(values, want) || current != 1 {
			t.Errorf("callers got N %v, %d with the current ETag; want %v, 1", values, current, want)
		}
	})
}

var errSawUncommitted = errors.New("saw n=1, which was never stored")

// A member of a batch sees the writes of the members before it; an error
// it returns on them is not returned unless they were committed. Here the
// first member's write is built on a stale copy of x, so the batch's
// commit fails and the first member writes another value: the second
// member, which failed on a value never stored, runs again instead of
// returning that failure.
func TestTransactBatchErrorOnlyOnCommittedView(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		s := etagstore.New[counter](h, nil)
		ctx := t.Context()
		if _, err := s.Upsert(ctx, "x", counter{1}); err != nil { // the Store caches x=1
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		holding(t, s, &wg)
		var aRuns, bRuns atomic.Int64
		wg.Go(func() {
			_, err := s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
				aRuns.Add(1)
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
		wg.Go(func() {
			_, err := s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
				bRuns.Add(1)
				n, err := tx.Get("n")
				if err == nil && n.N == 1 {
					return errSawUncommitted
				}
				return nil
			})
			if err != nil {
				t.Errorf("the second member: %v", err)
			}
		})
		synctest.Wait()
		if _, err := h.Backend.Write(ctx, "x", driver.Write{Data: []byte(`{"N":5}`), Cond: driver.Cond{Kind: driver.CondNone}}); err != nil {
			t.Fatal(err) // another process: the Store's copy of x is stale
		}
		close(h.hold)
		wg.Wait()
		if n, err := s.Get(ctx, "n"); err != nil || n.Value.N != 5 {
			t.Errorf("n = %+v, %v; want 5, from the current x", n, err)
		}
		if aRuns.Load() < 2 || bRuns.Load() < 2 {
			t.Errorf("runs: first %d, second %d; want both run again", aRuns.Load(), bRuns.Load())
		}
	})
}

// A fn that waits for another transaction of its Store to commit (here,
// the one queued behind it) leaves the batch after slotTimeout and runs
// on its own: it holds up nobody, and does not deadlock.
func TestTransactSlowFnLeavesTheBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		s := etagstore.New[counter](h, nil)
		ctx := t.Context()
		var wg sync.WaitGroup
		holding(t, s, &wg)
		second := make(chan struct{})
		wg.Go(func() {
			_, err := s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
				<-second
				return increment("slow")(tx)
			})
			if err != nil {
				t.Errorf("the slow member: %v", err)
			}
		})
		synctest.Wait()
		wg.Go(func() {
			defer close(second)
			if _, err := s.Transact(ctx, increment("quick")); err != nil {
				t.Errorf("the quick member: %v", err)
			}
		})
		synctest.Wait()
		close(h.hold)
		wg.Wait()
		for _, key := range []string{"slow", "quick"} {
			if d, err := s.Get(ctx, key); err != nil || d.Value.N != 1 {
				t.Errorf("%s = %+v, %v; want 1", key, d, err)
			}
		}
	})
}

// A slow fn that nobody waits for keeps its turn: it runs once. (The
// sleep is on the synctest bubble's fake clock: it stands for slow user
// code, and steers nothing.)
func TestTransactSlowFnAloneRunsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := etagstore.New[counter](memstore.New(nil), nil)
		runs := 0
		_, err := s.Transact(t.Context(), func(tx *etagstore.Tx[counter]) error {
			runs++
			time.Sleep(time.Second)
			return increment("n")(tx)
		})
		if err != nil || runs != 1 {
			t.Errorf("Transact = %v after %d runs, want nil after 1", err, runs)
		}
	})
}

// A Transact inside fn, on the same Store, completes: the outer fn's turn
// ends after slotTimeout and the inner transaction goes in the next batch.
func TestTransactNestedInFn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := etagstore.New[counter](memstore.New(nil), nil)
		ctx := t.Context()
		_, err := s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
			if _, err := s.Transact(ctx, increment("inner")); err != nil {
				return err
			}
			return increment("outer")(tx)
		})
		if err != nil {
			t.Fatal(err)
		}
		inner, _ := s.Get(ctx, "inner")
		outer, _ := s.Get(ctx, "outer")
		if inner.Value.N < 1 || outer.Value.N != 1 {
			t.Errorf("inner %d, outer %d; want ≥ 1 and 1", inner.Value.N, outer.Value.N)
		}
	})
}

// A member that panics on a view holding an earlier member's write runs
// again on its own; a panic there, on current reads, goes up its caller's
// stack with nothing of its own written, and the other member commits.
func TestTransactBatchPanic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		s := etagstore.New[counter](h, nil)
		ctx := t.Context()
		var wg sync.WaitGroup
		holding(t, s, &wg)
		first := make(chan struct{})
		wg.Go(func() {
			defer close(first)
			if _, err := s.Transact(ctx, increment("n")); err != nil {
				t.Errorf("the first member: %v", err)
			}
		})
		synctest.Wait()
		var runs atomic.Int64
		var recovered any
		wg.Go(func() {
			defer func() { recovered = recover() }()
			_, _ = s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
				if runs.Add(1) > 1 {
					<-first // alone: after the batch committed n
				}
				if err := tx.Put("mine", counter{7}); err != nil {
					return err
				}
				if n, _ := tx.Get("n"); n.N == 1 {
					panic("n is 1")
				}
				return nil
			})
		})
		synctest.Wait()
		close(h.hold)
		wg.Wait()
		if recovered != "n is 1" || runs.Load() != 2 {
			t.Errorf("recovered %v after %d runs; want the panic after 2 (in the batch, then alone)", recovered, runs.Load())
		}
		if _, err := s.Get(ctx, "mine"); !errors.Is(err, etagstore.ErrNotFound) {
			t.Errorf("mine: %v; want nothing written", err)
		}
		if n, err := s.Get(ctx, "n"); err != nil || n.Value.N != 1 {
			t.Errorf("n = %+v, %v; want 1", n, err)
		}
	})
}

// A caller whose context ends while it waits in the queue returns
// ctx.Err(), and nothing of its transaction is written.
func TestTransactQueuedCallerLeaves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		s := etagstore.New[counter](h, nil)
		var wg sync.WaitGroup
		holding(t, s, &wg)
		ctx, cancel := context.WithCancel(t.Context())
		var err error
		wg.Go(func() { _, err = s.Transact(ctx, increment("gone")) })
		synctest.Wait()
		cancel()
		synctest.Wait()
		close(h.hold)
		wg.Wait()
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Transact = %v, want context.Canceled", err)
		}
		if _, err := s.Get(t.Context(), "gone"); !errors.Is(err, etagstore.ErrNotFound) {
			t.Errorf("gone: %v; want nothing written", err)
		}
	})
}

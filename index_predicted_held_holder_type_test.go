package etagstore_test

import (
	"sync"
	"testing"
	"testing/synctest"

	"github.com/etagstore/etagstore"
)

// The frozen planner (index planner.frozen) keeps the Sets of the
// request's keys only. A transaction that reads a board b1 (another
// Store, another type, the same unique index name "title") and creates a
// card taking a title whose entry names b1: the entry is stale (b1 was
// renamed by a writer that does not keep the index), so the value is
// free, as the holder's own Store (boards) judges b1. Alone, the
// transaction's planner knows b1 is a board (the state's owner) and the
// card commits; in a batch, where the value is predicted held (cards wrote
// its entry lately) and Confirm judges with the frozen planner, it must
// judge the same.
func TestTxUniquePredictedHolderJudgedByItsOwnStore(t *testing.T) {
	for _, batched := range []bool{false, true} {
		name := "alone"
		if batched {
			name = "batched"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHeldCommits()
				l := &lookedUp{heldCommits: h}
				byTitle := etagstore.Unique("title", func(c titled) string { return c.Title })
				byName := etagstore.Unique("title", func(n namedBoard) string { return n.Name })
				counters := etagstore.New[counter](l, nil)
				cards := etagstore.New(l, nil, byTitle)
				otherCards := etagstore.New(l, nil, byTitle) // another process
				boards := etagstore.New(l, nil, byName)
				plainBoards := etagstore.New[namedBoard](l, nil) // a writer that does not keep the index
				ctx := t.Context()
				if _, err := cards.Create(ctx, "card-1", titled{"x"}); err != nil { // cards' recent: x
					t.Fatal(err)
				}
				if _, err := otherCards.Update(ctx, "card-1", func(c *titled) error { c.Title = "y"; return nil }); err != nil {
					t.Fatal(err)
				}
				if _, err := boards.Create(ctx, "b1", namedBoard{"x"}); err != nil {
					t.Fatal(err)
				}
				if _, err := plainBoards.Update(ctx, "b1", func(n *namedBoard) error { n.Name = "z"; return nil }); err != nil {
					t.Fatal(err)
				}
				fn := func(tx *etagstore.Txn) error {
					if _, err := boards.In(tx).Get("b1"); err != nil {
						return err
					}
					return cards.In(tx).Put("c1", titled{"x"})
				}
				var err error
				if batched {
					var wg sync.WaitGroup
					holding(t, counters, &wg)
					errs := make([]error, 2)
					fns := []func(tx *etagstore.Txn) error{
						func(tx *etagstore.Txn) error { return counters.In(tx).Put("x", counter{1}) },
						fn,
					}
					for i, f := range fns {
						wg.Go(func() { errs[i] = etagstore.Transact(ctx, f) })
						synctest.Wait()
					}
					l.read("")
					close(h.hold)
					wg.Wait()
					l.mu.Lock()
					t.Logf("ReadMany calls in the batch: %q", l.reads)
					l.mu.Unlock()
					if errs[0] != nil {
						t.Errorf("the other member: %v", errs[0])
					}
					err = errs[1]
				} else {
					close(h.hold)
					err = etagstore.Transact(ctx, fn)
				}
				if err != nil {
					t.Errorf("a card taking x, whose stale entry names b1 (now z): %v", err)
				}
			})
		})
	}
}

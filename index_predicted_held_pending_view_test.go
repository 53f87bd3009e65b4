package etagstore_test

import (
	"sync"
	"testing"
	"testing/synctest"

	"github.com/etagstore/etagstore"
)

// A member (M2) whose unique value is predicted held, and who took it
// from an earlier member's write (M1's) not stored yet, is not answered
// the *UniqueError the shared read finds: M1's write may never land (here
// the batch's commit is refused, M1 having read k from a stale cache, and
// M1's run again, on what is stored, does not write src), and in no order
// of the transactions would src then hold "mine1". M2 runs on its own, on
// what is stored, and commits c1 "other" (the rule of a created key's
// member, pendingBefore).
func TestTxUniquePredictedOnUnstoredWriteRunsAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		l := &lookedUp{heldCommits: h}
		byTitle := etagstore.Unique("title", func(c titled) string { return c.Title })
		counters := etagstore.New[counter](l, nil)
		otherCounters := etagstore.New[counter](l, nil) // another process
		cards := etagstore.New(l, nil, byTitle)
		srcs := etagstore.New[titled](l, nil)
		ctx := t.Context()
		if _, err := cards.Create(ctx, "card-1", titled{"mine1"}); err != nil { // cards' recent: mine1
			t.Fatal(err)
		}
		if _, err := srcs.Create(ctx, "src", titled{"other"}); err != nil {
			t.Fatal(err)
		}
		if _, err := counters.Create(ctx, "k", counter{0}); err != nil { // kept in counters' cache
			t.Fatal(err)
		}
		if _, err := otherCounters.Update(ctx, "k", func(c *counter) error { c.N = 1; return nil }); err != nil {
			t.Fatal(err)
		}
		m1 := func(tx *etagstore.Txn) error {
			c, err := counters.In(tx).Get("k")
			if err != nil {
				return err
			}
			if c.N == 0 { // only on the stale copy
				if err := srcs.In(tx).Put("src", titled{"mine1"}); err != nil {
					return err
				}
			}
			c.N += 10
			return counters.In(tx).Put("k", c)
		}
		m2 := func(tx *etagstore.Txn) error {
			s, err := srcs.In(tx).Get("src")
			if err != nil {
				return err
			}
			return cards.In(tx).Put("c1", titled{s.Title})
		}
		var wg sync.WaitGroup
		holding(t, counters, &wg)
		errs := make([]error, 2)
		for i, f := range []func(tx *etagstore.Txn) error{m1, m2} {
			wg.Go(func() { errs[i] = etagstore.Transact(ctx, f) })
			synctest.Wait()
		}
		close(h.hold)
		wg.Wait()
		if errs[0] != nil {
			t.Errorf("M1: %v", errs[0])
		}
		if errs[1] != nil {
			t.Errorf("M2, taking src's title: %v", errs[1])
		}
		if d, err := srcs.Get(ctx, "src"); err != nil || d.Value.Title != "other" {
			t.Errorf("src = %+v, %v; want other (M1 ran again on k = 1)", d.Value, err)
		}
		if d, err := counters.Get(ctx, "k"); err != nil || d.Value.N != 11 {
			t.Errorf("k = %+v, %v; want 11", d.Value, err)
		}
		if d, err := cards.Get(ctx, "c1"); err != nil || d.Value.Title != "other" {
			t.Errorf("c1 = %+v, %v; want the title other", d.Value, err)
		}
	})
}

package etagstore_test

import (
	"errors"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/etagstore/etagstore"
)

// A batch whose commit is refused because a member's write takes a unique
// value another document holds answers that member with the
// *UniqueError; a member that took no value (here: deleted the card the
// taker writes again) is not at fault, and commits in the next batch, as
// it would on its own: a Delete never fails with a UniqueError.

func TestTxGroupUniqueRefusalBlamesTheTakerOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		byTitle := etagstore.Unique("title", func(c titled) string { return c.Title })
		counters := etagstore.New[counter](h, nil)
		cards := etagstore.New(h, nil, byTitle)
		other := etagstore.New(h, nil, byTitle) // another process: cards never wrote its value
		ctx := t.Context()
		if _, err := other.Create(ctx, "c2", titled{"held"}); err != nil {
			t.Fatal(err)
		}
		if _, err := cards.Create(ctx, "c1", titled{"a"}); err != nil {
			t.Fatal(err)
		}
		del := func(tx *etagstore.Txn) error {
			if _, err := cards.In(tx).Get("c1"); err != nil {
				return err
			}
			return cards.In(tx).Delete("c1")
		}
		take := func(tx *etagstore.Txn) error { return cards.In(tx).Put("c1", titled{"held"}) }
		var wg sync.WaitGroup
		var e1, e2 error
		holding(t, counters, &wg)
		wg.Go(func() { e1 = etagstore.Transact(ctx, del) })
		synctest.Wait()
		wg.Go(func() { e2 = etagstore.Transact(ctx, take) })
		synctest.Wait()
		close(h.hold)
		wg.Wait()
		var ue *etagstore.UniqueError
		if !errors.As(e2, &ue) || ue.Key != "c2" {
			t.Errorf("the member taking the held title = %v; want a UniqueError naming c2", e2)
		}
		if e1 != nil {
			t.Errorf("the member deleting c1 = %v; want it committed (it takes no value)", e1)
		}
		if _, err := cards.Get(ctx, "c1"); !errors.Is(err, etagstore.ErrNotFound) {
			t.Errorf("c1 after its delete: %v, want ErrNotFound", err)
		}
	})
}

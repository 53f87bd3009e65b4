package etagstore_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
)

// The shared read of the predicted members' values (confirms)
// fails: each member learns on its own; the one whose value a document
// holds fails with the error naming it, the one whose value is free
// commits, and none hangs.
func TestTxUniquePredictedSharedReadFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		busy := func(context.Context) ([]driver.Item, error) {
			return nil, driver.Errorf(driver.ErrUnavailable, "the service is busy")
		}
		f := &armedRead{lookedUp: &lookedUp{heldCommits: h}, match: hasEntry, answer: busy}
		byTitle := etagstore.Unique("title", func(c titled) string { return c.Title })
		counters := etagstore.New[counter](f, nil)
		cards := etagstore.New(f, nil, byTitle)
		other := etagstore.New(f, nil, byTitle)
		ctx := t.Context()
		for key, title := range map[string]string{"card-1": "mine1", "card-3": "freed"} {
			if _, err := cards.Create(ctx, key, titled{title}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := other.Update(ctx, "card-3", func(c *titled) error { c.Title = "renamed"; return nil }); err != nil {
			t.Fatal(err)
		}
		create := func(key, title string) func(tx *etagstore.Txn) error {
			return func(tx *etagstore.Txn) error { return cards.In(tx).Put(key, titled{title}) }
		}
		var wg sync.WaitGroup
		holding(t, counters, &wg)
		f.armed.Store(true)
		errs := make([]error, 3)
		fns := []func(tx *etagstore.Txn) error{
			func(tx *etagstore.Txn) error { return counters.In(tx).Put("x", counter{1}) },
			create("c1", "mine1"), create("c3", "freed"),
		}
		for i, fn := range fns {
			wg.Go(func() { errs[i] = etagstore.Transact(ctx, fn) })
			synctest.Wait()
		}
		close(h.hold)
		wg.Wait()
		if f.armed.Load() {
			t.Fatal("no entry read failed: the test did not reach the shared read")
		}
		if errs[0] != nil {
			t.Errorf("the member taking no value: %v", errs[0])
		}
		var ue *etagstore.UniqueError
		if !errors.As(errs[1], &ue) || ue.Key != "card-1" {
			t.Errorf("the member taking a value card-1 holds: %v", errs[1])
		}
		if errs[2] != nil {
			t.Errorf("the member taking a freed value: %v", errs[2])
		}
	})
}

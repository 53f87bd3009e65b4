package etagstore_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/etagstore/etagstore"
)

// The caller making the shared read of the predicted members'
// values (confirms) is cancelled during it. It ends with its context's
// error; the others, waiting for that read, learn on their own, each with
// its right outcome, and none hangs.
func TestTxUniquePredictedReadMakerCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		who := make(chan int, 1)
		b := &armedRead{lookedUp: &lookedUp{heldCommits: h}, match: hasEntry, answer: heldBy(who)}
		byTitle := etagstore.Unique("title", func(c titled) string { return c.Title })
		counters := etagstore.New[counter](b, nil)
		cards := etagstore.New(b, nil, byTitle)
		other := etagstore.New(b, nil, byTitle)
		ctx := t.Context()
		titles := map[string]string{"card-1": "mine1", "card-2": "mine2", "card-3": "freed"}
		for key, title := range titles {
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
		b.armed.Store(true)
		fns := []func(tx *etagstore.Txn) error{
			func(tx *etagstore.Txn) error { return counters.In(tx).Put("x", counter{1}) },
			create("c1", "mine1"), create("c2", "mine2"), create("c3", "freed"),
		}
		errs := make([]error, len(fns))
		cancels := make([]context.CancelFunc, len(fns))
		for i, fn := range fns {
			cctx, cancel := context.WithCancel(context.WithValue(ctx, memberID{}, i))
			cancels[i] = cancel
			wg.Go(func() { errs[i] = etagstore.Transact(cctx, fn) })
			synctest.Wait()
		}
		close(h.hold)
		first := <-who
		synctest.Wait() // the others wait for its read
		cancels[first]()
		wg.Wait()
		for _, c := range cancels {
			c()
		}
		t.Logf("the shared read was made by member %d", first)
		if !errors.Is(errs[first], context.Canceled) {
			t.Errorf("the cancelled member %d: %v, want context.Canceled", first, errs[first])
		}
		for i, holder := range map[int]string{1: "card-1", 2: "card-2"} {
			if i == first {
				continue
			}
			var ue *etagstore.UniqueError
			if !errors.As(errs[i], &ue) || ue.Key != holder {
				t.Errorf("member %d, taking a value %s holds: %v", i, holder, errs[i])
			}
		}
		if first != 3 && errs[3] != nil {
			t.Errorf("the member taking a freed value: %v", errs[3])
		}
		if errs[0] != nil {
			t.Errorf("the member taking no value: %v", errs[0])
		}
	})
}

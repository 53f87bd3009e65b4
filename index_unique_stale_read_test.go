package etagstore_test

import (
	"sync"
	"testing"
	"testing/synctest"

	"github.com/etagstore/etagstore"
)

// A transaction that takes a unique value computed from a document it
// read from its Store's version cache, which another process has changed
// since, is not answered the *UniqueError of that stale run: its reads
// before the write are checked, as those before an unread Create are, and
// found stale, it runs again on current reads and takes the value it now
// computes. Alone, and as a batch member whose value is predicted held
// (the shared read finds the stale value held).
func TestTxUniqueErrorOnStaleRead(t *testing.T) {
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
				counters := etagstore.New[counter](l, nil)
				cards := etagstore.New(l, nil, byTitle)
				srcs := etagstore.New[titled](l, nil)
				otherSrcs := etagstore.New[titled](l, nil) // another process
				ctx := t.Context()
				if _, err := cards.Create(ctx, "card-1", titled{"mine1"}); err != nil { // an entry cards wrote lately
					t.Fatal(err)
				}
				if _, err := srcs.Create(ctx, "src", titled{"mine1"}); err != nil { // kept in srcs' cache
					t.Fatal(err)
				}
				if _, err := otherSrcs.Update(ctx, "src", func(c *titled) error { c.Title = "fresh"; return nil }); err != nil {
					t.Fatal(err)
				}
				fn := func(tx *etagstore.Txn) error {
					s, err := srcs.In(tx).Get("src")
					if err != nil {
						return err
					}
					return cards.In(tx).Put("c1", titled{s.Title})
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
					close(h.hold)
					wg.Wait()
					if errs[0] != nil {
						t.Errorf("the other member: %v", errs[0])
					}
					err = errs[1]
				} else {
					close(h.hold)
					err = etagstore.Transact(ctx, fn)
				}
				if err != nil {
					t.Errorf("a transaction taking the title of src (now %q): %v", "fresh", err)
				}
				if d, err := cards.Get(ctx, "c1"); err != nil || d.Value.Title != "fresh" {
					t.Errorf("c1 = %+v, %v; want the title fresh", d.Value, err)
				}
			})
		})
	}
}

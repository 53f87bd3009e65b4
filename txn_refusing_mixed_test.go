package etagstore_test

import (
	"errors"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/etagstore/etagstore"
)

// A Store whose index declaration was refused (a bad name) fails every
// write with ErrInvalidInput, also in a transaction led by a Store
// without indexes, and also in a batch of transactions: the other
// members commit, and nothing of the refused member is written.
func TestTxRefusedIndexesInMixedBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		counters := etagstore.New[counter](h, nil)
		bad := etagstore.New(h, nil, etagstore.Unique("not a name!", func(c titled) string { return c.Title }))
		ctx := t.Context()
		refused := func(tx *etagstore.Txn) error {
			if err := counters.In(tx).Put("p", counter{1}); err != nil {
				return err
			}
			return bad.In(tx).Put("b", titled{"x"})
		}
		if err := etagstore.Transact(ctx, refused); !errors.Is(err, etagstore.ErrInvalidInput) {
			t.Errorf("alone: %v, want ErrInvalidInput", err)
		}
		close(h.hold)
		h.hold = make(chan struct{})
		var wg sync.WaitGroup
		var e1, e2 error
		holding(t, counters, &wg)
		wg.Go(func() { _, e1 = counters.Transact(ctx, increment("x")) })
		synctest.Wait()
		wg.Go(func() { e2 = etagstore.Transact(ctx, refused) })
		synctest.Wait()
		close(h.hold)
		wg.Wait()
		if e1 != nil {
			t.Errorf("the other member: %v", e1)
		}
		if !errors.Is(e2, etagstore.ErrInvalidInput) {
			t.Errorf("in a batch: %v, want ErrInvalidInput", e2)
		}
		for _, k := range []string{"p", "b"} {
			if _, err := counters.Get(ctx, k); !errors.Is(err, etagstore.ErrNotFound) {
				t.Errorf("%s: %v, want nothing written", k, err)
			}
		}
	})
}

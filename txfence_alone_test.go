package etagstore_test

import (
	"sync"
	"testing"
	"testing/synctest"

	"github.com/etagstore/etagstore"
)

// A fenced transaction (WithFence) commits on its own, also while its
// group's commit is held: it never queues behind it, and its Create
// commits with the token.
func TestTxFencedNeverQueues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		s := etagstore.New[counter](h, nil)
		var wg sync.WaitGroup
		holding(t, s, &wg)
		done := make(chan error, 2)
		fctx := etagstore.WithFence(t.Context(), 4)
		go func() {
			_, err := s.Transact(fctx, func(tx *etagstore.Tx[counter]) error {
				if err := tx.Create("f", counter{1}); err != nil {
					return err
				}
				return increment("g")(tx)
			})
			done <- err
		}()
		go func() {
			done <- etagstore.Transact(fctx, func(tx *etagstore.Txn) error { return s.In(tx).Create("f2", counter{2}) })
		}()
		synctest.Wait()
		if len(done) != 2 {
			t.Errorf("%d of 2 fenced transactions done while the group's commit is held; want both", len(done))
		}
		close(h.hold)
		wg.Wait()
		for range 2 {
			if err := <-done; err != nil {
				t.Error(err)
			}
		}
		// A lower token is refused on the keys written under 4.
		_, err := s.Transact(etagstore.WithFence(t.Context(), 3), increment("f"))
		wantOnly(t, "Transact under a lower token", err, etagstore.ErrFenced)
	})
}

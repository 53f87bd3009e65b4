package etagstore_test

// Transactions deferred to the next batch because their keys do not fit
// the batch's commit (CheckCommit: another partition), under
// RetryPolicy.MaxAttempts: the members before the misfit run once; the
// misfit's run, which no request carried, does not count, so it runs once
// more, in the next batch, and commits (documented on Store.Transact).
import (
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/etagstore/etagstore"
)

func TestTxBatchMisfitDeferralCountsTowardMaxAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer runOutTimers()
		p := partitioned{newHeldCommits()}
		s := etagstore.New[counter](p, &etagstore.Options{Retry: &etagstore.RetryPolicy{MaxAttempts: 1}})
		var wg sync.WaitGroup
		holding(t, s, &wg)
		var eA, eB error
		var aRuns, bRuns atomic.Int64
		wg.Go(func() {
			_, eA = s.Transact(t.Context(), func(tx *etagstore.Tx[counter]) error { aRuns.Add(1); return tx.Put("a/1", counter{1}) })
		})
		synctest.Wait()
		wg.Go(func() {
			_, eB = s.Transact(t.Context(), func(tx *etagstore.Tx[counter]) error { bRuns.Add(1); return tx.Put("b/1", counter{1}) })
		})
		synctest.Wait()
		close(p.hold)
		wg.Wait()
		if eA != nil {
			t.Errorf("A: %v", eA)
		}
		t.Logf("B = %v after %d runs; A %d runs", eB, bRuns.Load(), aRuns.Load())
		if aRuns.Load() > 1 {
			t.Errorf("A's fn ran %d times with MaxAttempts 1 (its batch did not fit and the slots ran again a member at a time)", aRuns.Load())
		}
		if eB != nil || bRuns.Load() != 2 {
			t.Errorf("B = %v after %d runs; want nil after 2 (one in the batch it did not fit, uncounted; one in the next)", eB, bRuns.Load())
		}
	})
}

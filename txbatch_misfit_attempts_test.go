package etagstore_test

// FAILS: with MaxAttempts 1, B (deferred for not fitting A's partition) runs fn 3 times and A twice: txBatch.slots re-runs every slot member-at-a-time, uncounted, and leaveFor keeps lastAttempt so the next batch's run is uncounted too.

// Transactions deferred to the next batch because their keys do not fit
// the batch's commit (CheckCommit: another partition), under
// RetryPolicy.MaxAttempts: runs are counted per batch attempt across
// deferrals, as for a member deferred on an earlier member's pending write
// (TestTxBatchDeferredTwiceRespectsMaxAttempts): fn runs no more often than
// MaxAttempts.
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
		if bRuns.Load() > 1 {
			t.Errorf("B's fn ran %d times with MaxAttempts 1 (deferred for not fitting A's partition); Transact = %v", bRuns.Load(), eB)
		}
	})
}

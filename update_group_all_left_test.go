package etagstore_test

// Update batches whose members all give up just as the runner takes them:
// the batch's write never starts; each member gets ctx.Err() and nothing
// of theirs is written, and the key stays usable.
import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
)

func TestUpdateBatchWhoseMembersAllLeaveAsItIsTaken(t *testing.T) {
	for i := range 300 {
		synctest.Test(t, func(t *testing.T) {
			defer runOutTimers()
			s, gate := heldSolo(t)
			ctx := context.Background()
			var wg sync.WaitGroup
			wg.Go(func() {
				if _, err := s.Update(as(ctx, "solo"), "k", appendLog("solo")); err != nil {
					t.Errorf("solo: %v", err)
				}
			})
			synctest.Wait()
			mctx, mcancel := context.WithCancel(ctx)
			errs := make([]error, 3)
			for j := range errs {
				wg.Go(func() { _, errs[j] = s.Update(mctx, "k", appendLog("m")) })
			}
			synctest.Wait()
			mcancel()
			close(gate)
			wg.Wait()
			for j, err := range errs {
				if !errors.Is(err, context.Canceled) {
					t.Errorf("iteration %d member %d: %v", i, j, err)
				}
			}
			got, _ := s.Get(ctx, "k")
			if countIn(got.Value.Log, "m") != 0 {
				t.Errorf("iteration %d: %v", i, got.Value.Log)
			}
			if _, err := s.Update(ctx, "k", appendLog("after")); err != nil {
				t.Errorf("after: %v", err)
			}
		})
	}
}

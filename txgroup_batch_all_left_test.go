package etagstore_test

// Transactions grouped in a batch whose members all give up just as the
// runner takes them: the engine's retry loop ends before the first attempt
// (the batch's ctx, done when every member's is, is checked first), so the
// batch's plan never runs. Each member must get ctx.Err() and the process
// must go on.
import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/etagstore/etagstore"
)

func TestTxBatchWhoseMembersAllLeaveAsItIsTaken(t *testing.T) {
	for i := range 300 {
		synctest.Test(t, func(t *testing.T) {
			defer runOutTimers()
			h := newHeldCommits()
			s := etagstore.New[counter](h, nil)
			var wg sync.WaitGroup
			holding(t, s, &wg)
			mctx, mcancel := context.WithCancel(t.Context())
			var err error
			wg.Go(func() { _, err = s.Transact(mctx, increment("k")) })
			synctest.Wait() // queued behind the held transaction
			// The member gives up as the holder finishes: the runner may take it
			// before its goroutine runs to leave.
			mcancel()
			close(h.hold)
			wg.Wait()
			if !errors.Is(err, context.Canceled) {
				t.Errorf("iteration %d: %v, want context.Canceled", i, err)
			}
			if _, gerr := s.Get(t.Context(), "k"); !errors.Is(gerr, etagstore.ErrNotFound) {
				t.Errorf("iteration %d: the canceled member's write landed (%v)", i, gerr)
			}
		})
	}
}

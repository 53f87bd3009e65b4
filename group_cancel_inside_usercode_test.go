package etagstore_test

// A batch member (Update or Transact) whose ctx ends inside its own user
// code (mutate, fn), in its slot: nothing holding its change was sent, so
// it gets ctx.Err() and its change is not written; its batch-mates' land.
import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/etagstore/etagstore"
)

func TestUpdateBatchMemberCanceledInsideItsMutate(t *testing.T) {
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
		var eA, eM, eB error
		wg.Go(func() { _, eA = s.Update(ctx, "k", appendLog("A")) })
		synctest.Wait()
		mctx, mcancel := context.WithCancel(ctx)
		wg.Go(func() {
			_, eM = s.Update(mctx, "k", func(d *logDoc) error {
				mcancel()
				d.Log = append(d.Log, "M")
				return nil
			})
		})
		synctest.Wait()
		wg.Go(func() { _, eB = s.Update(ctx, "k", appendLog("B")) })
		synctest.Wait()
		close(gate)
		wg.Wait()
		if eA != nil || eB != nil {
			t.Errorf("A: %v, B: %v", eA, eB)
		}
		if !errors.Is(eM, context.Canceled) || errors.Is(eM, etagstore.ErrOutcomeUnknown) {
			t.Errorf("M: %v, want context.Canceled", eM)
		}
		got, _ := s.Get(ctx, "k")
		if fmt.Sprint(got.Value.Log) != "[solo A B]" {
			t.Errorf("stored %v", got.Value.Log)
		}
	})
}

func TestTxBatchMemberCanceledInsideItsFn(t *testing.T) {
	for _, where := range []string{"first run"} {
		t.Run(where, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				defer runOutTimers()
				h := newHeldCommits()
				s := etagstore.New[counter](h, nil)
				var wg sync.WaitGroup
				holding(t, s, &wg)
				var eA, eM, eB error
				wg.Go(func() { _, eA = s.Transact(t.Context(), increment("a")) })
				synctest.Wait()
				mctx, mcancel := context.WithCancel(t.Context())
				runs := 0
				wg.Go(func() {
					_, eM = s.Transact(mctx, func(tx *etagstore.Tx[counter]) error {
						runs++
						if where == "first run" || runs > 1 {
							mcancel()
						}
						return increment("m")(tx)
					})
				})
				synctest.Wait()
				wg.Go(func() { _, eB = s.Transact(t.Context(), increment("b")) })
				synctest.Wait()
				close(h.hold)
				wg.Wait()
				if eA != nil || eB != nil {
					t.Errorf("A: %v, B: %v", eA, eB)
				}
				if where == "first run" {
					if !errors.Is(eM, context.Canceled) || errors.Is(eM, etagstore.ErrOutcomeUnknown) {
						t.Errorf("M: %v, want context.Canceled", eM)
					}
					if _, err := s.Get(t.Context(), "m"); !errors.Is(err, etagstore.ErrNotFound) {
						t.Errorf("M's write: %v, want not written", err)
					}
				}
				for _, k := range []string{"a", "b"} {
					if d, err := s.Get(t.Context(), k); err != nil || d.Value.N != 1 {
						t.Errorf("%s = %+v, %v", k, d.Value, err)
					}
				}
			})
		})
	}
}

package etagstore_test

// Group commit of Updates: a member whose ctx ends while its batch's write
// is not in flight (refused unapplied, in the engine's pause before it is
// sent again) must get ctx.Err() and its mutation must not be written by
// the resend.
import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/memstore"
)

// hookClock is the bubble's clock, running onSleep before each pause.
type hookClock struct{ onSleep func() }

func (c *hookClock) Now() time.Time { return time.Now() }
func (c *hookClock) Sleep(ctx context.Context, d time.Duration) error {
	if c.onSleep != nil {
		c.onSleep()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func TestGroupedUpdateLeaverDuringThrottlePauseIsCanceledAndNotWritten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer runOutTimers()
		hb := &hookBackend{Backend: memstore.New(nil)}
		clock := &hookClock{}
		s := etagstore.New[logDoc](hb, &etagstore.Options{Clock: clock})
		ctx := context.Background()
		if _, err := s.Create(ctx, "k", logDoc{}); err != nil {
			t.Fatal(err)
		}
		gate := make(chan struct{})
		var throttled atomic.Bool
		hb.writeHook = func(ctx context.Context, key string, w driver.Write) (etagstore.ETag, error, bool) {
			switch role(ctx) {
			case "solo":
				<-gate
			case "L":
				if throttled.CompareAndSwap(false, true) {
					return "", fmt.Errorf("%w: throttled", driver.ErrNotApplied), true
				}
			}
			return "", nil, false
		}
		mctx, mcancel := context.WithCancel(ctx)
		var once sync.Once
		clock.onSleep = func() {
			if throttled.Load() {
				once.Do(func() {
					mcancel()
					synctest.Wait() // M leaves now, while nothing is in flight
				})
			}
		}
		var wg sync.WaitGroup
		wg.Go(func() {
			if _, err := s.Update(as(ctx, "solo"), "k", appendLog("solo")); err != nil {
				t.Errorf("solo: %v", err)
			}
		})
		synctest.Wait()
		var eL, eM, eN error
		wg.Go(func() { _, eL = s.Update(as(ctx, "L"), "k", appendLog("L")) })
		synctest.Wait()
		wg.Go(func() { _, eM = s.Update(mctx, "k", appendLog("M")) })
		synctest.Wait()
		wg.Go(func() { _, eN = s.Update(ctx, "k", appendLog("N")) })
		synctest.Wait()
		close(gate)
		wg.Wait()
		if !throttled.Load() {
			t.Fatal("the batch's write was never throttled")
		}
		if eL != nil || eN != nil {
			t.Errorf("L: %v, N: %v", eL, eN)
		}
		got, _ := s.Get(ctx, "k")
		switch {
		case errors.Is(eM, context.Canceled) && !errors.Is(eM, etagstore.ErrOutcomeUnknown):
			if countIn(got.Value.Log, "M") != 0 {
				t.Errorf("M got ctx.Err() but its mutation was written: %v", got.Value.Log)
			}
		default:
			t.Errorf("M: %v, want context.Canceled (nothing in flight when it left)", eM)
		}
		if fmt.Sprint(got.Value.Log) != "[solo L N]" {
			t.Errorf("stored %v", got.Value.Log)
		}
	})
}

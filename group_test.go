package etagstore_test

// Group commit: what a batch member that gives up does to its own result
// and to the other members. Each test runs in a synctest bubble: the
// callers' arrival order and the moment a member leaves are fixed by
// synctest.Wait (every other goroutine of the bubble is blocked: queued,
// held by the test backend, or returned), not by sleeping.
import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/memstore"

	"github.com/etagstore/etagstore/driver"
)

type logDoc struct{ Log []string }

// runOutTimers, at the end of a synctest bubble, lets the bubble's fake
// clock run until the Store's own timers have fired (a runner lingering for
// more callers after its last batch), so that no goroutine of the bubble is
// still blocked when it ends. It steers nothing: every caller has returned.
func runOutTimers() { time.Sleep(time.Minute) }

// The batch write lands but the answer is a 412 to a retry below the
// Store, which the backend marks ambiguous (driver.ErrAmbiguous, as the
// contract asks), so the engine resolves it by reading. In the window
// between the 412 and the read that finds the write, a member whose
// mutation the write holds gives up: it must not get ctx.Err(), since its
// mutation is committed. (A plain 412 is definite: see
// TestGroupedUpdateLeavingAfterDefiniteConflictIsCanceled.)
func TestLeaverOfALandedBatchWriteIsUnknown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer runOutTimers()
		hb := &hookBackend{Backend: memstore.New(nil)}
		s := etagstore.New[logDoc](hb, nil)
		ctx := context.Background()
		if _, err := s.Create(ctx, "k", logDoc{}); err != nil { // write 1
			t.Fatal(err)
		}
		gate := make(chan struct{})
		lctx, lcancel := context.WithCancel(ctx)
		var armRead sync.Once
		armed := make(chan struct{})
		var landed sync.Once
		var fired atomic.Bool
		hb.writeHook = func(ctx context.Context, key string, w driver.Write) (etagstore.ETag, error, bool) {
			first := false
			switch role(ctx) {
			case "solo": // the solo caller's write: hold it until the batch has queued
				<-gate
			case "L": // the batch's (L first) first write: it lands, the answer is a 412 to a retry
				if landed.Do(func() { first = true }); !first {
					break
				}
				fired.Store(true)
				if _, err := hb.Backend.Write(context.Background(), key, w); err != nil {
					t.Errorf("inner write: %v", err)
				}
				armRead.Do(func() { close(armed) })
				// A backend that sees its retry marks the refusal ambiguous
				// (the driver contract); a plain 412 is definite.
				return "", fmt.Errorf("%w: %w", driver.ErrAmbiguous, etagstore.ErrConflict), true
			}
			return "", nil, false
		}
		hb.afterRead = func(context.Context, string, driver.Item, error) {
			select {
			case <-armed:
				armRead = sync.Once{}
				armed = make(chan struct{}) // once
				lcancel()                   // L gives up now
				synctest.Wait()             // ... and has returned (or waits) before the read's result is used
			default:
			}
		}
		var wg sync.WaitGroup
		wg.Go(func() {
			if _, err := s.Update(as(ctx, "solo"), "k", func(d *logDoc) error { d.Log = append(d.Log, "solo"); return nil }); err != nil {
				t.Errorf("solo: %v", err)
			}
		})
		synctest.Wait() // the solo caller's write is held at the gate
		var lerr, aerr error
		wg.Go(func() {
			_, lerr = s.Update(as(lctx, "L"), "k", func(d *logDoc) error { d.Log = append(d.Log, "L"); return nil })
		})
		synctest.Wait() // L is queued, first
		wg.Go(func() {
			_, aerr = s.Update(ctx, "k", func(d *logDoc) error { d.Log = append(d.Log, "A"); return nil })
		})
		synctest.Wait() // A is queued behind L
		close(gate)
		wg.Wait()
		d, _ := s.Get(ctx, "k")
		t.Logf("stored %v; L: %v; A: %v", d.Value.Log, lerr, aerr)
		if !fired.Load() {
			t.Fatal("the batch's write never landed with its answer lost")
		}
		if slices.Contains(d.Value.Log, "L") && (errors.Is(lerr, context.Canceled)) {
			t.Errorf("L returned %v, but its mutation is stored: %v", lerr, d.Value.Log)
		}
	})
}

// A batch member leaving (its own ctx) between its turn and the send vetoes
// the write, and the batch is applied again without it. The others must not
// pay for it: the veto must not consume their retry attempts, or, when
// attempts run out, every other member gets a *ConflictError although
// nobody else wrote the key.
func membersLeavingBeforeTheSend(t *testing.T, maxAttempts, leavers int) {
	synctest.Test(t, func(t *testing.T) {
		defer runOutTimers()
		hb := &hookBackend{Backend: memstore.New(nil)}
		s := etagstore.New[counter](hb, &etagstore.Options{Retry: &etagstore.RetryPolicy{MaxAttempts: maxAttempts}})
		ctx := context.Background()
		if _, err := s.Create(ctx, "k", counter{}); err != nil {
			t.Fatal(err)
		}
		gate := make(chan struct{})
		hb.writeHook = func(ctx context.Context, key string, w driver.Write) (etagstore.ETag, error, bool) {
			if role(ctx) == "solo" { // the solo caller's write
				<-gate
			}
			return "", nil, false
		}
		var wg sync.WaitGroup
		wg.Go(func() { // solo
			if _, err := s.Update(as(ctx, "solo"), "k", func(c *counter) error { c.N++; return nil }); err != nil {
				t.Errorf("solo: %v", err)
			}
		})
		synctest.Wait() // the solo caller's write is held at the gate
		cancels := make([]context.CancelFunc, leavers)
		for i := range leavers {
			lctx, cancel := context.WithCancel(ctx)
			cancels[i] = cancel
			wg.Go(func() {
				_, err := s.Update(lctx, "k", func(c *counter) error { c.N++; return nil })
				if !errors.Is(err, context.Canceled) && err != nil {
					t.Logf("leaver %d: %v", i, err)
				}
			})
			synctest.Wait() // leaver i is queued, in order
		}
		var xerr, aerr error
		wg.Go(func() {
			_, aerr = s.Update(ctx, "k", func(c *counter) error { c.N++; return nil })
		})
		synctest.Wait() // A is queued behind the leavers
		calls := 0
		wg.Go(func() {
			_, xerr = s.Update(ctx, "k", func(c *counter) error {
				if calls < leavers {
					cancels[calls]() // one more member gives up while the batch is being applied
					synctest.Wait()  // ... and has left before X's turn ends
				}
				calls++
				c.N++
				return nil
			})
		})
		synctest.Wait() // X is queued last
		close(gate)
		wg.Wait()
		if aerr != nil || xerr != nil {
			t.Errorf("members that did not give up: A=%v X=%v (X's mutate ran %d times); nobody else wrote the key", aerr, xerr, calls)
		}
	})
}

func TestMemberLeavingBeforeTheSendDoesNotFailTheOthers(t *testing.T) {
	membersLeavingBeforeTheSend(t, 1, 1)
}

func TestMembersLeavingOneByOneDoNotExhaustTheOthersRetries(t *testing.T) {
	membersLeavingBeforeTheSend(t, 0, 10)
}

// A runner lingers before a batch for the callers the last batch answered
// to come back, but when they went on to other keys (a skewed workload) a
// linger only delays the batch: after a linger in vain, the next batch
// starts at once. Writes take 8 ms of the bubble's clock; a linger waits
// at most a quarter of the last batch's duration (2 ms). Every time.Sleep
// here is on that fake clock (synctest): it moves only once every other
// goroutine of the bubble is blocked, so it steers nothing by real time.
func TestRunnerStopsLingeringInVain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer runOutTimers()
		hb := &hookBackend{Backend: memstore.New(nil)}
		s := etagstore.New[counter](hb, nil)
		ctx := context.Background()
		if _, err := s.Create(ctx, "k", counter{}); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		var mu sync.Mutex
		var began []time.Duration // when each write after the Create began
		hb.writeHook = func(context.Context, string, driver.Write) (etagstore.ETag, error, bool) {
			mu.Lock()
			began = append(began, time.Since(start))
			mu.Unlock()
			time.Sleep(8 * time.Millisecond)
			return "", nil, false
		}
		var wg sync.WaitGroup
		update := func(n int) {
			for range n {
				wg.Go(func() {
					if _, err := s.Update(ctx, "k", func(c *counter) error { c.N++; return nil }); err != nil {
						t.Error(err)
					}
				})
			}
			synctest.Wait() // they are queued (or, the first, writing)
		}
		update(1)                         // t=0: solo, writes 0–8
		update(2)                         // queued: batch 1 writes 8–16
		time.Sleep(9 * time.Millisecond)  // t=9
		update(3)                         // batch 2 (3 callers) writes 16–24
		time.Sleep(8 * time.Millisecond)  // t=17
		update(2)                         // 2 < 3: the runner lingers 24–26 in vain; batch 3 writes 26–34
		time.Sleep(10 * time.Millisecond) // t=27
		update(1)                         // 1 < 2: batch 4 starts at 34 without lingering
		wg.Wait()
		want := []time.Duration{0, 8, 16, 26, 34}
		for i := range want {
			want[i] *= time.Millisecond
		}
		if !slices.Equal(began, want) {
			t.Errorf("writes began at %v, want %v", began, want)
		}
		if d, _ := s.Get(ctx, "k"); d.Value.N != 9 {
			t.Errorf("counter %d, want 9", d.Value.N)
		}
	})
}

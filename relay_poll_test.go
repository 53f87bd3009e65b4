package etagstore_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/memstore"
)

// Relay keeps its Poll whatever came before (issue 46, whose stalls were
// Azurite's, not the relay's): with Poll 25 ms, an event committed after
// an hour of idle passes is published within one Poll of its commit; an
// event committed while the publisher is down is published within the
// backoff's cap (a minute, +20%) of its recovery; the next event is
// again published within one Poll; and the success reset the backoff,
// so that one more failed publish waits about 100 ms (±20%), not a
// minute. On synctest's clock: deterministic, and the hour takes no
// time.
func TestRelayKeepsItsPollAfterIdleAndBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const poll = 25 * time.Millisecond
		b := memstore.New(nil)
		docs := etagstore.New[struct{ N int }](b, nil)
		ob := etagstore.NewOutbox[orderPlaced](b, &etagstore.OutboxOptions{Poll: poll})
		var down atomic.Bool
		published := make(chan string, 1)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			done <- ob.Relay(ctx, func(_ context.Context, ev etagstore.Event[orderPlaced]) error {
				if down.Load() {
					return errors.New("publisher down")
				}
				published <- ev.Value.Order
				return nil
			}, nil)
		}()
		emit := func(order string) {
			t.Helper()
			err := etagstore.Transact(t.Context(), func(tx *etagstore.Txn) error {
				if err := docs.In(tx).Put(order, struct{ N int }{1}); err != nil {
					return err
				}
				return ob.In(tx).Emit(orderPlaced{Order: order})
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		// publishedWithin waits for order's publish and fails the test if
		// it came later than within after start.
		publishedWithin := func(order string, start time.Time, within time.Duration) {
			t.Helper()
			select {
			case got := <-published:
				if took := time.Since(start); got != order || took > within {
					t.Errorf("published %q %v after, want %q within %v", got, took, order, within)
				}
			case <-time.After(time.Hour):
				t.Fatalf("%q not published within an hour", order)
			}
		}

		time.Sleep(time.Hour) // idle passes, every Poll
		emit("after-idle")
		publishedWithin("after-idle", time.Now(), poll)

		down.Store(true)
		emit("during-outage")
		time.Sleep(5 * time.Minute) // failed publishes: the backoff reaches its cap
		down.Store(false)
		publishedWithin("during-outage", time.Now(), time.Minute*12/10+poll)

		time.Sleep(time.Minute)
		emit("after-recovery")
		publishedWithin("after-recovery", time.Now(), poll)

		down.Store(true) // one more failure: its backoff starts again from 100 ms
		emit("second-outage")
		start := time.Now()
		time.Sleep(poll) // the publish that fails
		down.Store(false)
		publishedWithin("second-outage", start, poll+time.Millisecond*120+poll)

		cancel()
		if err := <-done; err != nil {
			t.Errorf("Relay = %v, want nil", err)
		}
	})
}

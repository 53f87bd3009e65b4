package etagstore_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/memstore"
)

// markHolding is a memstore whose mark commits (they create a sent
// record) wait for their context to end; active counts those running.
type markHolding struct {
	driver.Backend
	entered chan struct{}
	active  atomic.Int32
}

func (m *markHolding) Abilities() driver.Abilities {
	a := m.Backend.Abilities()
	commit := a.Commit
	a.Commit = func(ctx context.Context, actions []driver.Action) ([]driver.ETag, error) {
		for _, x := range actions {
			if strings.Contains(x.Key, ".s.") {
				m.active.Add(1)
				defer m.active.Add(-1)
				m.entered <- struct{}{}
				<-ctx.Done()
				return nil, ctx.Err()
			}
		}
		return commit(ctx, actions)
	}
	return a
}

// RelayBatchesOnce cancelled mid-pass (InFlight 3, Batch 8, 40 events):
// the first mark is held in its commit and 3 publishes are held in
// flight when the context ends; RelayBatchesOnce returns only once every
// one of them has returned (no publish, marker or commit left running),
// with the context's error, having marked none.
func TestRelayOnceCancelledLeavesNothingRunning(t *testing.T) {
	b := &markHolding{Backend: memstore.New(nil), entered: make(chan struct{}, 8)}
	docs := etagstore.New[struct{ N int }](b, nil)
	ob := etagstore.NewOutbox[orderPlaced](b, &etagstore.OutboxOptions{Batch: 8, InFlight: 3})
	emitOrders(t, docs, ob, 40)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var publishing atomic.Int32
	held := make(chan struct{}, 8)
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := ob.RelayBatchesOnce(ctx, func(ctx context.Context, evs []etagstore.Event[orderPlaced]) error {
			if evs[0].Seq < 33 {
				return nil // 1..32 land at once: a mark starts
			}
			publishing.Add(1)
			defer publishing.Add(-1)
			held <- struct{}{}
			<-ctx.Done()
			return ctx.Err()
		})
		done <- result{n, err}
	}()
	<-b.entered // the mark of 1..32 is in its commit
	<-held      // the publish of 33..40 is held
	cancel()
	r := <-done
	if got := publishing.Load(); got != 0 {
		t.Errorf("%d publishes still running after RelayBatchesOnce returned", got)
	}
	if got := b.active.Load(); got != 0 {
		t.Errorf("%d mark commits still running after RelayBatchesOnce returned", got)
	}
	if r.n != 0 || !errors.Is(r.err, context.Canceled) {
		t.Errorf("RelayBatchesOnce = %d, %v; want 0, context.Canceled", r.n, r.err)
	}
}

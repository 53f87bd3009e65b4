package etagstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/etagstore/etagstore"
)

// RelayBatches with Batch 100 over 70 events: one call carries all 70,
// in order; the marks go 32, 32 and 6 to a request (3 commits), and all
// 70 are marked. A call that fails marks none.
func TestRelayBatchesOverMarkBatch(t *testing.T) {
	ctx := t.Context()
	b := newMarkFailing(nil)
	docs := etagstore.New[struct{ N int }](b, nil)
	ob := etagstore.NewOutbox[orderPlaced](b, &etagstore.OutboxOptions{Batch: 100})
	emitOrders(t, docs, ob, 70)
	refused := errors.New("refused")
	n, err := ob.RelayBatchesOnce(ctx, func(context.Context, []etagstore.Event[orderPlaced]) error { return refused })
	if n != 0 || !errors.Is(err, refused) || b.marks.Load() != 0 {
		t.Fatalf("a failed call: %d marked, %v, %d mark commits; want 0, refused, 0", n, err, b.marks.Load())
	}
	var sizes []int
	n, err = ob.RelayBatchesOnce(ctx, func(_ context.Context, evs []etagstore.Event[orderPlaced]) error {
		for i, ev := range evs {
			if ev.Seq != int64(i+1) {
				t.Errorf("event %d of the call has Seq %d", i, ev.Seq)
			}
		}
		sizes = append(sizes, len(evs))
		return nil
	})
	if n != 70 || err != nil || len(sizes) != 1 || sizes[0] != 70 {
		t.Errorf("RelayBatchesOnce = %d, %v, calls of %v; want 70, nil, one call of 70", n, err, sizes)
	}
	if got := b.marks.Load(); got != 3 {
		t.Errorf("%d mark commits, want 3 (32, 32, 6)", got)
	}
	if n, err := ob.RelayBatchesOnce(ctx, func(context.Context, []etagstore.Event[orderPlaced]) error {
		t.Error("a call after all were marked")
		return nil
	}); n != 0 || err != nil {
		t.Errorf("the next pass = %d, %v", n, err)
	}
}

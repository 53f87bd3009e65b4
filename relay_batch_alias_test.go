package etagstore_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/memstore"
)

// emitOrders commits one transaction that emits n orderPlaced events
// (Seq 1..n) into ob, over docs.
func emitOrders(t *testing.T, docs *etagstore.Store[struct{ N int }], ob *etagstore.Outbox[orderPlaced], n int) {
	t.Helper()
	err := etagstore.Transact(t.Context(), func(tx *etagstore.Txn) error {
		if err := docs.In(tx).Put("k", struct{ N int }{n}); err != nil {
			return err
		}
		for i := range n {
			if err := ob.In(tx).Emit(orderPlaced{Order: string(rune('a' + i))}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A publisher of batches that appends to the slice it is given (here a
// trailer, as a publisher adding a marker or a heartbeat might) owns
// nothing beyond len(evs): the relay must still publish every event,
// 1..4, each before it is marked sent.
func TestRelayBatchesPublisherAppendLosesNoEvent(t *testing.T) {
	ctx := t.Context()
	b := memstore.New(nil)
	docs := etagstore.New[struct{ N int }](b, nil)
	ob := etagstore.NewOutbox[orderPlaced](b, &etagstore.OutboxOptions{Batch: 2})
	emitOrders(t, docs, ob, 4)
	var mu sync.Mutex
	var seqs []int64
	n, err := ob.RelayBatchesOnce(ctx, func(_ context.Context, evs []etagstore.Event[orderPlaced]) error {
		mu.Lock()
		for _, ev := range evs {
			seqs = append(seqs, ev.Seq)
		}
		mu.Unlock()
		_ = append(evs, etagstore.Event[orderPlaced]{ID: "trailer"}) // the publisher's own slice to extend
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(seqs, []int64{1, 2, 3, 4}) {
		t.Errorf("published Seqs %v, want [1 2 3 4]; RelayBatchesOnce marked %d sent", seqs, n)
	}
}

// The same publisher with InFlight 2: two calls run at once, and each
// must own its batch.
func TestRelayBatchesInFlightPublisherAppendRace(t *testing.T) {
	ctx := t.Context()
	b := memstore.New(nil)
	docs := etagstore.New[struct{ N int }](b, nil)
	ob := etagstore.NewOutbox[orderPlaced](b, &etagstore.OutboxOptions{Batch: 2, InFlight: 2})
	emitOrders(t, docs, ob, 4)
	var mu sync.Mutex
	var seqs []int64
	_, err := ob.RelayBatchesOnce(ctx, func(_ context.Context, evs []etagstore.Event[orderPlaced]) error {
		mine := make([]int64, 0, len(evs))
		for _, ev := range evs {
			mine = append(mine, ev.Seq)
		}
		_ = append(evs, etagstore.Event[orderPlaced]{ID: "trailer"})
		mu.Lock()
		seqs = append(seqs, mine...)
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(seqs)
	if !slices.Equal(seqs, []int64{1, 2, 3, 4}) {
		t.Errorf("published Seqs %v, want [1 2 3 4]", seqs)
	}
}

package etagstore_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/memstore"
)

// The outbox's cases over every backend are storetest.RunOutbox's
// (memstore, tablestore, blobstore); these are the refusals and names
// that depend on no backend.

type orderPlaced struct{ Order string }

type orderShipped struct{ Order string }

// An invalid Name refuses every call with ErrInvalidInput; so does a nil
// publish func; each in one line.
func TestOutboxRefusals(t *testing.T) {
	ctx := t.Context()
	b := memstore.New(nil)
	docs := etagstore.New[struct{ N int }](b, nil)
	want := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, etagstore.ErrInvalidInput) || strings.ContainsAny(err.Error(), "\r\n") {
			t.Errorf("%s = %v, want ErrInvalidInput in one line", what, err)
		}
	}
	publish := func(context.Context, etagstore.Event[orderPlaced]) error { return nil }
	for _, name := range []string{"has space", "dot.ted", strings.Repeat("n", 33), "é"} {
		ob := etagstore.NewOutbox[orderPlaced](b, &etagstore.OutboxOptions{Name: name})
		err := etagstore.Transact(ctx, func(tx *etagstore.Txn) error {
			if err := docs.In(tx).Put("k", struct{ N int }{1}); err != nil {
				return err
			}
			return ob.In(tx).Emit(orderPlaced{"o1"})
		})
		want("Emit in an outbox named "+name, err)
		for _, err := range ob.Read(ctx, "", 0) {
			want("Read of an outbox named "+name, err)
		}
		_, err = ob.RelayOnce(ctx, publish)
		want("RelayOnce of an outbox named "+name, err)
		want("Relay of an outbox named "+name, ob.Relay(ctx, publish, nil))
	}
	// A value JSON cannot encode: refused at Emit; fn going on commits its
	// document without an event.
	floats := etagstore.NewOutbox[float64](b, nil)
	var emitErr error
	err := etagstore.Transact(ctx, func(tx *etagstore.Txn) error {
		if err := docs.In(tx).Put("f", struct{ N int }{1}); err != nil {
			return err
		}
		emitErr = floats.In(tx).Emit(math.NaN())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want("Emit(NaN)", emitErr)
	for ev, err := range floats.Read(ctx, "", 0) {
		t.Errorf("Read after a refused Emit: %+v, %v", ev, err)
	}
	ob := etagstore.NewOutbox[orderPlaced](b, nil)
	_, err = ob.RelayOnce(ctx, nil)
	want("RelayOnce(nil)", err)
	want("Relay(nil)", ob.Relay(ctx, nil, nil))
	if _, err := docs.Get(ctx, "k"); !errors.Is(err, etagstore.ErrNotFound) {
		t.Errorf("a refused Emit's transaction wrote its document: %v", err)
	}
}

// Outboxes of two event types over one backend, by their default names
// (from the type), keep their events apart: one transaction emits into
// both, and each reads and relays its own, each numbered from 1.
func TestOutboxTwoTypes(t *testing.T) {
	ctx := t.Context()
	b := memstore.New(nil)
	docs := etagstore.New[struct{ N int }](b, nil)
	placed := etagstore.NewOutbox[orderPlaced](b, nil)
	shipped := etagstore.NewOutbox[orderShipped](b, nil)
	err := etagstore.Transact(ctx, func(tx *etagstore.Txn) error {
		if err := docs.In(tx).Put("o1", struct{ N int }{1}); err != nil {
			return err
		}
		if err := placed.In(tx).Emit(orderPlaced{"o1"}); err != nil {
			return err
		}
		if err := placed.In(tx).Emit(orderPlaced{"o2"}); err != nil {
			return err
		}
		return shipped.In(tx).Emit(orderShipped{"o1"})
	})
	if err != nil {
		t.Fatal(err)
	}
	var gotPlaced []etagstore.Event[orderPlaced]
	n, err := placed.RelayOnce(ctx, func(_ context.Context, ev etagstore.Event[orderPlaced]) error {
		gotPlaced = append(gotPlaced, ev)
		return nil
	})
	if n != 2 || err != nil || len(gotPlaced) != 2 || gotPlaced[0].Seq != 1 || gotPlaced[0].Value.Order != "o1" || gotPlaced[1].Seq != 2 || gotPlaced[1].Value.Order != "o2" {
		t.Errorf("placed: RelayOnce = %d, %v; published %+v", n, err, gotPlaced)
	}
	var gotShipped []etagstore.Event[orderShipped]
	for ev, err := range shipped.Read(ctx, "", 0) {
		if err != nil {
			t.Fatal(err)
		}
		gotShipped = append(gotShipped, ev)
	}
	if len(gotShipped) != 1 || gotShipped[0].Seq != 1 || gotShipped[0].Value.Order != "o1" {
		t.Errorf("shipped: Read = %+v, want its one event, Seq 1", gotShipped)
	}
	n, err = shipped.RelayOnce(ctx, func(context.Context, etagstore.Event[orderShipped]) error { return nil })
	if n != 1 || err != nil {
		t.Errorf("shipped: RelayOnce = %d, %v; want 1, nil", n, err)
	}
}

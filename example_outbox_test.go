package etagstore_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/memstore"
)

// An order service emits OrderPlaced in the transaction that creates the
// order: the event commits with the order, or neither does. RelayOnce
// publishes the committed events in order and marks them sent; Read
// reads them back, as a projection would.
func ExampleOutbox() {
	type Order struct{ Total int64 }
	type OrderPlaced struct {
		Order string
		Total int64
	}
	ctx := context.Background()
	backend := memstore.New(nil)
	orders := etagstore.New[Order](backend, nil)
	events := etagstore.NewOutbox[OrderPlaced](backend, nil) // beside the orders, on the same backend

	place := func(key string, total int64) error {
		return etagstore.Transact(ctx, func(tx *etagstore.Txn) error {
			if err := orders.In(tx).Create(key, Order{Total: total}); err != nil {
				return err
			}
			if err := events.In(tx).Emit(OrderPlaced{Order: key, Total: total}); err != nil {
				return err
			}
			if total > 100 {
				return errors.New("over the limit") // nothing commits: no order, no event
			}
			return nil
		})
	}
	fmt.Println(place("o1", 42), place("o2", 7), place("o3", 500))

	err := events.In(nil).Emit(OrderPlaced{}) // outside a transaction
	fmt.Println(errors.Is(err, etagstore.ErrInvalidInput))

	// Publish each committed event, in order, then mark it sent. A real
	// publisher sends it to a queue, with its ID for deduplication; Relay
	// does this in the background, every OutboxOptions.Poll.
	publish := func(ctx context.Context, e etagstore.Event[OrderPlaced]) error {
		fmt.Printf("publish #%d: %s, %d\n", e.Seq, e.Value.Order, e.Value.Total)
		return nil
	}
	n, err := events.RelayOnce(ctx, publish)
	fmt.Println(n, err)
	n, err = events.RelayOnce(ctx, publish) // nothing left to publish
	fmt.Println(n, err)

	// Read yields a partition's events after a Seq, relayed or not (within
	// OutboxOptions.Retention). memstore is one partition: "".
	for e, err := range events.Read(ctx, "", 1) {
		fmt.Println(e.Seq, e.Value.Order, err)
	}
	// Output:
	// <nil> <nil> over the limit
	// true
	// publish #1: o1, 42
	// publish #2: o2, 7
	// 2 <nil>
	// 0 <nil>
	// 2 o2 <nil>
}

// RelayBatchesOnce hands a publisher of batches up to Batch consecutive
// events of a partition a call, in Seq order (azqueuepub.NewBatches puts
// each batch in as few queue messages as fit).
func ExampleOutbox_RelayBatchesOnce() {
	type Counted struct{ N int }
	ctx := context.Background()
	backend := memstore.New(nil)
	counters := etagstore.New[Counted](backend, nil)
	events := etagstore.NewOutbox[Counted](backend, &etagstore.OutboxOptions{Batch: 4})
	for i := range 10 {
		err := etagstore.Transact(ctx, func(tx *etagstore.Txn) error {
			if err := counters.In(tx).Put(fmt.Sprint("c", i), Counted{N: i}); err != nil {
				return err
			}
			return events.In(tx).Emit(Counted{N: i})
		})
		if err != nil {
			fmt.Println(err)
			return
		}
	}
	n, err := events.RelayBatchesOnce(ctx, func(_ context.Context, batch []etagstore.Event[Counted]) error {
		fmt.Print("a batch of Seq")
		for _, e := range batch {
			fmt.Print(" ", e.Seq)
		}
		fmt.Println()
		return nil
	})
	fmt.Println(n, err)
	// Output:
	// a batch of Seq 1 2 3 4
	// a batch of Seq 5 6 7 8
	// a batch of Seq 9 10
	// 10 <nil>
}

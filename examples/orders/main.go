// Command orders is a transactional outbox end to end: an order service
// places orders whose OrderPlaced events commit in the same transaction
// (an etagstore Outbox, in an Azure table), a relay publishes the events
// to an Azure Storage queue (azqueuepub), and a worker emails the customer
// once per order, dropping repeated deliveries by event ID.
//
// To show the repeats, the relay's first -lost publishes lose their
// answer after the queue took the message, as a relay that crashes
// between publishing and marking an event sent does: the relay publishes
// those events again, and the worker drops the second copies.
//
//	scripts/with-azurite go run ./examples/orders        # needs Azurite (tables and queues)
//	go run ./examples/orders -conn "$CONNECTION_STRING"
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/azqueuepub"
	"github.com/etagstore/etagstore/tablestore"
)

func main() {
	conn := flag.String("conn", os.Getenv("ETAGSTORE_AZURITE"), "Azure Storage connection string (tables and queues)")
	orders := flag.Int("orders", 12, "orders to place")
	lost := flag.Int("lost", 3, "publishes whose answer is lost (the relay publishes those events again)")
	timeout := flag.Duration("timeout", 30*time.Second, "how long to wait for every email")
	flag.Parse()
	if *conn == "" {
		log.Fatal("no connection string: pass -conn, or run through scripts/with-azurite")
	}
	ctx := context.Background()
	name := fmt.Sprintf("orders%d", time.Now().UnixNano()%1e9)
	env, err := setup(ctx, *conn, name)
	if err != nil {
		log.Fatal(err)
	}
	defer env.teardown()

	// The relay and the worker run beside the order service, as they would
	// in their own processes.
	run, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	publish := loseAnswers(azqueuepub.New[OrderPlaced](env.queue, nil), *lost)
	wg.Go(func() { _ = env.service.Events.Relay(run, publish.publish, nil) })
	var mu sync.Mutex
	emails := map[string]int{} // emails sent per order
	worker := &Worker{Queue: env.queue, Handled: env.handled, Visibility: 30 * time.Second,
		Email: func(_ context.Context, e OrderPlaced) error {
			mu.Lock()
			defer mu.Unlock()
			emails[e.Order]++
			fmt.Printf("email to %s: order %s placed, %d.%02d\n", e.Customer, e.Order, e.Total/100, e.Total%100)
			return nil
		}}
	for range 2 {
		wg.Go(func() {
			if err := worker.Run(run); err != nil {
				log.Print(err)
			}
		})
	}

	customers := []string{"alice", "bob", "carol"}
	for i := range *orders {
		c := customers[i%len(customers)]
		key := fmt.Sprintf("%s/o-%03d", c, i+1)
		if err := env.service.Place(ctx, key, Order{Customer: c, Items: []string{"book"}, Total: int64(1250 + 100*i)}); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Printf("placed %d orders for %d customers, each with its OrderPlaced in one transaction\n", *orders, len(customers))

	// Done when every order is emailed, every repeat dropped, and every
	// message deleted.
	deadline := time.Now().Add(*timeout)
	for worker.Emailed.Load() < int64(*orders) || worker.Repeats.Load() < int64(*lost) || worker.Deleted.Load() < int64(*orders+*lost) {
		if time.Now().After(deadline) {
			log.Fatalf("after %s: %d of %d orders emailed, %d of %d repeats dropped, %d messages deleted", *timeout,
				worker.Emailed.Load(), *orders, worker.Repeats.Load(), *lost, worker.Deleted.Load())
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	wg.Wait()

	fmt.Printf("relay: %d publishes for %d events (%d answers lost, published again)\n", publish.calls.Load(), *orders, *lost)
	fmt.Printf("worker: received %d deliveries, emailed %d, dropped %d repeats by event ID\n",
		worker.Received.Load(), worker.Emailed.Load(), worker.Repeats.Load())
	for order, n := range emails {
		if n != 1 {
			log.Fatalf("order %s was emailed %d times", order, n)
		}
	}
	fmt.Printf("every order emailed once\n")
	props, err := env.queue.GetProperties(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	if n := props.ApproximateMessagesCount; n == nil || *n != 0 {
		log.Fatalf("queue %s not drained", name)
	}
	fmt.Printf("queue %s drained\n", name)
}

// env is the table and queue of one run.
type env struct {
	table   *aztables.Client
	queue   *azqueue.QueueClient
	service *Service
	handled *etagstore.Store[Handled]
}

// setup creates a table (the orders, their outbox, and the worker's
// handled IDs) and a queue, both named name.
func setup(ctx context.Context, conn, name string) (*env, error) {
	ts, err := aztables.NewServiceClientFromConnectionString(conn, nil)
	if err != nil {
		return nil, err
	}
	if _, err := ts.CreateTable(ctx, name, nil); err != nil {
		return nil, err
	}
	qs, err := azqueue.NewServiceClientFromConnectionString(conn, nil)
	if err != nil {
		return nil, err
	}
	q := qs.NewQueueClient(name)
	if _, err := q.Create(ctx, nil); err != nil {
		return nil, err
	}
	table := ts.NewClient(name)
	// Orders are keyed customer/order: a customer's orders, and their
	// events, are one partition, in which the events are numbered (Seq).
	orders := tablestore.New(table, nil)
	return &env{
		table: table,
		queue: q,
		service: &Service{
			Orders: etagstore.New[Order](orders, nil),
			Events: etagstore.NewOutbox[OrderPlaced](orders, &etagstore.OutboxOptions{Poll: 50 * time.Millisecond}),
		},
		handled: tablestore.NewStore[Handled](table, &tablestore.Options{Partition: "handled"}, nil),
	}, nil
}

func (e *env) teardown() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _ = e.queue.Delete(ctx, nil)
	_, _ = e.table.Delete(ctx, nil)
}

// lossy is a publish function whose first lost calls lose their answer
// after the message was enqueued.
type lossy struct {
	next  func(context.Context, etagstore.Event[OrderPlaced]) error
	lost  atomic.Int64 // answers still to lose
	calls atomic.Int64
}

func loseAnswers(next func(context.Context, etagstore.Event[OrderPlaced]) error, n int) *lossy {
	l := &lossy{next: next}
	l.lost.Store(int64(n))
	return l
}

func (l *lossy) publish(ctx context.Context, ev etagstore.Event[OrderPlaced]) error {
	l.calls.Add(1)
	if err := l.next(ctx, ev); err != nil {
		return err
	}
	if l.lost.Add(-1) >= 0 {
		return errors.New("the answer was lost")
	}
	return nil
}

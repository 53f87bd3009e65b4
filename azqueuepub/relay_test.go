package azqueuepub_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/azqueuepub"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/memstore"
	"github.com/etagstore/etagstore/storetest"
	"github.com/etagstore/etagstore/tablestore"
)

type Order struct {
	Customer string
	Total    int64
}

// backends are the two an outbox lives on, with the keys of orders in
// two partitions (one on memstore, which has one scope).
var backends = []struct {
	name   string
	new    func(t *testing.T) driver.Backend
	parts  []string // an order key's prefix per partition
	scopes []string // their Event.Partition
}{
	{"memstore", func(*testing.T) driver.Backend { return memstore.New(nil) }, []string{"a-", "b-"}, []string{"", ""}},
	{"tables", func(t *testing.T) driver.Backend { return tablestore.New(azuritetest.NewTable(t), nil) }, []string{"east/", "west/"}, []string{"east/", "west/"}},
}

// consumer dequeues events and keeps each ID's first delivery: what a
// deduplicating consumer handles, in the order it handled them.
type consumer struct {
	seen     map[string]bool
	handled  []etagstore.Event[OrderPlaced]
	repeats  int
	messages int
}

func (c *consumer) take(t *testing.T, q *azqueue.QueueClient) {
	t.Helper()
	if c.seen == nil {
		c.seen = map[string]bool{}
	}
	for _, m := range drain(t, q) {
		evs, err := azqueuepub.DecodeAll[OrderPlaced](*m.MessageText) // New's one event, or NewBatches' several
		if err != nil {
			t.Fatal(err)
		}
		c.messages++
		for _, ev := range evs {
			if c.seen[ev.ID] {
				c.repeats++
				continue
			}
			c.seen[ev.ID] = true
			c.handled = append(c.handled, ev)
		}
	}
}

// check fails unless the consumer handled each order's event once, in
// its partition (the scope of the order's prefix among parts) and,
// within a partition, in Seq order from 1 with no gap.
func (c *consumer) check(t *testing.T, orders map[string]int64, parts, scopes []string) {
	t.Helper()
	if len(c.handled) != len(orders) {
		t.Errorf("handled %d events, want one per order (%d)", len(c.handled), len(orders))
	}
	last := map[string]int64{}
	for _, ev := range c.handled {
		if total, ok := orders[ev.Value.Order]; !ok || total != ev.Value.Total {
			t.Errorf("event %+v: no such order", ev)
		}
		for i, p := range parts {
			if strings.HasPrefix(ev.Value.Order, p) && ev.Partition != scopes[i] {
				t.Errorf("event %+v: in partition %q, want %q", ev, ev.Partition, scopes[i])
			}
		}
		if ev.Seq != last[ev.Partition]+1 {
			t.Errorf("partition %q: event %d after %d", ev.Partition, ev.Seq, last[ev.Partition])
		}
		last[ev.Partition] = ev.Seq
	}
}

// placeOrders places n orders in each partition, each in a transaction
// that emits its OrderPlaced, and returns them by key.
func placeOrders(t *testing.T, b driver.Backend, outbox *etagstore.Outbox[OrderPlaced], parts []string, n int) map[string]int64 {
	t.Helper()
	orders := etagstore.New[Order](b, nil)
	placed := map[string]int64{}
	for i := range n {
		for _, p := range parts {
			key, total := fmt.Sprintf("%s%03d", p, i), int64(100+i)
			err := etagstore.Transact(t.Context(), func(tx *etagstore.Txn) error {
				if err := orders.In(tx).Create(key, Order{Customer: "c", Total: total}); err != nil {
					return err
				}
				return outbox.In(tx).Emit(OrderPlaced{Order: key, Total: total})
			})
			if err != nil {
				t.Fatal(err)
			}
			placed[key] = total
		}
	}
	return placed
}

// Orders placed with their events, relayed to a queue by RelayOnce with
// azqueuepub's publisher: each event reaches the queue once, in order per
// partition, and a second pass publishes nothing.
func TestRelayToQueue(t *testing.T) {
	t.Parallel()
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			b := be.new(t)
			outbox := etagstore.NewOutbox[OrderPlaced](b, nil)
			orders := placeOrders(t, b, outbox, be.parts, 5)
			q := azuritetest.NewQueue(t)
			pub := azqueuepub.New[OrderPlaced](q, nil)
			n, err := outbox.RelayOnce(t.Context(), pub)
			if err != nil || n != len(orders) {
				t.Fatalf("RelayOnce published %d (%v), want %d", n, err, len(orders))
			}
			var c consumer
			c.take(t, q)
			c.check(t, orders, be.parts, be.scopes)
			if c.repeats != 0 {
				t.Errorf("%d repeats without a fault", c.repeats)
			}
			// Read, after the relay, yields the events the queue got:
			// the same IDs, Seqs and values.
			got := map[string]etagstore.Event[OrderPlaced]{}
			for _, ev := range c.handled {
				got[ev.ID] = ev
			}
			read := 0
			for _, scope := range slices.Compact(slices.Clone(be.scopes)) { // memstore: one scope
				for ev, err := range outbox.Read(t.Context(), scope, 0) {
					if err != nil {
						t.Fatal(err)
					}
					read++
					if m, ok := got[ev.ID]; !ok || m.Seq != ev.Seq || m.Partition != ev.Partition || m.Value != ev.Value || !m.Time.Equal(ev.Time) {
						t.Errorf("Read yields %+v; the queue got %+v", ev, m)
					}
				}
			}
			if read != len(orders) {
				t.Errorf("Read yields %d events, want %d", read, len(orders))
			}
			if n, err := outbox.RelayOnce(t.Context(), pub); n != 0 || err != nil {
				t.Errorf("a second RelayOnce published %d (%v), want 0", n, err)
			}
			if msgs := drain(t, q); len(msgs) != 0 {
				t.Errorf("%d messages after a pass with nothing pending", len(msgs))
			}
		})
	}
}

// A missing queue stops the relay at each partition's first event with
// ErrStorageNotFound; once the queue exists, the next pass publishes them
// all.
func TestRelayToMissingQueue(t *testing.T) {
	t.Parallel()
	b := memstore.New(nil)
	outbox := etagstore.NewOutbox[OrderPlaced](b, nil)
	orders := placeOrders(t, b, outbox, []string{"a-"}, 3)
	missing := azuritetest.MissingQueue(t)
	n, err := outbox.RelayOnce(t.Context(), azqueuepub.New[OrderPlaced](missing, nil))
	if n != 0 {
		t.Errorf("published %d to a missing queue", n)
	}
	// Relay's own prefix names the event it stopped at (relay.go).
	wantSentinel(t, "RelayOnce to a missing queue", err, etagstore.ErrStorageNotFound, "etagstore: relay of event 1 ")

	q := azuritetest.NewQueue(t)
	if n, err := outbox.RelayOnce(t.Context(), azqueuepub.New[OrderPlaced](q, nil)); n != 3 || err != nil {
		t.Fatalf("RelayOnce to the queue: %d, %v; want 3", n, err)
	}
	var c consumer
	c.take(t, q)
	c.check(t, orders, []string{"a-"}, []string{""})
}

// Through a proxy that drops a third of the enqueues' answers after the
// queue took them, and fails a tenth with 500, with no retry in the SDK
// (the relay's passes retry): passes of RelayOnce publish every event at
// least once; the queue holds repeats, each with its event's ID, and the
// deduplicating consumer handles each event once, in Seq order per
// partition (an event is published again until it is enqueued for sure,
// and only then does the next one go).
func TestRelayThroughFaults(t *testing.T) {
	t.Parallel()
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			b := be.new(t)
			outbox := etagstore.NewOutbox[OrderPlaced](b, nil)
			orders := placeOrders(t, b, outbox, be.parts, 8)
			proxy := storetest.StartFaultProxy(t, azuritetest.Host(t, "Queue"), storetest.Faults{Seed: 46, DropAfterCommit: 0.3, ServerError: 0.1})
			q := azuritetest.NewQueueWith(t, proxy.URL(), azcore.ClientOptions{Retry: policy.RetryOptions{MaxRetries: -1}, Transport: azuritetest.Transport})
			pub := azqueuepub.New[OrderPlaced](q, nil)
			published, passes, failed := 0, 0, 0
			for ; published < len(orders) && passes < 100; passes++ {
				n, err := outbox.RelayOnce(t.Context(), pub)
				published += n
				switch {
				case errors.Is(err, etagstore.ErrUnavailable):
					failed++
				case err != nil:
					t.Fatalf("pass %d: %v, want nil or ErrUnavailable", passes, err)
				}
			}
			if published != len(orders) {
				t.Fatalf("after %d passes, %d of %d events published", passes, published, len(orders))
			}
			var c consumer
			c.take(t, directQueue(t, q))
			c.check(t, orders, be.parts, be.scopes)
			t.Logf("%d passes, %d of them stopped by a failed publish; the proxy's faults: %v; %d repeats dropped by ID", passes, failed, proxy.Counts(), c.repeats)
			if proxy.Counts()["drop-after-commit"] > 0 && c.repeats == 0 {
				t.Error("answers were dropped after the enqueue, yet no event came twice")
			}
		})
	}
}

// directQueue is a client of via's queue that talks to Azurite itself.
func directQueue(t *testing.T, via *azqueue.QueueClient) *azqueue.QueueClient {
	t.Helper()
	u, err := azqueue.ParseURL(via.URL())
	if err != nil {
		t.Fatal(err)
	}
	svc, err := azqueue.NewServiceClientFromConnectionString(azuritetest.ConnectionString(t), &azqueue.ClientOptions{ClientOptions: azuritetest.Options})
	if err != nil {
		t.Fatal(err)
	}
	return svc.NewQueueClient(u.QueueName)
}

// fixedClock tells one time (an event's Time, and so its size, is
// known); it sleeps as the system's does.
type fixedClock struct{ now time.Time }

func (c fixedClock) Now() time.Time { return c.now }
func (c fixedClock) Sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// The largest event Emit takes (its Event is etagstore.MaxEventSize bytes
// of JSON as Emit measures it) commits, relays and arrives whole; one
// byte more is ErrTooLarge at Emit.
func TestLargestEventRelays(t *testing.T) {
	t.Parallel()
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			b := be.new(t)
			clock := fixedClock{time.Date(2026, 11, 27, 17, 28, 9, 123456789, time.UTC)}
			outbox := etagstore.NewOutbox[OrderPlaced](b, &etagstore.OutboxOptions{Options: etagstore.Options{Clock: clock}})
			orders := etagstore.New[Order](b, nil)
			key := be.parts[0] + "big"
			// The size Emit measures: an ID of 32 hex digits, a Seq of 16.
			scope := be.scopes[0]
			measure := func(v OrderPlaced) int {
				value, _ := json.Marshal(v)
				b, _ := json.Marshal(etagstore.Event[json.RawMessage]{ID: strings.Repeat("f", 32), Partition: scope, Seq: 1e15, Time: clock.now, Value: value})
				return len(b)
			}
			v := OrderPlaced{Order: key, Total: 1}
			v.Order += strings.Repeat("x", etagstore.MaxEventSize-measure(v))
			if n := measure(v); n != etagstore.MaxEventSize {
				t.Fatalf("measured %d bytes, want %d", n, etagstore.MaxEventSize)
			}
			emit := func(v OrderPlaced) error {
				return etagstore.Transact(t.Context(), func(tx *etagstore.Txn) error {
					if err := orders.In(tx).Put(key, Order{Total: v.Total}); err != nil {
						return err
					}
					return outbox.In(tx).Emit(v)
				})
			}
			over := v
			over.Order += "x"
			wantSentinel(t, "Emit one byte over MaxEventSize", emit(over), etagstore.ErrTooLarge)
			if err := emit(v); err != nil {
				t.Fatalf("Emit of MaxEventSize: %v", err)
			}
			q := azuritetest.NewQueue(t)
			if n, err := outbox.RelayOnce(t.Context(), azqueuepub.New[OrderPlaced](q, nil)); n != 1 || err != nil {
				t.Fatalf("RelayOnce: %d, %v; want the one event", n, err)
			}
			var c consumer
			c.take(t, q)
			if len(c.handled) != 1 || c.handled[0].Value != v {
				t.Fatalf("the queue held %d events, want the one emitted, whole", len(c.handled))
			}
		})
	}
}

// Two relays race over one partition while orders keep coming: the queue
// may hold repeats, but the deduplicating consumer meets every event, and
// meets each partition's events first in Seq order with no gap (a relay
// publishes an event only after the one before it was published by it or
// marked sent by the other).
func TestRacingRelays(t *testing.T) {
	t.Parallel()
	b := tablestore.New(azuritetest.NewTable(t), nil)
	outbox := etagstore.NewOutbox[OrderPlaced](b, nil)
	orders := etagstore.New[Order](b, nil)
	q := azuritetest.NewQueue(t)
	pub := azqueuepub.New[OrderPlaced](q, nil)
	const emitters, each = 4, 5
	var placing, relaying sync.WaitGroup
	placed := make(chan struct{})
	for e := range emitters {
		placing.Go(func() {
			for i := range each {
				key := fmt.Sprintf("shop/%d-%d", e, i)
				err := etagstore.Transact(t.Context(), func(tx *etagstore.Txn) error {
					if err := orders.In(tx).Create(key, Order{Total: 1}); err != nil {
						return err
					}
					return outbox.In(tx).Emit(OrderPlaced{Order: key, Total: 1})
				})
				if err != nil {
					t.Error(err)
				}
			}
		})
	}
	for range 2 {
		relaying.Go(func() {
			for done := false; !done; {
				select {
				case <-placed:
					done = true // one more pass after the last commit
				default:
				}
				if _, err := outbox.RelayOnce(t.Context(), pub); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	placing.Wait()
	close(placed)
	relaying.Wait()
	if n, err := outbox.RelayOnce(t.Context(), pub); n != 0 || err != nil {
		t.Errorf("a pass after both relays ended published %d (%v), want nothing left", n, err)
	}
	var c consumer
	c.take(t, q)
	want := map[string]int64{}
	for e := range emitters {
		for i := range each {
			want[fmt.Sprintf("shop/%d-%d", e, i)] = 1
		}
	}
	c.check(t, want, []string{"shop/"}, []string{"shop/"})
	t.Logf("%d events, %d repeats dropped", len(c.handled), c.repeats)
}

// Orders placed with their events, relayed by RelayBatchesOnce with
// NewBatches: 12 events of a partition go in one call, one message, and
// the consumer, reading messages with DecodeAll, handles each event once,
// in order per partition; a second pass publishes nothing.
func TestRelayBatchesToQueue(t *testing.T) {
	t.Parallel()
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			b := be.new(t)
			outbox := etagstore.NewOutbox[OrderPlaced](b, nil)
			orders := placeOrders(t, b, outbox, be.parts, 6)
			q := azuritetest.NewQueue(t)
			pub := azqueuepub.NewBatches[OrderPlaced](q, nil)
			n, err := outbox.RelayBatchesOnce(t.Context(), pub)
			if err != nil || n != len(orders) {
				t.Fatalf("RelayBatchesOnce published %d (%v), want %d", n, err, len(orders))
			}
			var c consumer
			c.take(t, q)
			c.check(t, orders, be.parts, be.scopes)
			if want := len(slices.Compact(slices.Clone(be.scopes))); c.messages != want {
				t.Errorf("%d messages, want %d: one per partition's batch", c.messages, want)
			}
			if n, err := outbox.RelayBatchesOnce(t.Context(), pub); n != 0 || err != nil {
				t.Errorf("a second RelayBatchesOnce published %d (%v), want 0", n, err)
			}
		})
	}
}

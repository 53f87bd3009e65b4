package main

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/azqueuepub"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/internal/smoke"
)

// The package documentation's `scripts/with-azurite go run
// ./examples/orders`, run as a program with its defaults (12 orders, 3
// lost answers; Azurite through ETAGSTORE_AZURITE): it must end on its
// own, email every order once, drop each repeat, and leave the queue
// empty.
func TestMainSmoke(t *testing.T) {
	t.Parallel()
	azuritetest.ConnectionString(t) // fails, never skips, without Azurite
	bin := smoke.Build(t)
	out, errOut := smoke.Run(t, 60*time.Second, bin)
	fail := func(format string, args ...any) {
		t.Helper()
		t.Errorf(format, args...)
		t.Logf("stdout:\n%s\nstderr:\n%s", smoke.Indent(out), smoke.Indent(errOut))
	}
	find := func(re string) []int {
		t.Helper()
		m := regexp.MustCompile(`(?m)^` + re + `$`).FindStringSubmatch(out)
		if m == nil {
			fail("no line matching %q", re)
			return nil
		}
		n := make([]int, len(m)-1)
		for i, s := range m[1:] {
			n[i], _ = strconv.Atoi(s)
		}
		return n
	}

	const orders, lost = 12, 3 // main's defaults
	if n := find(`placed (\d+) orders for 3 customers, each with its OrderPlaced in one transaction`); n != nil && n[0] != orders {
		fail("placed %d orders, want %d", n[0], orders)
	}
	if n := find(`relay: (\d+) publishes for (\d+) events \((\d+) answers lost, published again\)`); n != nil && (n[0] != orders+lost || n[1] != orders) {
		fail("%d publishes for %d events, want %d for %d", n[0], n[1], orders+lost, orders)
	}
	if n := find(`worker: received (\d+) deliveries, emailed (\d+), dropped (\d+) repeats by event ID`); n != nil && (n[0] != orders+lost || n[1] != orders || n[2] != lost) {
		fail("received %d, emailed %d, dropped %d; want %d, %d, %d", n[0], n[1], n[2], orders+lost, orders, lost)
	}
	if emails := regexp.MustCompile(`(?m)^email to \w+: order \w+/o-\d+ placed, \d+\.\d\d$`).FindAllString(out, -1); len(emails) != orders {
		fail("%d emails printed, want %d", len(emails), orders)
	}
	find(`every order emailed once`)
	find(`queue orders\d+ drained`)
	if errOut != "" {
		fail("the example wrote to stderr")
	}
}

// The package documentation's other form, `go run ./examples/orders -conn
// "$CONNECTION_STRING"`: the connection string from the flag alone
// (ETAGSTORE_AZURITE emptied), with fewer orders.
func TestMainConnFlag(t *testing.T) {
	conn := azuritetest.ConnectionString(t)
	bin := smoke.Build(t)
	t.Setenv(azuritetest.EnvVar, "")
	out, errOut := smoke.Run(t, 60*time.Second, bin, "-conn", conn, "-orders", "3", "-lost", "1")
	if !regexp.MustCompile(`(?m)^worker: received 4 deliveries, emailed 3, dropped 1 repeats by event ID$`).MatchString(out) || errOut != "" {
		t.Errorf("want 3 orders emailed and 1 repeat dropped; stdout:\n%s\nstderr:\n%s", smoke.Indent(out), smoke.Indent(errOut))
	}
}

// rig is an env of the test's own (a fresh table and queue), with a
// worker whose emails are counted per order.
type rig struct {
	*env
	worker *Worker
	mu     sync.Mutex
	emails map[string]int
	fail   map[string]bool // orders whose next email fails
}

func newRig(t *testing.T, visibility time.Duration) *rig {
	t.Helper()
	e, err := setup(t.Context(), azuritetest.ConnectionString(t), azuritetest.Name("orders"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.teardown)
	r := &rig{env: e, emails: map[string]int{}, fail: map[string]bool{}}
	r.worker = &Worker{Queue: e.queue, Handled: e.handled, Visibility: visibility,
		Email: func(_ context.Context, o OrderPlaced) error {
			r.mu.Lock()
			defer r.mu.Unlock()
			if r.fail[o.Order] {
				delete(r.fail, o.Order)
				return errors.New("mail server down")
			}
			r.emails[o.Order]++
			return nil
		}}
	return r
}

// place places n orders of customer.
func (r *rig) place(t *testing.T, customer string, n int) {
	t.Helper()
	for i := range n {
		if err := r.service.Place(t.Context(), fmt.Sprintf("%s/o-%03d", customer, i+1), Order{Customer: customer, Total: 100}); err != nil {
			t.Fatal(err)
		}
	}
}

// drain lets the worker take messages until the queue answers empty
// (Azurite enqueues synchronously: a message is visible once its enqueue
// returned).
func (r *rig) drain(t *testing.T) {
	t.Helper()
	for range 100 {
		n, err := r.worker.Once(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
	}
	t.Fatal("the queue does not empty")
}

// Every event published twice (by two relays without a lock, say): the
// worker emails each order once and drops the second copies by ID.
func TestWorkerDropsRepeats(t *testing.T) {
	t.Parallel()
	r := newRig(t, 30*time.Second)
	r.place(t, "alice", 4)
	r.place(t, "bob", 3)
	pub := azqueuepub.New[OrderPlaced](r.queue, nil)
	twice := func(ctx context.Context, ev etagstore.Event[OrderPlaced]) error {
		if err := pub(ctx, ev); err != nil {
			return err
		}
		return pub(ctx, ev)
	}
	if n, err := r.service.Events.RelayOnce(t.Context(), twice); n != 7 || err != nil {
		t.Fatalf("RelayOnce: %d, %v; want 7", n, err)
	}
	r.drain(t)
	if got := r.worker.Received.Load(); got != 14 {
		t.Errorf("received %d deliveries, want 14", got)
	}
	if e, rep := r.worker.Emailed.Load(), r.worker.Repeats.Load(); e != 7 || rep != 7 {
		t.Errorf("emailed %d and dropped %d, want 7 and 7", e, rep)
	}
	for order, n := range r.emails {
		if n != 1 {
			t.Errorf("%s emailed %d times", order, n)
		}
	}
	if len(r.emails) != 7 {
		t.Errorf("%d orders emailed, want 7", len(r.emails))
	}
}

// An email that fails forgets the event's ID: the message comes back
// when its visibility timeout ends, and the email goes then.
func TestFailedEmailIsSentOnRedelivery(t *testing.T) {
	t.Parallel()
	r := newRig(t, time.Second) // the service's shortest visibility timeout
	r.place(t, "carol", 2)
	r.fail["carol/o-002"] = true
	if n, err := r.service.Events.RelayOnce(t.Context(), azqueuepub.New[OrderPlaced](r.queue, nil)); n != 2 || err != nil {
		t.Fatalf("RelayOnce: %d, %v; want 2", n, err)
	}
	r.drain(t) // carol/o-002's message stays, hidden for a second
	if r.emails["carol/o-002"] != 0 || r.emails["carol/o-001"] != 1 {
		t.Fatalf("emails before the redelivery: %v", r.emails)
	}
	// The queue shows the message again when its visibility timeout ends,
	// on the service's clock: poll it, within a bound.
	deadline := time.Now().Add(10 * time.Second)
	for r.emails["carol/o-002"] == 0 && time.Now().Before(deadline) {
		if _, err := r.worker.Once(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if r.emails["carol/o-002"] != 1 || r.emails["carol/o-001"] != 1 || r.worker.Repeats.Load() != 0 {
		t.Errorf("emails after the redelivery: %v, %d repeats; want each once, no repeat", r.emails, r.worker.Repeats.Load())
	}
}

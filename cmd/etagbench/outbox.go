package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/azqueuepub"
	"github.com/etagstore/etagstore/internal/azuritetest"
)

// The outbox scenario (table only, and only when -only names it: it
// needs Azurite's queue service; this file): the targets of issue 46's
// transactional outbox (docs/outbox.md), each cell on a fresh partition
// of the run's table, with an Outbox of OrderPlaced beside a
// Store[Order]. Three tables:
//
//   - commit: -outboxwriters goroutines (1 and 16) commit, for the
//     cell's duration, transactions that create one order
//     (Tx.Create of a fresh key), without and with Emit of an
//     OrderPlaced; one warm-up commit first, uncounted (the first Emit
//     of a process reads the head: one point read). Columns: commits/s,
//     requests per commit, and among the requests the entity group
//     transactions, point reads and queries per commit, p50 and p99.
//     Target: Emit adds 0 requests. Each cell is checked: one order per
//     commit, and (with Emit) Read from 0 yields one event per commit,
//     Seq 1, 2, 3… without a gap, each naming an order committed, IDs
//     distinct.
//   - relay: -outboxevents events (2,000) committed in one partition (32
//     goroutines, uncounted), then RelayOnce in a loop until every one
//     is published. Publishers: azqueue, EnqueueMessage of the Event's
//     JSON to a fresh queue behind the -rtt proxy as the tables are; the
//     same with the queue reached without the proxy (a queue near the
//     relay, storage far); and none (a publish that does nothing: the
//     relay's storage side alone). Columns: events/s (target ≥ 500 at
//     10 ms), RelayOnce passes, storage requests per event (and the
//     entity group transactions, queries and point reads among them),
//     queue requests per event. Checked: publish met Seq 1…N in order,
//     once each; a consumer drains the queue and finds every ID once; Read
//     yields the N events, relayed; a last RelayOnce publishes nothing.
//   - latency: Relay running (OutboxOptions.Poll from -outboxpoll,
//     250ms and 25ms), writers commit one order and its event each at a
//     steady -outboxrate per second (20, then 50) for the cell's duration,
//     each in a goroutine of its own (open loop), while a consumer
//     dequeues the queue (32 messages a request, through the -rtt proxy;
//     5 ms pauses while it finds none).
//     Columns: commit→published (EnqueueMessage answered) and
//     commit→dequeued (the consumer's request answered) p50, p99 and max,
//     from Transact's return (target p99 ≤ 1 s at 10 ms); the relay's
//     storage requests per event (its listings, cursor reads, marks and
//     sweeps, counted through its context) and its queue requests per
//     event; the writers' requests per commit. Checked as relay's cells
//     are, and no event dequeued twice.
//
// -metrics prints the library's own metrics of each cell (the relay's
// etagstore.outbox.published, retries and lag among them; a relay cell's
// include its seeding). The latency cells run before the relay cells,
// and every queue the scenario makes is deleted once its last cell is
// done (see outboxResults.drops).

var (
	outboxEvents   = flag.Int("outboxevents", 2000, "events the outbox relay cells commit in one partition, then relay")
	outboxWriters  = flag.String("outboxwriters", "1,16", "writer counts of the outbox commit cells")
	outboxRates    = flag.String("outboxrate", "20,50", "commits per second of the outbox latency cells")
	outboxPolls    = flag.String("outboxpoll", "250ms,25ms", "OutboxOptions.Poll of the outbox latency cells")
	outboxInFlight = flag.String("outboxinflight", "1", "OutboxOptions.InFlight of the outbox latency cells")
)

// Order is the outbox scenario's document.
type Order struct {
	Customer string
	Total    int64
}

// OrderPlaced is the outbox scenario's event: Order names the order's key.
type OrderPlaced struct {
	Order string
	Total int64
}

// outboxResults are the outbox scenario's rows on one backend.
type outboxResults struct {
	commits   []outboxCommitRow
	relays    []outboxRelayRow
	latencies []outboxLatencyRow
	summaries []string // -metrics: the library's own, by cell
	// drops delete the scenario's queues, once its last cell is done.
	// A queue deleted at the end of its cell would stop Azurite later:
	// its queue GC (a mark and sweep every 60 s) deletes the extent of
	// each message of a deleted queue with a lookup over every extent,
	// without yielding to its event loop, and Azurite then answers no
	// request, table or queue, while it runs: for 60 s to over 2
	// minutes after the relay cells' queues of 2,000 messages (seen in
	// the latency cells as a few events held 16 to over 60 s), for 3 to
	// 30 s after the latency cells' queues of 200 to 500. Kept, the
	// queues slow a consumer instead (Azurite's dequeue looks at every
	// message of the account), so the latency cells, whose consumer is
	// measured, run before the relay cells, whose dequeues are not.
	drops []func()
}

// dropLater keeps drop for the end of the scenario (see drops).
func (res *outboxResults) dropLater(drop func()) { res.drops = append(res.drops, drop) }

// metered runs cell with a meter of its own under -metrics, and keeps
// its summary under name.
func (res *outboxResults) metered(name string, cell func()) {
	if printMetrics {
		cellMetrics = newMetricsCell()
	}
	cell()
	if cellMetrics != nil {
		res.summaries = append(res.summaries, fmt.Sprintf("- %s: %s", name, cellMetrics.summary()))
		cellMetrics = nil
	}
}

type outboxCommitRow struct {
	writers         int
	emit            bool
	commits         int64
	seconds         float64
	latency         []float64 // ms
	requests        int64
	batches, reads  int64
	queries, events int64 // events: Read's, checked
}

type outboxRelayRow struct {
	publisher               string
	events                  int
	passes                  int
	seconds                 float64
	requests                int64 // storage
	batches, queries, reads int64
	queueRequests, dequeued int64
	readBack                int
	lastPass                int // RelayOnce after the loop
}

type outboxLatencyRow struct {
	poll                time.Duration
	inFlight            int
	rate                int
	commits             int
	seconds             float64
	published, dequeued []float64 // ms from commit
	relayRequests       int64     // storage, through the relay's context
	queueRequests       int64     // the publisher's
	writerRequests      int64
	readBack            int
}

// queueCount is the HTTP client of queue requests, counting them.
type queueCount struct{ n atomic.Int64 }

func (c *queueCount) Do(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return azuritetest.Transport.Do(r)
}

// queueService is a queue service client of conn's QueueEndpoint whose
// requests go through t.
func queueService(conn string, t policy.Transporter) (*azqueue.ServiceClient, error) {
	if !strings.Contains(conn, "QueueEndpoint=") {
		return nil, fmt.Errorf("ETAGSTORE_AZURITE has no QueueEndpoint= (the outbox scenario publishes to Azure Queue storage)")
	}
	return azqueue.NewServiceClientFromConnectionString(conn, &azqueue.ClientOptions{ClientOptions: azcore.ClientOptions{
		Transport: t, Retry: policy.RetryOptions{RetryDelay: 20 * time.Millisecond}}})
}

// newQueue makes a fresh queue on svc; drop deletes it.
func newQueue(ctx context.Context, svc *azqueue.ServiceClient, tag string) (q *azqueue.QueueClient, name string, drop func()) {
	name = fmt.Sprintf("etagbench-outbox-%s-%d", tag, time.Now().UnixNano()%1e9)
	if _, err := svc.CreateQueue(ctx, name, nil); err != nil {
		log.Fatalf("outbox: create queue %s: %v", name, err)
	}
	return svc.NewQueueClient(name), name, func() {
		if _, err := svc.DeleteQueue(context.WithoutCancel(ctx), name, nil); err != nil {
			log.Printf("outbox: delete queue %s: %v", name, err)
		}
	}
}

// enqueue is the inline publisher: the Event as JSON, one message.
func enqueue(q *azqueue.QueueClient) func(context.Context, etagstore.Event[OrderPlaced]) error {
	return azqueuepub.New[OrderPlaced](q, nil)
}

// outboxOpen returns the Stores of one cell: the orders and the outbox,
// on a fresh partition of the run's table.
func outboxOpen(e *env, cell string, poll time.Duration, inFlight int) (*etagstore.Store[Order], *etagstore.Outbox[OrderPlaced]) {
	b := e.backend(fmt.Sprintf("outbox%s%d", cell, time.Now().UnixNano()%1e9))
	opts := storeOptions("library") // with -metrics, the cell's meter
	return etagstore.New[Order](b, opts), etagstore.NewOutbox[OrderPlaced](b, &etagstore.OutboxOptions{Options: *opts, Poll: poll, InFlight: inFlight})
}

// placeOrder commits the order key, with its event when events is not
// nil.
func placeOrder(ctx context.Context, orders *etagstore.Store[Order], events *etagstore.Outbox[OrderPlaced], key string, total int64) error {
	return etagstore.Transact(ctx, func(tx *etagstore.Txn) error {
		if err := orders.In(tx).Create(key, Order{Customer: "c-" + key, Total: total}); err != nil {
			return err
		}
		if events == nil {
			return nil
		}
		return events.In(tx).Emit(OrderPlaced{Order: key, Total: total})
	})
}

// outboxRows runs the outbox scenario on tables, when -only names it.
// queueConn is the connection string whose QueueEndpoint is reached
// without the -rtt proxy.
func outboxRows(ctx context.Context, e *env, d time.Duration, queueConn string) *outboxResults {
	if e.table == nil || only == "" || !strings.Contains("outbox", only) {
		return nil
	}
	writers, err := parseWriters(*outboxWriters)
	if err != nil {
		log.Fatalf("-outboxwriters: %v", err)
	}
	var polls []time.Duration
	for _, f := range strings.Split(*outboxPolls, ",") {
		p, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil || p <= 0 {
			log.Fatalf("-outboxpoll: %q is not a duration", f)
		}
		polls = append(polls, p)
	}
	rates, err := parseWriters(*outboxRates)
	if err != nil {
		log.Fatalf("-outboxrate: %v", err)
	}
	inFlights, err := parseWriters(*outboxInFlight)
	if err != nil {
		log.Fatalf("-outboxinflight: %v", err)
	}
	var res outboxResults
	for _, w := range writers {
		for _, emit := range []bool{false, true} {
			var r outboxCommitRow
			res.metered(fmt.Sprintf("outbox commit, %d writers, emit %v", w, emit), func() { r = outboxCommitCell(ctx, e, w, emit, d) })
			res.commits = append(res.commits, r)
			fmt.Fprintf(os.Stderr, "%s / outbox commit, %d writers, emit %v: %.0f commits/s, %.2f requests/commit\n",
				e.name, w, emit, float64(r.commits)/r.seconds, float64(r.requests)/float64(r.commits))
		}
	}
	for _, rate := range rates {
		for _, inFlight := range inFlights {
			for _, poll := range polls {
				var r outboxLatencyRow
				res.metered(fmt.Sprintf("outbox latency, %d commits/s, InFlight %d, poll %s", rate, inFlight, poll), func() { r = outboxLatencyCell(ctx, &res, e, poll, inFlight, rate, d) })
				res.latencies = append(res.latencies, r)
				fmt.Fprintf(os.Stderr, "%s / outbox latency, %d commits/s, InFlight %d, poll %s: p99 commit→dequeued %.0f ms\n", e.name, rate, inFlight, poll, pct(r.dequeued, 99))
			}
		}
	}
	publishers := []struct {
		name, conn      string
		inFlight, batch int // batch > 0: RelayBatchesOnce with azqueuepub.NewBatches
	}{{"azqueue", e.conn, 1, 0}, {"azqueue, InFlight 16", e.conn, 16, 0}, {"azqueue, batches of 32 (RelayBatches)", e.conn, 1, 32},
		{"azqueue, queue without -rtt", queueConn, 1, 0}, {"none (storage alone)", "", 1, 0}}
	if queueConn == e.conn {
		publishers = slices.Delete(publishers, 3, 4) // no -rtt: the same queue
	}
	for _, p := range publishers {
		var r outboxRelayRow
		res.metered("outbox relay, "+p.name, func() { r = outboxRelayCell(ctx, &res, e, p.name, p.conn, p.inFlight, p.batch, *outboxEvents) })
		res.relays = append(res.relays, r)
		fmt.Fprintf(os.Stderr, "%s / outbox relay, %s: %.0f events/s\n", e.name, p.name, float64(r.events)/r.seconds)
	}
	for _, drop := range res.drops {
		drop()
	}
	return &res
}

// outboxCommitCell runs writers goroutines committing orders, with Emit
// or not, for d, and checks what they left.
func outboxCommitCell(ctx context.Context, e *env, writers int, emit bool, d time.Duration) outboxCommitRow {
	orders, events := outboxOpen(e, "commit", 0, 1)
	if !emit {
		events = nil
	}
	// The warm-up commit: the first Emit of a process reads the head.
	if err := placeOrder(ctx, orders, events, "order-warmup", 1); err != nil {
		log.Fatalf("%s outbox commit: %v", e.name, err)
	}
	r := outboxCommitRow{writers: writers, emit: emit}
	var mu sync.Mutex
	c := e.requests
	before, beforeBatches, beforeReads, beforeQueries := c.n.Load(), c.batches.Load(), c.pointReads.Load(), c.queries.Load()
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			var lat []float64
			for i := 0; time.Now().Before(deadline); i++ {
				t0 := time.Now()
				if err := placeOrder(ctx, orders, events, fmt.Sprintf("order-%03d-%06d", w, i), int64(i)); err != nil {
					log.Fatalf("%s outbox commit: %v", e.name, err)
				}
				lat = append(lat, float64(time.Since(t0).Microseconds())/1000)
			}
			mu.Lock()
			defer mu.Unlock()
			r.commits += int64(len(lat))
			r.latency = append(r.latency, lat...)
		})
	}
	wg.Wait()
	r.seconds = time.Since(start).Seconds()
	r.requests, r.batches = c.n.Load()-before, c.batches.Load()-beforeBatches
	r.reads, r.queries = c.pointReads.Load()-beforeReads, c.queries.Load()-beforeQueries

	// The check: one order per commit (and the warm-up's); with Emit, one
	// event per order, Seq 1, 2, 3…, IDs distinct.
	keys := map[string]bool{}
	for doc, err := range orders.List(ctx, "order-") {
		if err != nil {
			log.Fatalf("%s outbox commit: list: %v", e.name, err)
		}
		keys[doc.Key] = true
	}
	if int64(len(keys)) != r.commits+1 {
		log.Fatalf("%s outbox commit: %d orders after %d commits", e.name, len(keys), r.commits+1)
	}
	if emit {
		evs := readAll(ctx, e, events)
		ids := map[string]bool{}
		for i, ev := range evs {
			if ev.Seq != int64(i+1) || !keys[ev.Value.Order] || ids[ev.ID] {
				log.Fatalf("%s outbox commit: event %d: Seq %d, order %q, ID %q (seen: %v)", e.name, i, ev.Seq, ev.Value.Order, ev.ID, ids[ev.ID])
			}
			ids[ev.ID] = true
		}
		if int64(len(evs)) != r.commits+1 {
			log.Fatalf("%s outbox commit: %d events after %d commits", e.name, len(evs), r.commits+1)
		}
		r.events = int64(len(evs))
	}
	return r
}

// readAll is Read of the cell's partition ("": the backend is one
// partition) from the start.
func readAll(ctx context.Context, e *env, events *etagstore.Outbox[OrderPlaced]) []etagstore.Event[OrderPlaced] {
	var evs []etagstore.Event[OrderPlaced]
	for ev, err := range events.Read(ctx, "", 0) {
		if err != nil {
			log.Fatalf("%s outbox: Read: %v", e.name, err)
		}
		evs = append(evs, ev)
	}
	return evs
}

// seedEvents commits n orders and their events, 32 at a time.
func seedEvents(ctx context.Context, e *env, orders *etagstore.Store[Order], events *etagstore.Outbox[OrderPlaced], n int) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if err := placeOrder(ctx, orders, events, fmt.Sprintf("order-%07d", i), int64(i)); err != nil {
					log.Fatalf("%s outbox seed: %v", e.name, err)
				}
			}
		})
	}
	wg.Wait()
}

// publishLog is what a cell's publisher met, in order.
type publishLog struct {
	mu   sync.Mutex
	seqs []int64
	ids  []string
	at   map[string]time.Time // by order key: the publish's answer
	// changed, if not nil, is signalled after each publish recorded.
	changed chan struct{}
}

func (l *publishLog) wrap(publish func(context.Context, etagstore.Event[OrderPlaced]) error) func(context.Context, etagstore.Event[OrderPlaced]) error {
	return func(ctx context.Context, ev etagstore.Event[OrderPlaced]) error {
		if publish != nil {
			if err := publish(ctx, ev); err != nil {
				return err
			}
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		l.seqs = append(l.seqs, ev.Seq)
		l.ids = append(l.ids, ev.ID)
		if l.at != nil {
			if _, ok := l.at[ev.Value.Order]; !ok {
				l.at[ev.Value.Order] = time.Now()
			}
		}
		if l.changed != nil {
			select {
			case l.changed <- struct{}{}:
			default:
			}
		}
		return nil
	}
}

// wrapBatch is wrap for a publisher of batches (RelayBatches).
func (l *publishLog) wrapBatch(publish func(context.Context, []etagstore.Event[OrderPlaced]) error) func(context.Context, []etagstore.Event[OrderPlaced]) error {
	return func(ctx context.Context, evs []etagstore.Event[OrderPlaced]) error {
		if publish != nil {
			if err := publish(ctx, evs); err != nil {
				return err
			}
		}
		for _, ev := range evs {
			if err := l.wrap(nil)(ctx, ev); err != nil {
				return err
			}
		}
		return nil
	}
}

// bySeq puts what publish met in Seq order.
func (l *publishLog) bySeq() {
	l.mu.Lock()
	defer l.mu.Unlock()
	idx := make([]int, len(l.seqs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(l.seqs[a], l.seqs[b]) })
	seqs, ids := make([]int64, len(idx)), make([]string, len(idx))
	for i, j := range idx {
		seqs[i], ids[i] = l.seqs[j], l.ids[j]
	}
	l.seqs, l.ids = seqs, ids
}

// check tells whether publish met Seq 1…n in order, once each.
func (l *publishLog) check(n int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.seqs) != n {
		return fmt.Errorf("%d publishes of %d events", len(l.seqs), n)
	}
	for i, s := range l.seqs {
		if s != int64(i+1) {
			return fmt.Errorf("publish %d met Seq %d", i, s)
		}
	}
	return nil
}

// drain dequeues every message of q (32 a request, hidden for an hour:
// none comes back) until it finds none, and returns the events.
func drain(ctx context.Context, q *azqueue.QueueClient) ([]etagstore.Event[OrderPlaced], error) {
	var evs []etagstore.Event[OrderPlaced]
	for {
		got, err := dequeue(ctx, q)
		if err != nil || len(got) == 0 {
			return evs, err
		}
		evs = append(evs, got...)
	}
}

// dequeue is one DequeueMessages of up to 32 messages, hidden for an
// hour, decoded.
func dequeue(ctx context.Context, q *azqueue.QueueClient) ([]etagstore.Event[OrderPlaced], error) {
	resp, err := q.DequeueMessages(ctx, &azqueue.DequeueMessagesOptions{NumberOfMessages: ptr[int32](32), VisibilityTimeout: ptr[int32](3600)})
	if err != nil {
		return nil, err
	}
	evs := make([]etagstore.Event[OrderPlaced], 0, len(resp.Messages))
	for _, m := range resp.Messages {
		if m.MessageText == nil {
			return evs, errors.New("a message without text")
		}
		got, err := azqueuepub.DecodeAll[OrderPlaced](*m.MessageText) // one event (New), or a batch (NewBatches)
		if err != nil {
			return evs, fmt.Errorf("message %.60q: %w", *m.MessageText, err)
		}
		evs = append(evs, got...)
	}
	return evs, nil
}

func ptr[T any](v T) *T { return &v }

// checkDelivered tells whether got (dequeued, or read back) holds each
// of ids once, and nothing else.
func checkDelivered(what string, got []etagstore.Event[OrderPlaced], ids []string) error {
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	seen := map[string]bool{}
	for _, ev := range got {
		if !want[ev.ID] || seen[ev.ID] {
			return fmt.Errorf("%s: event %q (Seq %d) not published, or twice", what, ev.ID, ev.Seq)
		}
		seen[ev.ID] = true
	}
	if len(seen) != len(want) {
		return fmt.Errorf("%s: %d of the %d events published", what, len(seen), len(want))
	}
	return nil
}

// outboxRelayCell commits n events on a fresh partition, then relays them
// with RelayOnce in a loop to a fresh queue of conn's queue service ("":
// a publish that does nothing).
func outboxRelayCell(ctx context.Context, res *outboxResults, e *env, publisher, conn string, inFlight, batch, n int) outboxRelayRow {
	orders, events := outboxOpen(e, "relay", 0, inFlight)
	seedEvents(ctx, e, orders, events, n)
	var qc queueCount
	var q *azqueue.QueueClient
	var pl publishLog
	var publish func(context.Context, etagstore.Event[OrderPlaced]) error
	var publishBatch func(context.Context, []etagstore.Event[OrderPlaced]) error
	if conn != "" {
		svc, err := queueService(conn, &qc)
		if err != nil {
			log.Fatalf("outbox relay: %v", err)
		}
		var drop func()
		q, _, drop = newQueue(ctx, svc, "relay")
		res.dropLater(drop) // see outboxResults.drops
		publish, publishBatch = enqueue(q), azqueuepub.NewBatches[OrderPlaced](q, nil)
	}
	relayOnce := func() (int, error) { return events.RelayOnce(ctx, pl.wrap(publish)) }
	if batch > 0 {
		relayOnce = func() (int, error) { return events.RelayBatchesOnce(ctx, pl.wrapBatch(publishBatch)) }
	}
	r := outboxRelayRow{publisher: publisher, events: n}
	beforeQueue := qc.n.Load() // the queue's creation left out
	c := e.requests
	before, beforeBatches, beforeReads, beforeQueries := c.n.Load(), c.batches.Load(), c.pointReads.Load(), c.queries.Load()
	start := time.Now()
	for total := 0; total < n; {
		k, err := relayOnce()
		r.passes++
		if err != nil {
			log.Fatalf("%s outbox relay %s: RelayOnce: %v", e.name, publisher, err)
		}
		if k == 0 {
			log.Fatalf("%s outbox relay %s: a pass published nothing with %d of %d events published", e.name, publisher, total, n)
		}
		total += k
	}
	r.seconds = time.Since(start).Seconds()
	r.requests, r.batches = c.n.Load()-before, c.batches.Load()-beforeBatches
	r.reads, r.queries = c.pointReads.Load()-beforeReads, c.queries.Load()-beforeQueries
	r.queueRequests = qc.n.Load() - beforeQueue

	var err error
	if r.lastPass, err = relayOnce(); err != nil || r.lastPass != 0 {
		log.Fatalf("%s outbox relay %s: a last RelayOnce published %d (%v)", e.name, publisher, r.lastPass, err)
	}
	if inFlight > 1 {
		pl.bySeq() // published InFlight at a time: met in any order within each window
	}
	if err := pl.check(n); err != nil {
		log.Fatalf("%s outbox relay %s: %v", e.name, publisher, err)
	}
	back := readAll(ctx, e, events)
	if err := checkDelivered("Read", back, pl.ids); err != nil {
		log.Fatalf("%s outbox relay %s: %v", e.name, publisher, err)
	}
	r.readBack = len(back)
	if q != nil {
		got, err := drain(ctx, q)
		if err != nil {
			log.Fatalf("%s outbox relay %s: dequeue: %v", e.name, publisher, err)
		}
		if err := checkDelivered("the queue", got, pl.ids); err != nil {
			log.Fatalf("%s outbox relay %s: %v", e.name, publisher, err)
		}
		r.dequeued = int64(len(got))
	}
	return r
}

// outboxLatencyCell runs Relay (Poll poll) while writers commit rate
// orders a second for d, each with its event, and a consumer dequeues
// them.
func outboxLatencyCell(ctx context.Context, res *outboxResults, e *env, poll time.Duration, inFlight, rate int, d time.Duration) outboxLatencyRow {
	orders, events := outboxOpen(e, "latency", poll, inFlight)
	var qc queueCount
	svc, err := queueService(e.conn, &qc)
	if err != nil {
		log.Fatalf("outbox latency: %v", err)
	}
	q, name, drop := newQueue(ctx, svc, "latency")
	res.dropLater(drop) // see outboxResults.drops
	consumerSvc, err := queueService(e.conn, azuritetest.Transport)
	if err != nil {
		log.Fatalf("outbox latency: %v", err)
	}
	consumerQ := consumerSvc.NewQueueClient(name)
	r := outboxLatencyRow{poll: poll, inFlight: inFlight, rate: rate}
	beforeQueue := qc.n.Load() // the queue's creation left out
	pl := publishLog{at: map[string]time.Time{}, changed: make(chan struct{}, 1)}

	// The relay, its storage requests counted through its context.
	var relayRequests atomic.Int64
	rctx, stopRelay := context.WithCancel(withOpRequests(ctx, &relayRequests))
	relayDone := make(chan error, 1)
	go func() { relayDone <- events.Relay(rctx, pl.wrap(enqueue(q)), nil) }()

	// The consumer: dequeued[order] is when it first met the order's event.
	var mu sync.Mutex
	dequeued := map[string]time.Time{}
	var delivered []etagstore.Event[OrderPlaced]
	arrived := make(chan struct{}, 1)
	cctx, stopConsumer := context.WithCancel(ctx)
	consumerDone := make(chan error, 1)
	go func() {
		for cctx.Err() == nil {
			evs, err := dequeue(cctx, consumerQ)
			if err != nil {
				if cctx.Err() != nil {
					break
				}
				consumerDone <- err
				return
			}
			now := time.Now()
			mu.Lock()
			for _, ev := range evs {
				delivered = append(delivered, ev)
				if _, ok := dequeued[ev.Value.Order]; !ok {
					dequeued[ev.Value.Order] = now
				}
			}
			mu.Unlock()
			if len(evs) > 0 {
				select {
				case arrived <- struct{}{}:
				default:
				}
				continue
			}
			select {
			case <-cctx.Done():
			case <-time.After(5 * time.Millisecond):
			}
		}
		consumerDone <- nil
	}()

	// The writers: one commit per tick, each in a goroutine of its own.
	committed := map[string]time.Time{}
	var writerRequests atomic.Int64
	wctx := withOpRequests(ctx, &writerRequests)
	tick := time.NewTicker(time.Second / time.Duration(rate))
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for i := 0; time.Now().Before(deadline); i++ {
		<-tick.C
		wg.Go(func() {
			key := fmt.Sprintf("order-%07d", i)
			if err := placeOrder(wctx, orders, events, key, int64(i)); err != nil {
				log.Fatalf("%s outbox latency: %v", e.name, err)
			}
			now := time.Now()
			mu.Lock()
			committed[key] = now
			mu.Unlock()
		})
	}
	tick.Stop()
	wg.Wait()
	r.seconds = time.Since(start).Seconds()
	r.commits = len(committed)

	// Wait for the consumer to meet every event, and for every publish to
	// have returned: the queue may hand a message over before the
	// enqueue's answer reaches the relay, and stopping the relay then
	// would cancel a publish that has in fact been delivered.
	timeout := time.NewTimer(time.Minute)
	defer timeout.Stop()
	for {
		mu.Lock()
		got := len(dequeued)
		mu.Unlock()
		pl.mu.Lock()
		published := len(pl.seqs)
		pl.mu.Unlock()
		if got >= r.commits && published >= r.commits {
			break
		}
		select {
		case <-pl.changed:
		case <-arrived:
		case err := <-consumerDone:
			log.Fatalf("%s outbox latency: the consumer: %v", e.name, err)
		case <-timeout.C:
			log.Fatalf("%s outbox latency: %d of %d events dequeued, %d published, after a minute", e.name, got, r.commits, published)
		}
	}
	stopRelay()
	if err := <-relayDone; err != nil {
		log.Fatalf("%s outbox latency: Relay: %v", e.name, err)
	}
	stopConsumer()
	if err := <-consumerDone; err != nil {
		log.Fatalf("%s outbox latency: the consumer: %v", e.name, err)
	}
	r.relayRequests, r.queueRequests, r.writerRequests = relayRequests.Load(), qc.n.Load()-beforeQueue, writerRequests.Load()

	if inFlight > 1 {
		pl.bySeq() // published InFlight at a time: met in any order within each window
	}
	if err := pl.check(r.commits); err != nil {
		log.Fatalf("%s outbox latency: %v", e.name, err)
	}
	if err := checkDelivered("the queue", delivered, pl.ids); err != nil {
		log.Fatalf("%s outbox latency: %v", e.name, err)
	}
	back := readAll(ctx, e, events)
	if err := checkDelivered("Read", back, pl.ids); err != nil {
		log.Fatalf("%s outbox latency: %v", e.name, err)
	}
	r.readBack = len(back)
	for key, t := range committed {
		pub, ok := pl.at[key]
		deq, ok2 := dequeued[key]
		if !ok || !ok2 {
			log.Fatalf("%s outbox latency: order %s committed, its event not published or not dequeued", e.name, key)
		}
		r.published = append(r.published, float64(pub.Sub(t).Microseconds())/1000)
		r.dequeued = append(r.dequeued, float64(deq.Sub(t).Microseconds())/1000)
	}
	return r
}

// printOutbox prints the outbox rows of backend.
func printOutbox(backend string, res *outboxResults) {
	if res == nil {
		return
	}
	fmt.Printf("## %s: outbox, commit\n\n| scenario | transaction | commits/s | requests/commit | batches/commit | point reads/commit | queries/commit | p50 ms | p99 ms | check |\n|---|---|---|---|---|---|---|---|---|---|\n", backend)
	for _, r := range res.commits {
		tx, check := "order", fmt.Sprintf("exact (%d orders)", r.commits+1)
		if r.emit {
			tx, check = "order + Emit", fmt.Sprintf("exact (%d orders, %d events, Seq 1–%d)", r.commits+1, r.events, r.events)
		}
		n := float64(r.commits)
		fmt.Printf("| outbox commit, %d writers | %s | %.0f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %s |\n", r.writers, tx, n/r.seconds,
			float64(r.requests)/n, float64(r.batches)/n, float64(r.reads)/n, float64(r.queries)/n, pct(r.latency, 50), pct(r.latency, 99), check)
	}
	fmt.Println()
	fmt.Printf("## %s: outbox, relay from one partition\n\n| scenario | publisher | events/s | seconds | RelayOnce passes | storage requests/event | batches | queries | point reads | queue requests/event | check |\n|---|---|---|---|---|---|---|---|---|---|---|\n", backend)
	for _, r := range res.relays {
		n := float64(r.events)
		order := "in order"
		if strings.Contains(r.publisher, "InFlight") {
			order = "once each, in Seq order by window"
		}
		check := fmt.Sprintf("exact (%d published %s, %d read back", r.events, order, r.readBack)
		if r.dequeued > 0 {
			check += fmt.Sprintf(", %d dequeued", r.dequeued)
		}
		fmt.Printf("| outbox relay, %d events | %s | %.0f | %.2f | %d | %.3f | %d | %d | %d | %.2f | %s) |\n", r.events, r.publisher, n/r.seconds, r.seconds, r.passes,
			float64(r.requests)/n, r.batches, r.queries, r.reads, float64(r.queueRequests)/n, check)
	}
	fmt.Println()
	fmt.Printf("## %s: outbox, commit → queue message\n\n| scenario | InFlight | Poll | commits | commit→published p50 ms | p99 ms | max ms | commit→dequeued p50 ms | p99 ms | max ms | relay storage requests/event | relay queue requests/event | writer requests/commit | check |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n", backend)
	for _, r := range res.latencies {
		n := float64(r.commits)
		fmt.Printf("| outbox latency, %d commits/s | %d | %s | %d | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.3f | %.2f | %.2f | exact (%d published in order, dequeued once each, %d read back) |\n",
			r.rate, r.inFlight, r.poll, r.commits, pct(r.published, 50), pct(r.published, 99), slices.Max(append(r.published, 0)),
			pct(r.dequeued, 50), pct(r.dequeued, 99), slices.Max(append(r.dequeued, 0)),
			float64(r.relayRequests)/n, float64(r.queueRequests)/n, float64(r.writerRequests)/n, r.commits, r.readBack)
	}
	fmt.Println()
	if len(res.summaries) > 0 {
		fmt.Printf("Metrics the library recorded (-metrics), %s outbox:\n\n%s\n\n", backend, strings.Join(res.summaries, "\n"))
	}
}

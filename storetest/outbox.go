package storetest

// The cases of a transactional outbox (etagstore.Outbox) over any backend
// that keeps entries: an event commits with its transaction's documents or
// not at all; events are numbered in commit order per partition, read
// without a gap that fills later, and relayed at least once, in order,
// with their IDs, through crashes, lost answers and failing publishers;
// relayed events are kept for the retention, then swept. A crash point is
// a hook on the request chosen by what it writes (obHook), never by a
// count, and a relay's passes are driven by a clock the case ticks
// (obClock): no case sleeps.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
)

// OutboxEvent is the event of the outbox cases. The cases' transactions
// increment one counter document (a Page's N) and emit its new value, so
// that the event of Seq s carries N = s exactly when events are numbered
// in commit order and every event belongs to a committed transaction.
type OutboxEvent struct {
	N      int64
	Writer string // who emitted it: unique per Transact call
	Pad    string `json:",omitempty"`
}

// Event is the cases' event as an Outbox yields it.
type obEvent = etagstore.Event[OutboxEvent]

const (
	// obName is the outboxes' Name.
	obName = "obx"
	// obPoll is the relays' Poll: a Sleep of it waits for the case's Tick.
	obPoll = time.Hour
)

var (
	errObFn      = errors.New("storetest: fn refused")
	errObPublish = errors.New("storetest: publish refused")
)

// outboxCases are the cases of RunOutbox on a backend that keeps entries.
var outboxCases = []struct {
	name string
	fn   func(t *testing.T, f *obFix)
}{
	// 1. Atomic with the commit.
	{"Commit", testOutboxCommit},
	{"FnErrorLeavesNoEvent", testOutboxFnError},
	{"FnPanicLeavesNoEvent", testOutboxFnPanic},
	{"RetriedRunLeavesNoEvent", testOutboxRetriedRun},
	{"NoGhosts", testOutboxNoGhosts},
	{"OutsideTransaction", testOutboxOutside},
	{"BeforeAnyDocument", testOutboxBeforeDocument},
	{"TooLarge", testOutboxTooLarge},
	// 2. Order.
	{"OrderTwoRelays", testOutboxOrder},
	{"OrderLockedRelays", testOutboxOrderLocked},
	{"ReadHeldRun", testOutboxReadHeldRun},
	{"ReadHeldCommitRequest", testOutboxReadHeldRequest},
	{"ReadHeldCommitAnswer", testOutboxReadHeldAnswer},
	// 3. Crash points.
	{"CrashBeforePublish", testOutboxCrashBeforePublish},
	{"CrashBeforeMark", testOutboxCrashBeforeMark},
	{"LostCommitAnswer", testOutboxLostCommitAnswer},
	{"LostMarkAnswer", testOutboxLostMarkAnswer},
	// 5. Retention.
	{"Retention", testOutboxRetention},
	// 6. Publish errors.
	{"PublishError", testOutboxPublishError},
	{"PublishErrorRelay", testOutboxPublishErrorRelay},
	{"PublishPanics", testOutboxPublishPanics},
	// 7. A pass's pipeline (outboxrelay.go).
	{"InFlightWindow", testOutboxInFlightWindow},
	{"InFlightFailure", testOutboxInFlightFailure},
	{"MarksBehindPublishes", testOutboxMarksBehindPublishes},
	{"BusyRelay", testOutboxBusyRelay},
	{"Batches", testOutboxBatches},
	{"BatchFailure", testOutboxBatchFailure},
}

// RunOutbox checks a transactional outbox (etagstore.Outbox) over the
// backends newBackend makes: events commit with their transaction or not
// at all, in Seq order per partition; Read never meets a gap that fills
// later; Relay and RelayOnce publish every committed event at least once,
// in order, each repeat with its ID, through crashes, lost answers, failing
// and panicking publishers, and two relays at once; relayed events are
// kept for the retention and then swept, pending ones never. On a backend
// without index entries (blobs) it checks the refusal instead
// (errors.ErrUnsupported). The cases about partitions use the documents
// "b1/…" and "b2/…" (docKey): two partitions where the backend has them.
func RunOutbox(t *testing.T, newBackend NewBackend) {
	t.Helper()
	if newBackend(t).Abilities().Entries == nil {
		t.Run("Unsupported", func(t *testing.T) { testOutboxUnsupported(t, newBackend(t)) })
		return
	}
	for _, tc := range outboxCases {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newObFix(t, newBackend(t))) })
	}
}

// RunOutboxFaults checks the outbox under DefaultFaults (10% of the write
// answers lost after the commit, 5% of the writes answered 503):
// transactions of two Stores emit into one partition while two relays
// race; at the end no event is lost (each committed event is published),
// none is out of order (the deduplicated publications of the partition
// are Seq 1…N in order), none is a ghost (N is the count of committed
// transactions, and the event of Seq s carries the counter value s).
func RunOutboxFaults(t *testing.T, newBackend NewFaultyBackendFunc) {
	t.Helper()
	b, counts := newBackend(t, DefaultFaults)
	t.Cleanup(func() { t.Logf("faults injected: %v", counts()) })
	testOutboxUnderFaults(t, newObFix(t, b))
}

// obFix is one outbox case: its backend, clock, and counter document.
type obFix struct {
	t     *testing.T
	b     *obHook
	log   *slog.Logger // the Stores' and outboxes' logger: to t.Log
	clock *obClock
	key   string // the counter document, in board b1
	part  string // its partition (Event.Partition)
}

func newObFix(t *testing.T, b driver.Backend) *obFix {
	h := &obHook{Backend: b}
	key := docKey(t, b, "b1", "counter")
	w := &testWriter{t: t}
	t.Cleanup(w.end)
	log := slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
	return &obFix{t: t, b: h, log: log, clock: newObClock(), key: key, part: scopeOf(t, b, key)}
}

// testWriter writes lines to t.Log until the test ends.
type testWriter struct {
	t    testing.TB
	mu   sync.Mutex
	done bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (w *testWriter) end() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
}

// docs is a Store of counters over the case's backend.
func (f *obFix) docs(o etagstore.Options) *etagstore.Store[Page] {
	o.Logger = f.log
	return etagstore.New[Page](f.b, withErrorLines(f.t, o))
}

// outbox is an Outbox over the case's backend: another process's when
// called again (its own Store and cache). Name, Clock and Poll default to
// the case's.
func (f *obFix) outbox(o etagstore.OutboxOptions) *etagstore.Outbox[OutboxEvent] {
	o.Logger = f.log
	o.Options = *withErrorLines(f.t, o.Options)
	if o.Name == "" {
		o.Name = obName
	}
	if o.Clock == nil {
		o.Clock = f.clock
	}
	if o.Poll == 0 {
		o.Poll = obPoll
	}
	return etagstore.NewOutbox[OutboxEvent](f.b, &o)
}

// emit runs one transaction through docs and ob that increments the
// counter key and emits its new value as writer's event; then, when set,
// ends each run of fn on the value the run wrote.
func emit(ctx context.Context, docs *etagstore.Store[Page], ob *etagstore.Outbox[OutboxEvent], key, writer string, then func(n int64) error) error {
	return etagstore.Transact(ctx, func(tx *etagstore.Txn) error {
		d := docs.In(tx)
		p, err := d.Get(key)
		if err != nil && !errors.Is(err, etagstore.ErrNotFound) {
			return err
		}
		p.N++
		if err := d.Put(key, p); err != nil {
			return err
		}
		if err := ob.In(tx).Emit(OutboxEvent{N: p.N, Writer: writer}); err != nil {
			return err
		}
		if then != nil {
			return then(p.N)
		}
		return nil
	})
}

// emitMany is one transaction emitting k events, the counter incremented
// once for each; their writers are writer#0, writer#1…
func emitMany(ctx context.Context, docs *etagstore.Store[Page], ob *etagstore.Outbox[OutboxEvent], key, writer string, k int) error {
	return etagstore.Transact(ctx, func(tx *etagstore.Txn) error {
		d := docs.In(tx)
		p, err := d.Get(key)
		if err != nil && !errors.Is(err, etagstore.ErrNotFound) {
			return err
		}
		for i := range k {
			p.N++
			if err := d.Put(key, p); err != nil {
				return err
			}
			if err := ob.In(tx).Emit(OutboxEvent{N: p.N, Writer: fmt.Sprintf("%s#%d", writer, i)}); err != nil {
				return err
			}
		}
		return nil
	})
}

// mustEmit emits writer's events one transaction each, and fails the test
// on an error.
func (f *obFix) mustEmit(docs *etagstore.Store[Page], ob *etagstore.Outbox[OutboxEvent], key string, writers ...string) {
	f.t.Helper()
	for _, w := range writers {
		if err := emit(f.t.Context(), docs, ob, key, w, nil); err != nil {
			f.t.Fatalf("emit %s: %v", w, err)
		}
	}
}

// readAll is every event of part after Seq after, by Read.
func readAll(ctx context.Context, ob *etagstore.Outbox[OutboxEvent], part string, after int64) ([]obEvent, error) {
	var out []obEvent
	for ev, err := range ob.Read(ctx, part, after) {
		if err != nil {
			return out, err
		}
		out = append(out, ev)
	}
	return out, nil
}

func (f *obFix) read(ob *etagstore.Outbox[OutboxEvent], part string, after int64) []obEvent {
	f.t.Helper()
	evs, err := readAll(f.t.Context(), ob, part, after)
	if err != nil {
		f.t.Fatalf("Read(%q, %d): %v", part, after, err)
	}
	return evs
}

// raw lists the keys of part's entries whose names start with name,
// straight from the backend: "o.obx." every record of the outbox,
// "o.obx.p." the pending events, "o.obx.s." the sent ones, "x." expiry
// entries.
func (f *obFix) raw(part, name string) []string {
	f.t.Helper()
	b := f.b.Backend
	var keys []string
	for it, err := range b.List(f.t.Context(), b.Abilities().Entries.Key(part, name)) {
		if err != nil {
			f.t.Fatalf("List: %v", err)
		}
		keys = append(keys, it.Key)
	}
	return keys
}

// wantRecords checks how many records of part the backend holds under
// name (see raw).
func (f *obFix) wantRecords(part, name string, n int) {
	f.t.Helper()
	if keys := f.raw(part, name); len(keys) != n {
		f.t.Errorf("%d records %q in %q, want %d: %q", len(keys), name, part, n, keys)
	}
}

// wantCounter checks the counter key holds n.
func (f *obFix) wantCounter(key string, n int64) {
	f.t.Helper()
	d, err := f.docs(etagstore.Options{}).Get(f.t.Context(), key)
	switch {
	case n == 0 && errors.Is(err, etagstore.ErrNotFound):
	case err != nil:
		f.t.Fatalf("Get(%q): %v", key, err)
	case d.Value.N != n:
		f.t.Errorf("counter %q = %d, want %d", key, d.Value.N, n)
	}
}

// wantEvents checks that evs are part's events 1…n: in Seq order, each
// carrying the counter value of its Seq (a committed state: no ghost), an
// ID of 32 hex digits of its own, the partition, the outbox's clock.
func (f *obFix) wantEvents(evs []obEvent, part string, n int64) {
	f.t.Helper()
	if got, want := seqsOf(evs), seqRange(1, n); !slices.Equal(got, want) {
		f.t.Fatalf("events of %q: Seqs %v, want 1…%d", part, got, n)
	}
	ids := map[string]bool{}
	for _, ev := range evs {
		if _, err := hex.DecodeString(ev.ID); err != nil || len(ev.ID) != 32 || ids[ev.ID] {
			f.t.Errorf("event %d: ID %q: not 32 hex digits, or another event's", ev.Seq, ev.ID)
		}
		ids[ev.ID] = true
		if ev.Value.N != ev.Seq {
			f.t.Errorf("event %d carries the counter value %d (%s): not the state its commit wrote", ev.Seq, ev.Value.N, ev.Value.Writer)
		}
		if ev.Partition != part {
			f.t.Errorf("event %d: Partition %q, want %q", ev.Seq, ev.Partition, part)
		}
		if !ev.Time.Equal(f.clock.start) {
			f.t.Errorf("event %d: Time %v, want the outbox's clock %v", ev.Seq, ev.Time, f.clock.start)
		}
	}
}

// writersOf counts the events of each writer.
func writersOf(evs []obEvent) map[string]int {
	m := map[string]int{}
	for _, ev := range evs {
		m[ev.Value.Writer]++
	}
	return m
}

func seqsOf(evs []obEvent) []int64 {
	out := make([]int64, len(evs))
	for i, ev := range evs {
		out[i] = ev.Seq
	}
	return out
}

// seqRange is from…to (none when to < from).
func seqRange(from, to int64) []int64 {
	out := []int64{}
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

// pendingOf and sentOf report whether an action moves an event: the
// create of a pending record (an Emit's) or of a sent one (Relay's mark);
// holds reports whether its data holds marker.
func pendingOf(a driver.Action) bool {
	return !a.Delete && !a.Check && strings.Contains(a.Key, "o."+obName+".p.")
}

func sentOf(a driver.Action) bool {
	return !a.Delete && !a.Check && strings.Contains(a.Key, "o."+obName+".s.")
}

// emits reports whether a commit creates a pending event whose data holds
// marker: as it is (JSON), or in a member in base64 (a table's Edm.Binary
// property).
func emits(actions []driver.Action, marker string) bool {
	for _, a := range actions {
		if pendingOf(a) && holds(a.Write.Data, marker) {
			return true
		}
	}
	return false
}

func holds(data []byte, marker string) bool {
	if bytes.Contains(data, []byte(marker)) {
		return true
	}
	var members map[string]any
	if json.Unmarshal(data, &members) != nil {
		return false
	}
	for _, v := range members {
		if s, ok := v.(string); ok {
			if b, err := base64.StdEncoding.DecodeString(s); err == nil && bytes.Contains(b, []byte(marker)) {
				return true
			}
		}
	}
	return false
}

// marks reports whether a commit marks events sent.
func marks(actions []driver.Action) bool { return slices.ContainsFunc(actions, sentOf) }

// obCommit is a backend's Commit.
type obCommit = func(ctx context.Context, actions []driver.Action) ([]driver.ETag, error)

// obHook is the backend of the outbox cases: b, whose commits go through
// the case's hook when it sets one, so that it fails, holds or drops the
// answer to a request chosen by what it writes.
type obHook struct {
	driver.Backend
	mu      sync.Mutex
	hook    func(ctx context.Context, actions []driver.Action, commit obCommit) ([]driver.ETag, error)
	onRead  func(key string) // before a read
	commits atomic.Int64
}

func (h *obHook) Read(ctx context.Context, key string) (driver.Item, error) {
	h.mu.Lock()
	on := h.onRead
	h.mu.Unlock()
	if on != nil {
		on(key)
	}
	return h.Backend.Read(ctx, key)
}

// setRead sets (nil: clears) what runs before each read.
func (h *obHook) setRead(on func(key string)) {
	h.mu.Lock()
	h.onRead = on
	h.mu.Unlock()
}

func (h *obHook) Abilities() driver.Abilities {
	a := h.Backend.Abilities()
	if commit := a.Commit; commit != nil {
		a.Commit = func(ctx context.Context, actions []driver.Action) ([]driver.ETag, error) {
			h.commits.Add(1)
			h.mu.Lock()
			hook := h.hook
			h.mu.Unlock()
			if hook != nil {
				return hook(ctx, actions, commit)
			}
			return commit(ctx, actions)
		}
	}
	return a
}

// set sets the hook (nil: none).
func (h *obHook) set(hook func(ctx context.Context, actions []driver.Action, commit obCommit) ([]driver.ETag, error)) {
	h.mu.Lock()
	h.hook = hook
	h.mu.Unlock()
}

// obClock is the outboxes' clock in the cases: Now is a fixed instant
// that only Advance moves; a Sleep of obPoll (a relay between passes)
// waits for Tick; any other Sleep (a retry's backoff) takes real time.
type obClock struct {
	start   time.Time
	mu      sync.Mutex
	now     time.Time
	tick    chan struct{}
	asleep  int           // relays asleep since the last Tick
	changed chan struct{} // closed when asleep grows
}

func newObClock() *obClock {
	start := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	return &obClock{start: start, now: start, tick: make(chan struct{}), changed: make(chan struct{})}
}

func (c *obClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock on by d.
func (c *obClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func (c *obClock) Sleep(ctx context.Context, d time.Duration) error {
	if d != obPoll {
		if d <= 0 {
			return ctx.Err()
		}
		tm := time.NewTimer(d)
		defer tm.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tm.C:
			return nil
		}
	}
	c.mu.Lock()
	tick := c.tick
	c.asleep++
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
	select {
	case <-tick:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Tick wakes the relays asleep between passes.
func (c *obClock) Tick() {
	c.mu.Lock()
	close(c.tick)
	c.tick, c.asleep = make(chan struct{}), 0
	c.mu.Unlock()
}

// waitAsleep waits until n relays have gone to sleep since the last Tick:
// each has ended a pass.
func (c *obClock) waitAsleep(t *testing.T, n int) {
	t.Helper()
	watchdog := time.NewTimer(2 * time.Minute)
	defer watchdog.Stop()
	for {
		c.mu.Lock()
		asleep, changed := c.asleep, c.changed
		c.mu.Unlock()
		if asleep >= n {
			return
		}
		select {
		case <-changed:
		case <-watchdog.C:
			t.Fatalf("%d relays asleep after 2 minutes, want %d: a pass never ended; goroutines:\n%s", asleep, n, stacks())
		}
	}
}

// pass makes the n relays run one pass each, and waits for its end.
func (c *obClock) pass(t *testing.T, n int) {
	t.Helper()
	c.Tick()
	c.waitAsleep(t, n)
}

// stacks are the stacks of the goroutines in etagstore's code, for a
// case stuck.
func stacks() string {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "etagstore/etagstore.") {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}

// obLocker is an etagstore.Locker in memory: one holder per name.
type obLocker struct {
	mu   sync.Mutex
	held map[string]bool
}

func (l *obLocker) TryHold(ctx context.Context, name string) (etagstore.Held, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held[name] {
		return nil, fmt.Errorf("%w: %s is held", etagstore.ErrLocked, name)
	}
	if l.held == nil {
		l.held = map[string]bool{}
	}
	l.held[name] = true
	return &obHeld{l: l, name: name}, nil
}

type obHeld struct {
	l    *obLocker
	name string
}

func (h *obHeld) Context() context.Context { return context.Background() } // never lost

func (h *obHeld) Unlock(context.Context) error {
	h.l.mu.Lock()
	delete(h.l.held, h.name)
	h.l.mu.Unlock()
	return nil
}

// obConsumer records what relays publish, as a consumer that drops
// repeats by ID would see it, and what is wrong with it.
type obConsumer struct {
	mu        sync.Mutex
	fail      func(relay string, ev obEvent) error // before a delivery: its error fails the publish (it may panic)
	attempts  map[string]int                       // publish calls, by partition and Seq
	delivered map[string][]obEvent                 // every publish that succeeded, by relay
	seen      map[string]map[int64]obEvent         // by partition: the first delivery of each Seq
	first     map[string][]obEvent                 // by partition: first deliveries, in order
	dups      int
	problems  []string
	changed   chan struct{} // closed on each first delivery
}

func newObConsumer() *obConsumer {
	return &obConsumer{attempts: map[string]int{}, delivered: map[string][]obEvent{}, seen: map[string]map[int64]obEvent{},
		first: map[string][]obEvent{}, changed: make(chan struct{})}
}

func attemptKey(part string, seq int64) string { return fmt.Sprintf("%s|%d", part, seq) }

// setFail sets (nil: clears) the failure of publishes.
func (c *obConsumer) setFail(fail func(relay string, ev obEvent) error) {
	c.mu.Lock()
	c.fail = fail
	c.mu.Unlock()
}

// publish is relay's publish func: safe for concurrent use. A first
// delivery must follow the one of the Seq before it (no gap, in order); a
// repeat must be the first one again (its ID, value and time).
func (c *obConsumer) publish(relay string) func(context.Context, obEvent) error {
	return func(ctx context.Context, ev obEvent) error {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.attempts[attemptKey(ev.Partition, ev.Seq)]++
		if c.fail != nil {
			if err := c.fail(relay, ev); err != nil {
				return err
			}
		}
		c.delivered[relay] = append(c.delivered[relay], ev)
		seen := c.seen[ev.Partition]
		if seen == nil {
			seen = map[int64]obEvent{}
			c.seen[ev.Partition] = seen
		}
		if orig, ok := seen[ev.Seq]; ok {
			c.dups++
			if orig.ID != ev.ID || orig.Value != ev.Value || !orig.Time.Equal(ev.Time) {
				c.problems = append(c.problems, fmt.Sprintf("%s published event %d of %q again as %+v; first as %+v", relay, ev.Seq, ev.Partition, ev, orig))
			}
			return nil
		}
		if n := len(c.first[ev.Partition]); ev.Seq != int64(n)+1 {
			c.problems = append(c.problems, fmt.Sprintf("%s published event %d of %q first after %d events: a gap, or out of order", relay, ev.Seq, ev.Partition, n))
		}
		seen[ev.Seq] = ev
		c.first[ev.Partition] = append(c.first[ev.Partition], ev)
		close(c.changed)
		c.changed = make(chan struct{})
		return nil
	}
}

// count is how many events of part were delivered at least once.
func (c *obConsumer) count(part string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.first[part])
}

func (c *obConsumer) attemptsOf(part string, seq int64) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.attempts[attemptKey(part, seq)]
}

// deliveredBy are the Seqs relay published, in order.
func (c *obConsumer) deliveredBy(relay string) []int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return seqsOf(c.delivered[relay])
}

func (c *obConsumer) duplicates() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dups
}

// waitFor waits until n events of part were delivered; while it waits,
// step runs (a relay's pass) when set.
func (c *obConsumer) waitFor(t *testing.T, part string, n int64, step func()) {
	t.Helper()
	watchdog := time.NewTimer(2 * time.Minute)
	defer watchdog.Stop()
	for {
		c.mu.Lock()
		got, changed := int64(len(c.first[part])), c.changed
		c.mu.Unlock()
		if got >= n {
			return
		}
		if step != nil {
			select {
			case <-watchdog.C:
				t.Fatalf("%d events of %q published after 2 minutes, want %d; goroutines:\n%s", got, part, n, stacks())
			default:
			}
			step()
			continue
		}
		select {
		case <-changed:
		case <-watchdog.C:
			t.Fatalf("%d events of %q published after 2 minutes, want %d; goroutines:\n%s", got, part, n, stacks())
		}
	}
}

// check checks what the consumer saw of part: no problem met on the way,
// and each of want (the committed events, by Read) exactly once, in order,
// as Read has it.
func (c *obConsumer) check(t *testing.T, part string, want []obEvent) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.problems {
		t.Error(p)
	}
	got := c.first[part]
	if !slices.Equal(seqsOf(got), seqsOf(want)) {
		t.Fatalf("deduplicated, the consumer saw events %v of %q; committed: %v", seqsOf(got), part, seqsOf(want))
	}
	for i, ev := range got {
		if w := want[i]; ev.ID != w.ID || ev.Value != w.Value || !ev.Time.Equal(w.Time) || ev.Partition != w.Partition {
			t.Errorf("published %+v; Read has %+v", ev, w)
		}
	}
}

// wantIncreasing checks that each relay published Seqs strictly
// increasing, partition by partition.
func (c *obConsumer) wantIncreasing(t *testing.T) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for relay, evs := range c.delivered {
		last := map[string]int64{}
		for _, ev := range evs {
			if ev.Seq <= last[ev.Partition] {
				t.Errorf("%s published event %d of %q after %d", relay, ev.Seq, ev.Partition, last[ev.Partition])
			}
			last[ev.Partition] = ev.Seq
		}
	}
}

// --- 1. Atomic with the commit ---

// testOutboxCommit: an event commits with its documents in the same
// request (one commit, Emit adding none), carries ID, Partition, Seq, Time
// and Value, and Seqs follow commit order, two events of one transaction
// included.
func testOutboxCommit(t *testing.T, f *obFix) {
	ctx := t.Context()
	docs, ob := f.docs(etagstore.Options{}), f.outbox(etagstore.OutboxOptions{})
	if evs := f.read(ob, f.part, 0); len(evs) != 0 {
		t.Fatalf("Read of an empty outbox = %v", evs)
	}
	before := f.b.commits.Load()
	f.mustEmit(docs, ob, f.key, "w1")
	if n := f.b.commits.Load() - before; n != 1 {
		t.Errorf("a transaction that emits sent %d commits, want 1: the event rides its commit", n)
	}
	f.wantCounter(f.key, 1)
	evs := f.read(ob, f.part, 0)
	f.wantEvents(evs, f.part, 1)
	if evs[0].Value != (OutboxEvent{N: 1, Writer: "w1"}) {
		t.Errorf("event 1 = %+v", evs[0].Value)
	}
	f.mustEmit(docs, ob, f.key, "w2")
	if err := emitMany(ctx, docs, ob, f.key, "w3", 2); err != nil {
		t.Fatal(err)
	}
	evs = f.read(ob, f.part, 0)
	f.wantEvents(evs, f.part, 4)
	if got, want := writersOf(evs), map[string]int{"w1": 1, "w2": 1, "w3#0": 1, "w3#1": 1}; !mapsEqual(got, want) {
		t.Errorf("writers %v, want %v", got, want)
	}
	if got := seqsOf(f.read(ob, f.part, 2)); !slices.Equal(got, []int64{3, 4}) {
		t.Errorf("Read after 2 = %v, want [3 4]", got)
	}
	if got := f.read(ob, f.part, 4); len(got) != 0 {
		t.Errorf("Read after the last = %v, want nothing", seqsOf(got))
	}
	// Another process reads the same.
	if got := f.read(f.outbox(etagstore.OutboxOptions{}), f.part, 0); !slices.EqualFunc(got, evs, sameEvent) {
		t.Errorf("another Outbox reads %+v, want %+v", got, evs)
	}
	// A partition that is none.
	for _, err := range ob.Read(ctx, "no such/partition/", 0) {
		if !errors.Is(err, etagstore.ErrInvalidInput) {
			t.Errorf("Read of a partition that is none: %v, want ErrInvalidInput", err)
		} else {
			wantOneSentinel(t, err)
		}
	}
}

func sameEvent(a, b obEvent) bool {
	return a.ID == b.ID && a.Seq == b.Seq && a.Partition == b.Partition && a.Value == b.Value && a.Time.Equal(b.Time)
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// testOutboxFnError: a run that emits and then fails writes nothing: no
// event, no head, no document; the next event is Seq 1.
func testOutboxFnError(t *testing.T, f *obFix) {
	docs, ob := f.docs(etagstore.Options{}), f.outbox(etagstore.OutboxOptions{})
	err := emit(t.Context(), docs, ob, f.key, "never", func(int64) error { return errObFn })
	if !errors.Is(err, errObFn) {
		t.Fatalf("Transact = %v, want fn's error", err)
	}
	f.wantRecords(f.part, "o."+obName+".", 0)
	f.wantCounter(f.key, 0)
	f.mustEmit(docs, ob, f.key, "w1")
	evs := f.read(ob, f.part, 0)
	f.wantEvents(evs, f.part, 1)
	if evs[0].Value.Writer != "w1" {
		t.Errorf("event 1 is %q's", evs[0].Value.Writer)
	}
}

// testOutboxFnPanic: a run that emits and then panics writes nothing.
func testOutboxFnPanic(t *testing.T, f *obFix) {
	docs, ob := f.docs(etagstore.Options{}), f.outbox(etagstore.OutboxOptions{})
	f.mustEmit(docs, ob, f.key, "w1")
	got := func() (r any) {
		defer func() { r = recover() }()
		_ = emit(t.Context(), docs, ob, f.key, "never", func(int64) error { panic("fn panics") })
		return nil
	}()
	if got != "fn panics" {
		t.Fatalf("recovered %v, want fn's panic", got)
	}
	f.wantCounter(f.key, 1)
	f.wantRecords(f.part, "o."+obName+".p.", 1)
	f.mustEmit(docs, ob, f.key, "w2")
	evs := f.read(ob, f.part, 0)
	f.wantEvents(evs, f.part, 2)
	if got, want := writersOf(evs), map[string]int{"w1": 1, "w2": 1}; !mapsEqual(got, want) {
		t.Errorf("writers %v, want %v", got, want)
	}
}

// testOutboxRetriedRun: a run that emitted, then lost its race (another
// transaction committed in between), leaves no event: its second run's is
// the one committed, after the other's.
func testOutboxRetriedRun(t *testing.T, f *obFix) {
	ctx := t.Context()
	solo := etagstore.Options{DisableGroupCommit: true}
	docsA, obA := f.docs(solo), f.outbox(etagstore.OutboxOptions{})
	docsB, obB := f.docs(solo), f.outbox(etagstore.OutboxOptions{})
	held, release := make(chan struct{}), make(chan struct{})
	var runs []int64 // the counter value each run of A wrote
	errA := make(chan error, 1)
	go func() {
		errA <- emit(ctx, docsA, obA, f.key, "A", func(n int64) error {
			runs = append(runs, n)
			if len(runs) == 1 {
				close(held)
				<-release
			}
			return nil
		})
	}()
	<-held
	f.mustEmit(docsB, obB, f.key, "B")
	close(release)
	if err := <-errA; err != nil {
		t.Fatalf("A: %v", err)
	}
	if !slices.Equal(runs, []int64{1, 2}) {
		t.Fatalf("A's runs wrote %v, want [1 2]: a run that lost its race, then one after B", runs)
	}
	f.wantCounter(f.key, 2)
	evs := f.read(obA, f.part, 0)
	f.wantEvents(evs, f.part, 2)
	if evs[0].Value.Writer != "B" || evs[1].Value.Writer != "A" {
		t.Errorf("events by %q, %q; want B's, then A's second run's", evs[0].Value.Writer, evs[1].Value.Writer)
	}
}

// testOutboxNoGhosts: 3 Stores × 6 goroutines increment one counter and
// emit its value, their runs racing and running again; some runs fail or
// panic after their Emit. Events are exactly the committed transactions:
// as many as the counter's increments, each with the value its commit
// wrote, each committed writer's once, no failed one's.
func testOutboxNoGhosts(t *testing.T, f *obFix) {
	ctx := t.Context()
	const writers, ops = 6, 3
	var runs, committed atomic.Int64
	var mu sync.Mutex
	outcome := map[string]string{}
	var wg sync.WaitGroup
	for s, o := range []etagstore.Options{{}, {CacheSize: -1}, {DisableGroupCommit: true}} {
		docs, ob := f.docs(o), f.outbox(etagstore.OutboxOptions{Options: o})
		for w := range writers {
			wg.Go(func() {
				for i := range ops {
					writer := fmt.Sprintf("s%d.w%d.%d", s, w, i)
					var err error
					panicked := func() (r any) {
						defer func() { r = recover() }()
						err = emit(ctx, docs, ob, f.key, writer, func(int64) error {
							runs.Add(1)
							switch (w + i) % 6 {
							case 4:
								return errObFn
							case 5:
								panic(writer)
							}
							return nil
						})
						return nil
					}()
					mu.Lock()
					switch {
					case panicked != nil:
						outcome[writer] = "panic"
						if panicked != writer {
							t.Errorf("%s: recovered %v", writer, panicked)
						}
					case errors.Is(err, errObFn):
						outcome[writer] = "error"
					case err != nil:
						t.Errorf("%s: %v", writer, err)
						outcome[writer] = "error"
					default:
						outcome[writer] = "ok"
						committed.Add(1)
					}
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	n := committed.Load()
	t.Logf("%d transactions committed of %d, in %d runs of fn", n, 3*writers*ops, runs.Load())
	f.wantCounter(f.key, n)
	evs := f.read(f.outbox(etagstore.OutboxOptions{}), f.part, 0)
	f.wantEvents(evs, f.part, n)
	got := writersOf(evs)
	for w, o := range outcome {
		if want := map[bool]int{true: 1, false: 0}[o == "ok"]; got[w] != want {
			t.Errorf("%s (%s): %d events, want %d", w, o, got[w], want)
		}
	}
}

// testOutboxOutside: Emit with no transaction, or with one that has
// ended, is ErrInvalidInput in one line, and writes nothing.
func testOutboxOutside(t *testing.T, f *obFix) {
	docs, ob := f.docs(etagstore.Options{}), f.outbox(etagstore.OutboxOptions{})
	wantInvalid := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, etagstore.ErrInvalidInput) {
			t.Errorf("Emit %s = %v, want ErrInvalidInput", what, err)
			return
		}
		wantOneSentinel(t, err)
	}
	wantInvalid("with a nil Txn", ob.In(nil).Emit(OutboxEvent{N: 1}))
	wantInvalid("with a zero Txn", ob.In(&etagstore.Txn{}).Emit(OutboxEvent{N: 1}))
	var kept *etagstore.Txn
	err := etagstore.Transact(t.Context(), func(tx *etagstore.Txn) error {
		kept = tx
		p, err := docs.In(tx).Get(f.key)
		if err != nil && !errors.Is(err, etagstore.ErrNotFound) {
			return err
		}
		p.N++
		if err := docs.In(tx).Put(f.key, p); err != nil {
			return err
		}
		return ob.In(tx).Emit(OutboxEvent{N: p.N, Writer: "w1"})
	})
	if err != nil {
		t.Fatal(err)
	}
	wantInvalid("after Transact returned", ob.In(kept).Emit(OutboxEvent{N: 2, Writer: "late"}))
	// A failed transaction's Txn, too.
	err = etagstore.Transact(t.Context(), func(tx *etagstore.Txn) error {
		kept = tx
		if _, err := docs.In(tx).Get(f.key); err != nil {
			return err
		}
		return errObFn
	})
	if !errors.Is(err, errObFn) {
		t.Fatal(err)
	}
	wantInvalid("after a failed Transact returned", ob.In(kept).Emit(OutboxEvent{N: 2, Writer: "late"}))
	f.wantCounter(f.key, 1)
	evs := f.read(ob, f.part, 0)
	f.wantEvents(evs, f.part, 1)
	f.wantRecords(f.part, "o."+obName+".p.", 1)
}

// testOutboxBeforeDocument: Emit before the transaction used a document
// is ErrInvalidInput in one line; the transaction's later documents
// commit without an event if fn goes on.
func testOutboxBeforeDocument(t *testing.T, f *obFix) {
	docs, ob := f.docs(etagstore.Options{}), f.outbox(etagstore.OutboxOptions{})
	var emitErr error
	err := etagstore.Transact(t.Context(), func(tx *etagstore.Txn) error {
		emitErr = ob.In(tx).Emit(OutboxEvent{N: 1, Writer: "early"})
		return emitErr
	})
	if !errors.Is(emitErr, etagstore.ErrInvalidInput) || !errors.Is(err, etagstore.ErrInvalidInput) {
		t.Fatalf("Emit before a document = %v (Transact %v), want ErrInvalidInput", emitErr, err)
	}
	wantOneSentinel(t, emitErr)
	err = etagstore.Transact(t.Context(), func(tx *etagstore.Txn) error {
		if err := ob.In(tx).Emit(OutboxEvent{N: 1, Writer: "early"}); !errors.Is(err, etagstore.ErrInvalidInput) {
			return fmt.Errorf("Emit before a document = %v, want ErrInvalidInput", err)
		}
		return docs.In(tx).Put(f.key, Page{N: 1})
	})
	if err != nil {
		t.Fatal(err)
	}
	f.wantCounter(f.key, 1)
	f.wantRecords(f.part, "o."+obName+".", 0)
}

// testOutboxTooLarge: an event over MaxEventSize as JSON is ErrTooLarge at
// Emit, which writes nothing (fn may go on and commit its documents); one
// just under it commits and reads back whole.
func testOutboxTooLarge(t *testing.T, f *obFix) {
	docs, ob := f.docs(etagstore.Options{}), f.outbox(etagstore.OutboxOptions{})
	// The JSON of an Event around a Pad of n bytes, as Emit measures it.
	size := func(n int) int {
		ev := etagstore.Event[OutboxEvent]{ID: strings.Repeat("0", 32), Partition: f.part, Seq: 1e15, Time: f.clock.Now(),
			Value: OutboxEvent{N: 1, Writer: "w", Pad: strings.Repeat("x", n)}}
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		return len(b)
	}
	over := etagstore.MaxEventSize + 1 - size(1) + 1 // the Pad that makes it 1 byte over
	if size(over) != etagstore.MaxEventSize+1 || size(over-2) != etagstore.MaxEventSize-1 {
		t.Fatalf("sizes %d, %d around MaxEventSize %d", size(over), size(over-2), etagstore.MaxEventSize)
	}
	var emitErr error
	err := etagstore.Transact(t.Context(), func(tx *etagstore.Txn) error {
		if err := docs.In(tx).Put(f.key, Page{N: 0, Title: "kept"}); err != nil {
			return err
		}
		emitErr = ob.In(tx).Emit(OutboxEvent{N: 1, Writer: "w", Pad: strings.Repeat("x", over)})
		return nil // fn goes on: its document commits, without the event
	})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(emitErr, etagstore.ErrTooLarge) {
		t.Fatalf("Emit of %d bytes of JSON = %v, want ErrTooLarge", size(over), emitErr)
	}
	wantOneSentinel(t, emitErr)
	f.wantRecords(f.part, "o."+obName+".", 0)
	// 1 byte under: stored and read back as it was.
	pad := strings.Repeat("y", over-2)
	err = etagstore.Transact(t.Context(), func(tx *etagstore.Txn) error {
		if err := docs.In(tx).Put(f.key, Page{N: 1}); err != nil {
			return err
		}
		return ob.In(tx).Emit(OutboxEvent{N: 1, Writer: "w", Pad: pad})
	})
	if err != nil {
		t.Fatalf("Emit of an event of %d bytes of JSON (MaxEventSize %d): %v", size(over-2), etagstore.MaxEventSize, err)
	}
	evs := f.read(ob, f.part, 0)
	if len(evs) != 1 || evs[0].Value.Pad != pad {
		t.Fatalf("Read after an event of MaxEventSize-1 bytes: %d events", len(evs))
	}
	c := newObConsumer()
	if n, err := ob.RelayOnce(t.Context(), c.publish("r")); n != 1 || err != nil {
		t.Errorf("RelayOnce = %d, %v; want 1, nil", n, err)
	}
	c.check(t, f.part, evs)
}

// testOutboxUnsupported: over blobs an Outbox refuses everything with
// errors.ErrUnsupported, in one line, and writes nothing.
func testOutboxUnsupported(t *testing.T, b driver.Backend) {
	ctx := t.Context()
	ob := etagstore.NewOutbox[OutboxEvent](b, nil)
	docs := etagstore.New[Page](b, nil)
	want := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("%s = %v, want errors.ErrUnsupported", what, err)
			return
		}
		wantOneLine(t, err)
	}
	var emitErr error
	err := etagstore.Transact(ctx, func(tx *etagstore.Txn) error {
		emitErr = ob.In(tx).Emit(OutboxEvent{N: 1})
		return emitErr
	})
	want("Emit", emitErr)
	want("Transact", err)
	err = etagstore.Transact(ctx, func(tx *etagstore.Txn) error {
		if err := docs.In(tx).Put("k", Page{N: 1}); err != nil {
			return err
		}
		return ob.In(tx).Emit(OutboxEvent{N: 1})
	})
	want("Transact with a document", err)
	want("Emit outside a transaction", ob.In(nil).Emit(OutboxEvent{N: 1}))
	for _, err := range ob.Read(ctx, "", 0) {
		want("Read", err)
	}
	_, err = ob.RelayOnce(ctx, func(context.Context, obEvent) error { return nil })
	want("RelayOnce", err)
	want("Relay", ob.Relay(ctx, func(context.Context, obEvent) error { return nil }, nil)) // at once: ctx is not done
	want("Wrapped: Emit", etagstore.NewOutbox[OutboxEvent](Wrap(b), nil).In(nil).Emit(OutboxEvent{}))
	for it, err := range b.List(ctx, "") {
		t.Errorf("the container holds %q (%v)", it.Key, err)
	}
}

// --- 2. Order ---

// testOutboxOrder: 16 goroutines × 3 Stores (each with its own Outbox: a
// process) emit into one partition while two relays race (RelayOnce
// back to back, no lock) and a reader reads on. Every Read after the last
// Seq the reader met starts right after it and runs without a gap; the
// relays publish the events 1…N, each relay in increasing Seq, a repeat
// with its ID; deduplicated, each once, in order, no gap filled later;
// the counts the passes return add up to N (an event another relay
// marked first is not counted twice).
func testOutboxOrder(t *testing.T, f *obFix) {
	ctx := t.Context()
	const stores, writers, ops = 3, 16, 1
	c := newObConsumer()
	stop := make(chan struct{})
	var bg sync.WaitGroup
	var marked atomic.Int64 // what the passes say they marked sent
	for _, relay := range []string{"r1", "r2"} {
		r := f.outbox(etagstore.OutboxOptions{})
		bg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				k, err := r.RelayOnce(ctx, c.publish(relay))
				if err != nil {
					t.Errorf("%s: RelayOnce: %v", relay, err)
					return
				}
				marked.Add(int64(k))
			}
		})
	}
	reader := f.outbox(etagstore.OutboxOptions{})
	var reads, met atomic.Int64
	bg.Go(func() {
		var after int64
		for {
			select {
			case <-stop:
				return
			default:
			}
			evs, err := readAll(ctx, reader, f.part, after)
			if err != nil {
				t.Errorf("Read: %v", err)
				return
			}
			for i, ev := range evs {
				if ev.Seq != after+int64(i)+1 || ev.Value.N != ev.Seq {
					t.Errorf("Read after %d = %v (values %v): not %d, %d… without a gap", after, seqsOf(evs), evs, after+1, after+2)
					return
				}
			}
			if len(evs) > 0 {
				after = evs[len(evs)-1].Seq
			}
			reads.Add(1)
			met.Store(after)
		}
	})
	var wg sync.WaitGroup
	var runs atomic.Int64
	for s, o := range []etagstore.Options{{}, {CacheSize: -1}, {DisableGroupCommit: true}} {
		docs, ob := f.docs(o), f.outbox(etagstore.OutboxOptions{Options: o})
		for w := range writers {
			wg.Go(func() {
				for i := range ops {
					writer := fmt.Sprintf("s%d.w%d.%d", s, w, i)
					if err := emit(ctx, docs, ob, f.key, writer, func(int64) error { runs.Add(1); return nil }); err != nil {
						t.Errorf("%s: %v", writer, err)
					}
				}
			})
		}
	}
	wg.Wait()
	const n = stores * writers * ops
	f.wantCounter(f.key, n)
	c.waitFor(t, f.part, n, nil)
	close(stop)
	bg.Wait()
	k, err := reader.RelayOnce(ctx, c.publish("r3")) // what the two left pending, if anything
	if err != nil {
		t.Fatalf("a last RelayOnce: %v", err)
	}
	if got := marked.Load() + int64(k); got != n {
		t.Errorf("the passes counted %d events marked sent, want %d: each once, by the relay whose mark moved it", got, n)
	}
	evs := f.read(reader, f.part, 0)
	f.wantEvents(evs, f.part, n)
	for w, k := range writersOf(evs) {
		if k != 1 {
			t.Errorf("%s: %d events", w, k)
		}
	}
	c.check(t, f.part, evs)
	c.wantIncreasing(t)
	t.Logf("%d events in %d runs of fn; r1 published %d, r2 %d (%d repeats); the reader read %d times, up to %d while they were emitted",
		n, runs.Load(), len(c.deliveredBy("r1")), len(c.deliveredBy("r2")), c.duplicates(), reads.Load(), met.Load())
}

// testOutboxOrderLocked: two Relays under one lock while 3 Stores emit:
// one relays, the other stands by; the events go out once each, in order.
func testOutboxOrderLocked(t *testing.T, f *obFix) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	const writers, ops = 4, 2
	c := newObConsumer()
	lock := &obLocker{}
	var relays sync.WaitGroup
	for _, relay := range []string{"r1", "r2"} {
		r := f.outbox(etagstore.OutboxOptions{})
		relays.Go(func() {
			if err := r.Relay(ctx, c.publish(relay), lock); err != nil {
				t.Errorf("%s: Relay = %v", relay, err)
			}
		})
	}
	f.clock.waitAsleep(t, 2)
	var wg sync.WaitGroup
	for s, o := range []etagstore.Options{{}, {CacheSize: -1}, {DisableGroupCommit: true}} {
		docs, ob := f.docs(o), f.outbox(etagstore.OutboxOptions{Options: o})
		for w := range writers {
			wg.Go(func() {
				for i := range ops {
					if err := emit(ctx, docs, ob, f.key, fmt.Sprintf("s%d.w%d.%d", s, w, i), nil); err != nil {
						t.Errorf("emit: %v", err)
					}
				}
			})
		}
	}
	emitted := make(chan struct{})
	go func() { wg.Wait(); close(emitted) }()
	for done := false; !done; {
		select {
		case <-emitted:
			done = true
		default:
			f.clock.pass(t, 2)
		}
	}
	const n = 3 * writers * ops
	c.waitFor(t, f.part, n, func() { f.clock.pass(t, 2) })
	cancel()
	relays.Wait()
	evs := f.read(f.outbox(etagstore.OutboxOptions{}), f.part, 0)
	f.wantEvents(evs, f.part, n)
	c.check(t, f.part, evs)
	r1, r2 := c.deliveredBy("r1"), c.deliveredBy("r2")
	if len(r1) > 0 && len(r2) > 0 {
		t.Errorf("both relays published under one lock: r1 %v, r2 %v", r1, r2)
	}
	if got := append(r1, r2...); !slices.Equal(got, seqRange(1, n)) {
		t.Errorf("published %v, want 1…%d once each", got, n)
	}
}

// readHeld is the shape of the three ReadHeld cases: transaction A, on a
// Store of its own, is held at some point of its commit (hold, which
// closes held and returns once release is closed) while B emits and
// commits; readDuring checks what Read returns meanwhile; at the end A
// has committed, and a reader that met B's event (or A's) never meets a
// committed event below it.
func readHeld(t *testing.T, f *obFix, hold func(held, release chan struct{}) (then func(int64) error)) (during, after []obEvent) {
	ctx := t.Context()
	docsA, obA := f.docs(etagstore.Options{}), f.outbox(etagstore.OutboxOptions{})
	docsB, obB := f.docs(etagstore.Options{DisableGroupCommit: true}), f.outbox(etagstore.OutboxOptions{})
	reader := f.outbox(etagstore.OutboxOptions{})
	f.mustEmit(docsB, obB, f.key, "first")
	held, release := make(chan struct{}), make(chan struct{})
	errA := make(chan error, 1)
	then := hold(held, release)
	go func() { errA <- emit(ctx, docsA, obA, f.key, "slowA", then) }()
	<-held
	f.mustEmit(docsB, obB, f.key, "B")
	during = f.read(reader, f.part, 0)
	close(release)
	if err := <-errA; err != nil {
		t.Fatalf("A: %v", err)
	}
	after = f.read(reader, f.part, 0)
	f.wantEvents(after, f.part, 3)
	if got := f.read(reader, f.part, during[len(during)-1].Seq); !slices.EqualFunc(got, after[len(during):], sameEvent) {
		t.Errorf("Read after %d, the last Seq met while A was held: %v; want %v", during[len(during)-1].Seq, seqsOf(got), seqsOf(after[len(during):]))
	}
	return during, after
}

// testOutboxReadHeldRun: A is held in fn, after its Emit read the head;
// meanwhile B commits event 2 and Read returns 1, 2; A then loses its race
// and commits event 3: nothing below 2 appears.
func testOutboxReadHeldRun(t *testing.T, f *obFix) {
	during, after := readHeld(t, f, func(held, release chan struct{}) func(int64) error {
		first := true
		return func(int64) error {
			if first {
				first = false
				close(held)
				<-release
			}
			return nil
		}
	})
	if got := writersOf(during); !mapsEqual(got, map[string]int{"first": 1, "B": 1}) {
		t.Errorf("Read while A was held in fn: %v, want first's and B's", got)
	}
	if after[1].Value.Writer != "B" || after[2].Value.Writer != "slowA" {
		t.Errorf("events 2, 3 are %q's, %q's; want B's, then A's", after[1].Value.Writer, after[2].Value.Writer)
	}
}

// testOutboxReadHeldRequest: A's commit request is held before it reaches
// the storage; meanwhile B commits event 2 and Read returns 1, 2; A's
// commit then fails on the head, and its next run commits event 3.
func testOutboxReadHeldRequest(t *testing.T, f *obFix) {
	during, after := readHeld(t, f, func(held, release chan struct{}) func(int64) error {
		var once sync.Once
		f.b.set(func(ctx context.Context, actions []driver.Action, commit obCommit) ([]driver.ETag, error) {
			if emits(actions, "slowA") {
				hit := false
				once.Do(func() { hit = true })
				if hit {
					close(held)
					select {
					case <-release:
					case <-ctx.Done():
						return nil, ctx.Err()
					}
				}
			}
			return commit(ctx, actions)
		})
		return nil
	})
	f.b.set(nil)
	if got := writersOf(during); !mapsEqual(got, map[string]int{"first": 1, "B": 1}) {
		t.Errorf("Read while A's commit was held: %v, want first's and B's", got)
	}
	if after[1].Value.Writer != "B" || after[2].Value.Writer != "slowA" {
		t.Errorf("events 2, 3 are %q's, %q's; want B's, then A's", after[1].Value.Writer, after[2].Value.Writer)
	}
}

// testOutboxReadHeldAnswer: A's commit is applied and its answer held;
// meanwhile Read returns A's event 2, and B commits event 3 after it; A
// then returns, committed once.
func testOutboxReadHeldAnswer(t *testing.T, f *obFix) {
	during, after := readHeld(t, f, func(held, release chan struct{}) func(int64) error {
		var once sync.Once
		f.b.set(func(ctx context.Context, actions []driver.Action, commit obCommit) ([]driver.ETag, error) {
			if !emits(actions, "slowA") {
				return commit(ctx, actions)
			}
			etags, err := commit(ctx, actions)
			once.Do(func() {
				close(held)
				<-release
			})
			return etags, err
		})
		return nil
	})
	f.b.set(nil)
	if len(during) < 2 || during[1].Value.Writer != "slowA" {
		t.Errorf("Read while A's answer was held: %v; want first's, A's (and B's)", writersOf(during))
	}
	if after[1].Value.Writer != "slowA" || after[2].Value.Writer != "B" {
		t.Errorf("events 2, 3 are %q's, %q's; want A's, then B's", after[1].Value.Writer, after[2].Value.Writer)
	}
}

// --- 3. Crash points ---

// testOutboxCrashBeforePublish: five events committed. Relay r0 dies
// before it publishes anything (as it reads the cursor): nothing went out.
// Relay r1 dies as it is about to publish event 3 (its ctx ends in
// publish, before the event goes out). A new relay publishes from where
// the cursor is: 3 and on, with 1 and 2 again when r1 did not mark them,
// each with its ID.
func testOutboxCrashBeforePublish(t *testing.T, f *obFix) {
	docs, ob := f.docs(etagstore.Options{}), f.outbox(etagstore.OutboxOptions{})
	f.mustEmit(docs, ob, f.key, "w1", "w2", "w3", "w4", "w5")
	c := newObConsumer()
	r0ctx, kill0 := context.WithCancel(t.Context())
	f.b.setRead(func(key string) {
		if strings.HasSuffix(key, "o."+obName+".c") {
			kill0()
		}
	})
	n0, err := f.outbox(etagstore.OutboxOptions{}).RelayOnce(r0ctx, c.publish("r0"))
	f.b.setRead(nil)
	if n0 != 0 || err == nil || len(c.deliveredBy("r0")) != 0 {
		t.Errorf("RelayOnce of a relay that died reading the cursor = %d, %v, published %v; want 0, an error, nothing", n0, err, c.deliveredBy("r0"))
	}
	f.wantRecords(f.part, "o."+obName+".p.", 5)
	r1ctx, kill := context.WithCancel(t.Context())
	c.setFail(func(relay string, ev obEvent) error {
		if relay == "r1" && ev.Seq == 3 {
			kill()
			return r1ctx.Err()
		}
		return nil
	})
	n1, err := f.outbox(etagstore.OutboxOptions{}).RelayOnce(r1ctx, c.publish("r1"))
	if err == nil {
		t.Errorf("RelayOnce of the relay that died = %d, nil; want an error", n1)
	} else {
		wantOneLine(t, err)
	}
	if got := c.deliveredBy("r1"); !slices.Equal(got, []int64{1, 2}) {
		t.Fatalf("r1 published %v before it died, want [1 2]", got)
	}
	c.setFail(nil)
	n2, err := f.outbox(etagstore.OutboxOptions{}).RelayOnce(t.Context(), c.publish("r2"))
	if err != nil {
		t.Fatalf("RelayOnce of a new relay: %v", err)
	}
	// The new relay starts after the cursor: after what r1 marked (1, 2
	// if its mark went out as it died, none if not).
	if n1 != 0 && n1 != 2 {
		t.Errorf("the relay that died marked %d events, want 0 or 2", n1)
	}
	if r2 := c.deliveredBy("r2"); !slices.Equal(r2, seqRange(int64(n1)+1, 5)) || n2 != 5-n1 {
		t.Errorf("the new relay published %v (RelayOnce = %d), want %d…5", r2, n2, n1+1)
	}
	f.wantRecords(f.part, "o."+obName+".p.", 0)
	evs := f.read(ob, f.part, 0)
	f.wantEvents(evs, f.part, 5)
	c.check(t, f.part, evs)
}

// testOutboxCrashBeforeMark: r1 publishes five events and dies as it
// sends the mark (the request never reaches the storage). A new relay
// publishes all five again, each with its ID, and marks them.
func testOutboxCrashBeforeMark(t *testing.T, f *obFix) {
	docs, ob := f.docs(etagstore.Options{}), f.outbox(etagstore.OutboxOptions{})
	f.mustEmit(docs, ob, f.key, "w1", "w2", "w3", "w4", "w5")
	c := newObConsumer()
	r1ctx, kill := context.WithCancel(t.Context())
	var died atomic.Int64
	f.b.set(func(ctx context.Context, actions []driver.Action, commit obCommit) ([]driver.ETag, error) {
		if marks(actions) {
			died.Add(1)
			kill()
			return nil, fmt.Errorf("storetest: the relay died as it sent its mark: %w", context.Canceled)
		}
		return commit(ctx, actions)
	})
	n1, err := f.outbox(etagstore.OutboxOptions{}).RelayOnce(r1ctx, c.publish("r1"))
	f.b.set(nil)
	if err == nil || n1 != 0 || died.Load() == 0 {
		t.Errorf("RelayOnce of the relay that died at its mark = %d, %v (%d marks tried); want 0 and an error", n1, err, died.Load())
	} else {
		wantOneLine(t, err)
	}
	if got := c.deliveredBy("r1"); !slices.Equal(got, seqRange(1, 5)) {
		t.Fatalf("r1 published %v, want 1…5", got)
	}
	f.wantRecords(f.part, "o."+obName+".p.", 5)
	f.wantRecords(f.part, "o."+obName+".s.", 0)
	n2, err := f.outbox(etagstore.OutboxOptions{}).RelayOnce(t.Context(), c.publish("r2"))
	if err != nil || n2 != 5 {
		t.Errorf("RelayOnce of a new relay = %d, %v; want 5, nil", n2, err)
	}
	if got := c.deliveredBy("r2"); !slices.Equal(got, seqRange(1, 5)) {
		t.Errorf("the new relay published %v, want 1…5 again", got)
	}
	if d := c.duplicates(); d != 5 {
		t.Errorf("%d repeats, want 5", d)
	}
	f.wantRecords(f.part, "o."+obName+".p.", 0)
	f.wantRecords(f.part, "o."+obName+".s.", 5)
	evs := f.read(ob, f.part, 0)
	f.wantEvents(evs, f.part, 5)
	c.check(t, f.part, evs)
}

// testOutboxLostCommitAnswer: the answers to three commits that carry an
// event are lost after the storage applied them (one alone, two in a group
// of concurrent transactions): each transaction resolves the outcome and
// returns nil, and its event exists once.
func testOutboxLostCommitAnswer(t *testing.T, f *obFix) {
	ctx := t.Context()
	docs, ob := f.docs(etagstore.Options{}), f.outbox(etagstore.OutboxOptions{})
	var mu sync.Mutex
	lost := map[string]bool{}
	f.b.set(func(ctx context.Context, actions []driver.Action, commit obCommit) ([]driver.ETag, error) {
		drop := false // the first commit that carries a marker's event: both lost-2 and lost-3's, when they share one
		mu.Lock()
		for _, m := range []string{"lost-1", "lost-2", "lost-3"} {
			if emits(actions, m) && !lost[m] {
				lost[m], drop = true, true
			}
		}
		mu.Unlock()
		etags, err := commit(ctx, actions)
		if err != nil || !drop {
			return etags, err
		}
		return nil, errInjected
	})
	f.mustEmit(docs, ob, f.key, "ok-1", "lost-1", "ok-2")
	var wg sync.WaitGroup
	for _, w := range []string{"grp-1", "lost-2", "grp-2", "grp-3", "lost-3", "grp-4"} {
		wg.Go(func() {
			if err := emit(ctx, docs, ob, f.key, w, nil); err != nil {
				t.Errorf("%s, whose commit's answer may be lost: %v; want nil (resolved by reading)", w, err)
			}
		})
	}
	wg.Wait()
	f.b.set(nil)
	if len(lost) != 3 {
		t.Errorf("answers lost to commits of %v, want those of the 3 markers", lost)
	}
	f.wantCounter(f.key, 9)
	evs := f.read(ob, f.part, 0)
	f.wantEvents(evs, f.part, 9)
	for w, k := range writersOf(evs) {
		if k != 1 {
			t.Errorf("%s: %d events", w, k)
		}
	}
	c := newObConsumer()
	if n, err := ob.RelayOnce(ctx, c.publish("r")); n != 9 || err != nil {
		t.Errorf("RelayOnce = %d, %v; want 9, nil", n, err)
	}
	c.check(t, f.part, evs)
}

// testOutboxLostMarkAnswer: 40 events; the answers to the relay's marks
// (32, then 8) are lost after the storage applied them. The relay
// resolves them: all 40 are published once, marked once, and a second
// pass publishes nothing.
func testOutboxLostMarkAnswer(t *testing.T, f *obFix) {
	ctx := t.Context()
	docs, ob := f.docs(etagstore.Options{}), f.outbox(etagstore.OutboxOptions{})
	for _, w := range []string{"t1", "t2"} {
		if err := emitMany(ctx, docs, ob, f.key, w, 20); err != nil {
			t.Fatal(err)
		}
	}
	var lost atomic.Int64
	f.b.set(func(ctx context.Context, actions []driver.Action, commit obCommit) ([]driver.ETag, error) {
		etags, err := commit(ctx, actions)
		if err != nil || !marks(actions) {
			return etags, err
		}
		lost.Add(1)
		return nil, errInjected
	})
	c := newObConsumer()
	n, err := f.outbox(etagstore.OutboxOptions{}).RelayOnce(ctx, c.publish("r1"))
	f.b.set(nil)
	if lost.Load() < 2 {
		t.Errorf("%d answers to marks lost, want 2 or more", lost.Load())
	}
	if n != 40 || err != nil {
		t.Errorf("RelayOnce whose marks' answers were lost = %d, %v; want 40, nil", n, err)
	}
	f.wantRecords(f.part, "o."+obName+".p.", 0)
	f.wantRecords(f.part, "o."+obName+".s.", 40)
	if n, err := f.outbox(etagstore.OutboxOptions{}).RelayOnce(ctx, c.publish("r2")); n != 0 || err != nil {
		t.Errorf("a second pass = %d, %v; want 0, nil", n, err)
	}
	if got := c.deliveredBy("r1"); !slices.Equal(got, seqRange(1, 40)) {
		t.Errorf("r1 published %v, want 1…40", got)
	}
	if got := c.deliveredBy("r2"); len(got) != 0 {
		t.Errorf("a relay after the marks published %v again", got)
	}
	evs := f.read(ob, f.part, 0)
	f.wantEvents(evs, f.part, 40)
	c.check(t, f.part, evs)
}

// --- 4. Under the fault proxy ---

// testOutboxUnderFaults: transactions of two Stores emit into one
// partition while two relays race, writes failing by DefaultFaults. A
// transaction that returned nil has its event exactly once, one that
// failed none, one of unknown outcome at most one; the events are as many
// as the counter's increments, each with its value; every event is
// published, deduplicated once each and in order.
func testOutboxUnderFaults(t *testing.T, f *obFix) {
	ctx := t.Context()
	writers, ops := 8, 5
	if Soak() {
		writers, ops = 16, 20
	}
	c := newObConsumer()
	stop := make(chan struct{})
	var relayErrs atomic.Int64
	var bg sync.WaitGroup
	for _, relay := range []string{"r1", "r2"} {
		r := f.outbox(etagstore.OutboxOptions{})
		bg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := r.RelayOnce(ctx, c.publish(relay)); err != nil {
					relayErrs.Add(1)
					wantOneLine(t, err)
				}
			}
		})
	}
	var mu sync.Mutex
	outcome := map[string]string{}
	var wg sync.WaitGroup
	for s, o := range []etagstore.Options{{}, {DisableGroupCommit: true}} {
		docs, ob := f.docs(o), f.outbox(etagstore.OutboxOptions{Options: o})
		for w := range writers {
			wg.Go(func() {
				for i := range ops {
					writer := fmt.Sprintf("s%d.w%d.%d", s, w, i)
					err := emit(ctx, docs, ob, f.key, writer, nil)
					if err != nil {
						wantOneSentinel(t, err)
					}
					mu.Lock()
					switch {
					case err == nil:
						outcome[writer] = "ok"
					case errors.Is(err, etagstore.ErrOutcomeUnknown):
						outcome[writer] = "unknown"
					case errors.Is(err, etagstore.ErrUnavailable):
						outcome[writer] = "failed"
					default:
						t.Errorf("%s: %v", writer, err)
						outcome[writer] = "failed"
					}
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	d, err := readThrough(t, f.docs(etagstore.Options{}), f.key)
	if err != nil {
		t.Fatal(err)
	}
	n := d.Value.N
	c.waitFor(t, f.part, n, nil)
	close(stop)
	bg.Wait()
	evs := f.read(f.outbox(etagstore.OutboxOptions{}), f.part, 0)
	f.wantEvents(evs, f.part, n)
	got := writersOf(evs)
	tally := map[string]int{}
	for w, o := range outcome {
		tally[o]++
		switch k := got[w]; {
		case o == "ok" && k != 1, o == "failed" && k != 0, o == "unknown" && k > 1:
			t.Errorf("%s (%s): %d events", w, o, k)
		}
	}
	for w := range got {
		if _, ok := outcome[w]; !ok {
			t.Errorf("an event of %q, who never emitted", w)
		}
	}
	c.check(t, f.part, evs)
	t.Logf("transactions %v; %d events; %d repeats published; %d relay passes failed", tally, n, c.duplicates(), relayErrs.Load())
}

// --- 5. Retention ---

// testOutboxRetention: relayed events are kept for the Retention (Read
// returns them), hidden by Read once it has passed, and deleted by a
// Relay pass once the ExpirySkew has passed too; pending events (their
// publish failing) are never swept, however old.
func testOutboxRetention(t *testing.T, f *obFix) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	const retention = time.Hour
	docs, ob := f.docs(etagstore.Options{}), f.outbox(etagstore.OutboxOptions{Retention: retention})
	f.mustEmit(docs, ob, f.key, "w1", "w2", "w3")
	c := newObConsumer()
	var blocked atomic.Bool
	blocked.Store(true)
	c.setFail(func(_ string, ev obEvent) error {
		if ev.Seq >= 4 && blocked.Load() {
			return errObPublish
		}
		return nil
	})
	relayDone := make(chan error, 1)
	go func() { relayDone <- ob.Relay(ctx, c.publish("r"), nil) }()
	f.clock.waitAsleep(t, 1) // pass 1: 1…3 relayed at the clock's start
	if got := c.deliveredBy("r"); !slices.Equal(got, []int64{1, 2, 3}) {
		t.Fatalf("published %v, want [1 2 3]", got)
	}
	f.mustEmit(docs, ob, f.key, "w4", "w5")
	f.clock.pass(t, 1) // 4 fails to publish: 4, 5 stay pending
	f.wantRecords(f.part, "o."+obName+".s.", 3)
	f.wantRecords(f.part, "o."+obName+".p.", 2)
	if got := seqsOf(f.read(ob, f.part, 0)); !slices.Equal(got, seqRange(1, 5)) {
		t.Errorf("Read within the retention = %v, want 1…5", got)
	}
	f.clock.Advance(retention - time.Second)
	f.clock.pass(t, 1)
	f.wantRecords(f.part, "o."+obName+".s.", 3)
	if got := seqsOf(f.read(ob, f.part, 0)); !slices.Equal(got, seqRange(1, 5)) {
		t.Errorf("Read a second before the retention ends = %v, want 1…5", got)
	}
	f.clock.Advance(time.Second) // the instant it ends: hidden, not swept yet (ExpirySkew)
	if got := seqsOf(f.read(ob, f.part, 0)); !slices.Equal(got, []int64{4, 5}) {
		t.Errorf("Read once the retention ended = %v, want [4 5]", got)
	}
	f.clock.pass(t, 1)
	f.wantRecords(f.part, "o."+obName+".s.", 3)
	f.clock.Advance(time.Minute) // past the ExpirySkew: swept
	f.clock.pass(t, 1)
	f.wantRecords(f.part, "o."+obName+".s.", 0)
	f.wantRecords(f.part, "x.", 0)
	f.wantRecords(f.part, "o."+obName+".p.", 2)
	if got := seqsOf(f.read(ob, f.part, 0)); !slices.Equal(got, []int64{4, 5}) {
		t.Errorf("Read after the sweep = %v, want [4 5]", got)
	}
	f.clock.Advance(30 * 24 * time.Hour) // pending events are never swept
	f.clock.pass(t, 1)
	f.wantRecords(f.part, "o."+obName+".p.", 2)
	if got := seqsOf(f.read(ob, f.part, 0)); !slices.Equal(got, []int64{4, 5}) {
		t.Errorf("Read of pending events a month old = %v, want [4 5]", got)
	}
	blocked.Store(false)
	f.clock.Advance(2 * time.Minute) // past the partition's backoff
	f.clock.pass(t, 1)
	if got := c.deliveredBy("r"); !slices.Equal(got, seqRange(1, 5)) {
		t.Errorf("published %v, want 1…5", got)
	}
	f.wantRecords(f.part, "o."+obName+".p.", 0)
	f.wantRecords(f.part, "o."+obName+".s.", 2)
	f.clock.Advance(retention + time.Minute)
	f.clock.pass(t, 1)
	f.wantRecords(f.part, "o."+obName+".", 2) // the head and the cursor
	if got := f.read(ob, f.part, 0); len(got) != 0 {
		t.Errorf("Read after every event's retention = %v", seqsOf(got))
	}
	f.mustEmit(docs, ob, f.key, "w6") // Seqs go on
	if got := f.read(ob, f.part, 0); len(got) != 1 || got[0].Seq != 6 {
		t.Errorf("Read after an event emitted past the sweep = %v, want [6]", seqsOf(got))
	}
	cancel()
	if err := <-relayDone; err != nil {
		t.Errorf("Relay = %v", err)
	}
}

// --- 6. Publish errors ---

// testOutboxPublishError: a publish that fails stops its partition (the
// pass returns its error; later events are not published, even once more
// are committed); other partitions go on; once it succeeds, the rest go
// out in order, each once.
func testOutboxPublishError(t *testing.T, f *obFix) {
	ctx := t.Context()
	docs, ob := f.docs(etagstore.Options{}), f.outbox(etagstore.OutboxOptions{})
	key2 := docKey(t, f.b.Backend, "b2", "counter")
	part2 := scopeOf(t, f.b.Backend, key2)
	two := part2 != f.part
	f.mustEmit(docs, ob, f.key, "w1", "w2", "w3", "w4", "w5", "w6")
	if two {
		f.mustEmit(docs, ob, key2, "x1", "x2")
	}
	c := newObConsumer()
	var failing atomic.Bool
	failing.Store(true)
	c.setFail(func(_ string, ev obEvent) error {
		if ev.Partition == f.part && ev.Seq == 3 && failing.Load() {
			return errObPublish
		}
		return nil
	})
	n, err := ob.RelayOnce(ctx, c.publish("r"))
	if !errors.Is(err, errObPublish) {
		t.Fatalf("RelayOnce with a failing publish = %d, %v; want its error", n, err)
	}
	wantOneLine(t, err)
	if want := map[bool]int{true: 4, false: 2}[two]; n != want {
		t.Errorf("RelayOnce = %d, want %d: 1, 2 (and the other partition's)", n, want)
	}
	f.mustEmit(docs, ob, f.key, "w7", "w8")
	n, err = ob.RelayOnce(ctx, c.publish("r"))
	if !errors.Is(err, errObPublish) || n != 0 {
		t.Errorf("RelayOnce again = %d, %v; want 0 and the publish's error", n, err)
	}
	if got := c.attemptsOf(f.part, 3); got != 2 {
		t.Errorf("event 3 was tried %d times, want 2", got)
	}
	for seq := int64(4); seq <= 8; seq++ {
		if got := c.attemptsOf(f.part, seq); got != 0 {
			t.Errorf("event %d, after the failing 3, was tried %d times", seq, got)
		}
	}
	failing.Store(false)
	if n, err := ob.RelayOnce(ctx, c.publish("r")); n != 6 || err != nil {
		t.Errorf("RelayOnce once publish succeeds = %d, %v; want 6, nil", n, err)
	}
	want := seqRange(1, 8)
	if two {
		want = []int64{1, 2, 1, 2, 3, 4, 5, 6, 7, 8} // the partitions in key order
	}
	if got := c.deliveredBy("r"); !slices.Equal(got, want) {
		t.Errorf("published %v, want %v", got, want)
	}
	if d := c.duplicates(); d != 0 {
		t.Errorf("%d repeats", d)
	}
	evs := f.read(ob, f.part, 0)
	f.wantEvents(evs, f.part, 8)
	c.check(t, f.part, evs)
	if two {
		evs := f.read(ob, part2, 0)
		f.wantEvents(evs, part2, 2)
		c.check(t, part2, evs)
	}
}

// testOutboxPublishErrorRelay: under Relay a publish that fails stops its
// partition for a backoff: the passes within it try nothing; the next
// after it tries the same event again; once it succeeds, the rest go out
// in order.
func testOutboxPublishErrorRelay(t *testing.T, f *obFix) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	docs, ob := f.docs(etagstore.Options{}), f.outbox(etagstore.OutboxOptions{})
	f.mustEmit(docs, ob, f.key, "w1", "w2", "w3")
	c := newObConsumer()
	var failing atomic.Bool
	failing.Store(true)
	c.setFail(func(_ string, ev obEvent) error {
		if ev.Seq == 2 && failing.Load() {
			return errObPublish
		}
		return nil
	})
	relayDone := make(chan error, 1)
	go func() { relayDone <- ob.Relay(ctx, c.publish("r"), nil) }()
	f.clock.waitAsleep(t, 1)
	if got, a := c.deliveredBy("r"), c.attemptsOf(f.part, 2); !slices.Equal(got, []int64{1}) || a != 1 {
		t.Fatalf("first pass: published %v, event 2 tried %d times; want [1], once", got, a)
	}
	f.mustEmit(docs, ob, f.key, "w4")
	f.clock.pass(t, 1) // within the backoff (the clock has not moved)
	f.clock.pass(t, 1)
	if a := c.attemptsOf(f.part, 2); a != 1 {
		t.Errorf("event 2 tried %d times within its backoff, want once", a)
	}
	f.clock.Advance(time.Minute)
	f.clock.pass(t, 1)
	if a := c.attemptsOf(f.part, 2); a != 2 {
		t.Errorf("event 2 tried %d times after its backoff, want twice", a)
	}
	for seq := int64(3); seq <= 4; seq++ {
		if a := c.attemptsOf(f.part, seq); a != 0 {
			t.Errorf("event %d, after the failing 2, tried %d times", seq, a)
		}
	}
	failing.Store(false)
	f.clock.Advance(2 * time.Minute)
	f.clock.pass(t, 1)
	if got := c.deliveredBy("r"); !slices.Equal(got, seqRange(1, 4)) {
		t.Errorf("published %v, want 1…4", got)
	}
	cancel()
	if err := <-relayDone; err != nil {
		t.Errorf("Relay = %v", err)
	}
	evs := f.read(ob, f.part, 0)
	f.wantEvents(evs, f.part, 4)
	c.check(t, f.part, evs)
}

// testOutboxPublishPanics: a publish that panics is an error of the pass
// (RelayOnce returns it; Relay goes on), not a crash; the event is
// published again later, in order.
func testOutboxPublishPanics(t *testing.T, f *obFix) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	docs, ob := f.docs(etagstore.Options{}), f.outbox(etagstore.OutboxOptions{})
	f.mustEmit(docs, ob, f.key, "w1", "w2", "w3")
	c := newObConsumer()
	var panicking atomic.Bool
	panicking.Store(true)
	c.setFail(func(_ string, ev obEvent) error {
		if ev.Seq == 2 && panicking.Load() {
			panic("publish panics")
		}
		return nil
	})
	n, err := ob.RelayOnce(ctx, c.publish("once"))
	if err == nil || n != 1 || !strings.Contains(err.Error(), "publish panics") {
		t.Errorf("RelayOnce whose publish panics = %d, %v; want 1 and an error naming the panic", n, err)
	} else {
		wantOneLine(t, err)
	}
	// Relay: the panic ends a pass, not the loop.
	relayDone := make(chan error, 1)
	go func() { relayDone <- ob.Relay(ctx, c.publish("loop"), nil) }()
	f.clock.waitAsleep(t, 1)
	if a := c.attemptsOf(f.part, 2); a != 2 {
		t.Errorf("event 2 tried %d times, want twice (a panic each)", a)
	}
	panicking.Store(false)
	f.clock.Advance(time.Minute)
	f.clock.pass(t, 1)
	if got := c.deliveredBy("loop"); !slices.Equal(got, []int64{2, 3}) {
		t.Errorf("Relay published %v after the panics, want [2 3]", got)
	}
	cancel()
	if err := <-relayDone; err != nil {
		t.Errorf("Relay = %v", err)
	}
	evs := f.read(ob, f.part, 0)
	f.wantEvents(evs, f.part, 3)
	c.check(t, f.part, evs)
}

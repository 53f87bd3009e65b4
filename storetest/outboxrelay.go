package storetest

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
)

// This file checks how a relay pass moves through a partition's run:
// InFlight publishes at once in a window that slides past each one that
// lands, marks sent behind the publishes rather than between them, and a
// pass that published followed by the next at once.

// obRelayWatchdog bounds how long a case waits on a relay that a gate
// holds: only a relay that never lets the gate open runs into it.
const obRelayWatchdog = time.Minute

// obPublishLog records the publish calls of a case that gates them itself
// (obConsumer wants them in order, one at a time).
type obPublishLog struct {
	mu                sync.Mutex
	running, most     int
	attempts, landed  map[int64]int
	started           chan int64 // each Seq as its publish starts
	fail              func(ev obEvent) error
	hold              func(ev obEvent) // before it lands, outside the lock
	startOrder, order []int64
}

func newObPublishLog(n int) *obPublishLog {
	return &obPublishLog{attempts: map[int64]int{}, landed: map[int64]int{}, started: make(chan int64, 4*n)}
}

func (l *obPublishLog) publish(_ context.Context, ev obEvent) error {
	l.mu.Lock()
	l.running++
	l.most = max(l.most, l.running)
	l.attempts[ev.Seq]++
	l.startOrder = append(l.startOrder, ev.Seq)
	fail, hold := l.fail, l.hold
	l.mu.Unlock()
	l.started <- ev.Seq
	if hold != nil {
		hold(ev)
	}
	var err error
	if fail != nil {
		err = fail(ev)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.running--
	if err == nil {
		l.landed[ev.Seq]++
		l.order = append(l.order, ev.Seq)
	}
	return err
}

// relayOnce runs ob.RelayOnce(publish) and fails the case if it does not
// return within obRelayWatchdog (a gate the relay never opens).
func relayOnce(t *testing.T, ob *etagstore.Outbox[OutboxEvent], publish func(context.Context, obEvent) error) (int, error) {
	t.Helper()
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := ob.RelayOnce(t.Context(), publish)
		done <- result{n, err}
	}()
	select {
	case r := <-done:
		return r.n, r.err
	case <-time.After(obRelayWatchdog):
		t.Fatalf("RelayOnce still running after %v: held on a gate it should have opened; goroutines:\n%s", obRelayWatchdog, stacks())
		return 0, nil
	}
}

// testOutboxInFlightWindow: with InFlight 3, event 1's publish is held
// until event 4's has started, and each of 1, 2 and 3 until all three
// have started. A window that waited for all of 1, 2 and
// 3 before it started more would never start 4; one that slides starts 4
// as soon as 2 (or 3) lands. Never more than 3 run at once, every event
// is published once and marked sent once.
func testOutboxInFlightWindow(t *testing.T, f *obFix) {
	docs, ob := f.docs(etagstore.Options{}), f.outbox(etagstore.OutboxOptions{InFlight: 3})
	if err := emitMany(t.Context(), docs, ob, f.key, "w", 10); err != nil {
		t.Fatal(err)
	}
	l := newObPublishLog(10)
	three, fourth := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	firstThree := 0
	var once sync.Once
	l.hold = func(ev obEvent) {
		if ev.Seq <= 3 {
			mu.Lock()
			if firstThree++; firstThree == 3 {
				close(three)
			}
			mu.Unlock()
			<-three
		}
		switch ev.Seq {
		case 1:
			<-fourth
		case 4:
			once.Do(func() { close(fourth) })
		}
	}
	n, err := relayOnce(t, ob, l.publish)
	if n != 10 || err != nil {
		t.Fatalf("RelayOnce = %d, %v; want 10, nil", n, err)
	}
	if l.most != 3 {
		t.Errorf("at most %d publishes ran at once, want InFlight's 3 (started %v, landed %v)", l.most, l.startOrder, l.order)
	}
	for seq := int64(1); seq <= 10; seq++ {
		if l.attempts[seq] != 1 {
			t.Errorf("event %d published %d times, want once", seq, l.attempts[seq])
		}
	}
	if i := slices.Index(l.order, 1); i < 1 {
		t.Errorf("events landed in the order %v: event 1, held until event 4 started, should not be first", l.order)
	}
	if n, err := relayOnce(t, ob, l.publish); n != 0 || err != nil {
		t.Errorf("RelayOnce again = %d, %v; want 0, nil: every event marked sent", n, err)
	}
	f.wantRecords(f.part, "o."+obName+".p.", 0)
	f.wantRecords(f.part, "o."+obName+".s.", 10)
}

// testOutboxInFlightFailure: with InFlight 4, event 2's publish fails
// once. The pass marks only event 1, whatever landed after 2, and starts
// nothing once 2 failed; the next pass publishes 2 and everything after
// it, each at most twice in all, and marks the rest.
func testOutboxInFlightFailure(t *testing.T, f *obFix) {
	docs, ob := f.docs(etagstore.Options{}), f.outbox(etagstore.OutboxOptions{InFlight: 4})
	if err := emitMany(t.Context(), docs, ob, f.key, "w", 8); err != nil {
		t.Fatal(err)
	}
	l := newObPublishLog(16)
	failed := make(chan struct{})
	l.fail = func(ev obEvent) error {
		select {
		case <-failed:
			return nil
		default:
		}
		if ev.Seq == 2 {
			close(failed)
			return errObPublish
		}
		return nil
	}
	n, err := relayOnce(t, ob, l.publish)
	if n != 1 || !errors.Is(err, errObPublish) {
		t.Fatalf("RelayOnce with event 2 failing = %d, %v; want 1 (event 1) and the publish's error", n, err)
	}
	wantOneLine(t, err)
	started := len(l.startOrder)
	if started > 4+len(l.order) {
		t.Errorf("%d publishes started (%v), %d landed: more than InFlight beyond those that landed", started, l.startOrder, len(l.order))
	}
	f.wantRecords(f.part, "o."+obName+".s.", 1)
	n, err = relayOnce(t, ob, l.publish)
	if n != 7 || err != nil {
		t.Fatalf("RelayOnce after the failure = %d, %v; want 7, nil", n, err)
	}
	for seq := int64(1); seq <= 8; seq++ {
		if a := l.attempts[seq]; a < 1 || a > 2 || seq == 1 && a != 1 {
			t.Errorf("event %d published %d times; want once for 1, once or twice for the others", seq, a)
		}
	}
	f.wantRecords(f.part, "o."+obName+".p.", 0)
	f.wantRecords(f.part, "o."+obName+".s.", 8)
}

// testOutboxMarksBehindPublishes: the request that marks events 1…32
// sent is held until event 40's publish has started. A pass that marked
// between its publishes would wait on it before publishing 33; one that
// marks behind them goes on, and ends with all 40 marked in two
// requests.
func testOutboxMarksBehindPublishes(t *testing.T, f *obFix) {
	docs, ob := f.docs(etagstore.Options{}), f.outbox(etagstore.OutboxOptions{})
	if err := emitMany(t.Context(), docs, ob, f.key, "w", 40); err != nil {
		t.Fatal(err)
	}
	l := newObPublishLog(40)
	fortieth := make(chan struct{})
	l.hold = func(ev obEvent) {
		if ev.Seq == 40 {
			close(fortieth)
		}
	}
	var mu sync.Mutex
	var markSizes []int
	f.b.set(func(ctx context.Context, actions []driver.Action, commit obCommit) ([]driver.ETag, error) {
		if !marks(actions) {
			return commit(ctx, actions)
		}
		<-fortieth
		mu.Lock()
		markSizes = append(markSizes, countFunc(actions, sentOf))
		mu.Unlock()
		return commit(ctx, actions)
	})
	n, err := relayOnce(t, ob, l.publish)
	if n != 40 || err != nil {
		t.Fatalf("RelayOnce = %d, %v; want 40, nil", n, err)
	}
	if !slices.Equal(markSizes, []int{32, 8}) {
		t.Errorf("events marked sent per request: %v, want [32 8]", markSizes)
	}
	if !slices.Equal(l.order, seqRange(1, 40)) {
		t.Errorf("published %v, want 1…40 in order", l.order)
	}
	f.wantRecords(f.part, "o."+obName+".s.", 40)
}

// testOutboxBusyRelay: a Relay whose pass published something makes the
// next pass at once, without waiting for Poll. Event 1's publish commits
// event 2; the relay publishes it before it first sleeps.
func testOutboxBusyRelay(t *testing.T, f *obFix) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	docs, ob := f.docs(etagstore.Options{}), f.outbox(etagstore.OutboxOptions{})
	f.mustEmit(docs, ob, f.key, "w1")
	c := newObConsumer()
	publish := c.publish("r")
	var once sync.Once
	var emitErr error
	relayDone := make(chan error, 1)
	go func() {
		relayDone <- ob.Relay(ctx, func(ctx context.Context, ev obEvent) error {
			once.Do(func() { emitErr = emit(ctx, docs, ob, f.key, "w2", nil) })
			return publish(ctx, ev)
		}, nil)
	}()
	f.clock.waitAsleep(t, 1)
	if emitErr != nil {
		t.Fatalf("emit from event 1's publish: %v", emitErr)
	}
	if got := c.deliveredBy("r"); !slices.Equal(got, []int64{1, 2}) {
		t.Errorf("published %v before the relay first slept, want [1 2]: a pass that published is followed by the next at once", got)
	}
	cancel()
	if err := <-relayDone; err != nil {
		t.Errorf("Relay = %v", err)
	}
	c.check(t, f.part, f.read(ob, f.part, 0))
}

// countFunc is how many of s satisfy f.
func countFunc[S ~[]E, E any](s S, f func(E) bool) int {
	n := 0
	for _, v := range s {
		if f(v) {
			n++
		}
	}
	return n
}

// obBatchLog records the calls of a batch publisher: each call's Seqs.
type obBatchLog struct {
	mu    sync.Mutex
	calls [][]int64
	fail  func(call int, evs []obEvent) error
}

func (l *obBatchLog) publish(_ context.Context, evs []obEvent) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	seqs := make([]int64, len(evs))
	for i, ev := range evs {
		seqs[i] = ev.Seq
	}
	l.calls = append(l.calls, seqs)
	if l.fail != nil {
		return l.fail(len(l.calls), evs)
	}
	return nil
}

// sizes is how many events each call carried.
func (l *obBatchLog) sizes() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []int
	for _, c := range l.calls {
		out = append(out, len(c))
	}
	return out
}

// seqs is every Seq the calls carried, in the order they carried them.
func (l *obBatchLog) seqs() []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []int64
	for _, c := range l.calls {
		out = append(out, c...)
	}
	return out
}

// testOutboxBatches: RelayBatchesOnce hands publish the run in order, in
// batches of OutboxOptions.Batch (32 when left out), and marks every
// event sent once; a nil publish is ErrInvalidInput for RelayBatches
// and RelayBatchesOnce alike.
func testOutboxBatches(t *testing.T, f *obFix) {
	docs := f.docs(etagstore.Options{})
	for _, tc := range []struct {
		name  string
		batch int
		sizes []int
	}{
		{"default", 0, []int{32, 32, 6}},
		{"Batch 25", 25, []int{25, 25, 20}},
	} {
		name := "b" + strconv.Itoa(tc.batch)
		ob := f.outbox(etagstore.OutboxOptions{Name: name, Batch: tc.batch})
		if err := emitMany(t.Context(), docs, ob, f.key, "w", 70); err != nil {
			t.Fatal(err)
		}
		var l obBatchLog
		n, err := ob.RelayBatchesOnce(t.Context(), l.publish)
		if n != 70 || err != nil {
			t.Fatalf("%s: RelayBatchesOnce = %d, %v; want 70, nil", tc.name, n, err)
		}
		if !slices.Equal(l.sizes(), tc.sizes) || !slices.Equal(l.seqs(), seqRange(1, 70)) {
			t.Errorf("%s: publish got batches of %v carrying %v; want %v, 1…70 in order", tc.name, l.sizes(), l.seqs(), tc.sizes)
		}
		if n, err := ob.RelayBatchesOnce(t.Context(), l.publish); n != 0 || err != nil {
			t.Errorf("%s: RelayBatchesOnce again = %d, %v; want 0, nil: every event marked sent", tc.name, n, err)
		}
		f.wantRecords(f.part, "o."+name+".p.", 0)
	}
	ob := f.outbox(etagstore.OutboxOptions{})
	if _, err := ob.RelayBatchesOnce(t.Context(), nil); !errors.Is(err, etagstore.ErrInvalidInput) {
		t.Errorf("RelayBatchesOnce(nil) = %v, want ErrInvalidInput", err)
	}
	if err := ob.RelayBatches(t.Context(), nil, nil); !errors.Is(err, etagstore.ErrInvalidInput) {
		t.Errorf("RelayBatches(nil) = %v, want ErrInvalidInput", err)
	}
}

// testOutboxBatchFailure: with batches of 10, the second call fails
// once: the pass marks the first 10 alone and calls no more; then
// RelayBatches hands publish 11…20 again, then the rest, so no event
// goes before an earlier one that was not published.
func testOutboxBatchFailure(t *testing.T, f *obFix) {
	docs, ob := f.docs(etagstore.Options{}), f.outbox(etagstore.OutboxOptions{Batch: 10})
	if err := emitMany(t.Context(), docs, ob, f.key, "w", 35); err != nil {
		t.Fatal(err)
	}
	l := obBatchLog{fail: func(call int, _ []obEvent) error {
		if call == 2 {
			return errObPublish
		}
		return nil
	}}
	n, err := ob.RelayBatchesOnce(t.Context(), l.publish)
	if n != 10 || !errors.Is(err, errObPublish) {
		t.Fatalf("RelayBatchesOnce with the second batch failing = %d, %v; want 10 and the publish's error", n, err)
	}
	wantOneLine(t, err)
	if !strings.Contains(err.Error(), "event 11 ") {
		t.Errorf("the error %q does not name event 11, the first of the batch that failed", err)
	}
	if got := l.sizes(); !slices.Equal(got, []int{10, 10}) {
		t.Errorf("calls before the failure stopped the partition: %v, want [10 10]", got)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- ob.RelayBatches(ctx, l.publish, nil) }()
	f.clock.waitAsleep(t, 1)
	cancel()
	if err := <-done; err != nil {
		t.Errorf("RelayBatches = %v", err)
	}
	want := append(seqRange(1, 20), seqRange(11, 35)...)
	if got := l.seqs(); !slices.Equal(got, want) {
		t.Errorf("publish carried %v, want %v: the failed batch again, then the rest, in order", got, want)
	}
	f.wantRecords(f.part, "o."+obName+".p.", 0)
	f.wantRecords(f.part, "o."+obName+".s.", 35)
}

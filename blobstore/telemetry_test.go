package blobstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/blobstore"
	"github.com/etagstore/etagstore/internal/azuritetest"
)

// A broken lock, in the Locker's metrics: it was acquired, its renewal
// found the lease broken (lost, no renewal before), and the lock taken
// after it was acquired and released.
func TestLockEventsOfABrokenLock(t *testing.T) {
	ctx := t.Context()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	c := azuritetest.NewContainer(t)
	l, err := blobstore.NewLocker(c, &blobstore.LockOptions{RenewInterval: 500 * time.Millisecond, MeterProvider: mp})
	if err != nil {
		t.Fatal(err)
	}
	lk, err := l.TryLock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	breaker, err := blobstore.New(c, &blobstore.Options{Prefix: "locks/"}).BlobLease("k", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := breaker.Break(ctx, 0); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lk.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("the lock did not notice its lease was broken")
	}
	_ = lk.Unlock(ctx) // reports the loss; nothing is released
	again, err := l.TryLock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if err := again.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "etagstore.lock.events" {
				continue
			}
			for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
				v, _ := p.Attributes.Value("etagstore.event")
				got[v.AsString()] += p.Value
			}
		}
	}
	want := map[string]int64{"acquired": 2, "lost": 1, "released": 1}
	if len(got) != len(want) || got["acquired"] != 2 || got["lost"] != 1 || got["released"] != 1 {
		t.Errorf("lock events %v, want %v", got, want)
	}
}

// The key the telemetry tests use: personal data, which no span, metric
// or log may carry without RecordKeys.
const personalKey = "alice@example.com"

// spanTelemetry is an OpenTelemetry SDK in memory for one test, and a log
// that keeps every record.
type spanTelemetry struct {
	spans  *tracetest.InMemoryExporter
	reader *sdkmetric.ManualReader
	tp     *sdktrace.TracerProvider
	mp     *sdkmetric.MeterProvider
	logs   *bytes.Buffer
	mu     sync.Mutex
	log    *slog.Logger
	// renewed is closed when the first etagstore.RenewLease span ends.
	renewed chan struct{}
}

// renewalGate closes ch when the first lease renewal's span ends.
type renewalGate struct {
	once sync.Once
	ch   chan struct{}
}

func (g *renewalGate) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (g *renewalGate) OnEnd(s sdktrace.ReadOnlySpan) {
	if s.Name() == "etagstore.RenewLease" {
		g.once.Do(func() { close(g.ch) })
	}
}
func (g *renewalGate) Shutdown(context.Context) error   { return nil }
func (g *renewalGate) ForceFlush(context.Context) error { return nil }

func newSpanTelemetry(t *testing.T) *spanTelemetry {
	tel := &spanTelemetry{spans: tracetest.NewInMemoryExporter(), reader: sdkmetric.NewManualReader(), logs: &bytes.Buffer{}}
	tel.renewed = make(chan struct{})
	tel.tp = sdktrace.NewTracerProvider(sdktrace.WithSyncer(tel.spans), sdktrace.WithSpanProcessor(&renewalGate{ch: tel.renewed}))
	tel.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(tel.reader))
	tel.log = slog.New(slog.NewTextHandler(lockedWriter{&tel.mu, tel.logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	t.Cleanup(func() { _ = tel.tp.Shutdown(context.Background()); _ = tel.mp.Shutdown(context.Background()) })
	return tel
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (tel *spanTelemetry) logText() string {
	tel.mu.Lock()
	defer tel.mu.Unlock()
	return tel.logs.String()
}

// recorded is one span as the tests compare it.
type recorded struct {
	Name   string
	Kind   string
	Attrs  map[string]string
	Status string // "Error: " and the description, or ""
}

func record(sp tracetest.SpanStub) recorded {
	r := recorded{Name: sp.Name, Kind: sp.SpanKind.String(), Attrs: map[string]string{}}
	for _, kv := range sp.Attributes {
		r.Attrs[string(kv.Key)] = kv.Value.Emit()
	}
	if sp.Status.Code == codes.Error {
		r.Status = "Error: " + sp.Status.Description
	}
	return r
}

// want is the span of op on key, ended with err, as RecordKeys says.
func want(op, key, outcome string, err error, recordKeys bool) recorded {
	r := recorded{Name: "etagstore." + op, Kind: "client", Attrs: map[string]string{
		"etagstore.backend": "blobstore", "etagstore.operation": op, "etagstore.outcome": outcome}}
	if recordKeys && key != "" {
		r.Attrs["etagstore.key"] = key
	}
	switch {
	case err == nil:
	case recordKeys:
		r.Status = "Error: " + err.Error()
	default:
		r.Status = "Error: " + outcome
	}
	return r
}

// durations counts etagstore.operation.duration by operation and outcome.
func (tel *spanTelemetry) durations(t *testing.T) map[string]uint64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := tel.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if h, ok := m.Data.(metricdata.Histogram[float64]); ok && m.Name == "etagstore.operation.duration" {
				for _, p := range h.DataPoints {
					op, _ := p.Attributes.Value("etagstore.operation")
					oc, _ := p.Attributes.Value("etagstore.outcome")
					out[op.AsString()+" "+oc.AsString()] += p.Count
				}
			}
		}
	}
	return out
}

// noKey fails the test if a span, its links or the log names the key.
func (tel *spanTelemetry) noKey(t *testing.T) {
	t.Helper()
	for _, sp := range tel.spans.GetSpans() {
		if strings.Contains(fmt.Sprint(record(sp), sp.Links, sp.Events), personalKey) {
			t.Errorf("without RecordKeys, span %s names the key: %+v", sp.Name, record(sp))
		}
	}
	if strings.Contains(tel.logText(), personalKey) {
		t.Errorf("without RecordKeys, the log names the key:\n%s", tel.logText())
	}
}

// GetIf is a span of the Store it is given: a 304 is not_modified, a
// failed If-Match a conflict (no write was refused: etagstore.conflicts
// stays empty), and the key only with RecordKeys.
func TestGetIfSpans(t *testing.T) {
	for _, recordKeys := range []bool{false, true} {
		t.Run(fmt.Sprintf("RecordKeys=%v", recordKeys), func(t *testing.T) {
			ctx := t.Context()
			tel := newSpanTelemetry(t)
			b := blobstore.New(azuritetest.NewContainer(t), nil)
			d, err := etagstore.New[Note](b, nil).Create(ctx, personalKey, Note{Text: "v1"})
			if err != nil {
				t.Fatal(err)
			}
			s := etagstore.New[Note](b, &etagstore.Options{TracerProvider: tel.tp, MeterProvider: tel.mp, Logger: tel.log, RecordKeys: recordKeys})
			var errs []error
			for _, c := range []struct {
				key  string
				cond blobstore.ReadConditions
				want error
			}{
				{personalKey, blobstore.ReadConditions{IfMatch: d.ETag}, nil},
				{personalKey, blobstore.ReadConditions{IfNoneMatch: d.ETag}, blobstore.ErrNotModified},
				{personalKey, blobstore.ReadConditions{IfMatch: `"0x1"`}, etagstore.ErrConflict},
				{personalKey + ".missing", blobstore.ReadConditions{}, etagstore.ErrNotFound},
				{personalKey + ".", blobstore.ReadConditions{}, etagstore.ErrInvalidKey},
			} {
				_, err := blobstore.GetIf(ctx, s, c.key, c.cond)
				if c.want == nil && err != nil || !errors.Is(err, c.want) {
					t.Fatalf("GetIf(%q, %+v) = %v, want %v", c.key, c.cond, err, c.want)
				}
				errs = append(errs, err)
			}
			wantSpans := []recorded{
				want("GetIf", personalKey, "ok", nil, recordKeys),
				want("GetIf", personalKey, "not_modified", nil, recordKeys),
				want("GetIf", personalKey, "conflict", nil, recordKeys),
				want("GetIf", personalKey+".missing", "not_found", nil, recordKeys),
				want("GetIf", personalKey+".", "invalid", errs[4], recordKeys),
			}
			var got []recorded
			for _, sp := range tel.spans.GetSpans() {
				got = append(got, record(sp))
			}
			if diff := cmp.Diff(wantSpans, got); diff != "" {
				t.Errorf("spans (-want +got):\n%s", diff)
			}
			wantDurations := map[string]uint64{"GetIf ok": 1, "GetIf not_modified": 1, "GetIf conflict": 1, "GetIf not_found": 1, "GetIf invalid": 1}
			if diff := cmp.Diff(wantDurations, tel.durations(t)); diff != "" {
				t.Errorf("etagstore.operation.duration (-want +got):\n%s", diff)
			}
			var rm metricdata.ResourceMetrics
			if err := tel.reader.Collect(ctx, &rm); err != nil {
				t.Fatal(err)
			}
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					if m.Name == "etagstore.conflicts" {
						t.Errorf("a read's failed If-Match counted as a refused write: %+v", m.Data)
					}
				}
			}
			if !recordKeys {
				tel.noKey(t)
			}
		})
	}
}

// A Backend's lease handles trace every lease operation with
// Options.TracerProvider and MeterProvider: the key of a blob lease only
// with RecordKeys, none for the container's.
func TestLeaseSpans(t *testing.T) {
	for _, recordKeys := range []bool{false, true} {
		t.Run(fmt.Sprintf("RecordKeys=%v", recordKeys), func(t *testing.T) {
			ctx := t.Context()
			tel := newSpanTelemetry(t)
			b := blobstore.New(azuritetest.NewContainer(t), &blobstore.Options{TracerProvider: tel.tp, MeterProvider: tel.mp, RecordKeys: recordKeys})
			if _, err := etagstore.New[Note](b, nil).Create(ctx, personalKey, Note{}); err != nil {
				t.Fatal(err)
			}
			a, _ := b.BlobLease(personalKey, "")
			other, _ := b.BlobLease(personalKey, "")
			badDuration := a.Acquire(ctx, 10*time.Second)
			if err := a.Acquire(ctx, 15*time.Second); err != nil {
				t.Fatal(err)
			}
			taken := other.Acquire(ctx, 15*time.Second)
			if !errors.Is(taken, etagstore.ErrLocked) {
				t.Fatalf("second Acquire = %v", taken)
			}
			steps := []func() error{
				func() error { return a.Renew(ctx) },
				func() error { return a.Change(ctx, blobstore.NewLeaseID()) },
				func() error { _, err := other.Break(ctx, 0); return err },
			}
			for _, step := range steps {
				if err := step(); err != nil {
					t.Fatal(err)
				}
			}
			lost := a.Renew(ctx) // broken: cannot be renewed
			if !errors.Is(lost, etagstore.ErrLockLost) {
				t.Fatalf("Renew after Break = %v", lost)
			}
			if err := a.Release(ctx); err != nil {
				t.Fatal(err)
			}
			cl, _ := b.ContainerLease("")
			if err := cl.Acquire(ctx, blobstore.Infinite); err != nil {
				t.Fatal(err)
			}
			if err := cl.Release(ctx); err != nil {
				t.Fatal(err)
			}
			wantSpans := []recorded{
				want("AcquireLease", personalKey, "invalid", badDuration, recordKeys),
				want("AcquireLease", personalKey, "ok", nil, recordKeys),
				want("AcquireLease", personalKey, "locked", taken, recordKeys),
				want("RenewLease", personalKey, "ok", nil, recordKeys),
				want("ChangeLease", personalKey, "ok", nil, recordKeys),
				want("BreakLease", personalKey, "ok", nil, recordKeys),
				want("RenewLease", personalKey, "locked", lost, recordKeys),
				want("ReleaseLease", personalKey, "ok", nil, recordKeys),
				want("AcquireLease", "", "ok", nil, recordKeys),
				want("ReleaseLease", "", "ok", nil, recordKeys),
			}
			var got []recorded
			for _, sp := range tel.spans.GetSpans() {
				got = append(got, record(sp))
			}
			if diff := cmp.Diff(wantSpans, got); diff != "" {
				t.Errorf("spans (-want +got):\n%s", diff)
			}
			wantDurations := map[string]uint64{"AcquireLease invalid": 1, "AcquireLease ok": 2, "AcquireLease locked": 1,
				"RenewLease ok": 1, "ChangeLease ok": 1, "BreakLease ok": 1, "RenewLease locked": 1, "ReleaseLease ok": 2}
			if diff := cmp.Diff(wantDurations, tel.durations(t)); diff != "" {
				t.Errorf("etagstore.operation.duration (-want +got):\n%s", diff)
			}
			if !recordKeys {
				tel.noKey(t)
			}
		})
	}
}

// A Locker's spans: TryLock over its AcquireLease, Lock over its tries,
// background renewals and the loss linked to the TryLock that acquired the
// lock, Unlock over its ReleaseLease; the key only with RecordKeys, in
// spans and in the warning of the loss alike.
func TestLockerSpans(t *testing.T) {
	for _, recordKeys := range []bool{false, true} {
		t.Run(fmt.Sprintf("RecordKeys=%v", recordKeys), func(t *testing.T) {
			tel := newSpanTelemetry(t)
			c := azuritetest.NewContainer(t)
			l, err := blobstore.NewLocker(c, &blobstore.LockOptions{RenewInterval: 300 * time.Millisecond,
				TracerProvider: tel.tp, MeterProvider: tel.mp, Logger: tel.log, RecordKeys: recordKeys})
			if err != nil {
				t.Fatal(err)
			}
			other, err := blobstore.NewLocker(c, &blobstore.LockOptions{TracerProvider: tel.tp, MeterProvider: tel.mp, Logger: tel.log, RecordKeys: recordKeys})
			if err != nil {
				t.Fatal(err)
			}
			busy, gaveUp, lostErr := lockerScenario(t, l, other, blobstore.New(c, &blobstore.Options{Prefix: "locks/"}), tel.renewed)
			checkLockerSpans(t, tel.spans.GetSpans(), recordKeys, busy, gaveUp, lostErr)
			logs := tel.logText()
			if !strings.Contains(logs, "etagstore: lock lost") {
				t.Errorf("no warning of the loss:\n%s", logs)
			}
			if !recordKeys {
				tel.noKey(t)
			} else if !strings.Contains(logs, "key="+personalKey) {
				t.Errorf("with RecordKeys, the warning of the loss does not name the key:\n%s", logs)
			}
		})
	}
}

// lockerScenario takes the lock for personalKey; is refused by TryLock
// (busy) and by a Lock that gives up (gaveUp), both of other, as another
// process's Locker (the callers of l would wait in line without asking the
// service); lets the lock renew, breaks
// its lease through locks (a Backend on the lock blobs) and Unlocks the
// lost lock (lostErr); then takes the lock again and Unlocks it.
func lockerScenario(t *testing.T, l, other *blobstore.Locker, locks *blobstore.Backend, renewed <-chan struct{}) (busy, gaveUp, lostErr error) {
	t.Helper()
	ctx := t.Context()
	lk, err := l.TryLock(ctx, personalKey)
	if err != nil {
		t.Fatal(err)
	}
	if _, busy = other.TryLock(ctx, personalKey); !errors.Is(busy, etagstore.ErrLocked) {
		t.Fatalf("second TryLock = %v", busy)
	}
	wait, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, gaveUp = other.Lock(wait, personalKey); !errors.Is(gaveUp, etagstore.ErrLocked) {
		t.Fatalf("Lock while held = %v", gaveUp)
	}
	select { // at least one renewal
	case <-renewed:
	case <-time.After(10 * time.Second):
		t.Fatal("the lock did not renew its lease")
	}
	breaker, _ := locks.BlobLease(personalKey, "")
	if _, err := breaker.Break(ctx, 0); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lk.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("the lock did not notice its lease was broken")
	}
	if lostErr = lk.Unlock(ctx); !errors.Is(lostErr, etagstore.ErrLockLost) {
		t.Fatalf("Unlock of a lost lock = %v", lostErr)
	}
	again, err := l.TryLock(ctx, personalKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := again.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	return busy, gaveUp, lostErr
}

// checkLockerSpans checks the spans of lockerScenario, in the order they
// ended: the renewals that succeeded and Lock's tries (how many depends on
// timing) apart, the rest exactly.
func checkLockerSpans(t *testing.T, spans tracetest.SpanStubs, recordKeys bool, busy, gaveUp, lostErr error) {
	t.Helper()
	tree := newSpanTree(spans)
	renewals, tries := 0, 0
	var got []recorded
	for _, sp := range spans {
		r := record(sp)
		switch {
		case sp.Name == "etagstore.RenewLease" || sp.Name == "etagstore.LockLost":
			tree.checkBackground(t, sp)
			if sp.Name == "etagstore.RenewLease" && r.Attrs["etagstore.outcome"] == "ok" {
				renewals++
				if diff := cmp.Diff(want("RenewLease", personalKey, "ok", nil, recordKeys), r); diff != "" {
					t.Errorf("renewal (-want +got):\n%s", diff)
				}
				continue
			}
			got = append(got, r)
		case tree.under(sp, "etagstore.Lock"):
			// Lock's tries: refused, the last one possibly cut by its deadline.
			tries++
			if oc := r.Attrs["etagstore.outcome"]; oc != "locked" && oc != "canceled" {
				t.Errorf("Lock's try %s: outcome %s, want locked (or canceled at the deadline)", sp.Name, oc)
			}
		default:
			got = append(got, r)
		}
	}
	if renewals == 0 || tries < 2 {
		t.Errorf("%d renewals, %d spans under Lock; want a renewal, and a TryLock and its AcquireLease at least", renewals, tries)
	}
	if diff := cmp.Diff(wantLockerSpans(recordKeys, busy, gaveUp, lostErr), got); diff != "" {
		t.Errorf("spans (-want +got):\n%s", diff)
	}
}

// wantLockerSpans are the spans of lockerScenario but for the renewals
// that succeeded and Lock's tries.
func wantLockerSpans(recordKeys bool, busy, gaveUp, lostErr error) []recorded {
	k := personalKey
	// The renewal that found the lease broken failed with the service's
	// answer that lostErr wraps (ErrLockLost: its 409).
	answer := strings.TrimPrefix(lostErr.Error(), fmt.Sprintf("%v: lock %q: the renewal was refused: ", etagstore.ErrLockLost, k))
	renewErr := fmt.Errorf("%w: %s", etagstore.ErrLockLost, answer)
	lost := want("LockLost", k, "locked", lostErr, recordKeys)
	lost.Kind = "internal"
	return []recorded{
		want("AcquireLease", k, "not_found", nil, recordKeys), // no lock blob yet: TryLock creates it
		want("AcquireLease", k, "ok", nil, recordKeys),
		want("TryLock", k, "ok", nil, recordKeys),
		want("AcquireLease", k, "locked", busy, recordKeys),
		want("TryLock", k, "locked", busy, recordKeys),
		want("Lock", k, "locked", gaveUp, recordKeys),
		want("RenewLease", k, "locked", renewErr, recordKeys),
		lost,
		want("Unlock", k, "locked", lostErr, recordKeys),
		want("AcquireLease", k, "ok", nil, recordKeys),
		want("TryLock", k, "ok", nil, recordKeys),
		want("ReleaseLease", k, "ok", nil, recordKeys),
		want("Unlock", k, "ok", nil, recordKeys),
	}
}

// spanTree finds spans' ancestors, and the first TryLock.
type spanTree struct {
	byID  map[trace.SpanID]tracetest.SpanStub
	first trace.SpanID
}

func newSpanTree(spans tracetest.SpanStubs) spanTree {
	tree := spanTree{byID: map[trace.SpanID]tracetest.SpanStub{}}
	for _, sp := range spans {
		tree.byID[sp.SpanContext.SpanID()] = sp
		if sp.Name == "etagstore.TryLock" && !tree.first.IsValid() {
			tree.first = sp.SpanContext.SpanID()
		}
	}
	return tree
}

// under reports whether sp has an ancestor named name.
func (tree spanTree) under(sp tracetest.SpanStub, name string) bool {
	for p, ok := tree.byID[sp.Parent.SpanID()]; ok; p, ok = tree.byID[p.Parent.SpanID()] {
		if p.Name == name {
			return true
		}
	}
	return false
}

// checkBackground checks that sp, which the lock's background renewal
// made, is a root span linked to the TryLock that acquired the lock.
func (tree spanTree) checkBackground(t *testing.T, sp tracetest.SpanStub) {
	t.Helper()
	if len(sp.Links) != 1 || sp.Links[0].SpanContext.SpanID() != tree.first || sp.Parent.IsValid() {
		t.Errorf("%s: parent %v, links %v; want a root span linked to the first TryLock", sp.Name, sp.Parent, sp.Links)
	}
}

package etagstore_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/memstore"

	"github.com/etagstore/etagstore/driver"
)

// telemetry is an OpenTelemetry SDK set up in memory for one test.
type telemetry struct {
	spans  *tracetest.InMemoryExporter
	reader *sdkmetric.ManualReader
	opts   etagstore.Options
}

func newTelemetry(t *testing.T) *telemetry {
	tel := &telemetry{spans: tracetest.NewInMemoryExporter(), reader: sdkmetric.NewManualReader()}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(tel.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(tel.reader))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()); _ = mp.Shutdown(context.Background()) })
	tel.opts = etagstore.Options{TracerProvider: tp, MeterProvider: mp}
	return tel
}

// sums returns, for the instrument name, each data point's value (counters)
// or count and sum (histograms) by its attributes, rendered as "k=v,k=v".
func (tel *telemetry) sums(t *testing.T, name string) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := tel.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					out[render(p.Attributes)] += p.Value
				}
			case metricdata.Histogram[int64]:
				for _, p := range d.DataPoints {
					out[render(p.Attributes)+" count"] += int64(p.Count)
					out[render(p.Attributes)+" sum"] += p.Sum
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					out[render(p.Attributes)+" count"] += int64(p.Count)
				}
			}
		}
	}
	return out
}

func render(set attribute.Set) string {
	s := ""
	for _, kv := range set.ToSlice() {
		if kv.Key == "etagstore.backend" {
			continue
		}
		if s != "" {
			s += ","
		}
		s += string(kv.Key) + "=" + kv.Value.Emit()
	}
	return s
}

// Sixteen writers on one key, a first one alone and fifteen batched behind
// it: exact span and metric counts.
func TestTelemetryOfGroupCommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer runOutTimers()
		tel := newTelemetry(t)
		b := newStepBackend()
		s := etagstore.New[counter](b, &tel.opts)
		vals := make(chan int, 16)
		var wg sync.WaitGroup
		updates(t, s, 1, vals, &wg) // alone: its write is held
		<-b.arrived
		updates(t, s, 15, vals, &wg) // queue behind it: one batch
		b.pass <- struct{}{}
		<-b.arrived
		b.pass <- struct{}{}
		wg.Wait()

		spans := tel.spans.GetSpans()
		batches := map[int64]int{}
		for _, sp := range spans {
			if sp.Name != "etagstore.Update" {
				t.Errorf("span %q, want only etagstore.Update", sp.Name)
				continue
			}
			attrs := map[attribute.Key]attribute.Value{}
			for _, kv := range sp.Attributes {
				attrs[kv.Key] = kv.Value
			}
			if attrs["etagstore.outcome"].AsString() != "ok" || attrs["etagstore.backend"].AsString() != "etagstore_test" {
				t.Errorf("span attributes %v", sp.Attributes)
			}
			if _, ok := attrs["etagstore.key"]; ok {
				t.Error("a span records the key without Options.RecordKeys")
			}
			batches[attrs["etagstore.batch_size"].AsInt64()]++
		}
		if diff := cmp.Diff(map[int64]int{1: 1, 15: 15}, batches); diff != "" {
			t.Errorf("spans by batch size (-want +got):\n%s", diff)
		}
		// Once per conditional write: the first Update alone, then one batch of 15.
		if diff := cmp.Diff(map[string]int64{" count": 2, " sum": 1 + 15}, tel.sums(t, "etagstore.batch.size")); diff != "" {
			t.Errorf("etagstore.batch.size (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(map[string]int64{" count": 16, " sum": 16}, tel.sums(t, "etagstore.update.attempts")); diff != "" {
			t.Errorf("etagstore.update.attempts (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(map[string]int64{"etagstore.operation=Update,etagstore.outcome=ok count": 16}, tel.sums(t, "etagstore.operation.duration")); diff != "" {
			t.Errorf("etagstore.operation.duration (-want +got):\n%s", diff)
		}
		if got := tel.sums(t, "etagstore.conflicts"); len(got) != 0 {
			t.Errorf("conflicts %v, want none", got)
		}
	})
}

// A lost response found committed, a conflict absorbed by a retry, a
// conflict returned, the version cache, and the requests sent: each
// counted once.
func TestTelemetryOfConflictsLostResponsesAndCache(t *testing.T) {
	tel := newTelemetry(t)
	ctx := t.Context()
	hb := &hookBackend{Backend: memstore.New(nil)}
	opts := tel.opts
	opts.CacheSize = 8
	opts.RecordKeys = true
	s := etagstore.New[counter](hb, &opts)
	d, err := s.Create(ctx, "k", counter{})
	if err != nil {
		t.Fatal(err)
	}
	hb.writeHook = func(wctx context.Context, key string, w driver.Write) (etagstore.ETag, error, bool) {
		switch nOf(w.Data) {
		case 1: // the first Update's write from the cached copy: another writer comes first
			interfere(t, hb.Backend, key)
		case 102: // the second Update's write: committed, but the answer is lost
			if _, err := hb.Backend.Write(wctx, key, w); err != nil {
				t.Fatal(err)
			}
			return "", errors.New("connection reset"), true
		}
		return "", nil, false
	}
	inc := func(c *counter) error { c.N++; return nil }
	if _, err := s.Update(ctx, "k", inc); err != nil { // write 1: 412, write 2 after a read
		t.Fatal(err)
	}
	if _, err := s.Update(ctx, "k", inc); err != nil { // write 3: lost, committed
		t.Fatal(err)
	}
	if _, err := s.Replace(ctx, d); !errors.Is(err, etagstore.ErrConflict) {
		t.Fatalf("stale Replace = %v", err)
	}
	if diff := cmp.Diff(map[string]int64{"etagstore.resolution=absorbed": 1, "etagstore.resolution=returned": 1}, tel.sums(t, "etagstore.conflicts")); diff != "" {
		t.Errorf("etagstore.conflicts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int64{"etagstore.verdict=committed": 1}, tel.sums(t, "etagstore.lost_responses")); diff != "" {
		t.Errorf("etagstore.lost_responses (-want +got):\n%s", diff)
	}
	// Every request to the backend, by the operation that sent it: the
	// first Update's write refused, its read and write; the second's
	// read, its write whose answer was lost, the read that found it
	// committed; the stale Replace's write and the read that tells a
	// conflict from a deletion.
	if diff := cmp.Diff(map[string]int64{
		"etagstore.operation=Create,etagstore.outcome=ok":        1,
		"etagstore.operation=Update,etagstore.outcome=conflict":  1,
		"etagstore.operation=Update,etagstore.outcome=ok":        5,
		"etagstore.operation=Replace,etagstore.outcome=conflict": 1,
		"etagstore.operation=Replace,etagstore.outcome=ok":       1,
	}, tel.sums(t, "etagstore.requests")); diff != "" {
		t.Errorf("etagstore.requests (-want +got):\n%s", diff)
	}
	// The first Update found Create's copy, stale by then: the key is
	// marked shared, and the second Update reads first (a miss).
	if diff := cmp.Diff(map[string]int64{"etagstore.result=hit": 1, "etagstore.result=miss": 1}, tel.sums(t, "etagstore.cache.lookups")); diff != "" {
		t.Errorf("etagstore.cache.lookups (-want +got):\n%s", diff)
	}
	keyed := 0
	for _, sp := range tel.spans.GetSpans() {
		for _, kv := range sp.Attributes {
			if kv.Key == "etagstore.key" && kv.Value.AsString() == "k" {
				keyed++
			}
		}
	}
	if keyed != 4 {
		t.Errorf("%d spans carry the key with RecordKeys, want 4", keyed)
	}
}

// A mutate that panics still ends its Update's span, counted as an error;
// error texts (which quote keys) stay off spans without RecordKeys.
func TestTelemetryPanicsAndKeys(t *testing.T) {
	tel := newTelemetry(t)
	ctx := t.Context()
	for _, grouped := range []bool{true, false} {
		opts := tel.opts
		opts.DisableGroupCommit = !grouped
		s := etagstore.New[counter](memstore.New(nil), &opts)
		if _, err := s.Create(ctx, "alice@example.com", counter{}); err != nil {
			t.Fatal(err)
		}
		func() {
			defer func() { _ = recover() }()
			_, _ = s.Update(ctx, "alice@example.com", func(*counter) error { panic("boom") })
		}()
		_, _ = s.Get(ctx, "bob@example.com\x01") // an invalid key, quoted in the error
	}
	updates := 0
	for _, sp := range tel.spans.GetSpans() {
		if strings.Contains(sp.Status.Description, "example.com") {
			t.Errorf("span %s status %q holds a key", sp.Name, sp.Status.Description)
		}
		if sp.Name == "etagstore.Update" {
			updates++
			if sp.Status.Description != "error" {
				t.Errorf("the panicking Update's span: status %q, want error", sp.Status.Description)
			}
		}
	}
	if updates != 2 {
		t.Errorf("%d Update spans ended, want 2 (one per panicking Update)", updates)
	}
	if got := tel.sums(t, "etagstore.operation.duration")["etagstore.operation=Update,etagstore.outcome=error count"]; got != 2 {
		t.Errorf("panicking Updates counted %d times, want 2", got)
	}
}

// logRecords is a slog handler that keeps every record, at every level.
type logRecords struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecords) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r.Clone())
	return nil
}
func (h *logRecords) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logRecords) WithGroup(string) slog.Handler      { return h }

// texts returns each record as its message and its attributes' keys and
// resolved values (an error's value is its text).
func (h *logRecords) texts() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, r := range h.records {
		s := r.Message
		r.Attrs(func(a slog.Attr) bool {
			s += " " + a.Key + "=" + a.Value.Resolve().String()
			return true
		})
		out = append(out, s)
	}
	return out
}

// An Update that loses a race and retries, and one whose answer is lost
// after it committed, logged at Debug: without RecordKeys no record names
// the key or an ETag (the retry line once carried the ConflictError's
// text, which quotes both); with RecordKeys the retry and lost-response
// lines say which key.
func TestDebugLogsKeepKeysAndETagsOut(t *testing.T) {
	const key = "alice@example.com"
	for _, recordKeys := range []bool{false, true} {
		texts, etags := debugLogsOfRetries(t, key, recordKeys)
		lines := map[string]int{}
		for _, text := range texts {
			for _, line := range []string{"etagstore: retrying", "etagstore: lost response resolved by reading"} {
				if strings.HasPrefix(text, line) {
					lines[line]++
					if recordKeys && !strings.Contains(text, key) {
						t.Errorf("with RecordKeys, a debug line does not name its key: %s", text)
					}
				}
			}
			if !recordKeys {
				for _, leak := range append([]string{key}, etags...) {
					if strings.Contains(text, leak) {
						t.Errorf("without RecordKeys, a log record carries %s: %s", leak, text)
					}
				}
			}
		}
		if len(lines) != 2 {
			t.Errorf("RecordKeys %v: debug lines %v, want a retry and a lost response", recordKeys, lines)
		}
	}
}

// debugLogsOfRetries runs, on a Store logging every level, an Update that
// loses a race and retries, then one whose answer is lost after it
// committed; it returns the log records as texts, and the ETags memstore
// issued (quoted, as errors quote them).
func debugLogsOfRetries(t *testing.T, key string, recordKeys bool) (texts, etags []string) {
	t.Helper()
	logs := &logRecords{}
	clock := newFakeClock()
	hb := &hookBackend{Backend: memstore.New(nil)}
	// No version cache: the race is set up on the read the Update starts from.
	s := etagstore.New[counter](hb, &etagstore.Options{Clock: clock, Logger: slog.New(logs), RecordKeys: recordKeys, CacheSize: -1})
	ctx := t.Context()
	if _, err := s.Create(ctx, key, counter{}); err != nil {
		t.Fatal(err)
	}
	hb.afterRead = func(_ context.Context, _ string, it driver.Item, _ error) {
		if nOf(it.Data) == 0 { // the first Update's read of N 0 goes stale before its write: a 412, retried
			interfere(t, hb.Backend, key)
		}
	}
	hb.writeHook = func(_ context.Context, key string, w driver.Write) (etagstore.ETag, error, bool) {
		if nOf(w.Data) == 102 { // the second Update's write: committed, but the answer is lost
			if _, err := hb.Backend.Write(ctx, key, w); err != nil {
				t.Fatal(err)
			}
			return "", errors.New("connection reset"), true
		}
		return "", nil, false
	}
	inc := func(c *counter) error { c.N++; return nil }
	if _, err := s.Update(ctx, key, inc); err != nil {
		t.Fatal(err)
	}
	if len(clock.sleeps) == 0 {
		t.Fatal("the Update did not back off: no retry to log")
	}
	d, err := s.Update(ctx, key, inc)
	if err != nil {
		t.Fatal(err)
	}
	// memstore's ETags are "0x1", "0x2", … up to the last version.
	last, err := strconv.ParseUint(strings.Trim(string(d.ETag), `"0x`), 16, 64)
	if err != nil {
		t.Fatalf("ETag %s: %v", d.ETag, err)
	}
	for v := uint64(1); v <= last; v++ {
		etags = append(etags, fmt.Sprintf(`"0x%x"`, v))
	}
	return logs.texts(), etags
}

// A log record the Store makes under a recording span carries that span's
// trace_id and span_id, and every attempt of a write is an event on the
// operation's span (its number, its outcome, the delay before the next).
// Here an Update whose first read goes stale retries once.
func TestLogsCarryTheTraceAndAttemptsAreEvents(t *testing.T) {
	tel := newTelemetry(t)
	logs := &logRecords{}
	hb := &hookBackend{Backend: memstore.New(nil)}
	opts := tel.opts
	opts.Logger, opts.CacheSize, opts.Clock = slog.New(logs), -1, newFakeClock()
	s := etagstore.New[counter](hb, &opts)
	ctx := t.Context()
	if _, err := s.Create(ctx, "k", counter{}); err != nil {
		t.Fatal(err)
	}
	hb.afterRead = func(_ context.Context, _ string, it driver.Item, _ error) {
		if nOf(it.Data) == 0 { // the read of N 0 goes stale before its write
			interfere(t, hb.Backend, "k")
		}
	}
	if _, err := s.Update(ctx, "k", func(c *counter) error { c.N++; return nil }); err != nil {
		t.Fatal(err)
	}
	var update tracetest.SpanStub
	for _, sp := range tel.spans.GetSpans() {
		if sp.Name == "etagstore.Update" {
			update = sp
		}
	}
	if !update.SpanContext.IsValid() {
		t.Fatal("no etagstore.Update span")
	}
	retried := false
	for _, r := range logs.records {
		if r.Message != "etagstore: retrying" {
			continue
		}
		retried = true
		got := map[string]string{}
		r.Attrs(func(a slog.Attr) bool { got[a.Key] = a.Value.String(); return true })
		if got["trace_id"] != update.SpanContext.TraceID().String() || got["span_id"] != update.SpanContext.SpanID().String() {
			t.Errorf("the retry record carries trace_id %q span_id %q, want the Update span's %s %s",
				got["trace_id"], got["span_id"], update.SpanContext.TraceID(), update.SpanContext.SpanID())
		}
	}
	if !retried {
		t.Fatal("no retry was logged")
	}
	var attempts []string
	for _, ev := range update.Events {
		if ev.Name != "etagstore.attempt" {
			continue
		}
		var n, oc string
		delayed := false
		for _, kv := range ev.Attributes {
			switch kv.Key {
			case "etagstore.attempt":
				n = kv.Value.Emit()
			case "etagstore.outcome":
				oc = kv.Value.AsString()
			case "etagstore.delay_ms":
				delayed = kv.Value.AsFloat64() >= 0
			}
		}
		if !delayed {
			t.Errorf("attempt event %s has no delay", n)
		}
		attempts = append(attempts, n+":"+oc)
	}
	if diff := cmp.Diff([]string{"1:conflict", "2:ok"}, attempts); diff != "" {
		t.Errorf("attempt events (-want +got):\n%s", diff)
	}
}

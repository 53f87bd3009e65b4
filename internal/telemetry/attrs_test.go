package telemetry_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/outcome"
	"github.com/etagstore/etagstore/internal/telemetry"
)

// WithAttributes adds up: the later value of a key wins in the earlier
// one's place, invalid attributes are dropped, the parent keeps its own,
// and a call that adds nothing returns its context.
func TestWithAttributes(t *testing.T) {
	ctx := t.Context()
	if got := telemetry.Attributes(ctx); got != nil {
		t.Fatalf("a bare context carries %v", got)
	}
	if got := telemetry.WithAttributes(ctx); got != ctx {
		t.Error("WithAttributes of nothing made a new context")
	}
	if got := telemetry.WithAttributes(ctx, attribute.KeyValue{}, attribute.String("", "x")); got != ctx {
		t.Error("WithAttributes of invalid attributes made a new context")
	}
	parent := telemetry.WithAttributes(ctx, attribute.String("route", "/a"), attribute.Int("tier", 1), attribute.String("route", "/a2"))
	child := telemetry.WithAttributes(parent, attribute.String("tenant", "t"), attribute.String("route", "/b"))
	sibling := telemetry.WithAttributes(parent, attribute.String("job", "j"))
	for _, c := range []struct {
		name string
		ctx  context.Context
		want []attribute.KeyValue
	}{
		{"parent", parent, []attribute.KeyValue{attribute.String("route", "/a2"), attribute.Int("tier", 1)}},
		{"child", child, []attribute.KeyValue{attribute.String("route", "/b"), attribute.Int("tier", 1), attribute.String("tenant", "t")}},
		{"sibling", sibling, []attribute.KeyValue{attribute.String("route", "/a2"), attribute.Int("tier", 1), attribute.String("job", "j")}},
	} {
		if diff := cmp.Diff(c.want, telemetry.Attributes(c.ctx), cmp.Comparer(func(a, b attribute.KeyValue) bool { return a == b })); diff != "" {
			t.Errorf("%s (-want +got):\n%s", c.name, diff)
		}
	}
}

// Recording an operation's metrics under a context without a caller's
// attributes allocates nothing: the attribute sets are made once. (The
// providers are no-ops given explicitly, so that the Recorder records.)
func TestRecordingWithoutAttributesAllocatesNothing(t *testing.T) {
	r := telemetry.NewRecorder("test", "memstore", telemetry.Providers{
		TracerProvider: tracenoop.NewTracerProvider(), MeterProvider: metricnoop.NewMeterProvider(),
	})
	ctx, sp := r.Begin(t.Context(), telemetry.OpUpdate, "k")
	sp.Stats = telemetry.Stats{Attempts: 2, Batch: 1}
	if n := testing.AllocsPerRun(100, func() {
		_ = driver.Sent(ctx, nil)
		_ = driver.Sent(ctx, driver.ErrConflict)
		r.Conflict(ctx)
		r.Lost(ctx, "Update", "k", outcome.Committed)
		r.CacheLookup(ctx, true, false)
		r.Committed(ctx, 3)
		s := sp // a fresh copy to end each run
		s.End(nil)
	}); n != 0 {
		t.Errorf("recording allocates %v times per operation, want 0", n)
	}
}

package telemetry_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/telemetry"
)

func TestOutcomeOf(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{nil, "ok"},
		{fmt.Errorf("x: %w", driver.ErrConflict), "conflict"},
		{driver.ErrNotFound, "not_found"},
		{driver.ErrExists, "exists"},
		{driver.ErrStorageNotFound, "error"},
		{driver.ErrOutcomeUnknown, "unknown"},
		{driver.ErrFenced, "fenced"},
		{driver.ErrETagRequired, "invalid"},
		{driver.ErrInvalidKey, "invalid"},
		{driver.ErrTooLarge, "invalid"},
		{driver.ErrInvalidInput, "invalid"},
		{driver.ErrLocked, "locked"},
		{driver.ErrLockLost, "locked"},
		{fmt.Errorf("%w: gave up: %w", driver.ErrLocked, context.Canceled), "locked"}, // the sentinel first
		{context.DeadlineExceeded, "canceled"},
		{telemetry.ErrNotModified, "not_modified"},
		{errors.New("connection reset"), "error"},
	} {
		if got := telemetry.OutcomeOf(c.err).String(); got != c.want {
			t.Errorf("OutcomeOf(%v) = %s, want %s", c.err, got, c.want)
		}
	}
}

func TestDescribe(t *testing.T) {
	err := fmt.Errorf(`%w: "alice@example.com" is at "0x2", not "0x1"`, driver.ErrConflict)
	if got := telemetry.Describe(err, telemetry.OutcomeOf(err), false); got != "conflict" {
		t.Errorf("without keys: %q", got)
	}
	if got := telemetry.Describe(err, telemetry.OutcomeOf(err), true); got != err.Error() {
		t.Errorf("with keys: %q", got)
	}
}

// A Recorder's span: its name, kind, attributes and status, with and
// without RecordKeys.
func TestRecorderSpans(t *testing.T) {
	for _, keys := range []bool{false, true} {
		spans := tracetest.NewInMemoryExporter()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
		r := telemetry.NewRecorder("test", "blobstore", telemetry.Providers{TracerProvider: tp, RecordKeys: keys})
		_, sp := r.Begin(t.Context(), telemetry.OpAcquireLease, "alice@example.com")
		sp.End(fmt.Errorf(`%w: lease on "alice@example.com"`, driver.ErrLocked))
		got := spans.GetSpans()
		if len(got) != 1 {
			t.Fatalf("%d spans", len(got))
		}
		s := got[0]
		attrs := map[string]string{}
		for _, kv := range s.Attributes {
			attrs[string(kv.Key)] = kv.Value.Emit()
		}
		want := map[string]string{"etagstore.backend": "blobstore", "etagstore.operation": "AcquireLease", "etagstore.outcome": "locked"}
		wantStatus := "locked"
		if keys {
			want["etagstore.key"] = "alice@example.com"
			wantStatus = `etagstore: locked: lease on "alice@example.com"`
		}
		if s.Name != "etagstore.AcquireLease" || fmt.Sprint(attrs) != fmt.Sprint(want) {
			t.Errorf("RecordKeys %v: span %s %v, want etagstore.AcquireLease %v", keys, s.Name, attrs, want)
		}
		if s.Status.Code != codes.Error || s.Status.Description != wantStatus {
			t.Errorf("RecordKeys %v: status %v %q, want Error %q", keys, s.Status.Code, s.Status.Description, wantStatus)
		}
		_ = tp.Shutdown(context.Background())
	}
}

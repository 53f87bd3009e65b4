package telemetry

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// sweeps are the instruments of the sweeper of expired documents.
type sweeps struct {
	documents metric.Int64Counter
	cleaned   metric.Int64Counter
	lag       metric.Float64Histogram

	swept, refreshed, backend attrSet
}

func newSweeps(m metric.Meter, backend attribute.KeyValue) *sweeps {
	s := &sweeps{}
	s.documents, _ = m.Int64Counter("etagstore.sweep.documents", metric.WithUnit("{document}"),
		metric.WithDescription("Expired documents a sweep met: swept (deleted), or refreshed (written since their expiry entry was listed, and left alone)."))
	s.cleaned, _ = m.Int64Counter("etagstore.sweep.entries_cleaned", metric.WithUnit("{entry}"),
		metric.WithDescription("Expiry entries a sweep removed because their document was gone or no longer expired then."))
	s.lag, _ = m.Float64Histogram("etagstore.sweep.lag", metric.WithUnit("s"),
		metric.WithDescription("How long past its expiry the longest-waiting document a sweep pass deleted had waited, once per pass that deleted one."))
	result := attribute.Key("etagstore.result")
	s.swept, s.refreshed = newAttrSet(backend, result.String("swept")), newAttrSet(backend, result.String("refreshed"))
	s.backend = newAttrSet(backend)
	return s
}

// SweepPass is what one sweep pass did (Recorder.Swept).
type SweepPass struct {
	Swept, Refreshed, Cleaned, Listed int
	Lag, Took                         time.Duration
	Err                               error
}

// Swept records a sweep pass: its metrics, and one log line (a warning
// when it failed).
func (r *Recorder) Swept(ctx context.Context, p SweepPass) {
	if s := r.sweeps; r.metering() {
		kvs := r.attrsOf(ctx)
		s.documents.Add(ctx, int64(p.Swept), s.swept.adding(kvs)...)
		s.documents.Add(ctx, int64(p.Refreshed), s.refreshed.adding(kvs)...)
		s.cleaned.Add(ctx, int64(p.Cleaned), s.backend.adding(kvs)...)
		if p.Swept > 0 {
			s.lag.Record(ctx, p.Lag.Seconds(), s.backend.recording(kvs)...)
		}
	}
	args := []any{"swept", p.Swept, "refreshed", p.Refreshed, "cleaned", p.Cleaned, "listed", p.Listed,
		"lag", p.Lag, "took", p.Took}
	if p.Err != nil {
		r.log.WarnContext(ctx, "etagstore: sweep pass failed", append(args, "error", r.Describe(p.Err))...)
		return
	}
	r.log.InfoContext(ctx, "etagstore: sweep pass", args...)
}

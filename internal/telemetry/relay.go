package telemetry

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// relays are the instruments of an outbox's relay.
type relays struct {
	published metric.Int64Counter
	retries   metric.Int64Counter
	lag       metric.Float64Histogram
	backend   attrSet
}

func newRelays(m metric.Meter, backend attribute.KeyValue) *relays {
	r := &relays{backend: newAttrSet(backend)}
	r.published, _ = m.Int64Counter("etagstore.outbox.published", metric.WithUnit("{event}"),
		metric.WithDescription("Outbox events a relay published and marked sent."))
	r.retries, _ = m.Int64Counter("etagstore.outbox.retries", metric.WithUnit("{publish}"),
		metric.WithDescription("Publishes of outbox events that failed, to be tried again after a backoff."))
	r.lag, _ = m.Float64Histogram("etagstore.outbox.lag", metric.WithUnit("s"),
		metric.WithDescription("The age of the oldest event a relay pass found pending, once per pass that found one."))
	return r
}

// RelayPass is what one relay pass did (Recorder.Relayed).
type RelayPass struct {
	Published, Failed int
	Lag, Took         time.Duration
	Err               error
}

// Relayed records a relay pass: its metrics, and a log line (a warning
// when it failed; at debug level otherwise, as a relay passes every
// second or so).
func (r *Recorder) Relayed(ctx context.Context, p RelayPass) {
	if s := r.relays; r.metering() {
		kvs := r.attrsOf(ctx)
		s.published.Add(ctx, int64(p.Published), s.backend.adding(kvs)...)
		s.retries.Add(ctx, int64(p.Failed), s.backend.adding(kvs)...)
		if p.Lag > 0 {
			s.lag.Record(ctx, p.Lag.Seconds(), s.backend.recording(kvs)...)
		}
	}
	args := []any{"published", p.Published, "failed", p.Failed, "lag", p.Lag, "took", p.Took}
	if p.Err != nil {
		r.log.WarnContext(ctx, "etagstore: relay pass failed", append(args, "error", r.Describe(p.Err))...)
		return
	}
	r.log.DebugContext(ctx, "etagstore: relay pass", args...)
}

package etagstore

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/outcome"
	"github.com/etagstore/etagstore/internal/telemetry"
)

// This file makes what the Store does visible to the people who run an app:
// one OpenTelemetry span per Store operation, metrics of attempts, batches,
// conflicts, lost responses and the cache, and slog records of what needs
// attention. The library uses the OpenTelemetry API only; with no SDK
// installed every call is a no-op. Names are listed in the README.

// instrumentationName is the name of the tracer and meter the Store uses.
const instrumentationName = "github.com/etagstore/etagstore"

var spanNames = func() (n [telemetry.NumOps]string) {
	for op := range telemetry.NumOps {
		n[op] = "etagstore." + op.String()
	}
	return n
}()

// subjectAttr is the attribute that records what op is on, with
// Options.RecordKeys: a query's filter, or else its key (a listing's
// prefix).
func subjectAttr(op telemetry.Op) attribute.Key {
	if op == telemetry.OpQuery || op == telemetry.OpQueryPage {
		return attrFilter
	}
	return attrKey
}

// outcomeKind is how an operation ended, as spans and metrics name it;
// the kinds, their classification and their names are shared with the
// backend packages' own telemetry (package internal/telemetry).
type outcomeKind = telemetry.OutcomeKind

const (
	ocOK        = telemetry.OK
	ocConflict  = telemetry.Conflict
	ocUnknown   = telemetry.Unknown
	ocFenced    = telemetry.Fenced
	numOutcomes = telemetry.NumOutcomes
)

func outcomeOf(err error) outcomeKind { return telemetry.OutcomeOf(err) }

// Attribute keys of spans and metrics.
const (
	attrOperation = telemetry.Operation
	attrOutcome   = telemetry.Outcome
	attrBackend   = telemetry.Backend
	attrAttempts  = telemetry.Attempts
	attrBatch     = telemetry.Batch
	attrCacheHit  = telemetry.CacheHit
	attrKey       = telemetry.Key
	attrFilter    = telemetry.Filter
)

// observer holds a Store's tracer, instruments and logger, with the
// attribute sets of every combination computed once, so that recording
// allocates nothing.
type observer struct {
	tracer  trace.Tracer
	global  bool // tracer comes from the global provider
	gmeter  bool // instruments come from the global provider
	logs    bool // a Logger was given
	log     *slog.Logger
	keys    bool
	backend attribute.KeyValue

	duration  metric.Float64Histogram
	attempts  metric.Int64Histogram
	batchSize metric.Int64Histogram
	conflicts metric.Int64Counter
	lost      metric.Int64Counter
	cache     metric.Int64Counter
	fenced    metric.Int64Counter

	opOutcome        [telemetry.NumOps][numOutcomes][]metric.RecordOption
	absorbed         []metric.AddOption
	returned         []metric.AddOption
	verdicts         [4][]metric.AddOption // by verdict
	cacheHit         []metric.AddOption
	cacheMiss        []metric.AddOption
	cacheRevalidated []metric.AddOption
	backendOnly      []metric.AddOption
	updateOnly       []metric.RecordOption
	spanStart        []trace.SpanStartOption
}

func newObserver(o Options, b driver.Backend) *observer {
	tp, mp, log := o.TracerProvider, o.MeterProvider, o.Logger
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := mp.Meter(instrumentationName)
	ob := &observer{
		global:  o.TracerProvider == nil,
		gmeter:  o.MeterProvider == nil,
		logs:    o.Logger != nil,
		tracer:  tp.Tracer(instrumentationName),
		log:     log,
		keys:    o.RecordKeys,
		backend: attrBackend.String(backendName(b)),
	}
	ob.duration, _ = m.Float64Histogram("etagstore.operation.duration", metric.WithUnit("s"),
		metric.WithDescription("How long a Store operation took, retries and waiting for its batch included."))
	ob.attempts, _ = m.Int64Histogram("etagstore.update.attempts", metric.WithUnit("{attempt}"),
		metric.WithDescription("Writes an Update (or its group-commit batch) tried before it ended."),
		metric.WithExplicitBucketBoundaries(1, 2, 3, 5, 10, 20, 50, 100))
	ob.batchSize, _ = m.Int64Histogram("etagstore.batch.size", metric.WithUnit("{update}"),
		metric.WithDescription("Updates committed by one conditional write (group commit); 1 for an ungrouped Update."),
		metric.WithExplicitBucketBoundaries(1, 2, 4, 8, 16, 32, 64, 128))
	ob.conflicts, _ = m.Int64Counter("etagstore.conflicts", metric.WithUnit("{conflict}"),
		metric.WithDescription("Writes refused because another writer came first (HTTP 412): absorbed by a retry, or returned to the caller."))
	ob.lost, _ = m.Int64Counter("etagstore.lost_responses", metric.WithUnit("{response}"),
		metric.WithDescription("Writes whose answer was lost, by what a read then found: committed, not_landed (sent again), not_applied, unknown."))
	ob.cache, _ = m.Int64Counter("etagstore.cache.lookups", metric.WithUnit("{lookup}"),
		metric.WithDescription("Version cache lookups (Options.CacheSize): hit, miss, or revalidated (a 304 answered a conditional read)."))
	ob.fenced, _ = m.Int64Counter("etagstore.fenced_writes", metric.WithUnit("{write}"),
		metric.WithDescription("Writes refused because the document holds a newer fencing token (ErrFenced)."))
	for op := range telemetry.NumOps {
		for oc := range numOutcomes {
			ob.opOutcome[op][oc] = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(ob.backend,
				attrOperation.String(op.String()), attrOutcome.String(oc.String())))}
		}
	}
	add := func(kv ...attribute.KeyValue) []metric.AddOption {
		return []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(append(kv, ob.backend)...))}
	}
	resolution := attribute.Key("etagstore.resolution")
	ob.absorbed = add(resolution.String("absorbed"))
	ob.returned = add(resolution.String("returned"))
	verdict := attribute.Key("etagstore.verdict")
	for v, name := range []string{"unknown", "committed", "not_landed", "not_applied"} {
		ob.verdicts[v] = add(verdict.String(name))
	}
	result := attribute.Key("etagstore.result")
	ob.cacheHit, ob.cacheMiss, ob.cacheRevalidated = add(result.String("hit")), add(result.String("miss")), add(result.String("revalidated"))
	ob.backendOnly = add()
	ob.updateOnly = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(ob.backend))}
	ob.spanStart = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)}
	return ob
}

// backendName is the short name of b's package: memstore, tablestore,
// blobstore, or a wrapper's.
func backendName(b driver.Backend) string {
	name := strings.TrimPrefix(fmt.Sprintf("%T", b), "*")
	name, _, _ = strings.Cut(name, ".")
	return name
}

// tracing reports whether spans can be recorded: a provider was given, or
// the app has installed one globally (checked at every operation, since
// an app may install it after creating its Stores).
func (o *observer) tracing() bool { return !o.global || telemetry.GlobalTracing() }

// metering reports whether metrics can be recorded, as tracing does spans.
func (o *observer) metering() bool { return !o.gmeter || telemetry.GlobalMetering() }

// opSpan is one Store operation being observed.
type opSpan struct {
	o     *observer
	ctx   context.Context
	span  trace.Span
	op    telemetry.Op
	start time.Time
	stats opStats
	ended bool
}

// endOnPanic, deferred, ends the span of an operation whose user code
// (mutate, merge) panicked; the panic goes on.
func (s *opSpan) endOnPanic() {
	if !s.ended {
		s.end(errPanicked)
	}
}

// opStats are what an operation reports besides its error.
type opStats struct {
	attempts int  // writes tried (Update, Save)
	batch    int  // the size of the group-commit batch that wrote it
	cacheHit bool // the version cache answered (Get) or was current (Update)
}

// begin starts observing op on key. The returned context carries the span,
// so that the Azure SDK's own HTTP spans nest under it.
func (o *observer) begin(ctx context.Context, op telemetry.Op, key string) (context.Context, opSpan) {
	if !o.logs && !o.metering() && !o.tracing() {
		return ctx, opSpan{} // nothing would be recorded: not even the clock is read
	}
	var span trace.Span
	if o.tracing() {
		ctx, span = o.tracer.Start(ctx, spanNames[op], o.spanStart...)
		if span.IsRecording() {
			span.SetAttributes(o.backend, attrOperation.String(op.String()))
			if o.keys {
				span.SetAttributes(subjectAttr(op).String(key))
			}
		}
	}
	return ctx, opSpan{o: o, ctx: ctx, span: span, op: op, start: time.Now()}
}

// end records the operation's outcome err.
func (s *opSpan) end(err error) {
	if s.o == nil || s.ended {
		return
	}
	s.ended = true
	oc := outcomeOf(err)
	s.record(oc, err)
	if s.span != nil {
		s.annotate(oc, err)
		s.span.End()
	}
}

// record counts the operation in the metrics and logs what needs
// attention.
func (s *opSpan) record(oc outcomeKind, err error) {
	o := s.o
	o.duration.Record(s.ctx, time.Since(s.start).Seconds(), o.opOutcome[s.op][oc]...)
	if s.stats.attempts > 0 {
		o.attempts.Record(s.ctx, int64(s.stats.attempts), o.updateOnly...)
	}
	if s.stats.batch > 0 {
		o.batchSize.Record(s.ctx, int64(s.stats.batch), o.updateOnly...)
	}
	switch oc {
	case ocConflict:
		if s.op != telemetry.OpGetIf { // a read's failed If-Match refused no write
			o.conflicts.Add(s.ctx, 1, o.returned...)
		}
	case ocUnknown:
		o.log.WarnContext(s.ctx, "etagstore: outcome unknown", "operation", s.op.String(), "error", o.describe(err, oc))
	case ocFenced:
		o.fenced.Add(s.ctx, 1, o.backendOnly...)
		o.log.WarnContext(s.ctx, "etagstore: fenced write refused", "operation", s.op.String(), "error", o.describe(err, oc))
	}
}

// annotate sets the span's attributes and status.
func (s *opSpan) annotate(oc outcomeKind, err error) {
	if !s.span.IsRecording() {
		return
	}
	s.span.SetAttributes(attrOutcome.String(oc.String()))
	if s.stats.attempts > 0 {
		s.span.SetAttributes(attrAttempts.Int(s.stats.attempts))
	}
	if s.stats.batch > 0 {
		s.span.SetAttributes(attrBatch.Int(s.stats.batch))
	}
	if s.op == telemetry.OpGet || s.op == telemetry.OpUpdate {
		s.span.SetAttributes(attrCacheHit.Bool(s.stats.cacheHit))
	}
	if oc.Failed() {
		s.span.SetStatus(codes.Error, s.o.describe(err, oc))
	}
}

// describe is what spans and logs say of err: its text, which names the
// key, only with Options.RecordKeys; otherwise the outcome's name (see
// telemetry.Describe, which every package's telemetry uses).
func (o *observer) describe(err error, oc outcomeKind) string {
	return telemetry.Describe(err, oc, o.keys)
}

// absorbedConflict counts a 412 that a retry absorbed.
func (o *observer) absorbedConflict(ctx context.Context) { o.conflicts.Add(ctx, 1, o.absorbed...) }

// lostResponse counts a write whose answer was lost, by verdict.
func (o *observer) lostResponse(ctx context.Context, op, key string, v outcome.Verdict) {
	o.lost.Add(ctx, 1, o.verdicts[v]...)
	if !o.log.Enabled(ctx, slog.LevelDebug) {
		return
	}
	if o.keys {
		o.log.DebugContext(ctx, "etagstore: lost response resolved by reading", "operation", op, "verdict", v.String(), "key", key)
		return
	}
	o.log.DebugContext(ctx, "etagstore: lost response resolved by reading", "operation", op, "verdict", v.String())
}

// cacheLookup counts a version cache lookup.
func (o *observer) cacheLookup(ctx context.Context, hit, revalidated bool) {
	switch {
	case revalidated:
		o.cache.Add(ctx, 1, o.cacheRevalidated...)
	case hit:
		o.cache.Add(ctx, 1, o.cacheHit...)
	default:
		o.cache.Add(ctx, 1, o.cacheMiss...)
	}
}

// retrying logs a retry and its delay, and what it retries after as
// describe says it (the error's text names the key and the ETags).
func (o *observer) retrying(ctx context.Context, op string, attempt int, delay time.Duration, err error) {
	if o.log.Enabled(ctx, slog.LevelDebug) {
		o.log.DebugContext(ctx, "etagstore: retrying", "operation", op, "attempt", attempt+1, "delay", delay, "after", o.describe(err, outcomeOf(err)))
	}
}

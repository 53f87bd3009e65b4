package telemetry

import (
	"context"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Providers say where a Recorder's spans, metrics and logs go; nil
// providers mean the global ones, a nil Logger none.
type Providers struct {
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
	Logger         *slog.Logger
	RecordKeys     bool
}

// Recorder observes the operations of a package that has no Store
// (blobstore's leases and locks) as the Store observes its own: one span
// per operation, named "etagstore."+op, of kind client, with
// etagstore.backend, etagstore.operation, etagstore.outcome and, with
// RecordKeys, etagstore.key; its status says Describe of a failure; and
// etagstore.operation.duration by backend, operation and outcome. Safe for
// concurrent use.
type Recorder struct {
	tracer         trace.Tracer
	global, gmeter bool // the tracer (meter) comes from the global provider
	duration       metric.Float64Histogram
	backend        attribute.KeyValue
	keys           bool
	log            *slog.Logger
}

// NewRecorder returns a Recorder whose tracer and meter are named scope
// and whose spans and metrics say backend.
func NewRecorder(scope, backend string, p Providers) *Recorder {
	r := &Recorder{
		global:  p.TracerProvider == nil,
		gmeter:  p.MeterProvider == nil,
		backend: Backend.String(backend),
		keys:    p.RecordKeys,
		log:     p.Logger,
	}
	tp, mp := p.TracerProvider, p.MeterProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	r.tracer = tp.Tracer(scope)
	r.duration, _ = mp.Meter(scope).Float64Histogram("etagstore.operation.duration", metric.WithUnit("s"),
		metric.WithDescription("How long an operation took."))
	return r
}

// Logger is where the Recorder's owner logs (a discarding one if none was
// given).
func (r *Recorder) Logger() *slog.Logger { return r.log }

// Describe is Describe(err, OutcomeOf(err), RecordKeys).
func (r *Recorder) Describe(err error) string { return Describe(err, OutcomeOf(err), r.keys) }

// KeyAttrs returns the attributes that name key in a log record: none
// without RecordKeys.
func (r *Recorder) KeyAttrs(key string) []any {
	if !r.keys || key == "" {
		return nil
	}
	return []any{slog.String("key", key)}
}

// Span is one operation being observed; End it once.
type Span struct {
	r     *Recorder
	ctx   context.Context
	span  trace.Span
	op    string
	start time.Time
}

// Begin starts observing op on key ("" for none). The returned context
// carries the span, so that the Azure SDK's HTTP spans nest under it.
// opts add to the span's start options (a link, say; a kind other than
// client).
func (r *Recorder) Begin(ctx context.Context, op, key string, opts ...trace.SpanStartOption) (context.Context, Span) {
	if r == nil {
		return ctx, Span{}
	}
	tracing, metering := !r.global || GlobalTracing(), !r.gmeter || GlobalMetering()
	if !tracing && !metering {
		return ctx, Span{} // nothing would be recorded: not even the clock is read
	}
	s := Span{r: r, op: op, start: time.Now()}
	if tracing {
		opts = append([]trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)}, opts...)
		ctx, s.span = r.tracer.Start(ctx, "etagstore."+op, opts...)
		if s.span.IsRecording() {
			s.span.SetAttributes(r.backend, Operation.String(op))
			if r.keys && key != "" {
				s.span.SetAttributes(Key.String(key))
			}
		}
	}
	s.ctx = ctx
	return ctx, s
}

// End records the operation's outcome err.
func (s Span) End(err error) {
	if s.r == nil {
		return
	}
	oc := OutcomeOf(err)
	s.r.duration.Record(s.ctx, time.Since(s.start).Seconds(),
		metric.WithAttributes(s.r.backend, Operation.String(s.op), Outcome.String(oc.String())))
	if s.span == nil {
		return
	}
	s.annotate(err)
	s.span.End()
}

// annotate sets the span's outcome and status.
func (s Span) annotate(err error) {
	if !s.span.IsRecording() {
		return
	}
	oc := OutcomeOf(err)
	s.span.SetAttributes(Outcome.String(oc.String()))
	if oc.Failed() {
		s.span.SetStatus(codes.Error, Describe(err, oc, s.r.keys))
	}
}

// Event records something that happened, rather than an operation called,
// as a span of kind internal that ends at once (no duration is recorded): named
// "etagstore."+name, with the attributes of an operation's span, err's
// outcome and, if it failed, Describe of err as its status.
func (r *Recorder) Event(ctx context.Context, name, key string, err error, opts ...trace.SpanStartOption) {
	if r == nil || r.global && !GlobalTracing() {
		return
	}
	_, sp := r.Begin(ctx, name, key, append(opts, trace.WithSpanKind(trace.SpanKindInternal))...)
	if sp.span == nil {
		return
	}
	sp.annotate(err)
	sp.span.End()
}

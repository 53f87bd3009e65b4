package telemetry

import (
	"context"
	"log/slog"
	"reflect"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/outcome"
)

// Providers say where a Recorder's spans, metrics and logs go; nil
// providers mean the global ones, a nil Logger none.
type Providers struct {
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
	Logger         *slog.Logger
	RecordKeys     bool
}

// Recorder is the one recorder of every package's operations: a Store's
// and blobstore's leases and locks. It makes one span per operation, named
// "etagstore."+op, of kind client, with etagstore.backend,
// etagstore.operation, etagstore.outcome and, with RecordKeys,
// etagstore.key (a query's etagstore.filter); its status says Describe of
// a failure. It records etagstore.operation.duration by backend,
// operation and outcome, the Store's metrics of attempts, batches,
// conflicts, lost responses, the cache and fenced writes, and logs what
// needs attention. The attributes a caller's context carries
// (WithAttributes) are added to every span and data point recorded under
// it. The attribute sets of every combination are computed once, so that
// recording under a context without a caller's attributes allocates
// nothing. Safe for concurrent use.
type Recorder struct {
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
	requests  metric.Int64Counter
	sweeps    *sweeps // Sweep's (sweep.go)
	relays    *relays // an outbox's Relay's (relay.go)

	opOutcome        [NumOps][NumOutcomes]attrSet
	counters         [NumOps]requestCounter
	absorbed         attrSet
	returned         attrSet
	verdicts         [4]attrSet // by outcome.Verdict
	cacheHit         attrSet
	cacheMiss        attrSet
	cacheRevalidated attrSet
	backendOnly      attrSet
}

// NewRecorder returns a Recorder whose tracer and meter are named scope
// and whose spans and metrics say backend.
func NewRecorder(scope, backend string, p Providers) *Recorder {
	tp, mp, log := p.TracerProvider, p.MeterProvider, p.Logger
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	} else {
		log = slog.New(traced{log.Handler()})
	}
	m := mp.Meter(scope)
	r := &Recorder{
		global:  p.TracerProvider == nil,
		gmeter:  p.MeterProvider == nil,
		logs:    p.Logger != nil,
		tracer:  tp.Tracer(scope),
		log:     log,
		keys:    p.RecordKeys,
		backend: Backend.String(backend),
	}
	r.duration, _ = m.Float64Histogram("etagstore.operation.duration", metric.WithUnit("s"),
		metric.WithDescription("How long an operation took, retries and waiting for its batch included."))
	r.attempts, _ = m.Int64Histogram("etagstore.update.attempts", metric.WithUnit("{attempt}"),
		metric.WithDescription("Writes an Update (or its group-commit batch) tried before it ended."),
		metric.WithExplicitBucketBoundaries(1, 2, 3, 5, 10, 20, 50, 100))
	r.batchSize, _ = m.Int64Histogram("etagstore.batch.size", metric.WithUnit("{update}"),
		metric.WithDescription("Updates committed by one conditional write (group commit), recorded once per write; 1 for an ungrouped Update."),
		metric.WithExplicitBucketBoundaries(1, 2, 4, 8, 16, 32, 64, 128))
	r.conflicts, _ = m.Int64Counter("etagstore.conflicts", metric.WithUnit("{conflict}"),
		metric.WithDescription("Writes refused because another writer came first (HTTP 412): absorbed by a retry, or returned to the caller."))
	r.lost, _ = m.Int64Counter("etagstore.lost_responses", metric.WithUnit("{response}"),
		metric.WithDescription("Writes whose answer was lost, by what a read then found: committed, not_landed (sent again), not_applied, unknown."))
	r.cache, _ = m.Int64Counter("etagstore.cache.lookups", metric.WithUnit("{lookup}"),
		metric.WithDescription("Version cache lookups (Options.CacheSize): hit, miss, or revalidated (a 304 answered a conditional read)."))
	r.fenced, _ = m.Int64Counter("etagstore.fenced_writes", metric.WithUnit("{write}"),
		metric.WithDescription("Writes refused because the document holds a newer fencing token (ErrFenced)."))
	r.requests, _ = m.Int64Counter("etagstore.requests", metric.WithUnit("{request}"),
		metric.WithDescription("Storage requests sent, by the operation that sent them and how each ended (a request the Azure SDK retried on its own counts once)."))
	r.sweeps = newSweeps(m, r.backend)
	r.relays = newRelays(m, r.backend)
	for op := range NumOps {
		r.counters[op] = requestCounter{r: r, op: op}
		for oc := range NumOutcomes {
			r.opOutcome[op][oc] = newAttrSet(r.backend, Operation.String(op.String()), Outcome.String(oc.String()))
		}
	}
	add := func(kv ...attribute.KeyValue) attrSet { return newAttrSet(append(kv, r.backend)...) }
	resolution := attribute.Key("etagstore.resolution")
	r.absorbed, r.returned = add(resolution.String("absorbed")), add(resolution.String("returned"))
	verdict := attribute.Key("etagstore.verdict")
	for v, name := range []string{"unknown", "committed", "not_landed", "not_applied"} {
		r.verdicts[v] = add(verdict.String(name))
	}
	result := attribute.Key("etagstore.result")
	r.cacheHit, r.cacheMiss, r.cacheRevalidated = add(result.String("hit")), add(result.String("miss")), add(result.String("revalidated"))
	r.backendOnly = add()
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

// tracing reports whether spans can be recorded: a provider was given, or
// the app has installed one globally (checked at every operation, since
// an app may install it after creating its Stores and Lockers; see
// tracerDelegate).
func (r *Recorder) tracing() bool {
	return !r.global || tracerDelegate == nil || reflect.TypeOf(otel.GetTracerProvider()) != tracerDelegate
}

// metering reports whether metrics can be recorded, as tracing does spans.
func (r *Recorder) metering() bool {
	return !r.gmeter || meterDelegate == nil || reflect.TypeOf(otel.GetMeterProvider()) != meterDelegate
}

// Stats are what an operation reports besides its error.
type Stats struct {
	Attempts int  // writes tried (Update, Save, Transact)
	Batch    int  // the size of the group-commit batch that wrote it
	CacheHit bool // the version cache answered (Get) or was current (Update)
}

// Span is one operation being observed. End it once (further Ends do
// nothing).
type Span struct {
	r     *Recorder
	ctx   context.Context
	span  trace.Span
	op    Op
	attrs []attribute.KeyValue // the caller's (WithAttributes)
	start time.Time
	ended bool
	Stats Stats
}

// Begin starts observing op on subject (a key, a listing's prefix, a
// query's filter; "" for none). The returned context carries the span, so
// that the Azure SDK's own HTTP spans nest under it, and counts the
// storage requests sent under it (etagstore.requests, see
// driver.Sent) as op's. opts add to the
// span's start options (a link, say; a kind other than client). The
// attributes ctx carries (WithAttributes) are the span's, and every data
// point's the operation records.
func (r *Recorder) Begin(ctx context.Context, op Op, subject string, opts ...trace.SpanStartOption) (context.Context, Span) {
	if r == nil || op >= NumOps {
		return ctx, Span{}
	}
	metering := r.metering()
	if !r.logs && !metering && !r.tracing() {
		return ctx, Span{} // nothing would be recorded: not even the clock is read
	}
	attrs := Attributes(ctx)
	if metering {
		ctx = driver.CountRequests(ctx, &r.counters[op])
	}
	var span trace.Span
	if r.tracing() {
		opts = append([]trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)}, opts...)
		ctx, span = r.tracer.Start(ctx, spanNames[op], opts...)
		if span.IsRecording() {
			span.SetAttributes(attrs...) // first: the library's own win on a key both set
			span.SetAttributes(r.backend, Operation.String(op.String()))
			if r.keys && (subject != "" || op.OfStore()) {
				span.SetAttributes(subjectAttr(op).String(subject))
			}
		}
	}
	return ctx, Span{r: r, ctx: ctx, span: span, op: op, attrs: attrs, start: time.Now()}
}

var spanNames = func() (n [NumOps]string) {
	for op := range NumOps {
		n[op] = "etagstore." + op.String()
	}
	return n
}()

// subjectAttr is the attribute that records what op is on: a query's
// filter, or else its key (a listing's prefix).
func subjectAttr(op Op) attribute.Key {
	if op == OpQuery || op == OpQueryPage {
		return Filter
	}
	return Key
}

// Recording reports whether the span records anything.
func (s *Span) Recording() bool { return s.r != nil }

// EndOnPanic, deferred, ends the span of an operation whose user code
// (mutate, merge, a codec) panicked; the panic goes on.
func (s *Span) EndOnPanic() {
	if !s.ended {
		s.End(ErrPanicked)
	}
}

// End records the operation's outcome err.
func (s *Span) End(err error) {
	if s.r == nil || s.ended {
		return
	}
	s.ended = true
	oc := OutcomeOf(err)
	s.record(oc, err)
	if s.span != nil {
		s.annotate(oc, err)
		s.span.End()
	}
}

// record counts the operation in the metrics and logs what needs
// attention.
func (s *Span) record(oc OutcomeKind, err error) {
	r := s.r
	attrs := s.attrs
	if len(attrs) > 0 && !r.metering() {
		attrs = nil // no set is made for a meter that records nothing
	}
	r.duration.Record(s.ctx, time.Since(s.start).Seconds(), r.opOutcome[s.op][oc].recording(attrs)...)
	if s.Stats.Attempts > 0 {
		r.attempts.Record(s.ctx, int64(s.Stats.Attempts), r.backendOnly.recording(attrs)...)
	}
	switch {
	case oc == Conflict && s.op.Writes():
		r.conflicts.Add(s.ctx, 1, r.returned.adding(attrs)...)
	case oc == Unknown:
		r.log.WarnContext(s.ctx, "etagstore: outcome unknown", "operation", s.op.String(), "error", Describe(err, oc, r.keys))
	case oc == Fenced:
		r.fenced.Add(s.ctx, 1, r.backendOnly.adding(attrs)...)
		r.log.WarnContext(s.ctx, "etagstore: fenced write refused", "operation", s.op.String(), "error", Describe(err, oc, r.keys))
	}
}

// annotate sets the span's attributes and status.
func (s *Span) annotate(oc OutcomeKind, err error) {
	if !s.span.IsRecording() {
		return
	}
	s.span.SetAttributes(Outcome.String(oc.String()))
	if s.Stats.Attempts > 0 {
		s.span.SetAttributes(Attempts.Int(s.Stats.Attempts))
	}
	if s.Stats.Batch > 0 {
		s.span.SetAttributes(Batch.Int(s.Stats.Batch))
	}
	if s.op == OpGet || s.op == OpUpdate {
		s.span.SetAttributes(CacheHit.Bool(s.Stats.CacheHit))
	}
	if oc.Failed() {
		s.span.SetStatus(codes.Error, Describe(err, oc, s.r.keys))
	}
}

// Event records something that happened, rather than an operation called,
// as a span of kind internal that ends at once (no duration is recorded):
// named "etagstore."+name, with the attributes of an operation's span
// (ctx's WithAttributes too), err's outcome and, if it failed, Describe of
// err as its status.
func (r *Recorder) Event(ctx context.Context, name Op, key string, err error, opts ...trace.SpanStartOption) {
	if r == nil || name >= NumOps || !r.tracing() {
		return
	}
	_, sp := r.tracer.Start(ctx, spanNames[name], append(opts, trace.WithSpanKind(trace.SpanKindInternal))...)
	if sp.IsRecording() {
		sp.SetAttributes(Attributes(ctx)...)
		sp.SetAttributes(r.backend, Operation.String(name.String()))
		if r.keys && key != "" {
			sp.SetAttributes(Key.String(key))
		}
		oc := OutcomeOf(err)
		sp.SetAttributes(Outcome.String(oc.String()))
		if oc.Failed() {
			sp.SetStatus(codes.Error, Describe(err, oc, r.keys))
		}
	}
	sp.End()
}

// Conflict counts a 412 that a retry absorbed.
func (r *Recorder) Conflict(ctx context.Context) {
	r.conflicts.Add(ctx, 1, r.absorbed.adding(r.attrsOf(ctx))...)
}

// Lost counts a write whose answer was lost, by the verdict of the read
// that resolved it.
func (r *Recorder) Lost(ctx context.Context, op, key string, v outcome.Verdict) {
	r.lost.Add(ctx, 1, r.verdicts[v].adding(r.attrsOf(ctx))...)
	if !r.log.Enabled(ctx, slog.LevelDebug) {
		return
	}
	if r.keys {
		r.log.DebugContext(ctx, "etagstore: lost response resolved by reading", "operation", op, "verdict", v.String(), "key", key)
		return
	}
	r.log.DebugContext(ctx, "etagstore: lost response resolved by reading", "operation", op, "verdict", v.String())
}

// CacheLookup counts a version cache lookup.
func (r *Recorder) CacheLookup(ctx context.Context, hit, revalidated bool) {
	if !r.metering() {
		return // the instrument would record nothing: no attributes are looked up
	}
	a := &r.cacheMiss
	switch {
	case revalidated:
		a = &r.cacheRevalidated
	case hit:
		a = &r.cacheHit
	}
	r.cache.Add(ctx, 1, a.adding(r.attrsOf(ctx))...)
}

// Retrying logs a retry and its delay, and what it retries after as
// Describe says it (the error's text names the key and the ETags).
func (r *Recorder) Retrying(ctx context.Context, op string, attempt int, delay time.Duration, err error) {
	if r.log.Enabled(ctx, slog.LevelDebug) {
		r.log.DebugContext(ctx, "etagstore: retrying", "operation", op, "attempt", attempt+1, "delay", delay, "after", Describe(err, OutcomeOf(err), r.keys))
	}
}

// traced is the handler of a Recorder's logger: every record made under a
// recording span carries that span's trace_id and span_id, so that an
// operator can go from a log line to its trace.
type traced struct{ slog.Handler }

func (h traced) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h traced) WithAttrs(as []slog.Attr) slog.Handler { return traced{h.Handler.WithAttrs(as)} }
func (h traced) WithGroup(name string) slog.Handler    { return traced{h.Handler.WithGroup(name)} }

// Committed records the size of a write that committed: how many Updates
// (or, for a transaction, documents) one conditional write committed. It
// is called once per write, never per caller of a group-commit batch.
func (r *Recorder) Committed(ctx context.Context, n int) {
	if r.metering() {
		r.batchSize.Record(ctx, int64(n), r.backendOnly.recording(r.attrsOf(ctx))...)
	}
}

// Attempted records one attempt of a write as an event of the operation's
// span (etagstore.attempt): its number, its outcome, and the delay before
// the next attempt (0 when the next runs at once or none follows). It is
// the retry loop's hook (retry.Hooks).
func (r *Recorder) Attempted(ctx context.Context, n int, err error, delay time.Duration) {
	sp := trace.SpanFromContext(ctx)
	if !sp.IsRecording() {
		return
	}
	sp.AddEvent("etagstore.attempt", trace.WithAttributes(
		attribute.Int("etagstore.attempt", n),
		Outcome.String(OutcomeOf(err).String()),
		attribute.Float64("etagstore.delay_ms", float64(delay)/float64(time.Millisecond))))
}

// attrsOf returns the attributes ctx carries (WithAttributes) for a data
// point: none when metrics are not recorded, so that no set is made for a
// meter that records nothing.
func (r *Recorder) attrsOf(ctx context.Context) []attribute.KeyValue {
	if kvs := Attributes(ctx); len(kvs) > 0 && r.metering() {
		return kvs
	}
	return nil
}

// requestCounter counts the storage requests of one operation of one
// Recorder in etagstore.requests.
type requestCounter struct {
	r  *Recorder
	op Op
}

func (c *requestCounter) Sent(ctx context.Context, err error) {
	c.r.requests.Add(ctx, 1, c.r.opOutcome[c.op][OutcomeOf(err)].adding(c.r.attrsOf(ctx))...)
}

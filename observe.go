package etagstore

import (
	"context"

	"go.opentelemetry.io/otel/attribute"

	"github.com/etagstore/etagstore/internal/telemetry"
)

// What the Store does is made visible to the people who run an app by the
// one recorder of package internal/telemetry: one OpenTelemetry span per
// Store operation, metrics of attempts, batches, conflicts, lost responses
// and the cache, and slog records of what needs attention. The library
// uses the OpenTelemetry API only; with no SDK installed every call is a
// no-op. A caller adds attributes of its own to every span and data
// point of a call through its context (WithAttributes).
// Names are listed in docs/observability.md.

// WithAttributes returns a copy of ctx carrying kvs, which the library adds
// to every span and metric data point it records for a call made with
// that context (or one derived from it): the operation's span and
// etagstore.operation.duration, the storage requests it sends
// (etagstore.requests), its conflicts, lost responses, cache lookups,
// attempts and batch sizes. So do the operations of packages tablestore
// and blobstore on a Store, and blobstore's lease and lock calls; what a
// Locker does in the background (renewals, a lost lock, the
// etagstore.lock.events counter) belongs to no call and carries none.
// With it an app can count per route, tenant or job:
//
//	ctx = etagstore.WithAttributes(r.Context(), attribute.String("route", "/cards"))
//
// Calls add up: the attributes of ctx come first, then kvs, and on a key
// given twice the later value wins. An attribute with an empty key is
// dropped. The library's own attributes (etagstore.operation,
// etagstore.outcome, …) keep their names and values: on a key the library
// records, its value wins.
//
// Each attribute value is a new series of every instrument, so give only
// values of few kinds (a route's pattern, not its path with IDs). In a
// group-commit batch, which commits several callers' Updates (or
// transactions) in one write, each caller's span, duration and attempts
// carry its own attributes, and what the batch does as a whole (its write
// and reads, the conflicts it absorbed, its batch size) carries those of
// the batch's first caller. See docs/observability.md.
func WithAttributes(ctx context.Context, kvs ...attribute.KeyValue) context.Context {
	return telemetry.WithAttributes(ctx, kvs...)
}

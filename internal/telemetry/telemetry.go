// Package telemetry is the one recorder of every package's operations (a
// Store's, and blobstore's leases and locks), with what it is built on:
// the operation names (Op), the attribute keys of spans and metrics, how
// an operation's outcome is classified, and the one function that
// describes an error for spans and logs.
package telemetry

import (
	"context"
	"errors"
	"reflect"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"

	"github.com/etagstore/etagstore/driver"
)

// Attribute keys of spans and metrics.
const (
	Operation = attribute.Key("etagstore.operation")
	Outcome   = attribute.Key("etagstore.outcome")
	Backend   = attribute.Key("etagstore.backend")
	Attempts  = attribute.Key("etagstore.attempts")
	Batch     = attribute.Key("etagstore.batch_size")
	CacheHit  = attribute.Key("etagstore.cache_hit")
	// Key is the key (a listing's prefix) an operation is on; recorded
	// only with RecordKeys.
	Key = attribute.Key("etagstore.key")
	// Filter is a query's OData filter, which names keys and property
	// values; recorded only with RecordKeys.
	Filter = attribute.Key("etagstore.filter")
)

// ErrNotModified is what blobstore.GetIf ends its span with when its
// answer is blobstore.ErrNotModified (a 304), so that the outcome is named
// not_modified, not error.
var ErrNotModified = errors.New("blobstore: not modified")

// ErrPanicked ends the span of an operation that a panic cut short.
var ErrPanicked = errors.New("etagstore: operation ended by a panic")

// OutcomeKind is how an operation ended, as spans and metrics name it.
type OutcomeKind uint8

const (
	OK OutcomeKind = iota
	Conflict
	NotFound
	Exists
	Unknown
	Fenced
	Invalid // ErrETagRequired, ErrInvalidKey, ErrTooLarge, ErrInvalidInput
	Locked  // ErrLocked, ErrLockLost
	Canceled
	Error       // anything else: the caller's own error, a transport failure
	NotModified // a conditional read answered 304 (blobstore.GetIf)
	Unavailable // ErrUnavailable: throttled
	NumOutcomes
)

var outcomeNames = [NumOutcomes]string{"ok", "conflict", "not_found", "exists", "unknown", "fenced", "invalid", "locked", "canceled", "error", "not_modified", "unavailable"}

// String is the outcome's name, the value of the etagstore.outcome
// attribute.
func (oc OutcomeKind) String() string { return outcomeNames[oc] }

// Failed reports whether a span that ended so gets status Error: every
// outcome but ok and the answers that are part of the protocol (not found,
// exists, conflict, not modified).
func (oc OutcomeKind) Failed() bool {
	switch oc {
	case OK, NotFound, Exists, Conflict, NotModified:
		return false
	}
	return true
}

// bySentinel maps the sentinels, in the order of package etagstore's
// sentinel list (an error matching two is named by the first), to
// outcomes.
var bySentinel = [...]struct {
	err error
	oc  OutcomeKind
}{
	{driver.ErrNotFound, NotFound},
	{driver.ErrStorageNotFound, Error}, // the operator's to fix: a failure
	{driver.ErrExists, Exists},
	{driver.ErrConflict, Conflict},
	{driver.ErrETagRequired, Invalid},
	{driver.ErrInvalidKey, Invalid},
	{driver.ErrTooLarge, Invalid},
	{driver.ErrInvalidInput, Invalid},
	{driver.ErrFenced, Fenced},
	{driver.ErrLocked, Locked},
	{driver.ErrLockLost, Locked},
	{driver.ErrOutcomeUnknown, Unknown},
	{driver.ErrUnavailable, Unavailable},
	{ErrNotModified, NotModified},
}

// OutcomeOf classifies err.
func OutcomeOf(err error) OutcomeKind {
	if err == nil {
		return OK
	}
	for _, s := range bySentinel {
		if errors.Is(err, s.err) {
			return s.oc
		}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return Canceled
	}
	return Error
}

// Describe is what spans, logs and lock events say of err, which ended as
// oc: its text, which names the key (and often ETags), only with
// recordKeys; otherwise the outcome's name. Every telemetry path that
// reports an error uses it.
func Describe(err error, oc OutcomeKind, recordKeys bool) string {
	if err == nil {
		return oc.String()
	}
	if recordKeys {
		return err.Error()
	}
	return oc.String()
}

// tracerDelegate and meterDelegate are the types of the global providers
// before an app installs its own: they record nothing, but cost
// allocations and clock reads to ask. A Recorder on the global providers
// records while they are no longer these (Recorder.tracing, metering).
var (
	tracerDelegate = globalDefault(reflect.TypeOf(otel.GetTracerProvider()))
	meterDelegate  = globalDefault(reflect.TypeOf(otel.GetMeterProvider()))
)

func globalDefault(t reflect.Type) reflect.Type {
	if t != nil && t.Kind() == reflect.Pointer && t.Elem().PkgPath() == "go.opentelemetry.io/otel/internal/global" {
		return t
	}
	return nil
}

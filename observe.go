package etagstore

import (
	"fmt"
	"strings"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/telemetry"
)

// What the Store does is made visible to the people who run an app by the
// one recorder of package internal/telemetry: one OpenTelemetry span per
// Store operation, metrics of attempts, batches, conflicts, lost responses
// and the cache, and slog records of what needs attention. The library
// uses the OpenTelemetry API only; with no SDK installed every call is a
// no-op. A caller adds attributes of its own to every span and data
// point of a call through its context (WithAttributes, attributes.go).
// Names are listed in docs/observability.md.

// instrumentationName is the name of the tracer and meter the Store uses.
const instrumentationName = "github.com/etagstore/etagstore"

// newRecorder is the recorder of a Store on b, with the providers p.
func newRecorder(b driver.Backend, p telemetry.Providers) *telemetry.Recorder {
	return telemetry.NewRecorder(instrumentationName, backendName(b), p)
}

// backendName is the short name of b's package: memstore, tablestore,
// blobstore, or a wrapper's.
func backendName(b driver.Backend) string {
	name := strings.TrimPrefix(fmt.Sprintf("%T", b), "*")
	name, _, _ = strings.Cut(name, ".")
	return name
}

package access

import "context"

// Operation names a backend package passes to Begin: the etagstore.operation
// attribute, and the span "etagstore."+name.
const (
	Query     = "Query"     // tablestore.Query; subject: the filter
	QueryPage = "QueryPage" // tablestore.QueryPage; subject: the filter
	GetIf     = "GetIf"     // blobstore.GetIf; subject: the key
)

// Begin starts observing the operation op (one of the names above) that a
// backend package runs on store, a *etagstore.Store[T], with that Store's
// tracer, meter, logger and RecordKeys. subject is the key, or a query's
// filter, recorded only with RecordKeys. The returned context carries the
// span; end records the operation's outcome and must be called exactly
// once. Package etagstore sets Begin when it is initialised; a store that
// is not a Store, or an unknown op, is observed by nothing.
var Begin func(store any, ctx context.Context, op, subject string) (_ context.Context, end func(err error))

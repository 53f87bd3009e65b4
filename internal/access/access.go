// Package access is the one seam through which the backend packages reach
// a Store beyond its API: tablestore's merges and batches go through the
// Store's delivery engine, and tablestore's queries and blobstore's
// conditional reads use its paging, decoding and telemetry.
//
// A *etagstore.Store[T] embeds a Seam[T, etagstore.Doc[T], etagstore.Page[T]]
// in an unexported field, so a backend package calls these methods on the
// Store it was given and the compiler checks every type. go doc does not
// list them, and they are for this module's packages: a user cannot name
// Write, so DeliverWrite is out of reach; the others read and observe only.
package access

import (
	"context"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/paging"
	"github.com/etagstore/etagstore/internal/telemetry"
)

// Seam is what a backend package reaches of a Store of T: D is its
// Doc[T], P its Page[T].
type Seam[T, D, P any] interface {
	// DeliverWrite delivers w through the Store's engine (retries, fences,
	// resolution of lost answers, telemetry: one span) and returns each
	// action's new ETag ("" where it is not known). A refusal of one
	// action of several is a *driver.ActionError.
	DeliverWrite(ctx context.Context, w Write[T]) ([]driver.ETag, error)
	// PageWith is one page of the Store's documents as Store.Page makes
	// it — limit and token checked, the token bound to scope, the items
	// decoded, the next token made — from list, which answers as
	// driver.Backend.ListPage does.
	PageWith(ctx context.Context, scope string, limit int, token string, list List) (P, error)
	// DecodeItem is it decoded as the Store's Doc, with its codec and
	// errors; a document that has expired (etagstore.Expiry) matches
	// ErrNotFound, and a listing skips it.
	DecodeItem(it driver.Item) (D, error)
	// Expires reports whether the Store's documents expire (an Expiry
	// index): an answer that says a document is current without its data
	// (a 304) must then read it, to learn whether it has expired.
	Expires() bool
	// Observe starts observing op (Query, QueryPage or GetIf) with the
	// Store's tracer, meter, logger and RecordKeys; subject is the key or a
	// query's filter, recorded only with RecordKeys. The context carries
	// the span; end records the outcome and must be called exactly once.
	Observe(ctx context.Context, op Op, subject string) (_ context.Context, end func(err error))
}

// Op is an operation a backend package observes with Observe.
type Op = telemetry.Op

// The operations a backend package observes (spans and metrics).
const (
	Query     = telemetry.OpQuery     // tablestore.Query; subject: the filter
	QueryPage = telemetry.OpQueryPage // tablestore.QueryPage; subject: the filter
	GetIf     = telemetry.OpGetIf     // blobstore.GetIf; subject: the key
)

// List answers as driver.Backend.ListPage does (paging.List).
type List = paging.List

// Kind is what an Action does, in the words of Azure's table operations.
type Kind uint8

const (
	Create      Kind = iota // insert; fails if present
	Replace                 // replace the version ETag names (ETagAny: any)
	Merge                   // merge into the version ETag names (ETagAny: any)
	Upsert                  // insert or replace, unchecked
	UpsertMerge             // insert or merge, unchecked
	Delete                  // delete the version ETag names (ETagAny: any)
)

// Action is one document's part of a Write.
type Action[T any] struct {
	Kind Kind
	Key  string
	ETag driver.ETag // Replace, Merge, Delete: the version the caller holds
	// Encode returns the document's encoding (for Merge and UpsertMerge,
	// only the properties to write); nil for Delete. It runs inside the
	// operation's span, after the keys are checked.
	Encode func() ([]byte, error)
	Mine   T // the caller's value, for a *ConflictError
	// Overlay, for a Merge, returns the document the merge makes of
	// base, the codec's encoding of the version read, and data (Encode's):
	// the Store applies the change from base to it as it applies every
	// read-modify-write's, so that only what changed is sent and a
	// property the merge clears is removed. Nil: data is sent as it is, as
	// a merge of its properties.
	Overlay func(base, data []byte) ([]byte, error)
	// Extra is the etagstore.Extra of the Doc a Replace writes back: the
	// members its T does not know, kept. (Its fields are the Store's
	// own; an Extra of another type is ignored.)
	Extra any
}

// Write is a write a backend package hands to a Store's engine: a Batch
// (tablestore.Batch.Submit, one atomic request however many actions), or
// one Merge or UpsertMerge action on its own.
type Write[T any] struct {
	Batch   bool
	Actions []Action[T]
}

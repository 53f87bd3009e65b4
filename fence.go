package etagstore

import (
	"context"

	"github.com/etagstore/etagstore/internal/fence"
)

// WithFence returns a context whose writes through a Store carry the
// fencing token token (from a lock such as blobstore's). A document records
// the highest token written to it; a write carrying a lower token is refused
// with ErrFenced. The check is made against the version read and committed
// with If-Match of that version, so it is atomic on every backend.
//
// Update, Save, Replace and Delete honour the token (Replace and Delete then
// read the document first); Create records it; Upsert, which checks nothing,
// refuses a fenced context with ErrInvalidInput. An unfenced Replace or
// Upsert starts a new history and forgets the recorded token.
//
// A fenced Delete keeps the token once the document is gone, on every
// backend of this module (driver.Abilities.Tombstones): a fenced Create,
// Update with CreateIfMissing or transaction that creates the key again
// carrying a lower token is refused with ErrFenced, so a stale holder
// cannot bring back what a newer one deleted. Tokens are positive: a write
// fenced with 0 or less matches ErrInvalidInput, and nothing is sent. The
// token or a higher one creates the key (and raises the token kept), and
// so does an unfenced write. Where the token is kept, and what it costs,
// is each backend's (see driver.ModeTombstone): memstore keeps it in
// memory and tablestore in a small record entity beside the key (a fenced
// create then reads it first: one request more), both for good: unfenced
// writes and deletes leave it, so a stale holder stays refused. blobstore
// keeps it in an empty blob in the document's place (writes and deletes
// with ETagAny then read the blob's properties first: one request more),
// which any create replaces: there an unfenced create forgets it.
func WithFence(ctx context.Context, token int64) context.Context {
	return fence.With(ctx, token)
}

// FenceFrom returns the fencing token carried by ctx, if any.
func FenceFrom(ctx context.Context) (int64, bool) {
	return fence.From(ctx)
}

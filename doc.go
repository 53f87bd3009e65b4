// Package etagstore is a typed document store with optimistic concurrency
// over Azure Table storage and Azure Blob storage, so that concurrent
// writers never silently lose each other's updates.
//
//	accounts := etagstore.New[Account](backend, nil)
//	d, err := accounts.Update(ctx, "alice", func(a *Account) error {
//		a.Balance -= 30
//		return nil
//	})
//
// # Concurrency
//
// Every document carries an ETag. Replace and Delete send it as If-Match and
// fail with a *ConflictError when another writer got there first (HTTP 412);
// Update reads, applies a mutation and writes with If-Match, and on a
// conflict re-reads, re-applies and retries with jittered exponential
// backoff (RetryPolicy). Save is the wiki-style variant: it merges the
// caller's edit with the stored version (MergeFields by default) and reports
// overlapping edits with all three versions so no one's text is lost.
//
// An ETag is never optional: an empty one fails with ErrETagRequired before
// anything is sent. ETagAny ("*") is the explicit last-writer-wins opt-out,
// and Upsert (insert-or-replace) the unconditional bypass.
//
// Each write carries a random write id, and a document remembers its last
// few (Options.KeepWriteIDs). A write that committed but whose response was
// lost — so that the Azure SDK's retry of it saw 412 — is recognised by its
// id on the re-read and reported as the success it was; Update never applies
// a mutation twice because of it.
//
// Store, the backends and Codecs are safe for concurrent use by multiple
// goroutines; ConflictError and Doc are plain values.
//
// # Errors
//
// Failures match the sentinels with errors.Is: ErrNotFound (404), ErrExists
// (409 on create), ErrConflict (412; the error is a *ConflictError[T]),
// ErrETagRequired, ErrInvalidKey and ErrTooLarge (refused before any request),
// and ErrInvalidInput. A cancelled context returns ctx.Err() unchanged.
// Other errors (transport, authorization) come from the backend wrapped.
//
// # Backends
//
// A Backend stores bytes, ETags and conditions and knows nothing of T.
// Package memstore keeps documents in memory with Azure's semantics,
// tablestore keeps them as Azure Table entities (typed properties, merges,
// batches) and blobstore as Azure blobs (conditional reads, leases, a
// distributed Lock). Every backend passes the conformance suite in package
// storetest.
//
// # Fencing
//
// WithFence attaches a fencing token (blobstore's Lock hands one out with
// every acquisition) to a context; Store writes made with it record the
// highest token in the document and refuse lower ones with ErrFenced, so a
// lock holder that stalled past its lease cannot overwrite its successor.
package etagstore

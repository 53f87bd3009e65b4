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
// Transact commits several documents at once: fn reads and writes through
// a Tx, every document it read is checked at commit (serializable; on
// tables, keys fn found missing and did not write are not checked), and on
// a conflict fn runs again on fresh reads. An error of fn is returned only
// when the reads it saw were current together.
//
// Every write — these, group-commit batches, table merges and batches —
// goes through one delivery engine, which owns retries, backoff, throttling,
// fences, the resolution of lost answers and telemetry. Its words mean one
// thing each: a write is delivered (carried until its fate is known), one
// attempt sends one request, and a request whose answer was lost is
// settled by reading. "Merge" names three things users meet, each in its
// own place: Save's three-way merge of two edits (MergeFunc, MergeFields),
// a partial write of table properties (tablestore.Merge, Azure's Merge
// Entity; driver.ModeMerge), and etaghttp's JSON merge patch (RFC 7396).
//
// An ETag is never optional: an empty one fails with ErrETagRequired before
// anything is sent. ETagAny ("*") is the explicit last-writer-wins opt-out,
// and Upsert (insert-or-replace) the unconditional bypass.
//
// Concurrent Updates of one key in one Store are committed together (group
// commit): one read, then each caller's mutate runs on its own goroutine, in
// arrival order, on the state the one before it left, and one conditional
// write commits them all; the next batch starts from the version just
// written, without a read. Each caller still gets the state right after its
// own mutation (linearizable per key, as without grouping), its own errors
// and its own deadline; a mutate that panics, fails or blocks affects only
// its own caller, and one that writes its own key fails its own Update at
// once (ErrInvalidInput; the nested write lands once). Concurrent Transacts of one
// Store share one commit the same way (see Store.Transact). A version
// cache, on by default (Options.CacheSize), lets an Update write straight
// against the last version the Store saw: one request where no other
// writer came in between; a key other processes write is read first.
// Backoff is full-jitter exponential and starts higher on keys that keep
// losing races; a write that has waited long retries sooner, and a Store
// streaming writes of one key pauses now and then so that other processes
// get their turn, in the order they have waited (RetryPolicy, "Turns").
//
// # Exactly once
//
// A conditional write whose response is lost may have committed; a blind
// retry then gets 412 from its own success, and a naive loop applies the
// change twice. Every write here carries a random write id; a document keeps
// the ids of its last writes (Options.KeepWriteIDs, default 16) and a
// lineage name and sequence number, in bookkeeping that T never sees. The
// Azure backends send writes with the SDK's retries off, so a lost response
// reaches the Store as a transport error; the Store re-reads at once and one
// function (internal/outcome's Resolve) decides: committed (a success; the mutation is not
// applied again); not landed yet (the version it was conditioned on is still
// there: the same request is sent again, and at most one of the two can
// match); not applied (the history went on without it: an Update re-applies
// its mutation to the new version); or, where no read can tell,
// ErrOutcomeUnknown — for example a Delete whose document is gone, an
// Upsert or ETagAny write whose value was overwritten, or an Update whose
// write has left the window of ids the document holds. A write is never
// sent again unless a read proved the earlier try had not landed; a write
// the service refused unapplied (503 ServerBusy, its throttling answer) is
// sent again after a pause, and fails with ErrUnavailable when throttled
// until the retry policy's time ran out. A write found committed after later writes
// returns its own value with a superseded ETag (see Doc).
//
// Store, the backends and Codecs are safe for concurrent use by multiple
// goroutines; ConflictError and Doc are plain values.
//
// # Errors
//
// Failures match exactly one sentinel with errors.Is: ErrNotFound (404: no
// document under the key), ErrStorageNotFound (the table or container
// itself does not exist: the storage is not set up), ErrExists (409 on
// create), ErrConflict (412; the error is a
// *ConflictError[T]), ErrETagRequired, ErrInvalidKey and ErrTooLarge
// (refused before any request), ErrInvalidInput (an argument or value the
// codec cannot encode, such as NaN under JSON), ErrFenced, ErrLocked,
// ErrLockLost, ErrOutcomeUnknown (an *OutcomeUnknownError) and
// ErrUnavailable (throttled on every attempt, nothing written); a stored
// document that does not decode into T matches ErrInvalidInput. A context
// that ended before anything was sent returns ctx.Err() unchanged; a
// mutate's, merge's or transaction function's own error is returned as is;
// a failed read (transport, authorization) comes from the backend wrapped;
// an ability the backend lacks (Transact on blobs) matches
// errors.ErrUnsupported.
//
// # Backends
//
// A Backend (package driver: the contract for backend authors) stores
// bytes, ETags and conditions and knows nothing of T; it declares what it
// can do beyond the contract in Abilities, and wrappers that embed it keep
// those abilities.
// Package memstore keeps documents in memory with Azure's semantics,
// tablestore keeps them as Azure Table entities (typed properties, merges,
// batches) and blobstore as Azure blobs (conditional reads, leases, a
// distributed Lock). Every backend passes the conformance suite in package
// storetest.
//
// # Pages and observability
//
// List iterates; Page returns one page and an opaque token for the next,
// resuming after the last key so that pages stay exact while documents come
// and go. Both yield keys in the order of the backend's own listing
// (Store.CompareKeys): by UTF-16 code units, or on a table without
// tablestore.Options.Partition by PartitionKey, then RowKey. Every operation is one OpenTelemetry span, with metrics of
// attempts, batches, conflicts, lost responses and the cache
// (Options.TracerProvider, MeterProvider; the global ones by default, no-ops
// until an app installs an SDK), and warnings go to Options.Logger.
//
// # Fencing
//
// WithFence attaches a fencing token (blobstore's Lock hands one out with
// every acquisition) to a context; Store writes made with it record the
// highest token in the document and refuse lower ones with ErrFenced, so a
// lock holder that stalled past its lease cannot overwrite its successor.
package etagstore

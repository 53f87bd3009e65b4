package etagstore

import (
	"context"
	"errors"

	"github.com/etagstore/etagstore/internal/core"
	"github.com/etagstore/etagstore/internal/telemetry"
	"github.com/etagstore/etagstore/internal/txn"
)

// Transact runs fn, which reads documents through tx and buffers writes
// in it, and commits every write fn made in one atomic, conditional
// request (tables: one entity group transaction, in one partition, at
// most 100 entities; memstore: any keys). It returns the documents fn put,
// in the order fn first touched their keys, with their new ETags.
//
// Transactions are serializable, with one exception on tables. Every
// document fn read is checked at commit, whether fn wrote it or not, so
// no two transactions can both commit on reads the other invalidated (no
// write skew): a document fn read and did not write is sent as a check of
// its ETag (on tables, a Merge Entity without properties, which gives it
// a new ETag). A Put or Delete of a key fn did not read is conditioned on
// the version tx reads for it first. A transaction that writes nothing is
// checked at one instant on a backend with pure checks (memstore), by a
// commit of checks that writes nothing (a lost or throttled answer to it
// is checked again, within the RetryPolicy), and otherwise by reading its
// documents again. The exception: on tables a
// key fn found missing and did not write cannot be checked without
// creating it, and is not checked, so two transactions that read the same
// missing keys and each create a different one can both commit (write
// skew over absent keys; make them write one document in common).
//
// When a document changed before the commit, fn runs again on fresh reads,
// after the Store's backoff, within its RetryPolicy; fn must therefore be
// free of side effects outside tx. An fn that writes, through this Store
// but outside tx, a key the transaction touches would beat every commit:
// the transaction fails at once with ErrInvalidInput (that write landed,
// once). An error Transact returns from fn was
// made on reads that were all current together: when fn returns an error
// or panics, its reads are checked first, and if one changed fn runs
// again instead. An error of fn that matches ErrConflict runs it again
// too; a refusal another run cannot change (a caller's stale version)
// must be an error of fn's own that does not match ErrConflict. So check
// first and read hot documents last: a refusal returned before fn reads a
// document many writers change is not run again each time it moves.
//
// Concurrent transactions whose Stores commit together share one commit
// (group commit, as concurrent Updates of one key do; see Transact for
// transactions over several Stores): while one transaction or batch is in
// flight, the callers that arrive queue, and each fn of the next batch
// runs in turn,
// on its caller's goroutine, on the documents as the transactions before
// it in the batch left them (tx.ETag of a document one of them wrote is
// a Superseded ETag: its version is not stored yet). The batch's writes
// and checks go in one request, within the backend's limits (tables: one
// partition, 100 entities; a transaction that does not fit waits for the
// next batch; its run in the batch it did not fit does not count toward
// MaxAttempts). Each caller gets the documents it put; one that a later
// transaction of the batch wrote again carries a Superseded ETag (see
// ETag.Superseded). A fn that returns an error or panics after seeing
// another transaction's writes waits for the next batch; one that returns
// an error matching ErrConflict, or takes longer than 10 ms beyond its
// reads while another caller waits for it (one that calls Transact on
// this Store, say), runs again on its own, so that it affects only its
// caller; its runs in the batch count toward the policy's MaxAttempts,
// except a slow one's. A fn that returns an error of its own or wrote
// nothing leaves the batch at once, is checked by its own reads, as on
// its own, on its caller's goroutine, and does not join the commit; a
// transaction whose batch lost its last race over keys it did not touch
// runs again on its own, its runs in the batch uncounted.
// When a caller of the batch leaves (ctx) before the commit is sent, the
// others' fns run again, uncounted; one that leaves while the commit is in
// flight gets an *OutcomeUnknownError if it wrote anything.
// A lone transaction commits on its own, on its caller's goroutine.
// Options.DisableGroupCommit, or a fenced ctx (WithFence), makes each
// transaction commit on its own. Failures:
//
//   - fn's error aborts with nothing written and is returned as is; a
//     panic in fn goes on up the caller's stack, with nothing written.
//   - a key fn created with Tx.Create exists: an error matching
//     ErrExists, once fn's reads are found current (otherwise fn runs
//     again), with nothing written.
//   - a unique value a write takes is held by another document: its
//     *UniqueError (matching ErrExists), once the reads fn made before
//     that write are found current (otherwise fn runs again), with
//     nothing written.
//   - every attempt lost its race, while the policy's time lasted: an
//     error matching ErrConflict (never ErrExists or ErrNotFound of the
//     last refusal).
//   - every attempt was throttled: ErrUnavailable; so is a transaction
//     that wrote nothing (or whose fn failed) whose checks of its reads
//     went unanswered, throttled or their answers lost, until the policy
//     ended. Nothing was written: never an unknown outcome.
//   - a backend that cannot commit several documents atomically (blobs):
//     errors.ErrUnsupported, before anything is read.
//   - keys in more than one partition, or more documents than the backend
//     commits at once: ErrInvalidInput, before anything is sent.
//   - a document holding a newer fencing token than ctx's (WithFence):
//     ErrFenced. Written documents record the token.
//   - a done ctx before the commit is sent returns ctx.Err(); a commit
//     whose answer was lost is resolved by reading its documents (never
//     applied twice), and is an *OutcomeUnknownError only where no read
//     can tell.
func (s *Store[T]) Transact(ctx context.Context, fn func(tx *Tx[T]) error) ([]Doc[T], error) {
	ctx, sp := s.core.Obs.Begin(ctx, telemetry.OpTransact, "")
	defer sp.EndOnPanic()
	if s.core.Abilities.Commit == nil {
		err := errorf(errors.ErrUnsupported, "Transact: %s cannot commit several documents atomically", core.BackendName(s.core.Backend))
		sp.End(err)
		return nil, err
	}
	h, err := txn.NewCall(ctx, onHandles(func(t *Txn) error { return fn(s.In(t)) }), txStore[T]{s}, &sp).Run()
	var docs []Doc[T]
	if err == nil {
		docs = s.In(&Txn{h: h}).docs()
	}
	sp.End(err)
	return docs, err
}

// Transact runs fn, which reads and writes documents of any types through
// the typed views of tx (s.In(tx) for each Store s), and commits every
// write fn made, over all of them, in one atomic, conditional request.
// Store.Transact is its one-Store case, on the same path, with the same
// rules (see there): serializable (on tables, keys found missing and not
// written excepted), fn run again on a conflict and on its own
// ErrConflict, an error of fn returned only when its reads were current
// together, and group commit: concurrent transactions whose Stores commit
// together share one commit, whichever Stores each uses.
//
// The Stores must commit together: Stores over one backend, or over
// backends that declare the same driver.Abilities.CommitScope (tables:
// tablestore Backends over one *aztables.Client, with the same
// Options.Partition). The first Store fn uses leads: its RetryPolicy,
// Clock, version cache and telemetry carry the transaction (its span is
// etagstore.Transact), and its Options.DisableGroupCommit decides whether
// it may share a commit. In a batch, the lead of the first transaction
// that arrived leads the batch's commit (its policy bounds the batch; each
// transaction that leaves the batch runs again under its own lead's). A
// Store that cannot join the lead (another table or partition) fails at
// its first use in fn with ErrInvalidInput, and a backend that cannot
// commit atomically (blobs) with errors.ErrUnsupported; either way
// Transact fails with that error and nothing is written. One key is
// written through one Store. One exception to Store.Transact's rules: fn's
// first run knows no Store until its first use of one, so a write fn makes
// outside tx, through a Store, of a key the transaction touches lands in
// that run too, and fails the transaction (ErrInvalidInput) in the next,
// inside its lead's Reentry: it lands twice, not once.
func Transact(ctx context.Context, fn func(tx *Txn) error) error {
	c := txn.NewCall(ctx, onHandles(fn), nil, nil)
	defer func() {
		if sp := c.Span(); sp != nil {
			sp.EndOnPanic()
		}
	}()
	_, err := c.Run()
	if sp := c.Span(); sp != nil {
		sp.End(err)
	}
	return err
}

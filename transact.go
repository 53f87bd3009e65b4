package etagstore

import (
	"context"
	"errors"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/engine"
	"github.com/etagstore/etagstore/internal/telemetry"
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
// Concurrent Transacts of one Store share one commit (group commit, as
// concurrent Updates of one key do): while one batch is in flight, the
// callers that arrive queue, and each fn of the next batch runs in turn,
// on its caller's goroutine, on the documents as the transactions before
// it in the batch left them (tx.ETag of a document one of them wrote is
// a Superseded ETag: its version is not stored yet). The batch's writes
// and checks go in one request, within the backend's limits (tables: one
// partition, 100 entities; a transaction that does not fit waits for the
// next batch). Each caller gets the documents it put; one that a later
// transaction of the batch wrote again carries a Superseded ETag (see
// ETag.Superseded). A fn that returns an error or panics after seeing
// another transaction's writes, returns an error matching ErrConflict,
// or takes longer than 10 ms beyond its reads while another caller waits
// for it (one that calls Transact on this Store, say), runs again on its
// own, so that it affects only its caller; its runs in the batch count
// toward the policy's MaxAttempts, except a slow one's. A fn that wrote
// nothing is checked by its own reads, as on its own, and does not join
// the commit; a transaction whose batch lost its last race over keys it
// did not touch runs again on its own, its runs in the batch uncounted.
// When a caller of the batch leaves (ctx) before the commit is sent, the
// others' fns run again, uncounted; one that leaves while the commit is in
// flight gets an *OutcomeUnknownError if it wrote anything.
// Options.DisableGroupCommit, or a fenced ctx (WithFence), makes each
// transaction commit on its own, as the package-level Transact always
// does. Failures:
//
//   - fn's error aborts with nothing written and is returned as is; a
//     panic in fn goes on up the caller's stack, with nothing written.
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
	ctx, sp := s.obs.Begin(ctx, telemetry.OpTransact, "")
	defer sp.EndOnPanic()
	docs, err := s.transact(ctx, fn, &sp.Stats)
	sp.End(err)
	return docs, err
}

func (s *Store[T]) transact(ctx context.Context, fn func(tx *Tx[T]) error, st *telemetry.Stats) ([]Doc[T], error) {
	if s.abilities.Commit == nil {
		return nil, errorf(errors.ErrUnsupported, "Transact: %s cannot commit several documents atomically", backendName(s.b))
	}
	if s.grouped && !isUngrouped(ctx) && !s.env.Reentry.InsideAny() { // nested in a mutate: its writes must land on this goroutine
		return s.transactGrouped(ctx, fn, st)
	}
	return s.transactUngrouped(ctx, fn, 0, st)
}

// transactUngrouped runs fn's transaction on its own: its own reads, its own
// commit. made is how many runs of fn a batch made (they count as
// attempts).
func (s *Store[T]) transactUngrouped(ctx context.Context, fn func(tx *Tx[T]) error, made int, st *telemetry.Stats) ([]Doc[T], error) {
	t := &Txn{base: ctx, ctx: ctx, lead: &s.core, made: made}
	res, err := t.deliver(ctx, func(t *Txn) error { return fn(s.In(t)) }, nil)
	st.Attempts = res.Attempts
	if err != nil {
		return nil, err
	}
	st.Batch = len(res.Out)
	return s.In(t).docs(), nil
}

// Tx is a Store's typed view of a transaction (see Store.Transact and
// Transact): what fn read and wrote of the Store's documents. It is valid
// during fn and, like fn, not safe for concurrent use. After the commit,
// ETag reports the new ETag of each document written, and Put and Delete
// fail with ErrInvalidInput.
type Tx[T any] struct {
	s      *Store[T]
	txn    *Txn
	reads  map[string]version // the version read of every key touched (missing ones too); after the commit, the version made
	writes map[string]txWrite[T]
	made   map[string]driver.Item // after the commit: the version each write made

	// In a batch of transactions (txgroup.go): the versions the batch
	// read ahead, and what this member's fn touched itself (nil outside
	// a batch).
	ahead map[string]version
	own   *ownTouches
}

type txWrite[T any] struct {
	del   bool
	blind bool // Upsert of a key not read: no condition, nothing checked
	value T
	data  []byte  // T's encoding of value
	onto  written // data applied to the version read (not for a blind write)
	// whole: it writes T alone, keeping nothing of the stored document (an
	// Upsert, or a write after a delete in the transaction); anew: it
	// starts a new history over the stored version (after a delete).
	whole, anew bool
	// inherited: made by an earlier transaction of a batch; its value is
	// that transaction's, so a Get decodes data afresh.
	inherited bool
}

func (tx *Tx[T]) core() *core { return &tx.s.core }

func (tx *Tx[T]) read(key string) version { return tx.reads[key] }

func (tx *Tx[T]) wasRead(key string) bool {
	_, ok := tx.reads[key]
	return ok
}

func (tx *Tx[T]) action(d *engine.Delivery, key string) (engine.KeyWrite, bool) {
	b := tx.reads[key]
	w, written := tx.writes[key]
	switch {
	case !written:
		return engine.Check(b), false
	case w.del:
		return d.DeleteOver(b, tx.s.abilities.Tombstones), true
	case w.blind:
		return engine.Fresh(key, driver.Cond{Kind: driver.CondNone}, w.data, 0), true
	case w.anew: // created again after a delete: nothing of the stored version's bookkeeping carries over
		return engine.Fresh(key, driver.IfMatch(b.ETag), w.data, d.Fence()), true
	}
	return over(d, b, w.onto), true
}

// committed records it, the version the commit made of key (a check's:
// its ETag only, where the backend gave one a new one), and keeps it in
// the Store's version cache.
func (tx *Tx[T]) committed(key string, it driver.Item) {
	w, written := tx.writes[key]
	b := tx.reads[key]
	switch {
	case written && w.del:
		b = version{Item: driver.Item{Key: key}, Verified: true, MetaKnown: true, Missing: errorf(ErrNotFound, "%q was deleted by the transaction", key)}
	case written:
		b = tx.s.stored(it, false, w.blind || w.onto.canonical)
	case it.ETag != "" && !it.ETag.Superseded():
		b.ETag = it.ETag // a check that gave it a new ETag (tables)
	}
	tx.reads[key] = b
	if tx.made == nil {
		tx.made = map[string]driver.Item{}
	}
	tx.made[key] = it
	tx.s.cacheWritten(engine.Result{Out: []driver.Item{it}}, written && (w.blind || w.onto.canonical))
}

// docs is the documents the transaction put through tx, in the order it
// first touched their keys, with the versions the commit made.
func (tx *Tx[T]) docs() []Doc[T] {
	var docs []Doc[T]
	for _, tc := range tx.txn.order {
		w, ok := tx.writes[tc.key]
		if tc.view != txView(tx) || !ok || w.del {
			continue
		}
		it := tx.made[tc.key]
		docs = append(docs, Doc[T]{Key: tc.key, Value: w.value, ETag: it.ETag, Extra: tx.s.extraOf(it, w.data)})
	}
	return docs
}

// Get returns the document under key as the transaction sees it: its own
// write if it made one, otherwise the version it read the first time: on
// the first run of fn, the copy the Store's version cache holds, as an
// Update starts from it (the commit checks it by its ETag; a stale one
// runs fn again, on reads); otherwise read now. A missing document
// matches ErrNotFound.
func (tx *Tx[T]) Get(key string) (T, error) {
	var zero T
	if w, ok := tx.writes[key]; ok {
		tx.own.touch(key)
		tx.own.saw(key)
		if w.del {
			return zero, errorf(ErrNotFound, "%q was deleted in this transaction", key)
		}
		if w.inherited {
			var v T // a copy of its own: the earlier transaction keeps its value
			if err := tx.s.codec.Unmarshal(w.data, &v); err != nil {
				return zero, decodeError(key, err)
			}
			return v, nil
		}
		return w.value, nil
	}
	b, err := tx.version(key)
	if err != nil {
		return zero, err
	}
	if !b.Exists {
		return zero, b.Missing
	}
	d, err := tx.s.decode(b.Item)
	if err == nil && d.Extra.doc == "" && !b.Canonical {
		b.Canonical = true // T encodes it as stored: a Put over it need not work that out again
		tx.reads[key] = b
	}
	return d.Value, err
}

// Put buffers a write of v under key: a create if the transaction found it
// missing, otherwise a replace conditioned on the version it read. An
// invalid key or a value that cannot be stored is returned now.
func (tx *Tx[T]) Put(key string, v T) error {
	if err := tx.open(); err != nil {
		return err
	}
	b, err := tx.version(key)
	if err != nil {
		return err
	}
	data, err := tx.s.encode(key, v)
	if err != nil {
		return err
	}
	prev, had := tx.writes[key]
	next := txWrite[T]{value: v, data: data, whole: had && (prev.del || prev.whole), anew: had && (prev.del || prev.anew)}
	if next.whole {
		next.onto = written{data: data, canonical: true} // over a delete or an Upsert: T alone
	} else if next.onto, err = tx.s.apply(b, nil, data); err != nil { // the change, to the document read
		return err
	}
	tx.writes[key] = next
	tx.own.wrote(key)
	return nil
}

// Upsert buffers a write of v under key with no condition, as
// Store.Upsert writes: nothing is read for it and nothing is checked at
// commit for it (the documented bypass: it overwrites whatever is
// stored), and it writes T alone. A key the transaction has read (before
// the Upsert, or after it: ETag, Delete, Put), or a transaction under a
// fence (WithFence), is written as Put writes it, conditioned on the
// version read.
func (tx *Tx[T]) Upsert(key string, v T) error {
	if err := tx.open(); err != nil {
		return err
	}
	if _, fenced := FenceFrom(tx.txn.ctx); fenced || tx.mine(key) {
		return tx.Put(key, v)
	}
	if err := tx.s.checkKey(key); err != nil {
		return err
	}
	if err := tx.txn.join(&tx.s.core, key); err != nil {
		return err
	}
	data, err := tx.s.encode(key, v)
	if err != nil {
		return err
	}
	w := txWrite[T]{value: v, data: data, whole: true, onto: written{data: data, canonical: true}}
	prev, had := tx.writes[key]
	_, read := tx.reads[key] // in a batch: by an earlier transaction, whose check the write keeps
	switch {
	case !had && !read:
		w.blind = true
		tx.txn.order = append(tx.txn.order, touch{tx, key})
	case had && prev.blind:
		w.blind = true // over an earlier transaction's blind Upsert: still nothing read
	default:
		w.anew = had && (prev.del || prev.anew) // T alone, conditioned as the key's action is
	}
	tx.writes[key] = w
	tx.own.touch(key)
	tx.own.wrote(key)
	return nil
}

// mine reports whether the transaction read or wrote key (in a batch of
// transactions: this one, not an earlier one of the batch).
func (tx *Tx[T]) mine(key string) bool {
	if tx.own != nil {
		return tx.own.seen[key]
	}
	_, read := tx.reads[key]
	_, wrote := tx.writes[key]
	return read || wrote
}

// Delete buffers the delete of key, conditioned on the version the
// transaction read. A key that is missing (or that this transaction
// deleted) matches ErrNotFound now; deleting a key this transaction created
// cancels its Put.
func (tx *Tx[T]) Delete(key string) error {
	if err := tx.open(); err != nil {
		return err
	}
	b, err := tx.version(key)
	if err != nil {
		return err
	}
	if w, ok := tx.writes[key]; ok && !w.del && !b.Exists {
		delete(tx.writes, key) // created here: the delete cancels it
		tx.own.wrote(key)
		return nil
	}
	if w, ok := tx.writes[key]; !b.Exists || ok && w.del {
		return errorf(ErrNotFound, "%q", key)
	}
	tx.writes[key] = txWrite[T]{del: true}
	tx.own.wrote(key)
	return nil
}

// ETag returns the ETag of the version of key the transaction read (read
// now, the first time), or "" when the key was missing: what a caller
// holding a version from an earlier read (a docstore revision, say) checks
// it against inside the transaction. The check is part of the commit: a
// version that changes before it commits makes fn run again. An invalid
// key matches ErrInvalidKey.
func (tx *Tx[T]) ETag(key string) (ETag, error) {
	b, err := tx.version(key)
	if w, ok := tx.writes[key]; err == nil && tx.own.pending(key) && !tx.txn.done {
		// An earlier transaction of the batch wrote it (txgroup.go): the
		// version this one sees is not stored yet, and no ETag held
		// matches it.
		if ok && w.del && w.inherited {
			return "", nil
		}
		return driver.Superseded("pending"), nil
	}
	if err != nil || !b.Exists {
		return "", err
	}
	return b.ETag, nil
}

// cached is the copy of key the Store's version cache holds, when the
// attempt may start from copies (see Txn.copies).
func (tx *Tx[T]) cached(key string) []version {
	if !tx.txn.copies {
		return nil
	}
	return tx.s.cached(tx.txn.ctx, key, "")
}

// open refuses a write after the commit.
func (tx *Tx[T]) open() error {
	if tx.txn.done {
		return errorf(ErrInvalidInput, "Transact: the transaction has ended")
	}
	return nil
}

// readNow reads key; in a batch, its turn's timer does not count the read.
func (tx *Tx[T]) readNow(key string) (version, error) {
	tx.own.reading(true)
	defer tx.own.reading(false)
	return (hooks{&tx.s.core}).Read(tx.txn.ctx, key)
}

// version returns the version of key the transaction read, reading it the
// first time.
func (tx *Tx[T]) version(key string) (version, error) {
	tx.own.saw(key)
	if b, ok := tx.reads[key]; ok {
		tx.own.touch(key)
		return b, nil
	}
	if err := tx.s.checkKey(key); err != nil {
		return version{}, err
	}
	if err := tx.txn.join(&tx.s.core, key); err != nil {
		return version{}, err
	}
	if err := tx.txn.ctx.Err(); err != nil {
		return version{}, err
	}
	b, ok := tx.ahead[key] // read ahead by a batch
	if c := tx.cached(key); !ok && c != nil {
		b = c[0] // checked by the commit, by its ETag
	} else if !ok {
		var err error
		if b, err = tx.readNow(key); err != nil {
			return version{}, err
		}
	}
	tx.reads[key] = b
	tx.own.touch(key)
	if w, upserted := tx.writes[key]; upserted {
		// An Upsert touched it already: now that fn has read it, the
		// write is conditioned on the version read, as a Put's.
		w.blind = false
		w.onto = written{data: w.data, canonical: true} // an Upsert writes T alone
		tx.writes[key] = w
	} else {
		tx.txn.order = append(tx.txn.order, touch{tx, key})
	}
	return b, nil
}

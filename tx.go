package etagstore

import (
	"errors"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/txn"
)

// Tx is a Store's typed view of a transaction (see Store.Transact and
// Transact): what fn read and wrote of the Store's documents. It is valid
// during fn and, like fn, not safe for concurrent use. After the commit,
// ETag reports the new ETag of each document written, and Put, Create,
// Upsert and Delete fail with ErrInvalidInput.
//
// A Tx holds no state of its own: it names a Store and the transaction,
// whose state for the Store (a txn.View) it looks up on each call, so
// that a Tx fn took before the transaction joined a batch works on the
// batch's copy of it (internal/txn).
type Tx[T any] struct {
	s   *Store[T]
	txn *Txn
}

// In returns s's typed view of tx: its Get, Put, Create, Upsert, Delete
// and ETag read and write s's documents in tx. The first use checks that s
// can commit with the Stores tx already holds.
func (s *Store[T]) In(tx *Txn) *Tx[T] { return &Tx[T]{s: s, txn: tx} }

// store is tx's Store as the transaction machinery knows it.
func (tx *Tx[T]) store() txn.Store { return txStore[T]{tx.s} }

// valuesOf is the values fn put through v, the view of a Store of T.
func valuesOf[T any](v *txn.View) map[string]T {
	if v.Values == nil {
		v.Values = map[string]T{}
	}
	return v.Values.(map[string]T)
}

// docs is the documents the transaction put through tx, in the order it
// first touched their keys (in a batch: the member's own), with the
// versions the commit made.
func (tx *Tx[T]) docs() []Doc[T] {
	var docs []Doc[T]
	tx.txn.h.Written(tx.store(), func(v *txn.View, key string, data []byte, it driver.Item) {
		docs = append(docs, tx.s.dated(Doc[T]{Key: key, Value: valuesOf[T](v)[key], ETag: it.ETag, Extra: tx.s.extraOf(it, data)}))
	})
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
	v, got, err := tx.txn.h.Get(tx.store(), key)
	switch {
	case err != nil:
		return zero, err
	case got.Own:
		return valuesOf[T](v)[key], nil
	case got.Inherited:
		return tx.s.enc.Decode(key, got.Data) // a copy of its own: the earlier transaction keeps its value
	}
	d, err := tx.s.decode(got.Item)
	if err == nil && d.Extra.x.Doc == "" {
		v.Canonical(key) // T encodes it as stored: a Put over it need not work that out again
	}
	return d.Value, err
}

// Put buffers a write of v under key: a create if the transaction found it
// missing, otherwise a replace conditioned on the version it read. An
// invalid key or a value that cannot be stored is returned now.
func (tx *Tx[T]) Put(key string, v T) error {
	h, s := tx.txn.h, tx.store()
	if err := h.BeforePut(s, key); err != nil {
		return err
	}
	return tx.buffer(key, v, func(data []byte) (*txn.View, error) { return h.Put(s, key, data) })
}

// buffer encodes v and buffers it through write, which returns the view
// holding it: v is then the value fn put under key.
func (tx *Tx[T]) buffer(key string, v T, write func(data []byte) (*txn.View, error)) error {
	data, err := tx.s.enc.Encode(key, v)
	if err != nil {
		return err
	}
	view, err := write(data)
	if err != nil {
		return err
	}
	valuesOf[T](view)[key] = v
	return nil
}

// Create buffers the create of v under key, which must not exist: it
// reads nothing before the commit, which is conditioned on the key's
// absence. A key that exists fails the transaction with an error matching
// ErrExists, returned only once the documents fn read are found current
// together, as fn's own errors are (when one changed, fn runs again). A
// key the transaction read, or wrote, is known: Create of one that exists
// returns that error now (fn decides), of one missing or deleted in the
// transaction is Put. An invalid key or a value that cannot be stored is
// returned now. In a Store whose documents expire (Expiry), Create reads
// the key first, as Get does, so that an expired document is replaced
// (Put over it) and a live one returns ErrExists now.
//
// In a batch of transactions (group commit), one member's taken key does
// not cost the others a commit: a key its Store's version cache holds
// (most likely taken) makes its member leave the batch and read the key,
// beside the batch's commit;
// a key no cache holds is committed unread, on its absence; after a
// commit refused on such a key (another process made it), the next
// batches look up every key created together, in one request where the
// backend can (driver.Abilities.ReadMany).
func (tx *Tx[T]) Create(key string, v T) error {
	if tx.s.core.Life != nil { // an expired document is replaced: it must be read
		switch _, err := tx.Get(key); {
		case err == nil:
			return errorf(ErrExists, "Transact: %q exists", key)
		case !errors.Is(err, ErrNotFound):
			return err
		}
		return tx.Put(key, v)
	}
	return tx.createUnread(key, v, false)
}

// createUnread is Create reading nothing: conditioned on the key's
// absence. fresh says the key cannot exist yet (an outbox's event,
// numbered from its head): a batch does not look it up.
func (tx *Tx[T]) createUnread(key string, v T, fresh bool) error {
	h, s := tx.txn.h, tx.store()
	if put, err := h.BeforeCreate(s, key); err != nil || put {
		if err != nil {
			return err
		}
		return tx.Put(key, v)
	}
	return tx.buffer(key, v, func(data []byte) (*txn.View, error) { return h.Create(s, key, data, fresh), nil })
}

// Upsert buffers a write of v under key with no condition, as
// Store.Upsert writes: nothing is read for it and nothing is checked at
// commit for it (the documented bypass: it overwrites whatever is
// stored), and it writes T alone. A key the transaction has read (before
// the Upsert, or after it: ETag, Delete, Put), or a transaction under a
// fence (WithFence), is written as Put writes it, conditioned on the
// version read. So is every key of a Store with indexes, whose entries
// need the version the write replaces.
func (tx *Tx[T]) Upsert(key string, v T) error {
	h, s := tx.txn.h, tx.store()
	if put, err := h.BeforeUpsert(s, key); err != nil || put || tx.s.idx.KeepsEntries() {
		if err != nil {
			return err
		}
		return tx.Put(key, v)
	}
	return tx.buffer(key, v, func(data []byte) (*txn.View, error) { return h.Upsert(s, key, data), nil })
}

// Delete buffers the delete of key, conditioned on the version the
// transaction read. A key that is missing (or that this transaction
// deleted) matches ErrNotFound now; deleting a key this transaction created
// cancels its Put.
func (tx *Tx[T]) Delete(key string) error { return tx.txn.h.Delete(tx.store(), key) }

// ETag returns the ETag of the version of key the transaction read (read
// now, the first time), or "" when the key was missing: what a caller
// holding a version from an earlier read (a docstore revision, say) checks
// it against inside the transaction. The check is part of the commit: a
// version that changes before it commits makes fn run again. An invalid
// key matches ErrInvalidKey.
func (tx *Tx[T]) ETag(key string) (ETag, error) { return tx.txn.h.ETag(tx.store(), key) }

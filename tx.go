package etagstore

import (
	"github.com/etagstore/etagstore/driver"
)

// Tx is a Store's typed view of a transaction (see Store.Transact and
// Transact): what fn read and wrote of the Store's documents. It is valid
// during fn and, like fn, not safe for concurrent use. After the commit,
// ETag reports the new ETag of each document written, and Put, Create,
// Upsert and Delete fail with ErrInvalidInput.
//
// A Tx holds no state of its own: it names a Store and the transaction,
// whose state for the Store (storeTx) it looks up on each call, so that a
// Tx fn took before the transaction joined a batch works on the batch's
// copy of it (txgroup.go).
type Tx[T any] struct {
	s   *Store[T]
	txn *Txn
}

// In returns s's typed view of tx: its Get, Put, Create, Upsert, Delete
// and ETag read and write s's documents in tx. The first use checks that s
// can commit with the Stores tx already holds.
func (s *Store[T]) In(tx *Txn) *Tx[T] { return &Tx[T]{s: s, txn: tx} }

// view is the transaction's state for tx's Store, made at its first use
// (when the transaction's first use of a Store, of key, may give it
// another state: Txn.use).
func (tx *Tx[T]) view(key string) (*txnState, *storeTx[T]) { return tx.viewFor(key, true) }

// viewFor is view, for a use of key that reads it (Create's does not:
// its key is looked up with the other created keys of a batch).
func (tx *Tx[T]) viewFor(key string, reads bool) (*txnState, *storeTx[T]) {
	tx.txn.use(&tx.s.core, key, reads)
	st := tx.txn.st
	if v, ok := st.views[&tx.s.core]; ok {
		return st, v.(*storeTx[T])
	}
	v := &storeTx[T]{s: tx.s, reads: map[string]version{}, writes: map[string]txWrite[T]{}}
	if st.views == nil {
		st.views = map[*core]txView{}
	}
	st.views[&tx.s.core] = v
	return st, v
}

// docs is the documents the transaction put through tx, in the order it
// first touched their keys (in a batch: the member's own), with the
// versions the commit made.
func (tx *Tx[T]) docs() []Doc[T] {
	st, v := tx.view("")
	var docs []Doc[T]
	for _, key := range st.ownKeys() {
		w, ok := v.writes[key]
		if st.owner[key] != &tx.s.core || !ok || w.del || w.inherited {
			continue
		}
		it := st.made[key]
		docs = append(docs, Doc[T]{Key: key, Value: w.value, ETag: it.ETag, Extra: tx.s.extraOf(it, w.data)})
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
	st, v := tx.view(key)
	if w, ok := v.writes[key]; ok {
		st.own.touch(key)
		st.own.saw(key)
		if w.del {
			return zero, errorf(ErrNotFound, "%q was deleted in this transaction", key)
		}
		if w.inherited {
			var val T // a copy of its own: the earlier transaction keeps its value
			if err := tx.s.codec.Unmarshal(w.data, &val); err != nil {
				return zero, decodeError(key, err)
			}
			return val, nil
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
		v.reads[key] = b
	}
	return d.Value, err
}

// Put buffers a write of v under key: a create if the transaction found it
// missing, otherwise a replace conditioned on the version it read. An
// invalid key or a value that cannot be stored is returned now.
func (tx *Tx[T]) Put(key string, v T) error {
	st, view := tx.view(key)
	if err := st.open(); err != nil {
		return err
	}
	if prev, ok := view.writes[key]; ok && prev.unread { // over a Create: still one
		data, err := tx.s.encode(key, v)
		if err != nil {
			return err
		}
		view.writes[key] = txWrite[T]{value: v, data: data, unread: true, before: prev.before, whole: true, onto: written{data: data, canonical: true}}
		st.own.saw(key)
		st.own.wrote(key)
		return nil
	}
	b, err := tx.version(key)
	if err != nil {
		return err
	}
	data, err := tx.s.encode(key, v)
	if err != nil {
		return err
	}
	prev, had := view.writes[key]
	next := txWrite[T]{value: v, data: data, whole: had && (prev.del || prev.whole), anew: had && (prev.del || prev.anew)}
	if next.whole {
		next.onto = written{data: data, canonical: true} // over a delete or an Upsert: T alone
	} else if next.onto, err = tx.s.apply(b, nil, data); err != nil { // the change, to the document read
		return err
	}
	view.writes[key] = next
	st.own.wrote(key)
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
// returned now.
//
// In a batch of transactions (group commit), the keys its members create
// are looked up together in one request before the commit where the
// backend can (driver.Abilities.ReadMany), so that one member's taken key
// does not cost the others a round trip.
func (tx *Tx[T]) Create(key string, v T) error {
	st, view := tx.viewFor(key, false)
	if err := st.open(); err != nil {
		return err
	}
	if _, fenced := FenceFrom(st.ctx); fenced || tx.knows(key) {
		return tx.putNew(key, v)
	}
	if err := tx.s.checkKey(key); err != nil {
		return err
	}
	if err := st.join(&tx.s.core, key); err != nil {
		return err
	}
	data, err := tx.s.encode(key, v)
	if err != nil {
		return err
	}
	view.writes[key] = txWrite[T]{value: v, data: data, unread: true, before: len(st.ownKeys()), whole: true, onto: written{data: data, canonical: true}}
	st.order = append(st.order, touch{view, key})
	st.own.touch(key)
	st.own.wrote(key)
	return nil
}

// putNew is Create of a key the transaction knows: Put where it is
// missing, ErrExists where it exists.
func (tx *Tx[T]) putNew(key string, v T) error {
	st, view := tx.view(key)
	w, wrote := view.writes[key]
	if !wrote {
		b, err := tx.version(key)
		if err != nil {
			return err
		}
		wrote = b.Exists
	}
	if wrote && !w.del {
		st.own.saw(key)
		return errorf(ErrExists, "Transact: %q exists", key)
	}
	return tx.Put(key, v)
}

// knows reports whether the transaction read or wrote key (in a batch, it
// or an earlier member), or its batch read key ahead.
func (tx *Tx[T]) knows(key string) bool {
	st, v := tx.view(key)
	_, read := v.reads[key]
	_, wrote := v.writes[key]
	_, ahead := st.ahead[key]
	return read || wrote || ahead
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
	st, view := tx.view(key)
	if err := st.open(); err != nil {
		return err
	}
	if _, fenced := FenceFrom(st.ctx); fenced || tx.mine(key) || tx.s.idx != nil {
		return tx.Put(key, v) // with indexes: their entries need the version it replaces
	}
	if err := tx.s.checkKey(key); err != nil {
		return err
	}
	if err := st.join(&tx.s.core, key); err != nil {
		return err
	}
	data, err := tx.s.encode(key, v)
	if err != nil {
		return err
	}
	w := txWrite[T]{value: v, data: data, whole: true, onto: written{data: data, canonical: true}}
	prev, had := view.writes[key]
	_, read := view.reads[key] // in a batch: by an earlier transaction, whose check the write keeps
	switch {
	case !had && !read:
		w.blind = true
		st.order = append(st.order, touch{view, key})
	case had && prev.blind:
		w.blind = true // over an earlier transaction's blind Upsert: still nothing read
	case had && prev.unread:
		w.unread, w.before = true, prev.before // over an earlier Create: still conditioned on absence
	default:
		w.anew = had && (prev.del || prev.anew) // T alone, conditioned as the key's action is
	}
	view.writes[key] = w
	st.own.touch(key)
	st.own.wrote(key)
	return nil
}

// mine reports whether the transaction read or wrote key (in a batch of
// transactions: this one, not an earlier one of the batch).
func (tx *Tx[T]) mine(key string) bool {
	st, _ := tx.view(key)
	if st.own != nil {
		return st.own.seen[key]
	}
	return tx.knows(key)
}

// Delete buffers the delete of key, conditioned on the version the
// transaction read. A key that is missing (or that this transaction
// deleted) matches ErrNotFound now; deleting a key this transaction created
// cancels its Put.
func (tx *Tx[T]) Delete(key string) error {
	st, view := tx.view(key)
	if err := st.open(); err != nil {
		return err
	}
	b, err := tx.version(key)
	if err != nil {
		return err
	}
	if w, ok := view.writes[key]; ok && w.unread && b.Exists {
		return errorf(ErrExists, "Transact: %q exists", key) // the Create's key: created by another
	}
	if w, ok := view.writes[key]; ok && !w.del && !b.Exists {
		delete(view.writes, key) // created here: the delete cancels it
		st.own.wrote(key)
		return nil
	}
	if w, ok := view.writes[key]; !b.Exists || ok && w.del {
		return errorf(ErrNotFound, "%q", key)
	}
	view.writes[key] = txWrite[T]{del: true}
	st.own.wrote(key)
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
	st, view := tx.view(key)
	if w, ok := view.writes[key]; err == nil && st.own.pending(key) && !st.done {
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

// version returns the version of key the transaction read, reading it the
// first time (a Create's key too: its write stays conditioned on absence).
func (tx *Tx[T]) version(key string) (version, error) {
	st, view := tx.view(key)
	st.own.saw(key)
	if b, ok := view.reads[key]; ok {
		st.own.touch(key)
		return b, nil
	}
	if err := tx.s.checkKey(key); err != nil {
		return version{}, err
	}
	if err := st.join(&tx.s.core, key); err != nil {
		return version{}, err
	}
	if err := st.ctx.Err(); err != nil {
		return version{}, err
	}
	b, ok := st.ahead[key] // read ahead by a batch
	var c []version
	if !ok && st.copies {
		c = tx.s.cached(st.ctx, key, "")
	}
	if c != nil {
		b = c[0] // checked by the commit, by its ETag
	} else if !ok {
		var err error
		if b, err = st.readNow(hooks{&tx.s.core}, key); err != nil {
			return version{}, err
		}
	}
	view.reads[key] = b
	st.own.touch(key)
	w, touched := view.writes[key]
	switch {
	case touched && w.unread: // a Create's: still conditioned on absence
	case touched && w.blind:
		// An Upsert touched it already: now that fn has read it, the
		// write is conditioned on the version read, as a Put's.
		w.blind = false
		w.onto = written{data: w.data, canonical: true} // an Upsert writes T alone
		view.writes[key] = w
	case !touched:
		st.order = append(st.order, touch{view, key})
	}
	return b, nil
}

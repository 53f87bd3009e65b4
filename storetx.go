package etagstore

import (
	"maps"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/engine"
)

// A Store's part of a transaction, as the untyped transaction (txn.go)
// uses it: what fn read and wrote of the Store's documents, and what it
// makes of them in the commit.

// storeTx is what a transaction read and wrote of one Store's documents.
type storeTx[T any] struct {
	s      *Store[T]
	reads  map[string]version // the version read of every key touched (missing ones too); after the commit, the version made
	writes map[string]txWrite[T]
}

type txWrite[T any] struct {
	del   bool
	blind bool // Upsert of a key not read: no condition, nothing checked
	// unread: Create of a key not read: conditioned on its absence, a
	// refusal of which fails the transaction with ErrExists; before is how
	// many keys fn had touched when it called Create (their reads are
	// what the Create may depend on).
	unread bool
	before int
	value  T
	data   []byte  // T's encoding of value
	onto   written // data applied to the version read (not for a blind or unread write)
	// whole: it writes T alone, keeping nothing of the stored document (an
	// Upsert, or a write after a delete in the transaction); anew: it
	// starts a new history over the stored version (after a delete).
	whole, anew bool
	// inherited: made by an earlier transaction of a batch; its value is
	// that transaction's, so a Get decodes data afresh.
	inherited bool
}

func (v *storeTx[T]) core() *core { return &v.s.core }

func (v *storeTx[T]) read(key string) version { return v.reads[key] }

func (v *storeTx[T]) wasRead(key string) bool {
	_, ok := v.reads[key]
	return ok
}

func (v *storeTx[T]) action(d *engine.Delivery, key string) (engine.KeyWrite, bool) {
	b := v.reads[key]
	w, written := v.writes[key]
	switch {
	case !written:
		return engine.Check(b), false
	case w.del:
		return d.DeleteOver(b, v.s.abilities.Tombstones), true
	case w.blind:
		return engine.Fresh(key, driver.Cond{Kind: driver.CondNone}, w.data, 0), true
	case w.unread:
		kw := engine.Over(engine.Fresh(key, driver.Cond{Kind: driver.CondCreate}, w.data, d.Fence()), version{Item: driver.Item{Key: key}})
		kw.Unread = true
		return kw, true
	case w.anew: // created again after a delete: nothing of the stored version's bookkeeping carries over
		return engine.Over(engine.Fresh(key, driver.IfMatch(b.ETag), w.data, d.Fence()), b), true
	}
	return over(d, b, w.onto), true
}

// unreadCreate reports whether key's write is a Create of a key not read,
// and how many keys fn had touched when it called Create.
func (v *storeTx[T]) unreadCreate(key string) (int, bool) {
	w, ok := v.writes[key]
	return w.before, ok && w.unread
}

// committed records it, the version the commit made of key (a check's:
// its ETag only, where the backend gave one a new one), and keeps it in
// the Store's version cache.
func (v *storeTx[T]) committed(key string, it driver.Item) {
	w, written := v.writes[key]
	b := v.reads[key]
	switch {
	case written && w.del:
		b = deletedVersion(key)
	case written:
		b = v.s.stored(it, false, w.blind || w.unread || w.onto.canonical)
	case it.ETag != "" && !it.ETag.Superseded():
		b.ETag = it.ETag // a check that gave it a new ETag (tables)
	}
	v.reads[key] = b
	v.s.cacheWritten(engine.Result{Out: []driver.Item{it}}, written && (w.blind || w.unread || w.onto.canonical))
}

// settled records, in a batch member's view, what the batch's commit made
// of key, which the member wrote: it, or (a later member wrote it again)
// a version known by its Superseded ETag only.
func (v *storeTx[T]) settled(key string, it driver.Item) {
	if w := v.writes[key]; w.del {
		v.reads[key] = deletedVersion(key)
		return
	}
	v.reads[key] = version{Item: driver.Item{Key: key, ETag: it.ETag}, Exists: true, Verified: true}
}

func deletedVersion(key string) version {
	return version{Item: driver.Item{Key: key}, Verified: true, MetaKnown: true, Missing: errorf(ErrNotFound, "%q was deleted by the transaction", key)}
}

// fork is a copy of v for a batch member's fn: the writes it holds are
// marked inherited (an earlier member's).
func (v *storeTx[T]) fork() txView {
	f := &storeTx[T]{s: v.s, reads: maps.Clone(v.reads), writes: make(map[string]txWrite[T], len(v.writes))}
	if f.reads == nil {
		f.reads = map[string]version{}
	}
	for k, w := range v.writes {
		w.inherited = true
		f.writes[k] = w
	}
	return f
}

// wrote reports whether v writes key.
func (v *storeTx[T]) wrote(key string) bool {
	_, ok := v.writes[key]
	return ok
}

package txn

import (
	"maps"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/engine"
	"github.com/etagstore/etagstore/internal/meta"
)

// A Store's part of a transaction: what fn read and wrote of the Store's
// documents, and what it makes of them in the commit.

// View is what a transaction read and wrote of one Store's documents.
type View struct {
	s      Store
	reads  map[string]Version // the version read of every key touched (missing ones too); after the commit, the version made
	writes map[string]write
	// Values is the root's: the values fn put through the Store's typed
	// view, by key (a map of T, made at the first Put). Only a write
	// that is not inherited has one.
	Values any
}

// write is a write fn buffered, in T's encoding.
type write struct {
	del   bool
	blind bool // Upsert of a key not read: no condition, nothing checked
	// unread: Create of a key not read: conditioned on its absence, a
	// refusal of which fails the transaction with ErrExists; before is how
	// many keys fn had touched when it called Create (their reads are
	// what the Create may depend on).
	unread bool
	before int
	// fresh: an unread Create of a key that cannot exist yet (an outbox's
	// event, numbered from its head): a batch does not look it up.
	fresh bool
	data  []byte  // T's encoding of the value
	onto  written // data applied to the version read (not for a blind or unread write)
	// whole: it writes T alone, keeping nothing of the stored document (an
	// Upsert, or a write after a delete in the transaction); anew: it
	// starts a new history over the stored version (after a delete).
	whole, anew bool
	// inherited: made by an earlier transaction of a batch; its value is
	// that transaction's, so a Get decodes data afresh.
	inherited bool
}

// written is what a write of data stores over the version read (see
// Store.Apply).
type written struct {
	data, changes []byte
	canonical     bool
}

// whole is a written of data alone.
func whole(data []byte) written { return written{data: data, canonical: true} }

func newView(s Store) *View {
	return &View{s: s, reads: map[string]Version{}, writes: map[string]write{}}
}

// action is key's part of the commit: its write, or a check of the
// version read; written says it is a write.
func (v *View) action(d *engine.Delivery, key string) (engine.KeyWrite, bool) {
	b := v.reads[key]
	w, written := v.writes[key]
	switch {
	case !written:
		return engine.Check(b), false
	case w.del:
		return d.DeleteOver(b, v.s.Abilities().Tombstones), true
	case w.blind:
		return engine.Fresh(key, driver.Cond{Kind: driver.CondNone}, w.data, 0), true
	case w.unread:
		kw := engine.Fresh(key, driver.Cond{Kind: driver.CondCreate}, w.data, d.Fence()).Replacing(Version{Item: driver.Item{Key: key}})
		kw.Unread = true
		return kw, true
	case w.anew: // created again after a delete: nothing of the stored version's bookkeeping carries over
		return engine.Fresh(key, driver.IfMatch(b.ETag), w.data, d.Fence()).Replacing(b), true
	}
	kw := d.Over(b, w.onto.data)
	kw.Write.Changes = w.onto.changes // sent only with If-Match of b (driver.Write.Payload)
	return kw, true
}

func (v *View) wasRead(key string) bool {
	_, ok := v.reads[key]
	return ok
}

// unreadCreate reports whether key's write is a Create of a key not read,
// and how many keys fn had touched when it called Create.
func (v *View) unreadCreate(key string) (int, bool) {
	w, ok := v.writes[key]
	return w.before, ok && w.unread
}

// committed records it, the version the commit made of key (a check's:
// its ETag only, where the backend gave one a new one), and keeps it in
// the Store's version cache.
func (v *View) committed(key string, it driver.Item) {
	w, written := v.writes[key]
	b := v.reads[key]
	switch {
	case written && w.del:
		b = deletedVersion(key)
	case written:
		b = Version{Item: it, Exists: true, MetaKnown: true, Canonical: w.blind || w.unread || w.onto.canonical, Meta: meta.Parse(it.Meta)}
	case it.ETag != "" && !it.ETag.Superseded():
		b.ETag = it.ETag // a check that gave it a new ETag (tables)
	}
	v.reads[key] = b
	v.s.CacheWritten(engine.Result{Out: []driver.Item{it}}, written && (w.blind || w.unread || w.onto.canonical))
}

// settled records, in a batch member's view, what the batch's commit made
// of key, which the member wrote: it, or (a later member wrote it again)
// a version known by its Superseded ETag only.
func (v *View) settled(key string, it driver.Item) {
	if w := v.writes[key]; w.del {
		v.reads[key] = deletedVersion(key)
		return
	}
	v.reads[key] = Version{Item: driver.Item{Key: key, ETag: it.ETag}, Exists: true, Verified: true}
}

func deletedVersion(key string) Version {
	return Version{Item: driver.Item{Key: key}, Verified: true, MetaKnown: true, Missing: driver.Errorf(driver.ErrNotFound, "%q was deleted by the transaction", key)}
}

// fork is a copy of v for a batch member's fn: the writes it holds are
// marked inherited (an earlier member's).
func (v *View) fork() *View {
	f := &View{s: v.s, reads: maps.Clone(v.reads), writes: make(map[string]write, len(v.writes))}
	if f.reads == nil {
		f.reads = map[string]Version{}
	}
	for k, w := range v.writes {
		w.inherited = true
		f.writes[k] = w
	}
	return f
}

// wrote reports whether v writes key.
func (v *View) wrote(key string) bool {
	_, ok := v.writes[key]
	return ok
}

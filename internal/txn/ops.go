package txn

import (
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/fence"
)

// What fn does through a Store's typed view (the root's Tx[T]), in T's
// encoding: its reads, and the writes it buffers. The typed view encodes
// and decodes; these keep the rules.

// View is the transaction's state for s, made at its first use (when the
// transaction's first use of a Store, of key, may give it another state:
// use); reads says the use reads key (a Create's does not: its key is
// looked up with the other created keys of a batch).
func (h *Handle) View(s Store, key string, reads bool) (*State, *View) {
	h.use(s, key, reads)
	st := h.st
	if v, ok := st.views[s]; ok {
		return st, v
	}
	v := newView(s)
	if st.views == nil {
		st.views = map[Store]*View{}
	}
	st.views[s] = v
	return st, v
}

// Got is what Get found of a key: fn's own write (its value is in
// View.Values), an earlier batch member's write (Data, to decode afresh),
// or the version read (Item).
type Got struct {
	Own       bool
	Inherited bool
	Data      []byte
	Item      driver.Item
}

// Get is what the transaction sees of key (see the root's Tx.Get): its
// own write if it made one, otherwise the version it read the first
// time. A missing document matches ErrNotFound.
func (h *Handle) Get(s Store, key string) (*View, Got, error) {
	st, v := h.View(s, key, true)
	if w, ok := v.writes[key]; ok {
		st.own.touch(key)
		st.own.saw(key)
		if w.del {
			return v, Got{}, driver.Errorf(driver.ErrNotFound, "%q was deleted in this transaction", key)
		}
		return v, Got{Own: !w.inherited, Inherited: w.inherited, Data: w.data}, nil
	}
	b, err := h.version(s, key)
	if err != nil {
		return v, Got{}, err
	}
	if !b.Exists {
		return v, Got{}, b.Missing
	}
	return v, Got{Item: b.Item}, nil
}

// Canonical records that T encodes the version of key read as stored: a
// Put over it need not work that out again.
func (v *View) Canonical(key string) {
	if b, ok := v.reads[key]; ok && !b.Canonical {
		b.Canonical = true
		v.reads[key] = b
	}
}

// BeforePut is Put's first step, before the value is encoded: the
// transaction must be open, and the key read (unless fn created it
// unread: it stays a Create).
func (h *Handle) BeforePut(s Store, key string) error {
	st, v := h.View(s, key, true)
	if err := st.open(); err != nil {
		return err
	}
	if prev, ok := v.writes[key]; ok && prev.unread {
		return nil
	}
	_, err := h.version(s, key)
	return err
}

// Put buffers a write of data under key (after BeforePut): a create if
// the transaction found it missing, otherwise a replace conditioned on
// the version it read.
func (h *Handle) Put(s Store, key string, data []byte) (*View, error) {
	st, v := h.View(s, key, true)
	prev, had := v.writes[key]
	if had && prev.unread { // over a Create: still one
		v.writes[key] = write{data: data, unread: true, before: prev.before, whole: true, onto: whole(data)}
		st.own.saw(key)
		st.own.wrote(key)
		return v, nil
	}
	next := write{data: data, whole: had && (prev.del || prev.whole), anew: had && (prev.del || prev.anew)}
	if next.whole {
		next.onto = whole(data) // over a delete or an Upsert: T alone
	} else { // the change, to the document read
		doc, changes, canonical, err := s.Apply(v.reads[key], data)
		if err != nil {
			return v, err
		}
		next.onto = written{data: doc, changes: changes, canonical: canonical}
	}
	v.writes[key] = next
	st.own.wrote(key)
	return v, nil
}

// BeforeCreate is Create's first step, before the value is encoded: the
// transaction must be open; a key it knows (or any, fenced) is Put's
// (put), refused with ErrExists where it exists; any other is checked
// and joins the transaction.
func (h *Handle) BeforeCreate(s Store, key string) (put bool, err error) {
	st, v := h.View(s, key, false)
	if err := st.open(); err != nil {
		return false, err
	}
	if _, fenced := fence.From(st.ctx); fenced || h.knows(s, key) {
		w, wrote := v.writes[key]
		if !wrote {
			b, err := h.version(s, key)
			if err != nil {
				return false, err
			}
			wrote = b.Exists
		}
		if wrote && !w.del {
			st.own.saw(key)
			return false, driver.Errorf(driver.ErrExists, "Transact: %q exists", key)
		}
		return true, nil
	}
	if err := s.CheckKey(key); err != nil {
		return false, err
	}
	return false, st.join(s, key)
}

// Create buffers the create of data under key, read nothing of
// (after BeforeCreate): conditioned on the key's absence. fresh says the
// key cannot exist yet, so that a batch does not look it up.
func (h *Handle) Create(s Store, key string, data []byte, fresh bool) *View {
	st, v := h.View(s, key, false)
	v.writes[key] = write{data: data, unread: true, fresh: fresh, before: len(st.ownKeys()), whole: true, onto: whole(data)}
	st.order = append(st.order, touch{v, key})
	st.own.touch(key)
	st.own.wrote(key)
	return v
}

// knows reports whether the transaction read or wrote key (in a batch, it
// or an earlier member), or its batch read key ahead.
func (h *Handle) knows(s Store, key string) bool {
	st, v := h.View(s, key, true)
	_, read := v.reads[key]
	_, wrote := v.writes[key]
	_, ahead := st.ahead[key]
	return read || wrote || ahead
}

// BeforeUpsert is Upsert's first step, before the value is encoded: the
// transaction must be open; a key it has read, or any under a fence, is
// Put's (put); any other is checked and joins the transaction.
func (h *Handle) BeforeUpsert(s Store, key string) (put bool, err error) {
	st, _ := h.View(s, key, true)
	if err := st.open(); err != nil {
		return false, err
	}
	if _, fenced := fence.From(st.ctx); fenced || h.mine(s, key) {
		return true, nil
	}
	if err := s.CheckKey(key); err != nil {
		return false, err
	}
	return false, st.join(s, key)
}

// Upsert buffers a write of data under key with no condition (after
// BeforeUpsert): nothing is read for it, and it writes T alone.
func (h *Handle) Upsert(s Store, key string, data []byte) *View {
	st, v := h.View(s, key, true)
	w := write{data: data, whole: true, onto: whole(data)}
	prev, had := v.writes[key]
	_, read := v.reads[key] // in a batch: by an earlier transaction, whose check the write keeps
	switch {
	case !had && !read:
		w.blind = true
		st.order = append(st.order, touch{v, key})
	case had && prev.blind:
		w.blind = true // over an earlier transaction's blind Upsert: still nothing read
	case had && prev.unread:
		w.unread, w.before = true, prev.before // over an earlier Create: still conditioned on absence
	default:
		w.anew = had && (prev.del || prev.anew) // T alone, conditioned as the key's action is
	}
	v.writes[key] = w
	st.own.touch(key)
	st.own.wrote(key)
	return v
}

// mine reports whether the transaction read or wrote key (in a batch of
// transactions: this one, not an earlier one of the batch).
func (h *Handle) mine(s Store, key string) bool {
	st, _ := h.View(s, key, true)
	if st.own != nil {
		return st.own.seen[key]
	}
	return h.knows(s, key)
}

// Delete buffers the delete of key, conditioned on the version the
// transaction read (see the root's Tx.Delete).
func (h *Handle) Delete(s Store, key string) error {
	st, v := h.View(s, key, true)
	if err := st.open(); err != nil {
		return err
	}
	b, err := h.version(s, key)
	if err != nil {
		return err
	}
	if w, ok := v.writes[key]; ok && w.unread && b.Exists {
		return driver.Errorf(driver.ErrExists, "Transact: %q exists", key) // the Create's key: created by another
	}
	if w, ok := v.writes[key]; ok && !w.del && !b.Exists {
		delete(v.writes, key) // created here: the delete cancels it
		st.own.wrote(key)
		return nil
	}
	if w, ok := v.writes[key]; !b.Exists || ok && w.del {
		return driver.Errorf(driver.ErrNotFound, "%q", key)
	}
	v.writes[key] = write{del: true}
	st.own.wrote(key)
	return nil
}

// ETag is the ETag of the version of key the transaction read (see the
// root's Tx.ETag).
func (h *Handle) ETag(s Store, key string) (driver.ETag, error) {
	b, err := h.version(s, key)
	st, v := h.View(s, key, true)
	if w, ok := v.writes[key]; err == nil && st.own.pending(key) && !st.done {
		// An earlier transaction of the batch wrote it (group.go): the
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
func (h *Handle) version(s Store, key string) (Version, error) {
	st, v := h.View(s, key, true)
	st.own.saw(key)
	if b, ok := v.reads[key]; ok {
		st.own.touch(key)
		return b, nil
	}
	if err := s.CheckKey(key); err != nil {
		return Version{}, err
	}
	if err := st.join(s, key); err != nil {
		return Version{}, err
	}
	if err := st.ctx.Err(); err != nil {
		return Version{}, err
	}
	b, ok := st.ahead[key] // read ahead by a batch
	var c []Version
	if !ok && st.copies {
		c = s.Cached(st.ctx, key)
	}
	if c != nil {
		b = c[0] // checked by the commit, by its ETag
	} else if !ok {
		var err error
		if b, err = st.readNow(s, key); err != nil {
			return Version{}, err
		}
	}
	v.reads[key] = b
	st.own.touch(key)
	w, touched := v.writes[key]
	switch {
	case touched && w.unread: // a Create's: still conditioned on absence
	case touched && w.blind:
		// An Upsert touched it already: now that fn has read it, the
		// write is conditioned on the version read, as a Put's.
		w.blind = false
		w.onto = whole(w.data) // an Upsert writes T alone
		v.writes[key] = w
	case !touched:
		st.order = append(st.order, touch{v, key})
	}
	return b, nil
}

// Written yields the documents fn put through s's view, in the order it
// first touched their keys (in a batch: the member's own), with the
// versions the commit made: key, T's encoding of the value, the version.
func (h *Handle) Written(s Store, yield func(v *View, key string, data []byte, it driver.Item)) {
	st, v := h.View(s, "", true)
	for _, key := range st.ownKeys() {
		w, ok := v.writes[key]
		if st.owner[key] != s || !ok || w.del || w.inherited {
			continue
		}
		yield(v, key, w.data, st.made[key])
	}
}

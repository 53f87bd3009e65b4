package etagstore

// This file is the stored entity: what a stored document carries beside
// its value of type T. The codec (codec.go) turns T into the bytes a
// backend stores; beside them every stored document carries the Store's
// bookkeeping (recent write ids, lineage, fencing token: internal/meta) in
// driver.Item.Meta, which neither T nor the codec sees, and may hold
// members T does not know (written by a newer T or another program),
// which every write that starts from a read keeps.

import (
	"reflect"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/engine"
	"github.com/etagstore/etagstore/internal/members"
	"github.com/etagstore/etagstore/internal/meta"
)

// Extra is the members of a stored document that a Doc's T does not know,
// kept so that writing the Doc back does not erase them, and the
// bookkeeping of the version they came from. The zero Extra holds none.
// Equal (which go-cmp uses) compares the members; == compares the
// bookkeeping too, which is the same for every Doc of one version.
type Extra struct {
	raw  string // the members, as members.Unknown returns them
	meta string // the version's bookkeeping (driver.Item.Meta); "" when not known
}

// Empty reports whether e holds no members.
func (e Extra) Empty() bool { return len(e.raw) == 0 }

// Names returns the names of the members e holds (on tables, a typed
// property's type annotation is a member of its own, "Name@odata.type").
func (e Extra) Names() []string { return members.Names([]byte(e.raw)) }

// Equal reports whether e and o hold the same members.
func (e Extra) Equal(o Extra) bool { return e.raw == o.raw }

// extraOf is the Extra of a stored document under a codec whose member
// names for T are known (nil: every member is T's).
func extraOf(it driver.Item, known members.Known) Extra {
	return Extra{raw: string(members.Unknown(it.Data, known)), meta: it.Meta}
}

// knownMembers returns the member names codec stores for type t, or nil
// when codec cannot tell (see driver.Codec).
func knownMembers(codec Codec, t reflect.Type) members.Known {
	m, ok := codec.(interface {
		Members(reflect.Type) map[string]bool
	})
	if !ok {
		return members.Known{}
	}
	f, folds := codec.(interface{ FoldsNames() bool })
	return members.Known{Names: m.Members(t), Fold: folds && f.FoldsNames()}
}

// version is a version of a key a write starts from (see package
// internal/engine).
type version = engine.Version

// readVersion is the version a read of key found (it, or err matching
// ErrNotFound).
func (c *core) readVersion(key string, it driver.Item, err error) version {
	if err != nil {
		return version{Item: driver.Item{Key: key}, Verified: true, MetaKnown: true, Missing: err}
	}
	return c.stored(it, true)
}

// stored is the version it, read (verified) or known from a write.
func (c *core) stored(it driver.Item, verified bool) version {
	v := c.storedPlain(it, verified)
	v.Meta = meta.Parse(it.Meta)
	v.Extra = members.Unknown(it.Data, c.known)
	v.Canonical = v.Canonical && v.Extra == nil
	return v
}

// storedPlain is stored for an it known to hold no member T does not
// know, without looking, and without its meta (set it).
func (c *core) storedPlain(it driver.Item, verified bool) version {
	return version{Item: it, Exists: true, Verified: verified, MetaKnown: true, Canonical: c.verbatim}
}

// withExtra is data, a new encoding of b's document, with the members of b
// that T does not know added back (nothing a write did not touch is lost).
func withExtra(b version, data []byte) []byte {
	if !b.Exists {
		return data
	}
	return members.Add(data, b.Extra)
}

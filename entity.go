package etagstore

// This file is the stored entity: what a stored document carries beside
// its value of type T. The codec (codec.go) turns T into the bytes a
// backend stores; beside them every stored document carries the Store's
// bookkeeping (recent write ids, lineage, fencing token: internal/meta) in
// driver.Item.Meta, which neither T nor the codec sees, and may hold
// members T does not know (written by a newer T or another program),
// which every write that starts from a read keeps.

import (
	"bytes"
	"slices"
	"strings"
	"unsafe"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/engine"
	"github.com/etagstore/etagstore/internal/members"
	"github.com/etagstore/etagstore/internal/meta"
)

// Extra is what a Doc carries so that writing it back applies its change
// to the document it was read from: that document, when it holds more
// than T encodes (members of a newer version of T or of another program,
// at any depth), and the bookkeeping of its version. The zero Extra holds
// none: a Doc with it writes T alone. Extra is opaque and comparable;
// Equal (which go-cmp uses) compares the documents held, == the
// bookkeeping too, which is the same for every Doc of one version.
type Extra struct {
	doc     string // the stored document, when it holds more than T encodes; "" otherwise
	etag    ETag   // the version doc is
	meta    string // the version's bookkeeping (driver.Item.Meta); "" when not known
	unknown string // doc's top-level members T does not know (Names)
	beyond  bool   // doc holds a member T does not know, at some depth
	drop    string // the members Without drops, each name ended by NUL
	base    string // T's encoding of the version's value; "" for a Doc built by hand
}

// at reports whether e holds the stored document of the version etag
// names (the Doc's read, not since replaced): stored.
func (e Extra) at(etag ETag) bool {
	return e.etag == etag && etag != ETagAny && !etag.Superseded() && e.stored() != ""
}

// stored is the document of e's version as stored, when e holds it.
func (e Extra) stored() string {
	if e.doc != "" {
		return e.doc
	}
	return e.base
}

// Empty reports whether e holds no member T does not know, at any depth
// (on tables: no property T does not store).
func (e Extra) Empty() bool { return !e.beyond }

// Names returns the names of the top-level members e holds that T does
// not know (on tables, a typed property's type annotation is a member of
// its own, "Name@odata.type").
func (e Extra) Names() []string { return members.Names([]byte(e.unknown)) }

// Equal reports whether e and o hold the same document.
func (e Extra) Equal(o Extra) bool { return e.doc == o.doc && e.drop == o.drop }

// Without returns e without the top-level member name, which T does not
// know (on tables, the property name and its type annotation): a Replace
// of the Doc then removes it from the stored document and keeps the rest.
// A name e does not hold changes nothing.
func (e Extra) Without(name string) Extra {
	if e.doc == "" || !slices.Contains(members.Names([]byte(e.unknown)), name) {
		return e
	}
	e.drop += name + "\x00"
	e.unknown = string(members.Without([]byte("{"+e.unknown+"}"), name))
	e.unknown = e.unknown[1 : len(e.unknown)-1]
	return e
}

// dropped returns baseline, T's encoding of e's document, with the
// members Without dropped added as they are stored: to the merge they
// are then members T had and removed (see Store.onto).
func (e Extra) dropped(baseline []byte) []byte {
	for _, name := range strings.Split(strings.TrimSuffix(e.drop, "\x00"), "\x00") {
		baseline = members.Add(baseline, members.Only([]byte(e.doc), name))
	}
	return baseline
}

// extraOf is the Extra of it, a stored document, whose value T encodes as
// baseline (nil: the same as stored). With a codec that merges it keeps
// baseline, so that a write of the Doc over a later version (ETagAny)
// applies only the Doc's change to it (see Store.changeOnto).
func (c *core) extraOf(it driver.Item, baseline []byte) Extra {
	if !c.merges {
		return Extra{meta: it.Meta}
	}
	if baseline == nil || bytes.Equal(it.Data, baseline) {
		return Extra{etag: it.ETag, meta: it.Meta, base: frozen(it.Data)}
	}
	return Extra{doc: string(it.Data), etag: it.ETag, meta: it.Meta, base: frozen(baseline),
		unknown: string(members.Unknown(it.Data, c.known)), beyond: members.Beyond(it.Data, baseline)}
}

// superseded is the Extra of a state a group-commit batch's member left
// (data, T's encoding of it) that was never stored as a version of its
// own (etag, a superseded ETag): a write of its Doc over a later version
// (ETagAny) applies only its own change, from that state. Nothing else
// of e applies to it.
func (e Extra) superseded(etag driver.ETag, data []byte) Extra {
	if e.base == "" {
		return Extra{meta: e.meta} // a codec that cannot merge
	}
	return Extra{etag: etag, meta: e.meta, base: frozen(data)}
}

// frozen is b as a string, sharing its bytes: an encoding a Store wrote
// or read is read-only once made, as a string is (see driver.Item), so
// keeping it in a Doc costs no copy.
func frozen(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
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
	return c.stored(it, true, false)
}

// stored is the version it, read (verified) or known from a write;
// canonical says its Data is exactly T's encoding of its value.
// An expired document's version reads as missing (core.judged).
func (c *core) stored(it driver.Item, verified, canonical bool) version {
	return c.life.judged(version{Item: it, Exists: true, Verified: verified, MetaKnown: true, Canonical: canonical, Meta: meta.Parse(it.Meta)})
}

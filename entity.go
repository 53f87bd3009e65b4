package etagstore

// This file is the stored entity: what a stored document carries beside
// its value of type T. The codec (codec.go) turns T into the bytes a
// backend stores; beside them every stored document carries the Store's
// bookkeeping (recent write ids, lineage, fencing token: internal/meta) in
// driver.Item.Meta, which neither T nor the codec sees, and may hold
// members T does not know (written by a newer T or another program),
// which every write that starts from a read keeps.

import (
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/engine"
	"github.com/etagstore/etagstore/internal/extra"
)

// Extra is what a Doc carries so that writing it back applies its change
// to the document it was read from: that document, when it holds more
// than T encodes (members of a newer version of T or of another program,
// at any depth), and the bookkeeping of its version. The zero Extra holds
// none: a Doc with it writes T alone. Extra is opaque and comparable;
// Equal (which go-cmp uses) compares the documents held, == the
// bookkeeping too, which is the same for every Doc of one version.
type Extra struct{ x extra.Extra }

// Empty reports whether e holds no member T does not know, at any depth
// (on tables: no property T does not store).
func (e Extra) Empty() bool { return !e.x.Beyond }

// Names returns the names of the top-level members e holds that T does
// not know (on tables, a typed property's type annotation is a member of
// its own, "Name@odata.type").
func (e Extra) Names() []string { return e.x.Names() }

// Equal reports whether e and o hold the same document.
func (e Extra) Equal(o Extra) bool { return e.x.Equal(o.x) }

// Without returns e without the top-level member name, which T does not
// know (on tables, the property name and its type annotation): a Replace
// of the Doc then removes it from the stored document and keeps the rest.
// A name e does not hold changes nothing.
func (e Extra) Without(name string) Extra { return Extra{e.x.Without(name)} }

// extraOf is the Extra of it, a stored document, whose value T encodes as
// baseline (nil: the same as stored; see extra.Of).
func (s *Store[T]) extraOf(it driver.Item, baseline []byte) Extra {
	return Extra{extra.Of(it, baseline, s.core.Merges, s.core.Known)}
}

// version is a version of a key a write starts from, and keyWrite one
// key's write (see package internal/engine).
type (
	version  = engine.Version
	keyWrite = engine.KeyWrite
)

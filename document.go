package etagstore

import (
	"time"

	"github.com/etagstore/etagstore/driver"
)

// ETag is an opaque version token. Compare ETags only for equality: table
// ETags are weak (W/"datetime'…'") and blob ETags are quoted hex.
type ETag = driver.ETag

// ETagAny matches any existing version (If-Match: *). Passing it is the
// explicit last-writer-wins opt-out.
const ETagAny = driver.ETagAny

// Doc is a document with its key and the ETag of the version it came from.
//
// A Doc a write returns always has an ETag. When its value was never
// stored as a version of its own — an Update that was not the last of its
// group-commit batch (its state was committed together with the mutations
// that followed it), a document of a Transact that a later transaction of
// its batch wrote again, or a write whose response was lost, found committed
// with later writes after it — the ETag is a superseded one
// (ETag.Superseded reports it): it names that state and matches no stored
// version, so a Replace, Delete or Save with it is answered as any stale
// ETag is, a *ConflictError holding the current document (matching
// ErrConflict), and nothing it did not see is overwritten; Get gives the
// current version to go on from. Only a Doc built by hand has an
// empty ETag, which Replace and Delete refuse with ErrETagRequired.
//
// Extra is what a Doc carries so that a write of it changes only what its
// Value changed: T's encoding of the value of its version, the document
// that version is when it holds more than T encodes (members written by a
// newer version of T during a deploy, or by another program, at any
// depth), and the version's bookkeeping. Replace of a Doc that a read or
// write returned (Get, List, Page, Create, Replace, Upsert, Update, Save,
// Transact) writes the difference between T's encoding of the value read
// and of d.Value onto that document, as every write that starts from a
// read does (see "Writes that start from a read" in docs/rules.md); with
// ETagAny, onto the version stored when it writes. Create and Upsert of a
// value, and Replace of a Doc built by hand (a zero Extra), write T alone:
// that is also how to drop what T does not know on purpose (d.Extra =
// etagstore.Extra{}, then Replace); d.Extra.Without(name) drops one
// member. The bookkeeping (write ids, lineage, fencing token) lets a Save
// from the Doc continue that version's history without reading it first.
type Doc[T any] struct {
	Key   string
	Value T
	ETag  ETag
	Extra Extra
	// Expires is when the document expires, by the Store's Expiry index,
	// as the read or write that returned the Doc saw its value; the zero
	// time without one, or when the value never expires. A read never
	// returns a Doc whose Expires has passed by the Store's clock.
	Expires time.Time
}

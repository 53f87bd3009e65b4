package etagstore

import "github.com/etagstore/etagstore/driver"

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
// that followed it), or a write whose response was lost, found committed
// with later writes after it — the ETag is a superseded one
// (ETag.Superseded reports it): it names that state and matches no stored
// version, so a Replace, Delete or Save with it is answered as any stale
// ETag is, a *ConflictError holding the current document (matching
// ErrConflict), and nothing it did not see is overwritten; Get gives the
// current version to go on from. Only a Doc built by hand has an
// empty ETag, which Replace and Delete refuse with ErrETagRequired.
//
// Extra holds what the stored document holds beyond T: members T does not
// know (written by a newer version of T during a deploy, or by another
// program), each with its value and, on tables, its type. Every write
// that starts from a read keeps them: Update, Save, Transact, table
// merges, and Replace of a Doc that Get, List, Page, Update, Save or
// Transact returned, which carries them here. Create, Upsert and Replace of
// a Doc built by hand (a zero Extra) write T alone: that is also how to
// drop unknown members on purpose, for the migration that removes a field
// (d.Extra = etagstore.Extra{}, then Replace). Extra also carries the
// bookkeeping of the version the Doc came from (write ids, lineage,
// fencing token), so that a Save from the Doc continues that version's
// history without reading it first.
type Doc[T any] struct {
	Key   string
	Value T
	ETag  ETag
	Extra Extra
}

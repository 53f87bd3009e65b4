package etagstore

import (
	"context"
	"errors"
	"iter"
)

// Backend is the storage contract every backend implements: keys, encoded
// bytes, ETags and conditions. It knows nothing of the document type T; the
// typed API lives in [Store].
//
// A Backend must be safe for concurrent use by multiple goroutines.
//
// Failures are reported with the package's sentinel errors so callers can use
// errors.Is; a backend maps its service's error codes to them in exactly one
// place:
//
//   - ErrNotFound: the key does not exist (HTTP 404).
//   - ErrExists: a [CondCreate] write found the key present (HTTP 409, or 412
//     on If-None-Match: *).
//   - ErrConflict: a [CondIfMatch] write or delete found a different ETag
//     (HTTP 412). The backend returns the bare sentinel (or an error wrapping
//     it); the Store builds the typed [ConflictError].
//   - ErrInvalidKey: ValidateKey refused the key. Nothing was sent.
//   - ErrTooLarge: the document exceeds the backend's limits. Nothing was sent.
//   - ErrETagRequired: an IfMatch condition with an empty ETag. Nothing was
//     sent. (The Store checks this first; backends check again.)
//
// Any other error (transport, throttling after the SDK's own retries, auth)
// is returned wrapped and unclassified: the Store treats a write or delete
// that failed so as possibly applied. A backend that can see that a 412,
// 409 or 404 answered a retry of a request whose earlier try got no
// response marks the error with ErrAmbiguous as well: that answer may be to
// its own success.
type Backend interface {
	// ValidateKey reports whether key can be stored by this backend; it
	// returns an error matching ErrInvalidKey when it cannot. It sends no
	// request. The Store calls it before every operation.
	ValidateKey(key string) error

	// Read returns the item stored under key with its current ETag, or an
	// error matching ErrNotFound.
	Read(ctx context.Context, key string) (Item, error)

	// Write stores w.Data and w.Meta under key if w.Cond holds and returns
	// the new ETag, which differs from every ETag the key had before.
	//
	//   - CondIfMatch with ETagAny: writes if the key exists, else ErrNotFound.
	//   - CondIfMatch with an ETag: writes if the current ETag equals it; a
	//     different ETag is ErrConflict; a missing key is ErrNotFound or
	//     ErrConflict (Azure blobs answer 412 for both; the Store tells them
	//     apart by reading).
	//   - CondCreate: writes if the key does not exist, else ErrExists.
	//   - CondNone: writes unconditionally (insert or replace).
	Write(ctx context.Context, key string, w Write) (ETag, error)

	// Delete removes key if cond holds. cond.Kind must be CondIfMatch (with
	// an ETag or ETagAny): a missing key is ErrNotFound, a different ETag is
	// ErrConflict (or, as for Write, ErrConflict when the key is gone).
	Delete(ctx context.Context, key string, cond Cond) error

	// List yields the items whose key starts with prefix, in ascending key
	// order by UTF-16 code units (the order of Azure's tables and blob
	// listings; it puts characters above U+FFFF before U+E000–U+FFFF). A
	// failure is yielded once as the error, after which iteration stops.
	List(ctx context.Context, prefix string) iter.Seq2[Item, error]

	// ListPage returns, in List's order, the first limit items whose key
	// starts with prefix and sorts after the key after ("" means from the
	// start), and whether more such items existed when it looked. It
	// returns fewer than limit items only when the listing ends, or when
	// items were deleted while the page was read (it leaves them out, as
	// List does); it loops over service pages to fill the page, and more
	// is true only after a full page. limit is between 1 and MaxPageLimit
	// (the Store checks). after is "" or a key a ListPage of the same
	// prefix returned (the Store checks that it starts with prefix and
	// passes ValidateKey); the item may be gone since. The bound is
	// exclusive and in List's order, never a continuation token of the
	// service: that keeps pages exact while keys come and go. Errors are
	// classified as for List.
	ListPage(ctx context.Context, prefix, after string, limit int) (items []Item, more bool, err error)
}

// Verbatim is implemented by a Backend whose Read returns Item.Data exactly
// as written (memstore, blobstore). The Store then tells an unchanged
// document by its bytes alone; for other backends (tablestore hands back
// entity properties in its own layout) it encodes the value read once more
// before mutating it.
type Verbatim interface {
	VerbatimData() bool
}

// Revalidator is implemented by a Backend that can read a document only if
// it changed (blobstore: If-None-Match, answered 304 with no body). With
// Options.CacheSize set, Store.Get then revalidates its cached copy instead
// of downloading the document again. changed is false, with no Item, when
// etag is still current.
type Revalidator interface {
	ReadIfChanged(ctx context.Context, key string, etag ETag) (it Item, changed bool, err error)
}

// ErrAmbiguous marks a backend's write or delete error after which the
// request may or may not have been applied (see Backend). It is wrapped
// together with the sentinel that classifies the answer.
var ErrAmbiguous = errors.New("etagstore: the request may have been applied")

// CodecProvider is implemented by a Backend that prefers a particular
// encoding of documents (the table backend maps struct fields to typed
// entity properties). [New] uses it when Options.Codec is nil.
type CodecProvider interface {
	Codec() Codec
}

// Item is one stored document as a backend sees it.
type Item struct {
	Key  string
	Data []byte // the encoded document, as produced by the Store's Codec
	Meta string // the Store's bookkeeping (write ids), stored verbatim
	ETag ETag
}

// CondKind says which precondition a write or delete carries.
type CondKind uint8

const (
	// CondNone writes unconditionally: Azure's insert-or-replace. It is the
	// documented last-writer-wins bypass and is only used by Upsert.
	CondNone CondKind = iota
	// CondIfMatch requires the stored ETag to equal Cond.ETag (If-Match).
	// Cond.ETag may be ETagAny ("*"), which matches any existing document.
	CondIfMatch
	// CondCreate requires that the key does not exist (If-None-Match: *,
	// or Insert Entity on tables).
	CondCreate
)

// String returns the condition's name.
func (k CondKind) String() string {
	switch k {
	case CondNone:
		return "none"
	case CondIfMatch:
		return "if-match"
	case CondCreate:
		return "create"
	}
	return "invalid"
}

// Cond is the precondition of a write or delete.
type Cond struct {
	Kind CondKind
	ETag ETag // with CondIfMatch: the ETag that must be current, or ETagAny
}

// IfMatch returns the condition "the stored ETag equals etag".
func IfMatch(etag ETag) Cond { return Cond{Kind: CondIfMatch, ETag: etag} }

// Check reports whether the condition is well-formed: an IfMatch without an
// ETag matches ErrETagRequired. Backends call it before sending anything.
func (c Cond) Check() error {
	switch c.Kind {
	case CondNone, CondCreate:
		return nil
	case CondIfMatch:
		if c.ETag == "" {
			return ErrETagRequired
		}
		return nil
	}
	return errorf(ErrInvalidInput, "unknown condition kind %d", c.Kind)
}

// Write is one write request to a Backend.
type Write struct {
	Data []byte
	Cond Cond
	// Meta is stored with the document and returned verbatim by Read and
	// List. It holds printable ASCII only (it may travel as an HTTP header)
	// and is at most MaxMetaLen bytes.
	Meta string
}

// MaxMetaLen bounds Item.Meta so that every backend can keep it in one
// property or metadata header.
const MaxMetaLen = 1024

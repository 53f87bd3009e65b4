// Package driver is the contract between etagstore and its backends: the
// Backend interface, the items, writes and conditions a backend handles,
// the abilities it declares, the key rules and order, and the errors it
// reports. Application code should use package etagstore; this package is
// for writing a backend.
package driver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// ETag is an opaque version token. Compare ETags only for equality: table
// ETags are weak (W/"datetime'…'") and blob ETags are quoted hex.
type ETag string

// ETagAny matches any existing version (If-Match: *). Passing it is the
// explicit last-writer-wins opt-out.
const ETagAny ETag = "*"

// Sentinel errors. Package etagstore re-exports them and documents what
// each means to a user (etagstore.ErrNotFound and the rest); what each
// means to a backend is listed under Backend. A backend wraps the one that
// classifies a failure, so that errors.Is matches it.
var (
	ErrNotFound        = errors.New("etagstore: not found")
	ErrStorageNotFound = errors.New("etagstore: storage not found")
	ErrExists          = errors.New("etagstore: already exists")
	ErrConflict        = errors.New("etagstore: conflict")
	ErrETagRequired    = errors.New("etagstore: etag required")
	ErrInvalidKey      = errors.New("etagstore: invalid key")
	ErrTooLarge        = errors.New("etagstore: too large")
	ErrInvalidInput    = errors.New("etagstore: invalid input")
	ErrFenced          = errors.New("etagstore: fenced")
	ErrLocked          = errors.New("etagstore: locked")
	ErrLockLost        = errors.New("etagstore: lock lost")
	ErrOutcomeUnknown  = errors.New("etagstore: outcome unknown")
	ErrUnavailable     = errors.New("etagstore: unavailable")
)

// Backend is the storage contract every backend implements: keys, encoded
// bytes, ETags and conditions. It knows nothing of the document type T; the
// typed API lives in etagstore.Store.
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
//
// A backend calls Sent once for every request it sends to its service,
// with the error it made of the answer, so that etagstore.requests counts
// them (see Sent).
type Backend interface {
	// ValidateKey reports whether key can be stored by this backend, by its
	// own rules beyond CheckKey's (which the Store has applied); it returns
	// an error matching ErrInvalidKey when it cannot. It sends no request.
	// The Store calls it once before every operation: Read, Write, Delete
	// and List get keys that passed, and need not check them again.
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

	// Delete removes key if its ETag is etag (If-Match; ETagAny matches any
	// version): a missing key is ErrNotFound, a different ETag is
	// ErrConflict (or, as for Write, ErrConflict when the key is gone).
	// etag is never empty (the Store refuses that with ErrETagRequired).
	Delete(ctx context.Context, key string, etag ETag) error

	// List yields the items whose key starts with prefix, in ascending
	// key order: the backend's declared order (Abilities.KeyOrder), which
	// is CompareKeys, by UTF-16 code units, unless the backend declares
	// its own. A failure is yielded once as the error, after which
	// iteration stops.
	List(ctx context.Context, prefix string) iter.Seq2[Item, error]

	// ListPage returns, in List's order, the first limit items whose key
	// starts with prefix and sorts after the key after in that order (""
	// means from the start), and whether more such items existed when it
	// looked. It returns fewer than limit items only when the listing
	// ends, or when items were deleted while the page was read (it leaves
	// them out, as List does); it loops over service pages to fill the
	// page, and more is true only after a full page. limit is between 1
	// and MaxPageLimit (the Store checks). after is "" or a key a ListPage
	// of the same prefix returned (the Store checks that it starts with
	// prefix and passes ValidateKey); the item may be gone since. The
	// bound is exclusive and in List's order, never a continuation token
	// of the service: that keeps pages exact while keys come and go.
	// Errors are classified as for List.
	ListPage(ctx context.Context, prefix, after string, limit int) (items []Item, more bool, err error)

	// Abilities declares what the backend can do beyond this contract.
	Abilities() Abilities

	// As sets target, a pointer to a backend type (such as
	// **tablestore.Backend), to the backend under any wrappers and reports
	// whether it could: how a backend's extras (table queries and merges,
	// conditional blob reads) reach it through a wrapper that embeds it.
	As(target any) bool
}

// MaxPageLimit is the largest page ListPage is asked for (the largest blob
// listing page).
const MaxPageLimit = 5000

// ErrAmbiguous marks a backend's write or delete error after which the
// request may or may not have been applied (see Backend). It is wrapped
// together with the sentinel that classifies the answer.
var ErrAmbiguous = errors.New("etagstore: the request may have been applied")

// ErrNotApplied marks a backend's error that proves the request was not
// applied and may be sent again as it is: the service refused it before
// processing it (Azure's 503 ServerBusy, its throttling answer). The Store
// retries such a write with backoff instead of treating it as a possibly
// applied one. It matches ErrUnavailable: a request refused so until the
// caller's time ran out fails with that sentinel.
var ErrNotApplied = fmt.Errorf("%w: the service refused the request without applying it (throttled)", ErrUnavailable)

// Abilities is what a backend can do beyond the contract, declared by its
// Abilities method: a wrapper that embeds a Backend forwards it, so no
// ability is lost to a logging or fault-injecting wrapper.
type Abilities struct {
	// Verbatim: Read returns Item.Data exactly as written (memstore,
	// blobstore). It is a declaration for tools and tests: a Store encodes
	// a value it read once more on every backend, to tell the change it
	// writes, since another writer (an older T) may have written the
	// bytes it reads.
	Verbatim bool
	// Codec is the encoding the backend prefers (tablestore: typed entity
	// properties); nil means JSON. A Store uses it when Options.Codec is
	// nil.
	Codec Codec
	// ReadIfChanged, when set, reads key only if its ETag is no longer etag
	// (blobstore: If-None-Match, answered 304 with no body); changed is
	// false, with no Item, when etag is still current. With the version
	// cache on, Store.Get revalidates its copy with it.
	ReadIfChanged func(ctx context.Context, key string, etag ETag) (it Item, changed bool, err error)
	// ReadMany, when set, reads keys in as few requests as it can, so
	// that a batch of transactions learns in one request which of the
	// keys it is about to create, or read, exist. It returns one Item per
	// key, in the order of keys (a key given twice, twice): a key's Item
	// is what Read returns for it, or, for a missing key, one with Key
	// set, no ETag and nil Data; a missing key is no error. No keys: no
	// Items, and nothing is sent. Callers pass keys of one commit scope
	// (one partition), which ValidateKey accepts, or index entries' keys
	// (Entries.Key): another key fails the call as Read would
	// (ErrInvalidKey), before anything is sent. Any
	// other failure is classified as Read's, and no Items are returned.
	// memstore reads all keys at one instant; tablestore sends one query
	// per partition and up to 14 keys (the service's limit of 15
	// comparisons in a filter), in parallel, and keys of different queries
	// are read at different instants.
	ReadMany func(ctx context.Context, keys []string) ([]Item, error)
	// MaxKeyLen is the longest key, in bytes, ValidateKey may accept, when
	// that is more than 8 KiB (page tokens carry a key and are bounded by
	// it); 0 means at most 8 KiB.
	MaxKeyLen int
	// Merge: Write accepts ModeMerge (tablestore: Merge Entity). A
	// backend without it refuses ModeMerge with ErrInvalidInput.
	Merge bool
	// Tombstones: Write and Commit accept ModeTombstone, so that a fenced
	// delete keeps the key's fencing token (etagstore.WithFence). A
	// backend without it refuses ModeTombstone with ErrInvalidInput; a
	// Store over it deletes plainly, and the token goes with the key.
	Tombstones bool
	// Commit, when set, applies several writes and deletes atomically: all
	// of them or none (tablestore: an entity group transaction). It returns
	// the ETag of each action's new version where the service tells it
	// ("" otherwise, and for a delete). A refusal returns an *ActionError
	// naming the action whose condition failed, wrapping its sentinel.
	// Errors that may hide an applied request are classified as for Write.
	Commit func(ctx context.Context, actions []Action) ([]ETag, error)
	// CommitScope names what the backend commits in: backends whose
	// CommitScope is the same non-empty string read every key as the same
	// document and accept each other's actions in Commit, so that Stores
	// over them share one transaction (etagstore.Transact). tablestore:
	// its *aztables.Client and Options.Partition (two clients of one
	// table do not join: the SDK says no URL to compare). "" means the
	// backend instance alone (a Store over the same instance always
	// joins).
	CommitScope string
	// PureChecks: Commit's Check actions write nothing, and a Check of a
	// key found missing (Cond CondCreate) requires it to be missing at the
	// commit (memstore). A transaction's reads, absences included, are
	// then validated at one instant, by a Commit of checks alone; without
	// it they are read again, which cannot prove that a key missing at two
	// instants was missing between them, and on tables a missing key is
	// not checked at commit at all.
	PureChecks bool
	// CheckCommit reports, sending nothing, whether actions may go in one
	// Commit (one partition, at most so many actions); a refusal matches
	// ErrInvalidInput, in an *ActionError when one action is at fault. The
	// Store calls it once on every batch before anything is sent; Commit
	// need not check again.
	CheckCommit func(actions []Action) error
	// Versions, when set, lists the documents whose keys start with
	// prefix, as List does, without their data: each Item's Key, ETag,
	// Meta and Expires alone, in one listing that reads no document
	// (blobstore: List Blobs with their metadata). The sweeper of a Store
	// that expires documents over a backend without index entries uses
	// it to read only the documents due. An error is yielded once and
	// ends the sequence.
	Versions func(ctx context.Context, prefix string) iter.Seq2[Item, error]
	// VersionsBetween, when set, lists the documents whose keys sort after
	// after ("": from the first) and no later than through (in the order
	// of ListPage; "": none), with each Item's Key and ETag alone (no
	// Data, Meta or Expires), in a listing that reads no more than those
	// where the service can (tablestore: one query bounded by both keys,
	// with $select of the keys; the ETag comes with every entity). Like
	// ListPage of "", it never lists an index entry or a backend's own
	// record. Reindex lists a page of documents again with it, once the
	// page's entries are written, to learn which changed meanwhile. Its
	// errors are ListPage's.
	VersionsBetween func(ctx context.Context, after, through string) ([]Item, error)
	// Entries, when set, keeps index entries: small records the Store
	// writes beside its documents, in a document's commit scope, under
	// keys no user key equals (see Entries). nil: the backend keeps
	// none, and a Store with indexes over it refuses to write
	// (errors.ErrUnsupported).
	Entries *Entries
	// CompareKeys, when set, is the order in which List and ListPage
	// yield keys, declared because it is not the package's CompareKeys
	// (UTF-16 code units): the order the service lists in, so that a
	// listing is one streaming scan and a page one query. tablestore
	// without Options.Partition declares the table's own: by
	// PartitionKey, then RowKey, each by UTF-16 code units. It returns
	// -1, 0 or +1 and must be a total order on the keys ValidateKey
	// accepts. Prefixes select the same keys in every order; only the
	// sequence differs. nil means CompareKeys (memstore, blobstore, and
	// tablestore with Options.Partition). Use KeyOrder to read it.
	CompareKeys func(a, b string) int
}

// Entries is how a backend keeps index entries (Abilities.Entries). An
// entry is an item like a document: Read returns it, Commit writes,
// deletes and checks it beside documents of its scope, in one atomic
// request, and List and ListPage yield it under a prefix that Key made.
// ValidateKey refuses its key, so no user write can touch it, and no
// listing of a user's prefix, ReadMany or backend extra (tablestore's
// Query) ever yields it. The Store encodes an entry's Data as a JSON
// object of string members, and writes no Meta.
type Entries struct {
	// Scope returns the part of key that names its commit scope, as a
	// prefix of key: tablestore without Options.Partition "pk/"; "" for
	// a backend of one scope (memstore, tablestore with
	// Options.Partition). Only the scope's part of key is validated
	// (what follows may be an index's value, of any characters): an
	// error matches ErrInvalidKey.
	Scope func(key string) (string, error)
	// Key returns the key of the entry named name in scope (a prefix
	// Scope returned); what follows scope in it starts with U+FFFF, so
	// that a Store refuses to list a prefix reaching into entries.
	// name is printable ASCII of the letters, digits
	// and "._~-", at most MaxEntryName bytes; a shorter name is a prefix
	// of a longer one exactly when their keys are, so that
	// List(Key(scope, p)) yields the entries whose names start with p.
	Key func(scope, name string) string
	// Range yields the entries of every scope whose names n satisfy
	// from <= n < below, by scope and, within a scope, in name order;
	// from and below are names as Key takes them. It reads no document:
	// tablestore sends one query of the whole table filtered by RowKey
	// (the service pages it), memstore lists its entries. An error is
	// yielded once and ends the sequence.
	Range func(ctx context.Context, from, below string) iter.Seq2[Item, error]
}

// MaxEntryName bounds the names of index entries (Entries.Key).
const MaxEntryName = 240

// KeyOrder returns the order of the backend's List and ListPage:
// a.CompareKeys, or the package's CompareKeys when a declares none.
func (a Abilities) KeyOrder() func(x, y string) int {
	if a.CompareKeys != nil {
		return a.CompareKeys
	}
	return CompareKeys
}

// Action is one write, delete or check of a Commit.
type Action struct {
	Key    string
	Delete bool // delete, with If-Match Write.Cond.ETag
	// Check only requires the key to be at Write.Cond.ETag (a document a
	// transaction read and did not write). A backend that cannot check
	// without writing may write the document unchanged, so that its ETag
	// changes (tablestore: Merge Entity without properties); its
	// bookkeeping stays as stored.
	Check bool
	Write Write // the write; for a delete or a check only Write.Cond
}

// ActionError reports which action of a Commit failed; nothing in it was
// applied. It unwraps to the action's error, so errors.Is matches its
// sentinel. Index is -1 when the service named no action.
type ActionError struct {
	Index int
	Err   error
}

func (e *ActionError) Error() string { return fmt.Sprintf("action %d: %v", e.Index, e.Err) }

func (e *ActionError) Unwrap() error { return e.Err }

// Codec turns documents into the bytes a Backend stores and back.
// Marshal must be deterministic (the same value gives the same bytes): Update
// skips the write when a mutation leaves the bytes unchanged. Marshal
// returns bytes it does not touch again; Unmarshal must not modify data,
// and must copy what it keeps of it (as encoding/json's Unmarshaler does):
// data may be the bytes a backend holds (see Item).
// A Codec must be safe for concurrent use.
//
// A codec that can encode values it cannot decode into T (a table entity
// codec and a non-struct T, say) may also have a method
// CheckType(reflect.Type) error; the Store calls it for an interface T,
// whose Marshal sees only the concrete value inside.
//
// A codec may also have a method
//
//	Merge(stored, base, mine []byte) (data, changes []byte, err error)
//
// which applies a change to a stored document: base is the codec's
// encoding of the value decoded from stored, mine its encoding of that
// value after the change. data is stored with the change made and all
// else kept as stored (members T does not know, at any depth, and the
// members T did not change); changes, when not nil, is what a merging
// backend sends for it (see Write.Changes); an error refuses the write,
// and nothing is sent. A Store applies every write that starts from a
// read (Update, Save, Transact, Replace of a Doc a read returned) so;
// without the method it writes mine whole. The JSON codec merges
// (package internal/members' Merge); tablestore's entity codec merges
// properties.
//
// A codec whose documents are JSON objects, one member per stored field,
// may also have a method Members(reflect.Type) map[string]bool returning
// the member names a type's documents hold (nil: every name), for
// etagstore.Extra's Names. A codec whose decoder matches names as
// encoding/json's does, exactly or else case-folded, also has a method
// FoldsNames() bool returning true, and Members then holds each name
// folded too (internal/members' Fold).
type Codec interface {
	Marshal(v any) ([]byte, error)
	Unmarshal(data []byte, v any) error
}

// Item is one stored document as a backend sees it.
//
// Data is read-only once written, as a string is: a backend may keep the
// slice a Write gave it and return those bytes from every Read, List and
// ListPage (memstore does), so neither the caller of Write nor the
// receiver of an Item may modify them, and a Codec's Unmarshal must not.
// The Store never does.
type Item struct {
	Key  string
	Data []byte // the encoded document, as produced by the Store's Codec; read-only
	Meta string // the Store's bookkeeping (write ids), stored verbatim
	ETag ETag
	// Expires is the Write.Expires the version was written with, where
	// the backend keeps it (zero: not kept, or none).
	Expires time.Time
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

// Check reports whether the condition may be sent: an IfMatch without an
// ETag matches ErrETagRequired, and an IfMatch with a Superseded ETag,
// which no stored version holds, ErrConflict. Backends call it before
// sending anything.
func (c Cond) Check() error {
	switch c.Kind {
	case CondNone, CondCreate:
		return nil
	case CondIfMatch:
		if c.ETag == "" {
			return ErrETagRequired
		}
		if IsSuperseded(c.ETag) {
			return errSuperseded
		}
		return nil
	}
	return Errorf(ErrInvalidInput, "unknown condition kind %d", c.Kind)
}

// Mode says how a write treats the stored document.
type Mode uint8

const (
	// ModeReplace stores Data as the whole document.
	ModeReplace Mode = iota
	// ModeMerge stores Data's members over the stored document's, keeping
	// those Data does not name (Azure Table Merge Entity). Only a backend
	// whose Abilities.Merge is set accepts it; with CondCreate it is
	// refused. An empty Meta leaves the stored bookkeeping as it is.
	ModeMerge
	// ModeTombstone deletes the key, as Delete does (CondIfMatch), and
	// keeps the fencing token Meta carries (see FenceOf) beside the key
	// once it is gone: a later CondCreate write whose Meta carries a
	// lower positive token is refused with ErrFenced, and nothing is
	// written. To every other call the key is missing: Read, List,
	// ListPage and the backend's extras never return it, CondIfMatch
	// (ETagAny too) and Delete find it missing, and CondNone and
	// CondCreate (unfenced, or fenced with the token or a higher one)
	// write it. A fenced create raises the token kept to its own; whether
	// an unfenced one forgets it is the backend's to say (memstore and
	// tablestore keep it, blobstore forgets it). It goes as a
	// Write, or as a delete action in a Commit (Action.Delete with
	// Write.Mode ModeTombstone). Only a backend whose Abilities.Tombstones
	// is set accepts it.
	ModeTombstone
)

// FenceOf is the fencing token a write's Meta carries (0: none), for a
// backend that keeps the tokens of deleted keys (ModeTombstone). Meta is
// fields "k=v" separated by ';'; the token is field f (the Store's
// bookkeeping, package internal/meta, writes it so).
func FenceOf(meta string) int64 {
	for meta != "" {
		var field string
		field, meta, _ = strings.Cut(meta, ";")
		if v, ok := strings.CutPrefix(field, "f="); ok {
			token, _ := strconv.ParseInt(v, 10, 64)
			return token
		}
	}
	return 0
}

// Write is one write request to a Backend.
type Write struct {
	Data []byte // kept by the backend, perhaps as is: not modified after the call (see Item)
	Cond Cond
	Mode Mode
	// Meta is stored with the document and returned verbatim by Read and
	// List. It holds printable ASCII only (it may travel as an HTTP header)
	// and is at most MaxMetaLen bytes.
	Meta string
	// Expires, when not zero, is when the document expires (the Store's
	// Expiry index), set by a Store over a backend that keeps no index
	// entries. Such a backend may keep it beside the document and return
	// it in Item.Expires from Read and Abilities.Versions (blobstore: in
	// the blob's metadata, to the millisecond, rounded up); another
	// ignores it.
	Expires time.Time
	// Changes, when set (only on a ModeReplace write with CondIfMatch of
	// a stored version), is a JSON object of the members of Data that
	// differ from the document stored at Cond.ETag; Data keeps every other
	// member of that document as it is stored. The document after the
	// write is Data's either way, so a backend that can merge
	// (Abilities.Merge) sends Changes alone (tablestore: Merge Entity with
	// If-Match), and another stores Data. A codec's Merge method makes it
	// (see Codec). Use Payload.
	Changes []byte
}

// Payload is what a backend sends for w when it can merge: Changes, as a
// merge, when w carries them; otherwise Data, in w's Mode.
func (w Write) Payload() ([]byte, Mode) {
	if w.Changes != nil && w.Mode == ModeReplace && w.Cond.Kind == CondIfMatch {
		return w.Changes, ModeMerge
	}
	return w.Data, w.Mode
}

// MaxMetaLen bounds Item.Meta so that every backend can keep it in one
// property or metadata header.
const MaxMetaLen = 1024

// CheckKey is the validation every key passes before any backend's own
// rules (the Store applies it, then Backend.ValidateKey): it must be
// non-empty, valid UTF-8, and free of control characters (U+0000–U+001F,
// U+007F–U+009F), which no Azure service accepts in a key. It returns an
// error matching ErrInvalidKey.
func CheckKey(key string) error {
	if key == "" {
		return Errorf(ErrInvalidKey, "empty key")
	}
	if !utf8.ValidString(key) {
		return Errorf(ErrInvalidKey, "key %q is not valid UTF-8", key)
	}
	for _, r := range key {
		if r <= 0x1f || (r >= 0x7f && r <= 0x9f) {
			return Errorf(ErrInvalidKey, "key %q contains control character %U", key, r)
		}
	}
	return nil
}

// ungroupedKey marks a context whose writes must not be combined with
// other callers' (see Ungrouped).
type ungroupedKey struct{}

// Ungrouped returns a context whose Updates are not committed together with
// other callers' (group commit), because it carries write state of its own
// that a shared write would not honour for everyone — a lease id, say
// (blobstore.WithLease uses it).
func Ungrouped(ctx context.Context) context.Context {
	return context.WithValue(ctx, ungroupedKey{}, true)
}

// IsUngrouped reports whether ctx came from Ungrouped.
func IsUngrouped(ctx context.Context) bool {
	v, _ := ctx.Value(ungroupedKey{}).(bool)
	return v
}

// CompareKeys compares keys by their UTF-16 code units: the order in
// which List and ListPage yield keys unless a backend declares its own
// (Abilities.CompareKeys), and the order of Azure's blob listings and of
// the keys of one table partition. It differs from Go's string (code
// point) order in that characters above U+FFFF, encoded as surrogate
// pairs (U+D800–U+DFFF), sort before U+E000–U+FFFF. The result is -1, 0
// or +1.
func CompareKeys(a, b string) int {
	for a != "" && b != "" {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		if ra != rb {
			return cmp.Compare(utf16Rank(ra), utf16Rank(rb))
		}
		a, b = a[na:], b[nb:]
	}
	return cmp.Compare(len(a), len(b))
}

// utf16Rank maps r to a number that orders runes as their UTF-16 encodings
// order.
func utf16Rank(r rune) int {
	switch {
	case r >= 0x10000: // a surrogate pair, between U+D7FF and U+E000
		return 0xD800 + int(r-0x10000)
	case r >= 0xE000:
		return 0x110000 + int(r)
	}
	return int(r)
}

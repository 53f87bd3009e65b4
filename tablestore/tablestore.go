// Package tablestore is the driver.Backend on Azure Table storage
// (sdk/data/aztables). Documents are entities: a struct's fields become
// typed entity properties (see EntityCodec).
//
// The rules of Azure's Table service apply with the SDK's traps closed: a
// replace, merge or delete is always sent with the caller's ETag in If-Match
// (the SDK's nil-IfMatch-means-"*" default is unreachable), ETagAny ("*")
// is sent only when asked for, Upsert is Insert-or-Replace, Create is Insert
// Entity.
//
// Keys are "PartitionKey/RowKey", or plain row keys when Options.Partition
// is set. List and Page yield them in the table's own order, by
// PartitionKey and then RowKey (each by UTF-16 code units), so that a
// listing across partitions is one streaming query: partition "a" and its
// rows come before partition "a-b", although "a-b/x" < "a/y" character by
// character. The Backend declares that order (driver.Abilities.CompareKeys;
// Store.CompareKeys reports it); with Options.Partition it is the order of
// the row keys, by UTF-16 code units, as on every other backend.
//
// You build the aztables client (connection string, shared key or
// azidentity); the package never handles credentials.
package tablestore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"net/url"
	"reflect"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/access"
	"github.com/etagstore/etagstore/internal/azerr"
	"github.com/etagstore/etagstore/internal/azretry"
	"github.com/etagstore/etagstore/internal/telemetry"
)

// maxKeyBytes is Azure's limit for a PartitionKey or RowKey: 1 KiB (UTF-16).
const maxKeyBytes = 1024

// Options configure a Backend. Nil means the defaults.
type Options struct {
	// Partition, if set, puts every document in this partition and makes
	// keys plain row keys. Default: "" — keys are "PartitionKey/RowKey".
	Partition string
	// PageSize is how many entities List asks for per request.
	// Default: 1000, the service's maximum.
	PageSize int32
}

// Backend is a driver.Backend on one Azure table. It is safe for
// concurrent use.
type Backend struct {
	client *aztables.Client
	opts   Options
	scope  string // Abilities.CommitScope: the client and the partition rule
}

var _ driver.Backend = (*Backend)(nil)

// New returns a Backend that keeps documents in the table client points
// to. The table must exist. Nil opts means the defaults.
func New(client *aztables.Client, opts *Options) *Backend {
	b := &Backend{client: client}
	if opts != nil {
		b.opts = *opts
	}
	if b.opts.PageSize <= 0 || b.opts.PageSize > 1000 {
		b.opts.PageSize = 1000
	}
	// Backends over one client with one partition rule read every key as
	// the same entity: their Stores share transactions (etagstore.Transact).
	b.scope = fmt.Sprintf("tablestore %p %q", client, b.opts.Partition)
	return b
}

// NewStore is the one-line way to a typed store on a table:
// etagstore.New[T](New(client, opts), storeOpts).
func NewStore[T any](client *aztables.Client, opts *Options, storeOpts *etagstore.Options) *etagstore.Store[T] {
	return etagstore.New[T](New(client, opts), storeOpts)
}

// Client returns the aztables client the Backend uses.
func (b *Backend) Client() *aztables.Client { return b.client }

// Partition returns Options.Partition: the PartitionKey of every
// document, whose key is then its RowKey; "" when keys are
// "PartitionKey/RowKey".
func (b *Backend) Partition() string { return b.opts.Partition }

// Abilities declares the entity codec (struct fields become typed entity
// properties; Read hands back entities in its own layout, not verbatim),
// merges (Merge Entity), atomic commits of up to MaxBatchActions
// entities of one partition (entity group transactions) and, without
// Options.Partition, the table's key order (by PartitionKey, then RowKey;
// see List), tombstones: a fenced delete keeps the key's fencing
// token in a record entity beside it (see driver.ModeTombstone and
// tombstone.go), reads of several keys by one query per partition
// (driver.Abilities.ReadMany; see readmany.go), and index entries beside
// the documents, in their partitions (driver.Abilities.Entries; see
// entries.go).
func (b *Backend) Abilities() driver.Abilities {
	return driver.Abilities{Codec: EntityCodec{}, Merge: true, Commit: b.commit, CheckCommit: b.checkCommit, CompareKeys: b.keyOrder(),
		CommitScope: b.scope, Tombstones: true, ReadMany: b.readMany, VersionsBetween: b.versionsBetween, Entries: b.entries()}
}

// As sets a **tablestore.Backend target to b: how Query, Merge, Batch and
// the other extras reach b through a wrapper.
func (b *Backend) As(target any) bool {
	if p, ok := target.(**Backend); ok {
		*p = b
		return true
	}
	return false
}

// tableOf finds the table Backend under any wrappers of s's backend.
func tableOf[T any](s *etagstore.Store[T], what string) (*Backend, error) {
	var b *Backend
	if !s.Backend().As(&b) {
		return nil, fmt.Errorf("%w: tablestore: %s needs a Store on a tablestore Backend, not %T", errors.ErrUnsupported, what, s.Backend())
	}
	return b, nil
}

// ValidateKey checks key against Azure's key rules without sending
// anything: each part non-empty, at most 1 KiB (as UTF-16), with no '/',
// '\', '#', '?' or control character, and a row key that does not start
// with U+FFFF (reserved for the Backend's fence records and index
// entries). Errors match etagstore.ErrInvalidKey.
func (b *Backend) ValidateKey(key string) error {
	_, _, err := b.split(key)
	return err
}

// split turns a key into its PartitionKey and RowKey, validating both as
// ValidateKey does: a reserved row key (a fence record's or an index
// entry's) is refused.
func (b *Backend) split(key string) (pk, rk string, err error) {
	pk, rk, err = b.splitParts(key)
	if err == nil && strings.HasPrefix(rk, recordPrefix) {
		return "", "", errReserved(rk)
	}
	return pk, rk, err
}

// splitItem is split for the calls that reach entries (Read, Write,
// Delete, Commit, CheckCommit, Entries.Scope): it also accepts the key of
// an index entry (entries.go), never a fence record's.
func (b *Backend) splitItem(key string) (pk, rk string, err error) {
	pk, rk, err = b.splitParts(key)
	if err == nil && strings.HasPrefix(rk, recordPrefix) && !isEntryRow(rk) {
		return "", "", errReserved(rk)
	}
	return pk, rk, err
}

// errReserved is the refusal of a row key starting with U+FFFF.
func errReserved(rk string) error {
	return fmt.Errorf("%w: row key %q starts with U+FFFF, which the Store keeps for its fence records and index entries", etagstore.ErrInvalidKey, rk)
}

// splitParts turns a key into its PartitionKey and RowKey, validating
// both by the service's rules alone.
func (b *Backend) splitParts(key string) (pk, rk string, err error) {
	if b.opts.Partition != "" {
		pk, rk = b.opts.Partition, key
		if err := checkKeyPart("partition key", pk); err != nil {
			return "", "", err
		}
	} else {
		var ok bool
		pk, rk, ok = strings.Cut(key, "/")
		if !ok {
			return "", "", fmt.Errorf("%w: %q: table keys are \"PartitionKey/RowKey\"", etagstore.ErrInvalidKey, key)
		}
		if err := checkKeyPart("partition key", pk); err != nil {
			return "", "", err
		}
	}
	if err := checkKeyPart("row key", rk); err != nil {
		return "", "", err
	}
	return pk, rk, nil
}

func checkKeyPart(what, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%w: empty %s", etagstore.ErrInvalidKey, what)
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: %s %q is not valid UTF-8", etagstore.ErrInvalidKey, what, s)
	case 2*len(utf16.Encode([]rune(s))) > maxKeyBytes:
		return fmt.Errorf("%w: %s is over 1 KiB", etagstore.ErrInvalidKey, what)
	}
	for _, r := range s {
		if r == '/' || r == '\\' || r == '#' || r == '?' || r <= 0x1f || r >= 0x7f && r <= 0x9f {
			return fmt.Errorf("%w: %s %q contains %U, which Azure Table keys do not allow", etagstore.ErrInvalidKey, what, s, r)
		}
	}
	return nil
}

// key is the inverse of split.
func (b *Backend) key(pk, rk string) string {
	if b.opts.Partition != "" {
		return rk
	}
	return pk + "/" + rk
}

// Read returns the entity under key, or an error matching
// etagstore.ErrNotFound.
func (b *Backend) Read(ctx context.Context, key string) (driver.Item, error) {
	pk, rk, err := b.splitItem(key)
	if err != nil {
		return driver.Item{}, err
	}
	resp, err := b.client.GetEntity(ctx, pk, rk, nil)
	if err := driver.Sent(ctx, mapReadError("read", key, err)); err != nil {
		return driver.Item{}, err
	}
	it, err := b.item(resp.Value)
	if err != nil {
		return driver.Item{}, err
	}
	it.ETag = etagstore.ETag(resp.ETag)
	return it, nil
}

// item turns an entity as the service returns it into an Item: the system
// properties are removed from Data, the bookkeeping goes to Meta. It scans
// the entity once and moves the document's properties, as they are and in
// the service's order (the SDK's: sorted by name), to the front of
// entity's own bytes, which become Data: no copy, and Data holds strings
// exactly as EntityCodec writes them. entity is the caller's no more.
func (b *Backend) item(entity []byte) (driver.Item, error) {
	var it driver.Item
	var pk, rk string
	// Each member kept moves left or stays: it is written after '{' and
	// the members kept before it, which are no longer than what preceded
	// it in entity (its '{' or ',' included), so data never overtakes the
	// scan.
	data := entity[:0]
	err := eachMember(entity, func(name, value, member []byte) bool {
		switch string(name) {
		case "PartitionKey":
			pk = textOf(value)
		case "RowKey":
			rk = textOf(value)
		case "odata.etag":
			it.ETag = etagstore.ETag(textOf(value))
		case MetaProperty:
			it.Meta = textOf(value)
		default:
			if !systemProperty(name) {
				data = append(data, ',')
				data = append(data, member...)
			}
		}
		return true
	})
	if err != nil {
		return driver.Item{}, fmt.Errorf("tablestore: entity is not a JSON object: %w", err)
	}
	it.Key = b.key(pk, rk)
	if len(data) == 0 {
		data = append(data, '{')
	}
	data[0] = '{' // the first member's ','
	it.Data = append(data, '}')
	return it, nil
}

// systemProperty reports whether name is a property (or the annotation of
// one) that the service or the Store keeps, not part of the document.
func systemProperty(name []byte) bool {
	if bytes.HasPrefix(name, []byte("odata.")) {
		return true
	}
	base, _, _ := bytes.Cut(name, []byte("@"))
	switch string(base) {
	case "PartitionKey", "RowKey", "Timestamp", MetaProperty:
		return true
	}
	return false
}

// textOf is the JSON string value as text ("" when it is not a string).
func textOf(value []byte) string {
	t, _ := unquote(value)
	return t.text
}

// entity builds the JSON body of a write: the key properties, the
// bookkeeping property and the document's properties (a JSON object).
func entity(pk, rk, meta string, data []byte) ([]byte, error) {
	data = bytes.TrimSpace(data)
	if len(data) < 2 || data[0] != '{' || data[len(data)-1] != '}' {
		return nil, fmt.Errorf("%w: tablestore: a document must encode as a JSON object of properties", etagstore.ErrInvalidInput)
	}
	body := make([]byte, 0, len(data)+2*(len(pk)+len(rk)+len(meta))+64) // room for some escapes
	body = append(body, `{"PartitionKey":`...)
	body, _ = appendString(body, pk)
	body = append(body, `,"RowKey":`...)
	body, _ = appendString(body, rk)
	if meta != "" {
		body = append(body, `,"`+MetaProperty+`":`...)
		body, _ = appendString(body, meta)
	}
	if rest := bytes.TrimSpace(data[1:]); len(rest) > 1 { // more than "}"
		body = append(body, ',')
	}
	return append(body, data[1:]...), nil
}

// Write stores w under key if w.Cond holds: CondCreate is Insert Entity
// (EntityAlreadyExists → etagstore.ErrExists), CondIfMatch is Update Entity
// in replace mode with If-Match (UpdateConditionNotSatisfied →
// etagstore.ErrConflict, a missing entity → etagstore.ErrNotFound), CondNone
// is Insert or Replace Entity. An IfMatch without an ETag matches
// etagstore.ErrETagRequired and nothing is sent.
//
// A write that carries its changes to the version it is conditioned on
// (driver.Write.Changes: a read-modify-write) sends them alone, as Merge
// Entity with If-Match: the properties the document type did not change,
// or does not store, are not sent.
func (b *Backend) Write(ctx context.Context, key string, w driver.Write) (etagstore.ETag, error) {
	if w.Mode == driver.ModeTombstone || fencedCreate(driver.Action{Key: key, Write: w}) {
		return b.writeRecorded(ctx, key, w)
	}
	data, mode := w.Payload()
	if mode == driver.ModeMerge {
		return b.write(ctx, key, w, data, aztables.UpdateModeMerge)
	}
	return b.write(ctx, key, w, data, aztables.UpdateModeReplace)
}

// write is Write of data with a choice of replace or merge semantics.
func (b *Backend) write(ctx context.Context, key string, w driver.Write, data []byte, mode aztables.UpdateMode) (etagstore.ETag, error) {
	pk, rk, err := b.splitItem(key)
	if err != nil {
		return "", err
	}
	if err := w.Cond.Check(); err != nil {
		return "", err
	}
	body, err := entity(pk, rk, w.Meta, data)
	if err != nil {
		return "", err
	}
	ctx = azretry.NoRetry(ctx)
	var etag azcore.ETag
	switch w.Cond.Kind {
	case driver.CondCreate:
		if mode != aztables.UpdateModeReplace {
			return "", fmt.Errorf("%w: tablestore: create cannot merge", etagstore.ErrInvalidInput)
		}
		var resp aztables.AddEntityResponse
		resp, err = b.client.AddEntity(ctx, body, nil)
		etag = resp.ETag
	case driver.CondIfMatch:
		if err := checkETag(w.Cond.ETag); err != nil {
			return "", err
		}
		ifMatch := azcore.ETag(w.Cond.ETag) // never nil: nil would mean "*"
		var resp aztables.UpdateEntityResponse
		resp, err = b.client.UpdateEntity(ctx, body, &aztables.UpdateEntityOptions{IfMatch: &ifMatch, UpdateMode: mode})
		etag = resp.ETag
	case driver.CondNone:
		var resp aztables.UpsertEntityResponse
		resp, err = b.client.UpsertEntity(ctx, body, &aztables.UpsertEntityOptions{UpdateMode: mode})
		etag = resp.ETag
	}
	if err := driver.Sent(ctx, mapError("write", key, err)); err != nil {
		return "", err
	}
	return etagstore.ETag(etag), nil
}

// Delete removes the entity under key with If-Match of etag (ETagAny
// allowed). A stale ETag matches etagstore.ErrConflict, a missing entity
// etagstore.ErrNotFound; without an ETag nothing is sent
// (etagstore.ErrETagRequired).
func (b *Backend) Delete(ctx context.Context, key string, etag driver.ETag) error {
	pk, rk, err := b.splitItem(key)
	if err != nil {
		return err
	}
	if err := driver.IfMatch(etag).Check(); err != nil {
		return err
	}
	if err := checkETag(etag); err != nil {
		return err
	}
	ifMatch := azcore.ETag(etag) // never nil: nil would mean "*"
	ctx = azretry.NoRetry(ctx)
	_, err = b.client.DeleteEntity(ctx, pk, rk, &aztables.DeleteEntityOptions{IfMatch: &ifMatch})
	return driver.Sent(ctx, mapError("delete", key, err))
}

// List yields the entities whose key starts with prefix in the table's
// order (PartitionKey, then RowKey: the Backend's declared key order, see
// order.go), from one query whose pages of Options.PageSize it streams.
// With "PartitionKey/RowKey" keys a prefix without '/' selects the
// partitions whose key starts with it, and one with '/' a range of rows
// in one partition. Index entries are yielded only for a prefix that
// Entries.Key made (entries.go), and fence records never.
func (b *Backend) List(ctx context.Context, prefix string) iter.Seq2[driver.Item, error] {
	return b.query(ctx, b.prefixFilter(prefix), b.entryListing(prefix))
}

// prefixFilter is the OData filter for the keys starting with prefix. A
// listing of documents (not of entries: entryListing) stops below the
// Backend's own rows, whose RowKey starts with U+FFFF and sorts after
// every document's, so that a page never queries its way through a
// partition's index entries and fence records to learn it has ended.
func (b *Backend) prefixFilter(prefix string) Filter {
	var f Filter
	if b.opts.Partition != "" {
		f = Eq("PartitionKey", b.opts.Partition).And(prefixRange("RowKey", prefix))
	} else if pk, rkPrefix, ok := strings.Cut(prefix, "/"); ok {
		f = Eq("PartitionKey", pk).And(prefixRange("RowKey", rkPrefix))
	} else {
		f = prefixRange("PartitionKey", prefix)
	}
	if !b.entryListing(prefix) {
		f = f.And(Lt("RowKey", recordPrefix))
	}
	return f
}

// Query yields the entities matching filter (see Filter) in table order.
// Entities outside Options.Partition are skipped when it is set, and so
// are the Backend's own rows, whose RowKey starts with U+FFFF (fence
// records and index entries), whatever the filter.
func (b *Backend) Query(ctx context.Context, filter Filter) iter.Seq2[driver.Item, error] {
	if b.opts.Partition != "" {
		filter = Eq("PartitionKey", b.opts.Partition).And(filter)
	}
	return b.query(ctx, filter, false)
}

// Query yields the typed documents of s (a Store on a table Backend)
// matching filter, in table order. A filter that cannot be expressed, one
// that names a property T does not store or compares one with a value of
// another type (see Filter), is yielded once as an error matching
// etagstore.ErrInvalidInput, and a Store on another backend as one matching
// errors.ErrUnsupported; nothing is sent.
// The iteration is one span (etagstore.Query) of s's telemetry; with
// RecordKeys it records the filter (etagstore.filter).
func Query[T any](ctx context.Context, s *etagstore.Store[T], filter Filter) iter.Seq2[etagstore.Doc[T], error] {
	return func(yield func(etagstore.Doc[T], error) bool) {
		ctx, end := s.Observe(ctx, access.Query, filter.String())
		failed := telemetry.ErrPanicked // until the loop ends normally (yield may panic)
		defer func() { end(failed) }()
		failed = queryDocs(ctx, s, filter, yield)
	}
}

// queryDocs yields what Query yields and returns the error it ended with.
func queryDocs[T any](ctx context.Context, s *etagstore.Store[T], filter Filter, yield func(etagstore.Doc[T], error) bool) error {
	b, err := tableOf(s, access.Query.String())
	if err != nil {
		yield(etagstore.Doc[T]{}, err)
		return err
	}
	if filter.Err() == nil {
		if err := checkFilter(filter, reflect.TypeFor[T](), s.Codec()); err != nil {
			yield(etagstore.Doc[T]{}, err)
			return err
		}
	}
	for it, err := range b.Query(ctx, filter) {
		var d etagstore.Doc[T]
		if err == nil {
			if d, err = decode(s, it); errors.Is(err, etagstore.ErrNotFound) {
				continue // expired (etagstore.Expiry)
			}
		}
		if !yield(d, err) || err != nil {
			return err
		}
	}
	return nil
}

// query yields the entities matching filter: with entries, the index
// entries alone (a listing of a prefix Entries.Key made); without, the
// documents alone. Fence records never.
func (b *Backend) query(ctx context.Context, filter Filter, entries bool) iter.Seq2[driver.Item, error] {
	return func(yield func(driver.Item, error) bool) {
		if err := filter.Err(); err != nil {
			yield(driver.Item{}, fmt.Errorf("%w: %w", etagstore.ErrInvalidInput, err))
			return
		}
		opts := &aztables.ListEntitiesOptions{Top: &b.opts.PageSize}
		if f := filter.String(); f != "" {
			opts.Filter = &f
		}
		pager := b.client.NewListEntitiesPager(opts)
		for pager.More() {
			page, err := pager.NextPage(ctx)
			if err := driver.Sent(ctx, mapReadError("list", "", err)); err != nil {
				yield(driver.Item{}, err)
				return
			}
			for _, e := range page.Entities {
				it, err := b.item(e)
				if err != nil {
					yield(driver.Item{}, err)
					return
				}
				if !b.listed(it.Key, entries) {
					continue // a fence record (tombstone.go) or an index entry (entries.go)
				}
				if !yield(it, nil) {
					return
				}
			}
		}
	}
}

// checkETag refuses, before sending, an If-Match ETag that is not one the
// Table service issues (W/"datetime'<timestamp>'", or "*"): it cannot
// match any version, so the answer is a conflict (the Store then reads the
// current version, or finds the entity gone), never the service's 400.
func checkETag(etag etagstore.ETag) error {
	if etag == etagstore.ETagAny {
		return nil
	}
	inner, ok := strings.CutPrefix(string(etag), `W/"datetime'`)
	if ok {
		inner, ok = strings.CutSuffix(inner, `'"`)
	}
	if ok {
		if ts, err := url.PathUnescape(inner); err == nil {
			if _, err := time.Parse(time.RFC3339Nano, ts); err == nil {
				return nil
			}
		}
	}
	return fmt.Errorf("%w: tablestore: %q is not a table ETag and matches no version", etagstore.ErrConflict, etag)
}

// mapError is the one place where Table service errors become etagstore's
// sentinels, by ErrorCode (falling back on the HTTP status for codes this
// list does not name). The result wraps the original error; nil stays nil.
func mapError(op, key string, err error) error {
	if err == nil {
		return nil
	}
	return mapErrorDetail(op, key, "", err)
}

// mapReadError is mapError for a read (Read, a query's page, ReadMany, a
// fence record): a failure with no service answer (a connection reset
// mid-body, say) is ErrUnavailable, as a read that can be made again;
// for a write it stays unclassified, an answer the Store resolves.
func mapReadError(op, key string, err error) error {
	e := mapError(op, key, err)
	if e == nil || driver.SentinelOf(e) != nil || errors.Is(e, context.Canceled) || errors.Is(e, context.DeadlineExceeded) {
		return e
	}
	return fmt.Errorf("%w: %w", etagstore.ErrUnavailable, e)
}

// mapErrorDetail is mapError with detail, what the service said (one line),
// printed after the key.
func mapErrorDetail(op, key, detail string, err error) error {
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		return azerr.Plain("tablestore", op, key, err)
	}
	se := azerr.New("tablestore", op, key, re, err)
	se.Detail = detail
	var sentinel error
	switch aztables.TableErrorCode(re.ErrorCode) {
	case aztables.UpdateConditionNotSatisfied:
		sentinel = etagstore.ErrConflict
	case aztables.EntityAlreadyExists:
		sentinel = etagstore.ErrExists
	case aztables.ResourceNotFound, aztables.EntityNotFound:
		sentinel = etagstore.ErrNotFound
	case aztables.EntityTooLarge, aztables.PropertyValueTooLarge, aztables.TooManyProperties:
		sentinel = etagstore.ErrTooLarge
	case aztables.TableNotFound:
		// Definite, and no retry will change it: the table must be created.
		se.Detail = "the table does not exist"
		sentinel = etagstore.ErrStorageNotFound
	default:
		if sentinel = azerr.ByStatus(re.StatusCode, false); sentinel == nil {
			return azerr.ServerBusy(re.StatusCode, re.ErrorCode, se)
		}
	}
	return azerr.Wrap(sentinel, se)
}

// decode is it as a document of s, decoded as s decodes its own.
func decode[T any](s *etagstore.Store[T], it driver.Item) (etagstore.Doc[T], error) {
	return s.DecodeItem(it)
}

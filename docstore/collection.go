// Package docstore is a gocloud.dev/docstore driver over etagstore's
// backends: Azure Table storage (tablestore), Azure Blob storage
// (blobstore) and memory (memstore). Go CDK users get Azure storage with
// real optimistic concurrency; etagstore users get a portable API.
//
// Open a collection with OpenCollection (a key field) or
// OpenCollectionWithKeyFunc over any etagstore driver.Backend, or by URL
// (see URLOpener): azuretable://TABLE, azureblob://CONTAINER and
// etagmem://NAME.
//
// # Writes
//
// Every write goes through an etagstore.Store (group commit on by
// default): Create is Store.Create, Replace is Store.Replace (If-Match of
// the revision, or "*" without one), Put is Store.Upsert (Replace with a
// revision), Delete is Store.Delete, and Update with mods is Store.Update:
// without a revision it is retried on a conflict (HTTP 412), and a write
// whose answer was lost is resolved by reading, never applied twice. An
// Update with a revision reads, checks the revision and replaces with
// If-Match. Atomic writes (ActionList.AtomicWrites) are one
// Store.Transact (a Put without a revision reads nothing: Tx.Upsert): on tables all in one partition (at most 100 documents;
// otherwise InvalidArgument, nothing sent), in memory any keys; blobs
// cannot commit several documents at once (Unimplemented).
//
// # Revisions
//
// A document's revision is its ETag, a string, whole (a table ETag is
// W/"datetime'…'", a blob's a quoted hex string). A revision is given to a
// document whose type has the revision field (docstore.DefaultRevisionField
// or Options.RevisionField) or that was written with one.
//
// # Documents
//
// On tables a document is an entity of typed properties, as
// tablestore.EntityCodec stores a struct (see JSONProperty for lists, maps
// and nil), so that a tablestore.Store[T] of a matching struct reads and
// writes the same entities; elsewhere a document is a JSON object, as
// etagstore.JSON stores a struct, with an annotation beside members
// holding bytes or times. The key field is a member like any other; a
// document a Store[T] wrote has none, and a query's row gets it (and the
// partition field) from the entity's key. A string, bytes or JSON value
// too large for one table property is stored across properties as
// tablestore stores a field tagged `table:"split"` (the property holds
// the number of parts, F‿1 … F‿n the pieces), and such values, a
// Store[T]'s or docstore's, are joined on every read: documents, mods and
// filters see the whole value. This is the default for every member past
// one property (strings, bytes, and lists and maps as JSON), with no
// option to set. A document that no entity can hold (more than 1 MiB, or
// more properties than an entity has, counting parts) is refused before
// anything is sent, naming its largest member: etagstore.ErrTooLarge,
// gcerrors.ResourceExhausted.
//
// Values keep their kinds as memdocstore keeps them: a float64 reads back
// as a float64, whole or not (on tables an Edm.Double, listed in
// DoubleProperty when whole, since the service answers 2.0 as 2), an
// integer as an int64, and an Increment keeps the member's kind. Times on
// tables are stored in UTC, to 100 ns (Edm.DateTime): one reads back in
// UTC, truncated, and a filter's time is compared as it would be stored
// (truncated, in the $filter and in memory), so that a document is found
// by the time it was written with. Elsewhere a time keeps its zone and
// every nanosecond. An Update that would change the key field or the
// partition field (moving the document) is refused with InvalidArgument,
// nothing sent. A struct's revision field is not stored: the revision is
// the ETag.
//
// # Queries
//
// A query streams a page at a time (Options.PageSize) and checks every
// filter in memory as the page comes in. What the backend is asked for
// (Query.Plan says it): on tables, equality and range filters on
// top-level members holding strings, booleans (equality) and times become
// the query's $filter ("in" an OR of equalities; a string comparison also
// lets through documents whose member holds a number, as a value stored
// in parts does, to be checked in memory once joined); number filters are not
// sent, as a property's EDM type (Int32, Int64, Double) is not known
// before reading. An equality on the key field lists that key's prefix,
// and "<" or "<=" on it ends the listing at the bound (not with
// Options.PartitionField, whose keys are not in key order). Offset and
// Limit stop reading when satisfied, and when every filter went to the
// service and nothing is sorted a page asks for Offset+Limit documents
// ($top on tables). An equality on Options.PartitionField is a
// PartitionKey filter. On blobs a query reads every document listed under
// its prefix (one GET each). OrderBy on the key, ascending, is the
// listing's order; any other OrderBy sorts in memory and holds every
// match until the listing ends (with a Limit, at most twice Offset+Limit
// of them).
//
// # Errors
//
// Errors carry gcerrors codes: NotFound, AlreadyExists, FailedPrecondition
// (a stale revision, etagstore.ErrFenced, a held lock), InvalidArgument,
// ResourceExhausted (etagstore.ErrTooLarge), Unimplemented (atomic writes
// on blobs) and Unknown (etagstore.ErrOutcomeUnknown). ErrorAs reaches
// *etagstore.OutcomeUnknownError and *azcore.ResponseError.
package docstore

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"gocloud.dev/docstore"
	"gocloud.dev/docstore/driver"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/blobstore"
	edriver "github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/tablestore"
)

// Options configure a collection. Nil means the defaults.
type Options struct {
	// RevisionField names the field holding a document's revision.
	// Default: docstore.DefaultRevisionField.
	RevisionField string
	// PartitionField names the string member whose value is a document's
	// partition: its etagstore key is "PARTITION/KEY" (on tables, its
	// PartitionKey; use it with a tablestore Backend without a fixed
	// Partition). Default: "", the key alone.
	PartitionField string
	// Store configures the etagstore.Store every write goes through. Its
	// Codec is the driver's own. Default: nil, etagstore's defaults (group
	// commit on).
	Store *etagstore.Options
	// MaxOutstandingActions bounds the goroutines one ActionList.Do runs
	// at once. Default: 16.
	MaxOutstandingActions int
	// PageSize is how many documents a query reads per page. Default: 1000.
	PageSize int
	// Create, when set, creates the backend's table or container, if it
	// does not exist, as the collection is opened (one request, within
	// 30 s; the URL parameter create=true). Default: false, the storage
	// must exist (a missing one fails every action with
	// etagstore.ErrStorageNotFound).
	Create bool
}

// raw is a stored document as the driver's format encodes it.
type raw []byte

// rawCodec hands the Store the bytes the driver's format made.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return append([]byte(nil), v.(raw)...), nil }

func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*raw) = append(raw(nil), data...)
	return nil
}

// collection is the driver.Collection. It is safe for concurrent use.
type collection struct {
	store    *etagstore.Store[raw]
	table    *tablestore.Backend // nil unless the backend is a table
	blob     bool                // the backend is a blob container
	format   format
	keyField string
	keyFunc  func(docstore.Document) any
	opts     Options
}

var _ driver.Collection = (*collection)(nil)

// OpenCollection returns a collection of the documents in b whose key is
// the string field keyField. Create makes up a key when the field is
// empty.
func OpenCollection(b edriver.Backend, keyField string, opts *Options) (*docstore.Collection, error) {
	c, err := newCollection(b, keyField, nil, opts)
	if err != nil {
		return nil, err
	}
	return docstore.NewCollection(c), nil
}

// OpenCollectionWithKeyFunc returns a collection of the documents in b
// whose key keyFunc makes from a document (nil when it cannot); the key
// must be a string. It must work for map[string]any documents too for
// Query.Delete and Query.Update.
func OpenCollectionWithKeyFunc(b edriver.Backend, keyFunc func(docstore.Document) any, opts *Options) (*docstore.Collection, error) {
	c, err := newCollection(b, "", keyFunc, opts)
	if err != nil {
		return nil, err
	}
	return docstore.NewCollection(c), nil
}

func newCollection(b edriver.Backend, keyField string, keyFunc func(docstore.Document) any, opts *Options) (*collection, error) {
	if keyField == "" && keyFunc == nil {
		return nil, invalidf("need a key field or a key function")
	}
	if b == nil {
		return nil, invalidf("nil backend")
	}
	c := &collection{keyField: keyField, keyFunc: keyFunc, format: jsonFormat{}}
	if opts != nil {
		c.opts = *opts
	}
	if c.opts.RevisionField == "" {
		c.opts.RevisionField = docstore.DefaultRevisionField
	}
	if c.opts.MaxOutstandingActions <= 0 {
		c.opts.MaxOutstandingActions = 16
	}
	if c.opts.PageSize <= 0 || c.opts.PageSize > edriver.MaxPageLimit {
		c.opts.PageSize = 1000
	}
	var so etagstore.Options
	if c.opts.Store != nil {
		so = *c.opts.Store
	}
	so.Codec = rawCodec{}
	if b.As(&c.table) {
		c.format = tableFormat{}
	}
	var bb *blobstore.Backend
	c.blob = b.As(&bb)
	if c.opts.Create {
		if err := createStorage(b); err != nil {
			return nil, err
		}
	}
	c.store = etagstore.New[raw](b, &so)
	return c, nil
}

// createStorage creates b's table or container unless it exists.
func createStorage(b edriver.Backend) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var (
		tb   *tablestore.Backend
		bb   *blobstore.Backend
		err  error
		code string
	)
	switch {
	case b.As(&tb):
		_, err = tb.Client().CreateTable(ctx, nil)
		code = "TableAlreadyExists"
	case b.As(&bb):
		_, err = bb.Container().Create(ctx, nil)
		code = "ContainerAlreadyExists"
	default:
		return nil // memory: nothing to create
	}
	var re *azcore.ResponseError
	if err == nil || errors.As(err, &re) && re.ErrorCode == code {
		return nil
	}
	return fmt.Errorf("docstore: create the storage: %w", err)
}

// Key returns the document's key: the key field's value (nil when empty,
// for Create to fill in) or what the key function makes of it.
func (c *collection) Key(doc driver.Document) (any, error) {
	if c.keyField != "" {
		if _, isMap := doc.Origin.(map[string]any); !isMap && !doc.HasField(c.keyField) {
			return nil, invalidf("the document has no key field %q (the collection's key field: OpenCollection's keyField, or key= in a URL)", c.keyField)
		}
		key, _ := doc.GetField(c.keyField)
		if key == nil || driver.IsEmptyValue(reflect.ValueOf(key)) {
			return nil, nil
		}
		return key, nil
	}
	key := c.keyFunc(doc.Origin)
	if key == nil || driver.IsEmptyValue(reflect.ValueOf(key)) {
		return nil, invalidf("missing document key")
	}
	return key, nil
}

// storeKey is the etagstore key of a document whose docstore key is key.
func (c *collection) storeKey(doc driver.Document, key any) (string, error) {
	s, ok := key.(string)
	if !ok {
		return "", fmt.Errorf("%w: docstore: key %v is a %T, not a string", etagstore.ErrInvalidKey, key, key)
	}
	if c.opts.PartitionField == "" {
		return s, nil
	}
	p, err := doc.GetField(c.opts.PartitionField)
	ps, ok := p.(string)
	if err != nil || !ok || ps == "" {
		return "", fmt.Errorf("%w: docstore: partition field %s must hold a non-empty string", etagstore.ErrInvalidKey, c.opts.PartitionField)
	}
	return ps + "/" + s, nil
}

// RevisionField returns the revision field's name.
func (c *collection) RevisionField() string { return c.opts.RevisionField }

// RevisionToBytes turns a revision (an ETag string) into bytes.
func (c *collection) RevisionToBytes(rev any) ([]byte, error) {
	s, ok := rev.(string)
	if !ok || s == "" {
		return nil, invalidf("revision %v (%T) is not an ETag", rev, rev)
	}
	return []byte(s), nil
}

// BytesToRevision is the inverse of RevisionToBytes.
func (c *collection) BytesToRevision(b []byte) (any, error) {
	if len(b) == 0 {
		return nil, invalidf("empty revision")
	}
	return string(b), nil
}

// As sets a *driver.Backend (etagstore's) target to the collection's
// backend, and whatever the backend's own As sets (a **tablestore.Backend,
// **blobstore.Backend, **memstore.Backend).
func (c *collection) As(i any) bool {
	if i == nil {
		return false
	}
	if p, ok := i.(*edriver.Backend); ok {
		*p = c.store.Backend()
		return true
	}
	return c.store.Backend().As(i)
}

// Close does nothing: the backend's clients belong to the caller.
func (c *collection) Close() error { return nil }

// Package blobstore is the driver.Backend on Azure Blob storage
// (sdk/storage/azblob): each document is a block blob holding its encoded
// bytes (JSON by default), written in one Put Blob request that always
// carries its access conditions.
//
// It also has what only blobs offer: reads with If-None-Match,
// If-Modified-Since and If-Unmodified-Since (GetIf), blob and container
// leases (Lease), and a distributed Lock with heartbeat renewal, a lost-lock
// signal and fencing tokens (Locker).
//
// You build the container client (connection string, shared key or
// azidentity); the package never handles credentials.
package blobstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/access"
	"github.com/etagstore/etagstore/internal/azerr"
	"github.com/etagstore/etagstore/internal/azretry"
	"github.com/etagstore/etagstore/internal/telemetry"
)

// metaKey is the blob metadata entry holding the Store's bookkeeping.
const metaKey = "etagstoremeta"

// ErrNotModified is returned by GetIf when an If-None-Match or
// If-Modified-Since condition says the caller's copy is current (HTTP 304).
var ErrNotModified = errors.New("blobstore: not modified")

// Options configure a Backend. Nil means the defaults.
type Options struct {
	// Prefix is put before every key to form the blob name, e.g. "docs/".
	// Default: "".
	Prefix string
	// ContentType is the Content-Type of document blobs.
	// Default: "application/json".
	ContentType string
	// MaxDocSize is the largest document written, in bytes; a larger one
	// matches etagstore.ErrTooLarge before anything is sent. Documents are
	// always written with one Put Blob request, so that the If-Match or
	// If-None-Match condition is never dropped (the SDK's chunked uploads
	// would drop it). Default: 4 MiB; at most 256 MiB.
	MaxDocSize int
	// TracerProvider, MeterProvider and RecordKeys are the telemetry of the
	// Backend's own lease handles (BlobLease, ContainerLease): one span per
	// lease operation (etagstore.AcquireLease, …) and
	// etagstore.operation.duration, with a Store's attribute keys; the key
	// (etagstore.key) only with RecordKeys. A Store's operations, GetIf
	// included, use the Store's etagstore.Options instead. Defaults: the
	// global providers; no keys.
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
	RecordKeys     bool
}

// scope names the tracer and meter of the package's own operations
// (leases and locks).
const scope = "github.com/etagstore/etagstore/blobstore"

// Backend is a driver.Backend on one blob container. It is safe for
// concurrent use.
type Backend struct {
	c    *container.Client
	opts Options
	rec  *telemetry.Recorder // of lease handles
}

var _ driver.Backend = (*Backend)(nil)

// New returns a Backend that keeps documents in the container c points to.
// The container must exist. Nil opts means the defaults.
func New(c *container.Client, opts *Options) *Backend {
	b := &Backend{c: c}
	if opts != nil {
		b.opts = *opts
	}
	if b.opts.ContentType == "" {
		b.opts.ContentType = "application/json"
	}
	if b.opts.MaxDocSize <= 0 {
		b.opts.MaxDocSize = 4 << 20
	}
	b.opts.MaxDocSize = min(b.opts.MaxDocSize, 256<<20)
	b.rec = telemetry.NewRecorder(scope, "blobstore", telemetry.Providers{
		TracerProvider: b.opts.TracerProvider, MeterProvider: b.opts.MeterProvider, RecordKeys: b.opts.RecordKeys,
	})
	return b
}

// NewStore is the one-line way to a typed store on a container:
// etagstore.New[T](New(c, opts), storeOpts).
func NewStore[T any](c *container.Client, opts *Options, storeOpts *etagstore.Options) *etagstore.Store[T] {
	return etagstore.New[T](New(c, opts), storeOpts)
}

// Container returns the container client the Backend uses.
func (b *Backend) Container() *container.Client { return b.c }

// Abilities reports that Read returns documents byte for byte as written,
// that a cached copy can be revalidated with If-None-Match, that a
// fenced delete keeps the key's fencing token (Tombstones; see
// tombstone.go), and that the documents' versions are listed without
// their data (Versions; see expires.go).
func (b *Backend) Abilities() driver.Abilities {
	return driver.Abilities{Verbatim: true, ReadIfChanged: b.readIfChanged, Tombstones: true, Versions: b.versions}
}

// As sets a **blobstore.Backend target to b: how GetIf reaches b through a
// wrapper.
func (b *Backend) As(target any) bool {
	if p, ok := target.(**Backend); ok {
		*p = b
		return true
	}
	return false
}

// ValidateKey checks that prefix+key is a valid blob name: 1 to 1024
// characters, at most 254 path segments, no empty segment, not ending in
// '.' or '/', none of the code points Azure refuses. Errors match
// etagstore.ErrInvalidKey. (The Store has applied driver.CheckKey.)
func (b *Backend) ValidateKey(key string) error {
	return checkBlobName(b.opts.Prefix + key)
}

func checkBlobName(name string) error {
	switch n := len([]rune(name)); {
	case n == 0 || n > 1024:
		return fmt.Errorf("%w: blob name %q must be 1 to 1024 characters", etagstore.ErrInvalidKey, name)
	case strings.HasSuffix(name, ".") || strings.HasSuffix(name, "/"):
		return fmt.Errorf("%w: blob name %q must not end with '.' or '/'", etagstore.ErrInvalidKey, name)
	case strings.Contains(name, "//") || strings.HasPrefix(name, "/"):
		return fmt.Errorf("%w: blob name %q has an empty path segment", etagstore.ErrInvalidKey, name)
	case strings.Count(name, "/") >= 254:
		return fmt.Errorf("%w: blob name %q has more than 254 path segments", etagstore.ErrInvalidKey, name)
	case strings.Contains(name, `\`):
		return fmt.Errorf("%w: blob name %q contains '\\', which some clients turn into '/'", etagstore.ErrInvalidKey, name)
	}
	for _, r := range name {
		if notForBlobNames(r) {
			return fmt.Errorf("%w: blob name %q contains %U, which Azure does not accept in blob names", etagstore.ErrInvalidKey, name, r)
		}
	}
	return driver.CheckKey(name)
}

// checkPrefix refuses, before anything is sent, a listing prefix holding a
// code point no blob name may hold (see notForBlobNames): the service
// answers such a listing with a 400, and no document can match it.
func (b *Backend) checkPrefix(prefix string) error {
	for _, r := range b.opts.Prefix + prefix {
		if notForBlobNames(r) {
			return fmt.Errorf("%w: blobstore: list prefix %q contains %U, which Azure does not accept in blob names", etagstore.ErrInvalidKey, prefix, r)
		}
	}
	return nil
}

// notForBlobNames reports whether r is one of the code points Azure's
// naming rules exclude from blob names even when percent-encoded: Unicode
// noncharacters (U+FDD0–U+FDEF and the last two of every plane, U+FFFE,
// U+FFFF, U+1FFFE, …) and the private-use area U+E000–U+F8FF ("code
// points like \uE000 … aren't valid Unicode characters, so they can't be
// used"). Once such a blob exists, listing the container fails.
func notForBlobNames(r rune) bool {
	return r&0xFFFE == 0xFFFE || r >= 0xFDD0 && r <= 0xFDEF || r >= 0xE000 && r <= 0xF8FF
}

func (b *Backend) blob(key string) *blockblob.Client {
	return b.c.NewBlockBlobClient(b.opts.Prefix + key)
}

// leaseKey is the context key of a lease id.
type leaseKey struct{}

// WithLease returns a context whose reads, writes and deletes through a
// blob Backend carry the lease id leaseID: the way to write a leased blob
// (without it Azure answers 412 LeaseIdMissing, etagstore.ErrLocked) and to
// read it exclusively. leaseID is a UUID (see Lease.ID); with any other
// non-empty id, those reads, writes and deletes fail with
// etagstore.ErrInvalidInput before anything is sent.
func WithLease(ctx context.Context, leaseID string) context.Context {
	// A grouped write carries one caller's context: never let a caller
	// without the lease ride on one with it, or the other way round.
	return driver.Ungrouped(context.WithValue(ctx, leaseKey{}, leaseID))
}

// leaseConditions is the lease condition of ctx's lease id (WithLease),
// nil without one; an id that is not a UUID matches
// etagstore.ErrInvalidInput.
func leaseConditions(ctx context.Context) (*blob.LeaseAccessConditions, error) {
	if id, ok := ctx.Value(leaseKey{}).(string); ok && id != "" {
		if err := checkLeaseID("WithLease lease id", id); err != nil {
			return nil, err
		}
		return &blob.LeaseAccessConditions{LeaseID: &id}, nil
	}
	return nil, nil
}

// Read downloads the blob under key, or returns an error matching
// etagstore.ErrNotFound.
func (b *Backend) Read(ctx context.Context, key string) (driver.Item, error) {
	it, err := b.read(ctx, key, nil)
	if errors.Is(err, ErrNotModified) { // cannot happen without conditions
		return driver.Item{}, fmt.Errorf("blobstore: read %q: unexpected 304", key)
	}
	return it, err
}

func (b *Backend) read(ctx context.Context, key string, mac *blob.ModifiedAccessConditions) (driver.Item, error) {
	lac, err := leaseConditions(ctx)
	if err != nil {
		return driver.Item{}, err
	}
	resp, err := b.blob(key).DownloadStream(ctx, &blob.DownloadStreamOptions{
		AccessConditions: &blob.AccessConditions{ModifiedAccessConditions: mac, LeaseAccessConditions: lac},
	})
	if err := driver.Sent(ctx, mapError("read", driver.CondNone, key, err)); err != nil {
		return driver.Item{}, err
	}
	if resp.ETag == nil || resp.Body == nil {
		// The SDK answers 304 Not Modified with no error and an empty response.
		return driver.Item{}, fmt.Errorf("%w: %q", ErrNotModified, key)
	}
	defer resp.Body.Close()
	if _, buried := tombToken(resp.Metadata); buried {
		return driver.Item{}, fmt.Errorf("%w: %q", etagstore.ErrNotFound, key) // a fenced delete's tombstone
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, int64(b.opts.MaxDocSize)+1))
	if err != nil {
		return driver.Item{}, mapError("read", driver.CondNone, key, err)
	}
	return driver.Item{Key: key, Data: data, Meta: metaOf(resp.Metadata), ETag: etagstore.ETag(*resp.ETag), Expires: expiresOf(resp.Metadata)}, nil
}

// readIfChanged reads the blob under key only if its ETag is no longer
// etag (If-None-Match); changed is false, and nothing is downloaded, when it
// still is. See driver.Abilities. A read under a lease (WithLease) reads
// whole: Azurite answers 304 before it checks the lease id, and a read with
// a wrong id must fail with ErrLockLost, not return a kept copy.
func (b *Backend) readIfChanged(ctx context.Context, key string, etag etagstore.ETag) (driver.Item, bool, error) {
	if lac, err := leaseConditions(ctx); err != nil {
		return driver.Item{}, false, err
	} else if lac != nil {
		it, err := b.read(ctx, key, nil)
		return it, err == nil, err
	}
	it, err := b.read(ctx, key, &blob.ModifiedAccessConditions{IfNoneMatch: to(azcore.ETag(etag))})
	if errors.Is(err, ErrNotModified) {
		return driver.Item{}, false, nil
	}
	return it, err == nil, err
}

// metaOf finds the bookkeeping entry; the SDK hands metadata keys back in
// Go's canonical header case, so the lookup ignores case.
func metaOf(md map[string]*string) string {
	for k, v := range md {
		if strings.EqualFold(k, metaKey) && v != nil {
			return *v
		}
	}
	return ""
}

// ReadConditions are the conditional headers of GetIf. Zero fields are not
// sent. IfNoneMatch etagstore.ETagAny ("*") matches every version: an
// existing blob gives ErrNotModified, a missing one etagstore.ErrNotFound.
type ReadConditions struct {
	IfMatch           etagstore.ETag // mismatch: etagstore.ErrConflict (412)
	IfNoneMatch       etagstore.ETag // match (ETagAny: the blob exists): ErrNotModified (304)
	IfModifiedSince   time.Time      // not modified since: ErrNotModified (304)
	IfUnmodifiedSince time.Time      // modified since: etagstore.ErrConflict (412)
}

func (c ReadConditions) azure() *blob.ModifiedAccessConditions {
	var m blob.ModifiedAccessConditions
	if c.IfMatch != "" {
		e := azcore.ETag(c.IfMatch)
		m.IfMatch = &e
	}
	if c.IfNoneMatch != "" {
		e := azcore.ETag(c.IfNoneMatch)
		m.IfNoneMatch = &e
	}
	if !c.IfModifiedSince.IsZero() {
		m.IfModifiedSince = &c.IfModifiedSince
	}
	if !c.IfUnmodifiedSince.IsZero() {
		m.IfUnmodifiedSince = &c.IfUnmodifiedSince
	}
	return &m
}

// GetIf reads the document under key if the conditions hold. A cached copy
// that is still current gives ErrNotModified (HTTP 304: nothing is
// downloaded), and so does any existing blob with IfNoneMatch
// etagstore.ETagAny; a failed If-Match or If-Unmodified-Since gives
// etagstore.ErrConflict; a missing blob etagstore.ErrNotFound; a Store on
// another backend errors.ErrUnsupported, and nothing is sent. On a Store
// whose documents expire (etagstore.Expiry), an expired document matches
// ErrNotFound: a 304 is then checked by reading the blob (one more
// request). The call is one span (etagstore.GetIf) of s's telemetry; a
// 304 is the outcome not_modified.
func GetIf[T any](ctx context.Context, s *etagstore.Store[T], key string, cond ReadConditions) (etagstore.Doc[T], error) {
	ctx, end := s.Observe(ctx, access.GetIf, key)
	d, err := getIf(ctx, s, key, cond)
	if errors.Is(err, ErrNotModified) {
		end(telemetry.ErrNotModified) // the outcome not_modified, not error
	} else {
		end(err)
	}
	return d, err
}

func getIf[T any](ctx context.Context, s *etagstore.Store[T], key string, cond ReadConditions) (etagstore.Doc[T], error) {
	var b *Backend
	if !s.Backend().As(&b) {
		return etagstore.Doc[T]{}, fmt.Errorf("%w: blobstore: GetIf needs a Store on a blobstore Backend, not %T", errors.ErrUnsupported, s.Backend())
	}
	if err := driver.CheckKey(key); err != nil {
		return etagstore.Doc[T]{}, err
	}
	if err := b.ValidateKey(key); err != nil {
		return etagstore.Doc[T]{}, err
	}
	var err error
	if cond.IfNoneMatch == etagstore.ETagAny {
		err = b.notModifiedIfExists(ctx, key, cond)
	} else {
		var it driver.Item
		if it, err = b.read(ctx, key, cond.azure()); err == nil {
			return s.DecodeItem(it) // as s decodes its own documents
		}
		err = b.buriedOr(ctx, key, cond, err)
	}
	if errors.Is(err, ErrNotModified) && s.Expires() {
		return etagstore.Doc[T]{}, expiredOr(ctx, b, s, key, err)
	}
	return etagstore.Doc[T]{}, err
}

// expiredOr is notModified, GetIf's answer that the document is current,
// unless it has expired (s's Expiry), which only its data tells: then
// ErrNotFound, as for a missing blob. It reads the blob to learn it.
func expiredOr[T any](ctx context.Context, b *Backend, s *etagstore.Store[T], key string, notModified error) error {
	it, err := b.read(ctx, key, ReadConditions{}.azure())
	if err != nil {
		return b.buriedOr(ctx, key, ReadConditions{}, err)
	}
	if _, err := s.DecodeItem(it); errors.Is(err, etagstore.ErrNotFound) {
		return err
	}
	return notModified
}

// buriedOr is GetIf's failure err, or what a missing blob would have
// answered when a date condition was judged on a tombstone (tombstone.go),
// which is no document: ErrNotFound for a 304 or a 412 of a date. (A 304
// of the client's own ETag is a document's, as a tombstone's ETag is
// handed to no one; a 412 of If-Match is a missing blob's answer too.)
func (b *Backend) buriedOr(ctx context.Context, key string, cond ReadConditions, err error) error {
	if cond.IfMatch != "" || cond.IfNoneMatch != "" || !errors.Is(err, etagstore.ErrConflict) && !errors.Is(err, ErrNotModified) {
		return err
	}
	if _, md, perr := b.properties(ctx, key); perr == nil && isTombstone(md) {
		return fmt.Errorf("%w: %q", etagstore.ErrNotFound, key)
	}
	return err
}

// notModifiedIfExists is GetIf with If-None-Match: *, which no existing
// version passes: ErrNotModified if the blob exists, etagstore.ErrNotFound
// if not. The header is not sent (Azurite refuses it on reads with 400
// UnsatisfiableCondition, whether the blob exists or not): one HEAD request
// checks that the blob exists under the conditions that come before
// If-None-Match (If-Match, else If-Unmodified-Since: RFC 9110, 13.2.2;
// If-Modified-Since is not evaluated beside If-None-Match).
func (b *Backend) notModifiedIfExists(ctx context.Context, key string, cond ReadConditions) error {
	lac, err := leaseConditions(ctx)
	if err != nil {
		return err
	}
	before := ReadConditions{IfMatch: cond.IfMatch, IfUnmodifiedSince: cond.IfUnmodifiedSince}
	resp, err := b.blob(key).GetProperties(ctx, &blob.GetPropertiesOptions{
		AccessConditions: &blob.AccessConditions{ModifiedAccessConditions: before.azure(), LeaseAccessConditions: lac},
	})
	if err := driver.Sent(ctx, mapError("read", driver.CondNone, key, err)); err != nil {
		return err
	}
	if isTombstone(resp.Metadata) {
		return fmt.Errorf("%w: %q", etagstore.ErrNotFound, key) // a fenced delete's tombstone
	}
	return fmt.Errorf("%w: %q", ErrNotModified, key)
}

// Write uploads w.Data as the blob under key in one Put Blob request with
// the condition w.Cond: CondCreate sends If-None-Match: * (an existing blob
// matches etagstore.ErrExists), CondIfMatch sends If-Match (a different or
// missing blob matches etagstore.ErrConflict), CondNone sends none. A lease
// id from WithLease is sent along; a leased blob written without it matches
// etagstore.ErrLocked, never ErrConflict.
func (b *Backend) Write(ctx context.Context, key string, w driver.Write) (etagstore.ETag, error) {
	if err := w.Cond.Check(); err != nil {
		return "", err
	}
	if w.Mode == driver.ModeTombstone {
		return b.bury(ctx, key, w)
	}
	if w.Mode != driver.ModeReplace {
		return "", fmt.Errorf("%w: blobstore cannot merge %q", etagstore.ErrInvalidInput, key)
	}
	if len(w.Data) > b.opts.MaxDocSize {
		return "", fmt.Errorf("%w: document %q is %d bytes, the limit is %d", etagstore.ErrTooLarge, key, len(w.Data), b.opts.MaxDocSize)
	}
	var md map[string]*string
	if w.Meta != "" {
		md = map[string]*string{metaKey: &w.Meta}
	}
	md = withExpires(md, w.Expires)        // expires.go
	if w.Cond.Kind == driver.CondIfMatch { // ETagAny: the version stored now, never a tombstone (tombstone.go)
		return b.onVersion(ctx, key, w.Cond.ETag, func(etag etagstore.ETag) (etagstore.ETag, error) {
			return b.upload(ctx, "write", key, w.Data, md, driver.IfMatch(etag))
		})
	}
	etag, err := b.upload(ctx, "write", key, w.Data, md, w.Cond)
	if w.Cond.Kind == driver.CondCreate && errors.Is(err, etagstore.ErrExists) {
		return b.createOver(ctx, key, w, md, err) // over a tombstone, perhaps
	}
	return etag, err
}

// upload is one Put Blob of data and metadata md under key with cond,
// and the lease id of ctx; op names it in errors.
func (b *Backend) upload(ctx context.Context, op, key string, data []byte, md map[string]*string, cond driver.Cond) (etagstore.ETag, error) {
	lac, err := leaseConditions(ctx)
	if err != nil {
		return "", err
	}
	opts := &blockblob.UploadOptions{
		HTTPHeaders:      &blob.HTTPHeaders{BlobContentType: &b.opts.ContentType},
		AccessConditions: &blob.AccessConditions{ModifiedAccessConditions: writeConditions(cond), LeaseAccessConditions: lac},
		Metadata:         md,
	}
	ctx = azretry.NoRetry(ctx)
	resp, err := b.blob(key).Upload(ctx, nopCloser{bytes.NewReader(data)}, opts)
	if err := driver.Sent(ctx, mapError(op, cond.Kind, key, err)); err != nil {
		return "", err
	}
	if resp.ETag == nil {
		return "", fmt.Errorf("blobstore: write %q: no ETag in the response", key)
	}
	return etagstore.ETag(*resp.ETag), nil
}

func writeConditions(c driver.Cond) *blob.ModifiedAccessConditions {
	switch c.Kind {
	case driver.CondCreate:
		return &blob.ModifiedAccessConditions{IfNoneMatch: to(azcore.ETagAny)}
	case driver.CondIfMatch:
		return &blob.ModifiedAccessConditions{IfMatch: to(azcore.ETag(c.ETag))}
	}
	return nil
}

func to[T any](v T) *T { return &v }

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }

// Delete deletes the blob under key with If-Match of etag (ETagAny: any
// version). A missing blob matches etagstore.ErrNotFound, a different ETag
// etagstore.ErrConflict; without an ETag nothing is sent
// (etagstore.ErrETagRequired).
func (b *Backend) Delete(ctx context.Context, key string, etag driver.ETag) error {
	cond := driver.IfMatch(etag)
	if err := cond.Check(); err != nil {
		return err
	}
	lac, err := leaseConditions(ctx)
	if err != nil {
		return err
	}
	_, err = b.onVersion(ctx, key, etag, func(etag etagstore.ETag) (etagstore.ETag, error) { // ETagAny: never a tombstone
		cond := driver.IfMatch(etag)
		ctx := azretry.NoRetry(ctx)
		_, err := b.blob(key).Delete(ctx, &blob.DeleteOptions{
			AccessConditions: &blob.AccessConditions{ModifiedAccessConditions: writeConditions(cond), LeaseAccessConditions: lac},
		})
		return "", driver.Sent(ctx, mapError("delete", cond.Kind, key, err))
	})
	return err
}

// List yields the documents whose key starts with prefix, in key order
// (the blob listing's: by UTF-16 code units, driver.CompareKeys; the
// Backend declares no other): it lists the blob names, then downloads
// each (a blob deleted in between is skipped).
func (b *Backend) List(ctx context.Context, prefix string) iter.Seq2[driver.Item, error] {
	return b.documents(ctx, prefix, func(key string, _ *container.BlobItem) (driver.Item, bool, error) {
		it, err := b.Read(ctx, key)
		if errors.Is(err, etagstore.ErrNotFound) {
			return it, false, nil // deleted since it was listed
		}
		return it, true, err
	})
}

// documents yields, for each blob under prefix that is a document of
// this Backend (not a lock or a tombstone), in name order, what item
// makes of it (ok false: nothing), from one listing with the blobs'
// metadata (a page per 5,000). An error is yielded once and ends it.
func (b *Backend) documents(ctx context.Context, prefix string, item func(key string, bi *container.BlobItem) (driver.Item, bool, error)) iter.Seq2[driver.Item, error] {
	return func(yield func(driver.Item, error) bool) {
		if err := b.checkPrefix(prefix); err != nil {
			yield(driver.Item{}, err)
			return
		}
		full := b.opts.Prefix + prefix
		pager := b.c.NewListBlobsFlatPager(&container.ListBlobsFlatOptions{Prefix: &full, Include: container.ListBlobsInclude{Metadata: true}})
		for pager.More() {
			page, err := pager.NextPage(ctx)
			if err := driver.Sent(ctx, mapError("list", driver.CondNone, prefix, err)); err != nil {
				yield(driver.Item{}, err)
				return
			}
			for _, bi := range page.Segment.BlobItems {
				if bi.Name == nil {
					continue
				}
				key := strings.TrimPrefix(*bi.Name, b.opts.Prefix)
				if driver.CheckKey(key) != nil || b.ValidateKey(key) != nil || isLockBlob(bi.Metadata) || isTombstone(bi.Metadata) {
					continue // not a document of this Backend
				}
				it, ok, err := item(key, bi)
				if !ok && err == nil {
					continue
				}
				if !yield(it, err) || err != nil {
					return
				}
			}
		}
	}
}

// ListPage returns up to limit documents whose key starts with prefix and
// sorts after the key after, in key order, and whether more follow; see
// driver.Backend. The listing starts at the blob name after (StartFrom,
// inclusive; names up to after are skipped, so a service that ignored it
// would only be slower), never at a stored marker, so a page resumes
// correctly however the container changed. The page's documents are
// downloaded, pageReaders at a time; one deleted in between is left out
// and the page filled from the names after it.
func (b *Backend) ListPage(ctx context.Context, prefix, after string, limit int) ([]driver.Item, bool, error) {
	if err := b.checkPrefix(prefix); err != nil {
		return nil, false, err
	}
	full := b.opts.Prefix + prefix
	maxResults := int32(min(limit+2, 5000)) // the page, after itself, and one to tell "more"
	opts := &container.ListBlobsFlatOptions{Prefix: &full, MaxResults: &maxResults, Include: container.ListBlobsInclude{Metadata: true}}
	if after != "" {
		from := b.opts.Prefix + after
		opts.StartFrom = &from
	}
	pager := b.c.NewListBlobsFlatPager(opts)
	var items []driver.Item
	var keys []string // listed, not yet downloaded
	for {
		need := limit - len(items)
		for len(keys) <= need && pager.More() {
			page, err := pager.NextPage(ctx)
			if err := driver.Sent(ctx, mapError("list", driver.CondNone, prefix, err)); err != nil {
				return nil, false, err
			}
			keys = b.appendPageKeys(keys, page.Segment.BlobItems, prefix, after)
		}
		if need == 0 || len(keys) == 0 {
			return items, need == 0 && len(keys) > 0, nil
		}
		n := min(need, len(keys))
		got, err := b.readMany(ctx, keys[:n])
		if err != nil {
			return nil, false, err
		}
		items, keys = append(items, got...), keys[n:]
	}
}

// appendPageKeys appends to keys those of the listed blobs that belong to
// the page: documents (not lock blobs) under prefix, after after, with
// keys the backend accepts.
func (b *Backend) appendPageKeys(keys []string, blobs []*container.BlobItem, prefix, after string) []string {
	for _, bi := range blobs {
		if bi.Name == nil {
			continue
		}
		key, ok := strings.CutPrefix(*bi.Name, b.opts.Prefix)
		if ok && strings.HasPrefix(key, prefix) && driver.CompareKeys(key, after) > 0 &&
			driver.CheckKey(key) == nil && b.ValidateKey(key) == nil && !isLockBlob(bi.Metadata) && !isTombstone(bi.Metadata) {
			keys = append(keys, key)
		}
	}
	return keys
}

// pageReaders is how many documents ListPage downloads at once.
const pageReaders = 8

// readMany reads the documents under keys, pageReaders at a time, and
// returns them in the order of keys without those that are gone. The
// first failure stops the others and is returned.
func (b *Backend) readMany(ctx context.Context, keys []string) ([]driver.Item, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	items := make([]driver.Item, len(keys))
	found := make([]bool, len(keys))
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	next := make(chan int)
	for range min(pageReaders, len(keys)) {
		wg.Go(func() {
			for i := range next {
				it, err := b.Read(ctx, keys[i])
				switch {
				case err == nil:
					items[i], found[i] = it, true
				case !errors.Is(err, etagstore.ErrNotFound):
					mu.Lock()
					if firstErr == nil {
						firstErr = err
						cancel()
					}
					mu.Unlock()
				}
			}
		})
	}
	for i := range keys {
		next <- i
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	out := items[:0]
	for i, it := range items {
		if found[i] {
			out = append(out, it)
		}
	}
	return out, nil
}

// mapError is the one place where Blob service errors become etagstore's
// sentinels, by ErrorCode (falling back on the HTTP status). cond says what
// the request was: a 412 on a create means the blob exists. nil stays nil.
func mapError(op string, cond driver.CondKind, key string, err error) error {
	if err == nil {
		return nil
	}
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		return azerr.Plain("blobstore", op, key, err)
	}
	se := azerr.New("blobstore", op, key, re, err)
	var sentinel error
	switch bloberror.Code(re.ErrorCode) {
	case bloberror.ConditionNotMet:
		sentinel = azerr.PreconditionFailed(cond == driver.CondCreate)
	case bloberror.BlobAlreadyExists:
		sentinel = etagstore.ErrExists
	case bloberror.BlobNotFound:
		sentinel = etagstore.ErrNotFound
	case bloberror.LeaseIDMissing, bloberror.LeaseAlreadyPresent, bloberror.LeaseIsBreakingAndCannotBeAcquired:
		sentinel = etagstore.ErrLocked
	case bloberror.LeaseIDMismatchWithBlobOperation, bloberror.LeaseIDMismatchWithContainerOperation,
		bloberror.LeaseIDMismatchWithLeaseOperation, bloberror.LeaseLost, bloberror.LeaseIsBrokenAndCannotBeRenewed,
		bloberror.LeaseNotPresentWithBlobOperation, bloberror.LeaseNotPresentWithContainerOperation,
		bloberror.LeaseNotPresentWithLeaseOperation, bloberror.LeaseAlreadyBroken, bloberror.LeaseIsBreakingAndCannotBeChanged:
		sentinel = etagstore.ErrLockLost
	case bloberror.RequestBodyTooLarge, bloberror.MetadataTooLarge:
		sentinel = etagstore.ErrTooLarge
	case bloberror.ContainerNotFound:
		// Definite, and no retry will change it: the container must be created.
		se.Detail = "the container does not exist"
		sentinel = etagstore.ErrStorageNotFound
	default:
		if re.StatusCode == http.StatusNotModified {
			sentinel = ErrNotModified
		} else if sentinel = azerr.ByStatus(re.StatusCode, cond == driver.CondCreate); sentinel == nil {
			return azerr.ServerBusy(re.StatusCode, re.ErrorCode, se)
		}
	}
	return azerr.Wrap(sentinel, se)
}

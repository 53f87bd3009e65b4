package blobstore

// Tombstones (driver.ModeTombstone): a fenced delete keeps the key's
// fencing token, so that a stale holder's fenced create of the key is
// refused. Blobs cannot commit two blobs at once, so the token stays
// where the document was: the delete replaces the blob, If-Match of the
// version it deletes, with an empty one whose metadata holds the token
// (tombKey). Every read and listing takes such a blob for a missing one.
// A create finds it present (If-None-Match: *) and replaces it, If-Match
// of its ETag, once the create's token is no lower than the one kept; an
// unconditional upload replaces it as any blob. A write or delete of any
// version (If-Match: *) would find it present too, so it reads the blob's
// properties first and is sent If-Match of the version found: a document
// found missing or buried is etagstore.ErrNotFound. That costs ETagAny
// writes and deletes one request more; a tombstone costs an empty blob.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/lease"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
)

// tombKey is the metadata entry of a tombstone: the fencing token kept.
const tombKey = "etagstoretomb"

// isTombstone reports whether md is a tombstone's metadata.
func isTombstone(md map[string]*string) bool {
	_, ok := tombToken(md)
	return ok
}

// tombToken is the token a tombstone's metadata keeps; ok is false when
// md is not a tombstone's.
func tombToken(md map[string]*string) (token int64, ok bool) {
	for k, v := range md {
		if strings.EqualFold(k, tombKey) && v != nil {
			token, _ = strconv.ParseInt(*v, 10, 64)
			return token, true
		}
	}
	return 0, false
}

// bury is Write with driver.ModeTombstone: the blob's version w.Cond
// names replaced by an empty blob keeping w.Meta's token.
func (b *Backend) bury(ctx context.Context, key string, w driver.Write) (etagstore.ETag, error) {
	if w.Cond.Kind != driver.CondIfMatch {
		return "", fmt.Errorf("%w: a tombstone of %q deletes a version (CondIfMatch)", etagstore.ErrInvalidInput, key)
	}
	token := strconv.FormatInt(driver.FenceOf(w.Meta), 10)
	md := map[string]*string{metaKey: &w.Meta, tombKey: &token}
	_, err := b.onVersion(ctx, key, w.Cond.ETag, func(etag etagstore.ETag) (etagstore.ETag, error) {
		return b.upload(ctx, "delete", key, nil, md, driver.IfMatch(etag))
	})
	if err == nil {
		b.releaseBuried(ctx, key)
	}
	return "", err // a tombstone's ETag is no version of the document
}

// releaseBuried releases the lease of ctx (WithLease) on the tombstone
// just written under it: a delete ends a blob's lease, so a deleted
// document's must not stay on its tombstone, where it would refuse the
// next create with ErrLocked. A release that fails leaves the lease to
// expire or be broken; the delete stands.
func (b *Backend) releaseBuried(ctx context.Context, key string) {
	id, ok := ctx.Value(leaseKey{}).(string)
	if !ok || id == "" {
		return
	}
	c, err := lease.NewBlobClient(b.blob(key), &lease.BlobClientOptions{LeaseID: &id})
	if err != nil {
		return
	}
	_, err = c.ReleaseLease(ctx, nil)
	driver.Sent(ctx, mapError("release lease", driver.CondNone, key, err))
}

// onVersion runs op with etag, or, for ETagAny, with the ETag of the
// version stored now (a blob found missing or buried is
// etagstore.ErrNotFound), again on a race with another writer.
func (b *Backend) onVersion(ctx context.Context, key string, etag etagstore.ETag, op func(etagstore.ETag) (etagstore.ETag, error)) (etagstore.ETag, error) {
	if etag != etagstore.ETagAny {
		return op(etag)
	}
	for {
		current, md, err := b.properties(ctx, key)
		if err != nil {
			return "", err
		}
		if _, buried := tombToken(md); buried {
			return "", fmt.Errorf("%w: %q", etagstore.ErrNotFound, key)
		}
		out, err := op(current)
		if !errors.Is(err, etagstore.ErrConflict) {
			return out, err
		}
		if err := ctx.Err(); err != nil { // another writer won each race: the version stays any
			return "", err
		}
	}
}

// createOver is a create of w, refused with exists (If-None-Match: *):
// over a tombstone whose token is no higher than the create's, the create
// replaces it; over a document, exists stands.
func (b *Backend) createOver(ctx context.Context, key string, w driver.Write, md map[string]*string, exists error) (etagstore.ETag, error) {
	for {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		current, stored, err := b.properties(ctx, key)
		switch {
		case errors.Is(err, etagstore.ErrNotFound): // gone meanwhile: create it
			etag, err := b.upload(ctx, "write", key, w.Data, md, w.Cond)
			if !errors.Is(err, etagstore.ErrExists) {
				return etag, err
			}
			continue
		case err != nil:
			return "", err
		}
		kept, buried := tombToken(stored)
		if !buried {
			return "", exists
		}
		if token := driver.FenceOf(w.Meta); token > 0 && token < kept {
			return "", fmt.Errorf("%w: %q was deleted under fencing token %d, the create carries %d", etagstore.ErrFenced, key, kept, token)
		}
		etag, err := b.upload(ctx, "write", key, w.Data, md, driver.IfMatch(current))
		if !errors.Is(err, etagstore.ErrConflict) {
			return etag, err
		}
	}
}

// properties reads the ETag and metadata of the blob under key (under the
// lease of ctx, if any). It is the read a write makes before it sends
// anything: a failure that is no answer of the service's (ErrNotFound,
// ErrLocked…) is marked driver.ErrNotApplied, so that it is never taken
// for a write whose outcome is unknown.
func (b *Backend) properties(ctx context.Context, key string) (etagstore.ETag, map[string]*string, error) {
	lac, err := leaseConditions(ctx)
	if err != nil {
		return "", nil, err
	}
	resp, err := b.blob(key).GetProperties(ctx, &blob.GetPropertiesOptions{AccessConditions: &blob.AccessConditions{LeaseAccessConditions: lac}})
	if err := driver.Sent(ctx, mapError("read", driver.CondNone, key, err)); err != nil {
		return "", nil, notSent(err)
	}
	if resp.ETag == nil {
		return "", nil, fmt.Errorf("blobstore: read %q: no ETag in the response", key)
	}
	return etagstore.ETag(*resp.ETag), resp.Metadata, nil
}

// notSent marks err, the failure of a read a write made before sending
// anything, as not applied (driver.ErrNotApplied), unless it is a sentinel
// the service's answer made or the context's end.
func notSent(err error) error {
	if driver.SentinelOf(err) != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("%w: %w", driver.ErrNotApplied, err)
}

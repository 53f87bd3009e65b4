package blobstore

import (
	"context"
	"iter"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
)

// This file keeps when a document expires (driver.Write.Expires, from a
// Store with an Expiry index) in its blob's metadata, and lists the
// documents' versions with it and without their data
// (driver.Abilities.Versions), so that a sweep reads only the blobs due.

// expiresKey is the blob metadata entry holding when the document
// expires: milliseconds since 1970, rounded up.
const expiresKey = "etagstoreexpires"

// withExpires is md with the entry of at added (none when at is zero).
func withExpires(md map[string]*string, at time.Time) map[string]*string {
	if at.IsZero() {
		return md
	}
	ms := at.UnixMilli()
	if at.After(time.UnixMilli(ms)) {
		ms++ // rounded up: a sweep never judges a document due early
	}
	v := strconv.FormatInt(ms, 10)
	out := make(map[string]*string, len(md)+1)
	for k, x := range md {
		out[k] = x
	}
	out[expiresKey] = &v
	return out
}

// expiresOf is the instant md's entry names (zero: none). The SDK hands
// metadata keys back in Go's canonical header case, so the lookup
// ignores case.
func expiresOf(md map[string]*string) time.Time {
	for k, v := range md {
		if strings.EqualFold(k, expiresKey) && v != nil {
			if ms, err := strconv.ParseInt(*v, 10, 64); err == nil {
				return time.UnixMilli(ms).UTC()
			}
		}
	}
	return time.Time{}
}

// versions lists the documents under prefix with their ETags, Meta and
// Expires, from the listing alone: a page per 5,000 blobs, no blob read.
// See driver.Abilities.Versions.
func (b *Backend) versions(ctx context.Context, prefix string) iter.Seq2[driver.Item, error] {
	return b.documents(ctx, prefix, func(key string, bi *container.BlobItem) (driver.Item, bool, error) {
		if bi.Properties == nil || bi.Properties.ETag == nil {
			return driver.Item{}, false, nil
		}
		return driver.Item{Key: key, Meta: metaOf(bi.Metadata), ETag: etagstore.ETag(*bi.Properties.ETag), Expires: expiresOf(bi.Metadata)}, true, nil
	})
}

package blobstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/blobstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/storetest"
)

// Documents that expire, on blobs: no entries (the Expiry index keeps
// none; unique and lookup indexes are unsupported), no transactions;
// Sweep lists the documents.
func TestExpiry(t *testing.T) {
	storetest.RunExpiry(t, func(t *testing.T) driver.Backend {
		return blobstore.New(azuritetest.NewContainer(t), &blobstore.Options{Prefix: "docs/"})
	})
}

// TestExpiryGetIf: GetIf of a document that has expired by the Store's
// clock answers as for a missing blob, ErrNotFound, whatever its
// conditions: its ETag in If-None-Match is no cached copy still current
// (a 304 would tell a client to keep showing it). 1 ms before, it answers
// as for the live document.
func TestExpiryGetIf(t *testing.T) {
	ctx := t.Context()
	clock := storetest.NewFakeClock(storetest.ExpAt.Add(-time.Millisecond))
	b := blobstore.New(azuritetest.NewContainer(t), nil)
	s := etagstore.New[storetest.ExpCard](b, &etagstore.Options{Clock: clock}, storetest.ExpUntil)
	c := storetest.ExpCard{Title: "t1", Until: storetest.ExpAt}
	d, err := s.Create(ctx, "k", c)
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now().Add(-time.Hour)
	after := time.Now().Add(time.Hour)
	for _, tc := range []struct {
		name string
		cond blobstore.ReadConditions
		live error // the answer 1 ms before the expiry
	}{
		{"no condition", blobstore.ReadConditions{}, nil},
		{"If-Match its ETag", blobstore.ReadConditions{IfMatch: d.ETag}, nil},
		{"If-None-Match other", blobstore.ReadConditions{IfNoneMatch: `"0x1"`}, nil},
		{"If-Modified-Since earlier", blobstore.ReadConditions{IfModifiedSince: before}, nil},
		{"If-Unmodified-Since later", blobstore.ReadConditions{IfUnmodifiedSince: after}, nil},
		{"If-None-Match its ETag", blobstore.ReadConditions{IfNoneMatch: d.ETag}, blobstore.ErrNotModified},
		{"If-None-Match *", blobstore.ReadConditions{IfNoneMatch: etagstore.ETagAny}, blobstore.ErrNotModified},
		{"If-Modified-Since later", blobstore.ReadConditions{IfModifiedSince: after}, blobstore.ErrNotModified},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock.Set(storetest.ExpAt.Add(-time.Millisecond))
			got, err := blobstore.GetIf(ctx, s, "k", tc.cond)
			switch {
			case tc.live == nil && err != nil:
				t.Fatalf("at E−1ms: GetIf = %v, want the document", err)
			case tc.live == nil && (got.Value.Title != c.Title || !got.Expires.Equal(storetest.ExpAt)):
				t.Fatalf("at E−1ms: GetIf = %+v (expires %v), want %+v expiring at E", got.Value, got.Expires, c)
			case tc.live != nil && !errors.Is(err, tc.live):
				t.Fatalf("at E−1ms: GetIf = %v, want %v", err, tc.live)
			}
			clock.Set(storetest.ExpAt)
			got, err = blobstore.GetIf(ctx, s, "k", tc.cond)
			if tc.live != nil && !errors.Is(err, etagstore.ErrNotFound) {
				t.Errorf("at E: GetIf = %+v, %v; want ErrNotFound, as for a missing blob", got.Value, err)
			} else if !errors.Is(err, etagstore.ErrNotFound) {
				t.Errorf("at E: GetIf = %+v, %v; want ErrNotFound, as for a missing blob", got.Value, err)
			}
		})
	}
	// Still stored: the Sweep deletes it.
	clock.Set(storetest.ExpAt.Add(time.Minute))
	if n, err := s.Sweep(ctx); n != 1 || err != nil {
		t.Errorf("Sweep = %d, %v; want 1, nil", n, err)
	}
	if _, err := b.Read(ctx, "k"); !errors.Is(err, etagstore.ErrNotFound) {
		t.Errorf("after the Sweep: Backend.Read = %v, want ErrNotFound", err)
	}
}

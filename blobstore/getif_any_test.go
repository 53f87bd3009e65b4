package blobstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/blobstore"
)

// GetIf with If-None-Match: * (ETagAny): every version matches, so an
// existing blob is not modified and a missing one is not found; the
// conditions that come before If-None-Match still decide first.
func TestGetIfNoneMatchAny(t *testing.T) {
	ctx := t.Context()
	s, _ := newNotes(t)
	d, err := s.Create(ctx, "n", Note{Text: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now().Add(-time.Hour)
	after := time.Now().Add(time.Hour)
	for _, tc := range []struct {
		name string
		key  string
		cond blobstore.ReadConditions
		want error
	}{
		{"existing", "n", blobstore.ReadConditions{IfNoneMatch: etagstore.ETagAny}, blobstore.ErrNotModified},
		{"missing", "missing", blobstore.ReadConditions{IfNoneMatch: etagstore.ETagAny}, etagstore.ErrNotFound},
		{"If-Match current", "n", blobstore.ReadConditions{IfNoneMatch: etagstore.ETagAny, IfMatch: d.ETag}, blobstore.ErrNotModified},
		{"If-Match other", "n", blobstore.ReadConditions{IfNoneMatch: etagstore.ETagAny, IfMatch: `"0x1"`}, etagstore.ErrConflict},
		{"If-Unmodified-Since earlier", "n", blobstore.ReadConditions{IfNoneMatch: etagstore.ETagAny, IfUnmodifiedSince: before}, etagstore.ErrConflict},
		{"If-Unmodified-Since later", "n", blobstore.ReadConditions{IfNoneMatch: etagstore.ETagAny, IfUnmodifiedSince: after}, blobstore.ErrNotModified},
		{"If-Modified-Since earlier", "n", blobstore.ReadConditions{IfNoneMatch: etagstore.ETagAny, IfModifiedSince: before}, blobstore.ErrNotModified},
		{"If-Modified-Since later, missing", "missing", blobstore.ReadConditions{IfNoneMatch: etagstore.ETagAny, IfModifiedSince: after}, etagstore.ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := blobstore.GetIf(ctx, s, tc.key, tc.cond)
			if !errors.Is(err, tc.want) || got != (etagstore.Doc[Note]{}) {
				t.Fatalf("GetIf = %+v, %v; want %v", got, err, tc.want)
			}
			if errors.Is(err, etagstore.ErrInvalidInput) {
				t.Fatalf("GetIf = %v: refused as invalid input", err)
			}
			checkOneLine(t, "GetIf", err)
		})
	}
}

package blobstore_test

import (
	"errors"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/blobstore"
	"github.com/etagstore/etagstore/internal/azuritetest"
)

// TestTombstoneBlob: a fenced Delete leaves an empty blob in the
// document's place keeping the token; every read takes it for a missing
// document (GetIf with and without conditions too), and a write of any
// version finds it missing. (Its own ETag is no version a read returns.)
func TestTombstoneBlob(t *testing.T) {
	ctx := t.Context()
	c := azuritetest.NewContainer(t)
	type doc struct{ Title string }
	s := blobstore.NewStore[doc](c, nil, nil)
	if _, err := s.Create(etagstore.WithFence(ctx, 2), "k", doc{"a"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(etagstore.WithFence(ctx, 3), "k", etagstore.ETagAny); err != nil {
		t.Fatal(err)
	}
	props, err := c.NewBlobClient("k").GetProperties(ctx, &blob.GetPropertiesOptions{})
	if err != nil {
		t.Fatalf("the tombstone blob: %v", err)
	}
	if props.ContentLength == nil || *props.ContentLength != 0 || props.Metadata["Etagstoretomb"] == nil || *props.Metadata["Etagstoretomb"] != "3" {
		t.Errorf("tombstone: %d bytes, metadata %v; want an empty blob keeping token 3", *props.ContentLength, props.Metadata)
	}
	for name, cond := range map[string]blobstore.ReadConditions{
		"none": {}, "IfNoneMatch *": {IfNoneMatch: etagstore.ETagAny}, "IfMatch *": {IfMatch: etagstore.ETagAny},
	} {
		if _, err := blobstore.GetIf(ctx, s, "k", cond); !errors.Is(err, etagstore.ErrNotFound) {
			t.Errorf("GetIf(%s) of the deleted document = %v, want ErrNotFound", name, err)
		}
	}
	if _, err := s.Replace(ctx, etagstore.Doc[doc]{Key: "k", ETag: etagstore.ETagAny, Value: doc{"r"}}); !errors.Is(err, etagstore.ErrNotFound) {
		t.Errorf("Replace(ETagAny) of the deleted document = %v, want ErrNotFound", err)
	}
	if _, err := s.Create(ctx, "k", doc{"unfenced"}); err != nil {
		t.Errorf("an unfenced Create over the tombstone: %v", err)
	}
}

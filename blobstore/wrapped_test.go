package blobstore_test

import (
	"errors"
	"testing"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/blobstore"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/storetest"
)

// A blob Backend behind a pass-through wrapper keeps its abilities
// (verbatim reads, revalidation) and GetIf reaches it through As.
func TestExtrasThroughAWrapper(t *testing.T) {
	ctx := t.Context()
	b := storetest.Wrap(blobstore.New(azuritetest.NewContainer(t), nil))
	if a := b.Abilities(); !a.Verbatim || a.ReadIfChanged == nil {
		t.Fatalf("abilities behind a wrapper: %+v", a)
	}
	s := etagstore.New[Note](b, nil)
	d, err := s.Create(ctx, "n", Note{Text: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := blobstore.GetIf(ctx, s, "n", blobstore.ReadConditions{IfNoneMatch: d.ETag}); !errors.Is(err, blobstore.ErrNotModified) {
		t.Fatalf("GetIf(If-None-Match current) through a wrapper = %v, want ErrNotModified", err)
	}
}

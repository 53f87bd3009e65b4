package blobstore_test

import (
	"errors"
	"testing"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/blobstore"
	"github.com/etagstore/etagstore/memstore"
)

// TestGetIfOnAnotherBackend: GetIf on a Store over another backend
// answers errors.ErrUnsupported, not the caller's bad input.
func TestGetIfOnAnotherBackend(t *testing.T) {
	type doc struct{ Title string }
	s := etagstore.New[doc](memstore.New(nil), nil)
	_, err := blobstore.GetIf(t.Context(), s, "k", blobstore.ReadConditions{})
	if !errors.Is(err, errors.ErrUnsupported) || errors.Is(err, etagstore.ErrInvalidInput) {
		t.Errorf("GetIf on a memstore Store = %v, want errors.ErrUnsupported alone", err)
	}
}

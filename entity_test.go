package etagstore_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/memstore"
)

// TestUndecodableDocumentIsInvalidInput: a stored document that does not
// decode into T fails Get, List and Update with an error that matches
// ErrInvalidInput and no other sentinel, and still carries the codec's
// error.
func TestUndecodableDocumentIsInvalidInput(t *testing.T) {
	b := memstore.New(nil)
	if _, err := etagstore.New[struct{ N string }](b, nil).Upsert(t.Context(), "k", struct{ N string }{"text"}); err != nil {
		t.Fatal(err)
	}
	s := etagstore.New[struct{ N int }](b, nil)
	check := func(op string, err error) {
		t.Helper()
		if !errors.Is(err, etagstore.ErrInvalidInput) {
			t.Fatalf("%s: err = %v, want ErrInvalidInput", op, err)
		}
		for _, other := range []error{etagstore.ErrNotFound, etagstore.ErrStorageNotFound, etagstore.ErrExists, etagstore.ErrConflict, etagstore.ErrETagRequired, etagstore.ErrInvalidKey, etagstore.ErrTooLarge, etagstore.ErrFenced, etagstore.ErrLocked, etagstore.ErrLockLost, etagstore.ErrOutcomeUnknown} {
			if errors.Is(err, other) {
				t.Fatalf("%s: err = %v matches %v too", op, err, other)
			}
		}
		var te *json.UnmarshalTypeError
		if !errors.As(err, &te) {
			t.Fatalf("%s: err = %v does not carry the codec's *json.UnmarshalTypeError", op, err)
		}
	}
	_, err := s.Get(t.Context(), "k")
	check("Get", err)
	for _, err := range s.List(t.Context(), "") {
		check("List", err)
	}
	_, err = s.Update(t.Context(), "k", func(*struct{ N int }) error {
		t.Fatal("mutate ran on a document that did not decode")
		return nil
	})
	check("Update", err)
}
